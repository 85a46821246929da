/**
 * Splits a document into overlapping chunks: paragraphs are kept whole when they fit, longer ones
 * are cut at sentence boundaries (Intl.Segmenter, so abbreviations and non-Latin punctuation are
 * handled), and a sentence longer than a chunk is cut at word boundaries. Each chunk after the
 * first starts with the tail of the previous one, so a fact that straddles a boundary is still
 * found whole in one chunk. Pure and deterministic: the same text always gives the same chunks.
 */

export interface ChunkOptions {
  /** Target chunk length in characters. */
  size: number;
  /** Characters repeated from the end of one chunk at the start of the next. */
  overlap: number;
}

interface Unit {
  text: string;
  /** True when this unit ends a paragraph (joined to the next with a blank line). */
  paragraphEnd: boolean;
}

const sentenceSegmenter = new Intl.Segmenter('en', { granularity: 'sentence' });
/**
 * Characters handed to the sentence segmenter at once. Iterating Intl.Segmenter over one long
 * string costs time in proportion to the string for every sentence it yields (a 500 KB paragraph
 * of short lines took seconds), so long paragraphs are segmented a window at a time.
 */
const SEGMENT_WINDOW = 4096;

/** The sentences of a paragraph, in order; linear in its length. */
function* sentences(paragraph: string): Generator<string> {
  let start = 0;
  while (start < paragraph.length) {
    const end = Math.min(paragraph.length, start + SEGMENT_WINDOW);
    const window = paragraph.slice(start, end);
    const found = Array.from(sentenceSegmenter.segment(window), ({ segment, index }) => ({ segment, index }));
    const last = found[found.length - 1];
    if (end === paragraph.length || !last) {
      for (const { segment } of found) yield segment;
      return;
    }
    if (found.length === 1) {
      // No sentence boundary in the window: a run of text, handed on up to its last word break.
      const space = Math.max(window.lastIndexOf(' '), window.lastIndexOf('\n'));
      const cut = space > SEGMENT_WINDOW / 2 ? space + 1 : window.length;
      yield window.slice(0, cut);
      start += cut;
      continue;
    }
    // The last segment may be a sentence the window cut short: it starts the next window.
    for (const { segment } of found.slice(0, -1)) yield segment;
    start += last.index;
  }
}

/** White space other than single spaces: where collapsing runs of white space changes a line. */
const NOT_SINGLE_SPACED = /[^\S ]| {2}/;

/**
 * Normalises line endings and whitespace; paragraphs are separated by one blank line. Line breaks
 * inside a paragraph are kept (one per line): they are what tells list items, table rows and a
 * heading from running text when the passage is read back.
 */
function normaliseParagraphs(text: string): string[] {
  return text
    .replace(/\r\n?/g, '\n')
    .split(/\n[ \t]*\n/)
    .map((paragraph) =>
      paragraph
        .split('\n')
        .map((line) => (NOT_SINGLE_SPACED.test(line) ? line.replace(/\s+/g, ' ') : line).trim())
        .filter((line) => line.length > 0)
        .join('\n'),
    )
    .filter((paragraph) => paragraph.length > 0);
}

/** Cuts `text` into pieces of at most `limit` characters, at spaces where possible. */
function splitAtWords(text: string, limit: number): string[] {
  const pieces: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    let cut = Math.max(rest.lastIndexOf(' ', limit), rest.lastIndexOf('\n', limit));
    if (cut < limit / 2) cut = limit;
    pieces.push(rest.slice(0, cut).trim());
    rest = rest.slice(cut).trim();
  }
  if (rest) pieces.push(rest);
  return pieces;
}

function units(paragraphs: string[], limit: number): Unit[] {
  const result: Unit[] = [];
  for (const paragraph of paragraphs) {
    if (paragraph.length <= limit) {
      result.push({ text: paragraph, paragraphEnd: true });
      continue;
    }
    const pieces: string[] = [];
    for (const segment of sentences(paragraph)) {
      const sentence = segment.trim();
      if (!sentence) continue;
      if (sentence.length <= limit) pieces.push(sentence);
      else pieces.push(...splitAtWords(sentence, limit));
    }
    pieces.forEach((text, index) => {
      result.push({ text, paragraphEnd: index === pieces.length - 1 });
    });
  }
  return result;
}

/** The end of a chunk repeated at the start of the next: from a sentence start when one is near, else a word start. */
function overlapTail(chunk: string, overlap: number): string {
  if (overlap <= 0 || chunk.length <= overlap) return '';
  const tail = chunk.slice(chunk.length - overlap);
  const sentenceStart = tail.search(/[.!?。！？]\s+\S/);
  if (sentenceStart >= 0) {
    const start = tail.slice(sentenceStart + 1).search(/\S/);
    return tail.slice(sentenceStart + 1 + start);
  }
  const space = tail.indexOf(' ');
  return space >= 0 ? tail.slice(space + 1) : '';
}

/** The chunks of a document's text, in order. */
export function chunkText(text: string, options: ChunkOptions): string[] {
  const { size } = options;
  const overlap = Math.min(options.overlap, Math.floor(size / 2));
  // Units leave room for the overlap so a chunk stays close to `size`.
  const pieces = units(normaliseParagraphs(text), Math.max(1, size - overlap));
  const chunks: string[] = [];
  let current = '';
  // True while `current` holds only the tail carried over from the previous chunk.
  let onlyCarried = false;
  let lastWasParagraphEnd = false;
  const joined = (unit: Unit) => (current ? current + (lastWasParagraphEnd ? '\n\n' : ' ') + unit.text : unit.text);
  for (const unit of pieces) {
    if (current && !onlyCarried && joined(unit).length > size) {
      chunks.push(current);
      current = overlapTail(current, overlap);
      onlyCarried = current.length > 0;
    }
    // Units are at most size - overlap long, so this only trims a tail that would overflow by a separator.
    if (onlyCarried && joined(unit).length > size) current = '';
    current = joined(unit);
    onlyCarried = false;
    lastWasParagraphEnd = unit.paragraphEnd;
  }
  if (current) chunks.push(current);
  return chunks;
}
