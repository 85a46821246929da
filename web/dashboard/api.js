// The one fetch helper: calls the API with the signed-in credential and maps failures to ApiFailure.
import { hooks, state } from './state.js';
import { ApiFailure } from './errors.js';
import { announce, clearError, showError } from './feedback.js';

export function authHeaders(extra = {}) {
  return { authorization: `Bearer ${state.secret}`, ...extra };
}

/** Calls the API with the signed-in credential; resolves with the JSON body or throws ApiFailure. */
export async function api(method, path, body) {
  const init = {
    method,
    headers: authHeaders(body === undefined ? {} : { 'content-type': 'application/json' }),
    cache: 'no-store',
    // The credential travels only in Authorization: never send or accept cookies.
    credentials: 'omit',
  };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  return parseResponse(response);
}

export async function parseResponse(response) {
  const text = await response.text();
  let payload = null;
  try {
    payload = text ? JSON.parse(text) : null;
  } catch {
    payload = null;
  }
  if (!response.ok) {
    const error = payload?.error ? payload.error : {};
    throw new ApiFailure(
      response.status,
      error.code || `http_${response.status}`,
      error.message || `The server answered ${response.status}.`,
      error.details,
    );
  }
  return payload;
}

/** Runs an action with its button disabled and errors shown; returns the action's result. */
export async function busy(button, action) {
  clearError();
  // A new user action replaces the last outcome; background refreshes leave it standing.
  if (button) {
    announce('');
    button.disabled = true;
  }
  try {
    return await action();
  } catch (error) {
    if (error instanceof ApiFailure && error.status === 401 && state.role === 'user') {
      hooks.signOut('Your key is no longer valid (revoked or unknown). Sign in with another key.');
      return undefined;
    }
    showError(error);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}
