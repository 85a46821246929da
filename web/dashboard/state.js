// The signed-in state shared by every view, and the one element lookup.

export const CREDENTIAL_KEY = 'colloquy.dashboard.credential';
export const SECOND = 1000;

/**
 * @type {{role: 'user'|'admin'|null, secret: string|null, userId: string|null, reset: number|null, refreshingQuota: boolean,
 *   stream: AbortController|null, view: 'sign-in'|'admin'|'user', page: 'home'|'overview'}}
 */
export const state = {
  role: null,
  secret: null,
  userId: null,
  reset: null,
  refreshingQuota: false,
  stream: null,
  view: 'sign-in',
  page: 'home',
};

export const $ = (id) => {
  const node = document.getElementById(id);
  if (!node) throw new Error(`missing element #${id}`);
  return node;
};

/** Late-bound actions, set by the entry point, so views can call them without importing it back. */
export const hooks = { signOut: (_message) => {} };
