/** Tool-call arguments for dialects that take them as an object (Anthropic `input`, Ollama `arguments`). */

/** The arguments' JSON text as an object; text that is not an object is wrapped (`{value}`), never dropped. */
export function argumentsObject(text: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    return { value: parsed };
  } catch {
    return text.trim().length === 0 ? {} : { value: text };
  }
}
