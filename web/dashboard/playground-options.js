// The playground's request options, offered from what the API offers: the configured models
// (GET /api/models), the knowledge-base collections (GET /api/rag/collections), web search and
// deep thinking.
import { $ } from './state.js';
import { api } from './api.js';
import { element } from './dom.js';

function option(value, text, selected) {
  const node = element('option', { text, attributes: { value } });
  node.selected = selected;
  return node;
}

function renderModels(payload) {
  const picker = $('playground-model');
  const chosen = picker.value || payload.default_model;
  const models = payload.models ?? [];
  picker.replaceChildren(
    ...models.map((model) => {
      const upstream = model.upstream_model && model.upstream_model !== model.id ? ` → ${model.upstream_model}` : '';
      const label = `${model.id} (${model.provider}${upstream})${model.default ? ', default' : ''}`;
      return option(model.id, label, model.id === chosen);
    }),
  );
}

function renderCollections(payload) {
  const picker = $('playground-collection');
  const chosen = picker.value;
  const collections = payload.collections ?? [];
  picker.replaceChildren(
    option('', 'All collections', chosen === ''),
    ...collections.map((collection) =>
      option(
        collection.name,
        `${collection.name} (${collection.documents} document${collection.documents === 1 ? '' : 's'})`,
        collection.name === chosen,
      ),
    ),
  );
}

/** Fills the model and collection pickers; keeps what was picked when it is still offered. */
export async function loadPlaygroundOptions() {
  const [models, collections] = await Promise.all([api('GET', '/api/models'), api('GET', '/api/rag/collections')]);
  renderModels(models);
  renderCollections(collections);
}

/** The chat request fields the options ask for (only those that differ from the API's defaults). */
export function playgroundFields() {
  const fields = {};
  const model = $('playground-model').value;
  if (model) fields.model = model;
  if ($('playground-rag').checked) {
    const collection = $('playground-collection').value;
    fields.rag = collection ? { collection } : true;
  }
  if ($('playground-web').checked) fields.web_search = true;
  if ($('playground-deep').checked) fields.deep_thinking = true;
  return fields;
}

/** The collection picker is usable only while the knowledge base is on. */
export function bindPlaygroundOptions() {
  $('playground-rag').addEventListener('change', (event) => {
    $('playground-collection').disabled = !event.currentTarget.checked;
  });
}
