// Secrets (new keys) shown once, with copy and hide.
import { $ } from './state.js';
import { announce } from './feedback.js';

export function revealSecret(key, owner) {
  const panel = $('secret-panel');
  $('secret-value').value = key;
  $('secret-owner').textContent = owner;
  $('secret-copy').textContent = 'Copy';
  panel.hidden = false;
  panel.focus();
  $('secret-value').select();
}

export function hideSecret() {
  $('secret-value').value = '';
  $('secret-panel').hidden = true;
}

export async function copySecret() {
  const input = $('secret-value');
  try {
    await navigator.clipboard.writeText(input.value);
    $('secret-copy').textContent = 'Copied';
    announce('The key was copied to the clipboard.');
  } catch {
    // Without clipboard permission, leave it selected so Ctrl+C works.
    input.focus();
    input.select();
    announce('Copying is blocked here: the key is selected, press Ctrl+C to copy it.');
  }
}
