/** Deterministic prose-like documents for ingestion loads (the bench and the bulk-ingestion fault suite). */

/** About `bytes` of sentences of 12 words from a few thousand (skewed towards the common ones), in paragraphs of 8. */
export function proseDocument(seed: number, bytes: number): string {
  let state = seed;
  const next = () => {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    return state / 4_294_967_296;
  };
  const parts: string[] = [];
  let length = 0;
  while (length < bytes) {
    const sentence = `${Array.from({ length: 12 }, () => `w${Math.floor(next() ** 2 * 8000).toString(36)}`).join(' ')}.`;
    parts.push(sentence, parts.length % 8 === 7 ? '\n\n' : ' ');
    length += sentence.length + 1;
  }
  return parts.join('').slice(0, bytes);
}
