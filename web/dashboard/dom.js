// Small DOM helpers. Nodes are built with createElement/textContent only (the CSP enforces Trusted Types).
import { SECOND } from './state.js';
import { showError } from './feedback.js';

export function element(tag, options = {}, children = []) {
  const node = document.createElement(tag);
  if (options.className) node.className = options.className;
  if (options.text !== undefined) node.textContent = options.text;
  if (options.attributes) for (const [name, value] of Object.entries(options.attributes)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

/** A <time> for an ISO string, or a dash when there is none. */
export function timeNode(iso, fallback = '—') {
  if (!iso) return document.createTextNode(fallback);
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return document.createTextNode(String(iso));
  return element('time', { text: date.toLocaleString(), attributes: { datetime: date.toISOString() } });
}

/** A table cell that carries its column name for the stacked phone layout. */
export function cell(label, content) {
  const td = element('td', { attributes: { 'data-label': label } });
  td.append(content instanceof Node ? content : document.createTextNode(String(content)));
  return td;
}

export function formatDuration(ms) {
  const total = Math.max(0, Math.ceil(ms / SECOND));
  const days = Math.floor(total / 86_400);
  const hours = Math.floor((total % 86_400) / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  const parts = [];
  if (days) parts.push(`${days} d`);
  if (days || hours) parts.push(`${hours} h`);
  if (days || hours || minutes) parts.push(`${minutes} min`);
  parts.push(`${seconds} s`);
  return parts.join(' ');
}

export function formValue(form, name) {
  const field = form.elements.namedItem(name);
  return field && 'value' in field ? field.value.trim() : '';
}

/** Checks the form's required fields and patterns, focusing the first bad one. */
export function validForm(form) {
  for (const field of form.elements) {
    if (!('checkValidity' in field) || field.disabled) continue;
    if ('value' in field && typeof field.value === 'string' && field.required && field.value.trim() === '') field.value = '';
    if (!field.checkValidity()) {
      const label = field.labels?.[0] ? field.labels[0].textContent.trim() : field.name;
      showError(`${label}: ${field.validationMessage}`);
      field.setAttribute('aria-invalid', 'true');
      field.focus();
      return false;
    }
    field.removeAttribute('aria-invalid');
  }
  return true;
}
