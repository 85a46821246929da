// Feedback: one polite status line and one alert region.
import { $ } from './state.js';
import { ApiFailure } from './errors.js';

export function announce(message) {
  $('status').textContent = message;
}

export function showError(error) {
  const alert = $('alert');
  let message = error instanceof Error ? error.message : String(error);
  if (error instanceof ApiFailure && Array.isArray(error.details) && error.details.length > 0) {
    message += ` ${error.details.map((detail) => `${detail.path}: ${detail.message}`).join('; ')}`;
  }
  alert.textContent = message;
  alert.hidden = false;
}

export function clearError() {
  const alert = $('alert');
  alert.hidden = true;
  alert.textContent = '';
}
