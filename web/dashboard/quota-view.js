// The quota bar and the countdown to the window reset.
import { $, SECOND, state } from './state.js';
import { api, busy } from './api.js';
import { formatDuration } from './dom.js';

export function renderQuota(quota) {
  const limit = Number(quota.limit) || 0;
  const used = Math.max(0, Number(quota.used) || 0);
  const remaining = Number(quota.remaining) || 0;
  $('quota-plan').textContent = quota.plan;
  $('quota-used').textContent = String(used);
  $('quota-limit').textContent = String(limit);
  $('quota-remaining').textContent = String(remaining);
  const bar = $('quota-bar');
  bar.max = Math.max(limit, 1);
  bar.value = Math.min(used, bar.max);
  bar.textContent = `${used} of ${limit}`;
  bar.setAttribute('aria-valuetext', `${used} of ${limit} used, ${remaining} remaining`);
  bar.classList.toggle('low', limit > 0 && remaining / limit <= 0.1);
  // The same figures beside the playground's Send button, so each message's cost shows where it is spent.
  const meter = $('playground-quota');
  meter.max = bar.max;
  meter.value = bar.value;
  meter.setAttribute('aria-valuetext', bar.getAttribute('aria-valuetext'));
  meter.classList.toggle('low', bar.classList.contains('low'));
  $('playground-quota-text').textContent = `${remaining} of ${limit} left`;
  const reset = $('quota-reset');
  reset.replaceChildren();
  const resetAt = Date.parse(quota.reset);
  state.reset = Number.isNaN(resetAt) ? null : resetAt;
  if (state.reset !== null) {
    reset.setAttribute('datetime', new Date(state.reset).toISOString());
    reset.textContent = new Date(state.reset).toLocaleString();
  }
  renderTokens(quota.tokens);
  tickCountdown();
}

/** The token budget's bar, shown only for plans that have one. */
function renderTokens(tokens) {
  const box = $('quota-tokens');
  box.hidden = !tokens;
  if (!tokens) return;
  const limit = Number(tokens.limit) || 0;
  const remaining = Math.max(0, Number(tokens.remaining) || 0);
  const used = Math.max(0, limit - remaining);
  const bar = $('quota-tokens-bar');
  bar.max = Math.max(limit, 1);
  bar.value = Math.min(used, bar.max);
  bar.setAttribute('aria-valuetext', `${used} of ${limit} tokens used, ${remaining} remaining`);
  bar.classList.toggle('low', limit > 0 && remaining / limit <= 0.1);
  $('quota-tokens-text').textContent = `${used} of ${limit} tokens used, ${remaining} left`;
  const resetAt = Date.parse(tokens.reset);
  const reset = $('quota-tokens-reset');
  reset.textContent = Number.isNaN(resetAt) ? '—' : new Date(resetAt).toLocaleString();
  if (!Number.isNaN(resetAt)) reset.setAttribute('datetime', new Date(resetAt).toISOString());
}

/** Applies the quota carried by a stream's start event, before the reply is even written. */
export function applyStamp(stamp) {
  const limit = Number($('quota-limit').textContent);
  if (!Number.isFinite(limit) || typeof stamp.remaining !== 'number') return;
  // The token bar keeps its figures unless the stamp brings new ones.
  const tokensBar = $('quota-tokens-bar');
  const tokensLimit = Number(tokensBar.max);
  const tokensLeft = typeof stamp.remaining_tokens === 'number' ? stamp.remaining_tokens : tokensLimit - Number(tokensBar.value);
  renderQuota({
    plan: stamp.plan ?? $('quota-plan').textContent,
    limit,
    used: limit - stamp.remaining,
    remaining: stamp.remaining,
    reset: stamp.reset,
    tokens: $('quota-tokens').hidden
      ? undefined
      : { limit: tokensLimit, remaining: tokensLeft, reset: $('quota-tokens-reset').getAttribute('datetime') },
  });
}

export async function loadQuota() {
  const quota = await api('GET', '/api/chat/quota/me');
  renderQuota(quota);
}

function tickCountdown() {
  if (state.reset === null) {
    $('quota-countdown').textContent = '—';
    return;
  }
  const left = state.reset - Date.now();
  $('quota-countdown').textContent = formatDuration(left);
  // The window rolled over: fetch the fresh record once.
  if (left <= 0 && !state.refreshingQuota && state.role === 'user') {
    state.refreshingQuota = true;
    busy(null, loadQuota).finally(() => {
      state.refreshingQuota = false;
    });
  }
}

let countdownTimer = null;
export function startCountdown() {
  if (countdownTimer === null) countdownTimer = setInterval(tickCountdown, SECOND);
}
