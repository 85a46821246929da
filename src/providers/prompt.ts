/**
 * What every upstream dialect puts in its system instruction: the caller's system text, the
 * reply language and the numbered sources to cite. Each provider places the result where its
 * API expects it (a system message, Anthropic's top-level `system`).
 */
import type { ProviderMessage, ProviderRequest } from './types.js';

/** A BCP 47 tag as a readable name where the runtime knows it (`fr-CA` → `Canadian French`). */
function languageName(tag: string): string {
  try {
    const name = new Intl.DisplayNames(['en'], { type: 'language' }).of(tag);
    return name && name !== tag ? `${name} (${tag})` : tag;
  } catch {
    return tag;
  }
}

/** The combined system instruction, or undefined when there is nothing to say. */
export function systemText(request: ProviderRequest): string | undefined {
  const parts = request.messages.filter((message) => message.role === 'system').map((message) => message.content);
  if (request.language) parts.push(`Write your whole reply in ${languageName(request.language)}.`);
  if (request.sources.length > 0) {
    const listed = request.sources
      .map(
        (source) =>
          `[${source.index}] ${source.title}${source.page !== undefined ? `, page ${source.page}` : ''}${source.url ? ` (${source.url})` : ''}\n${source.snippet}`,
      )
      .join('\n\n');
    parts.push(
      `Answer from the numbered sources below when they are relevant, citing them inline as [n]. ` +
        `Say so when they do not contain the answer.\n\nSources:\n${listed}`,
    );
  }
  return parts.length > 0 ? parts.join('\n\n') : undefined;
}

/** The user/assistant turns, without system messages (they are folded into systemText). */
export function conversation(request: ProviderRequest): ProviderMessage[] {
  return request.messages.filter((message) => message.role !== 'system');
}
