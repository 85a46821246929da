/**
 * Posting blocks: the postings of one term within one segment, as fixed-width binary entries
 * sorted by chunk. An entry is 8 bytes: the chunk's offset from the segment's first chunk (u32),
 * the term's frequency in the chunk (u16) and the chunk's token length (u16), little-endian.
 * Fixed width lets a lookup binary-search a block without decoding it. Pure code, no storage:
 * worker threads build blocks, the index writer stores them as they are.
 */
import { tokenize } from './tokenize.js';

export const ENTRY_BYTES = 8;
const U16_MAX = 0xffff;

/** One document's postings: for terms[i], the entries from offsets[i] to offsets[i + 1] of `entries`. */
export interface DocumentPostings {
  /** Distinct terms, sorted (the order blocks are stored in). */
  terms: string[];
  /** Entry offsets per term, terms.length + 1 long. */
  offsets: Uint32Array;
  /** The entries, chunk offsets relative to the document's first chunk. */
  entries: Uint8Array;
  /** The terms joined by '\n', when they arrived that way from a worker thread (the stored term list is this string). */
  termText?: string | undefined;
  /** termHash of each term (computed where the postings are built, a worker thread, so the writer need not hash the strings again). */
  hashes?: Uint32Array | undefined;
}

/** How many distinct terms a document's postings hold (without reading the term list). */
export function termCount(postings: DocumentPostings): number {
  return postings.offsets.length - 1;
}

/** A document's terms joined by '\n' (no term holds one), as its stored term list keeps them. */
export function joinedTerms(postings: DocumentPostings): string {
  return postings.termText ?? postings.terms.join('\n');
}

/** A 32-bit hash of a term (FNV-1a over its code units). */
export function termHash(term: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < term.length; index += 1) hash = Math.imul(hash ^ term.charCodeAt(index), 0x01000193);
  return hash >>> 0;
}

/** Token lengths of the chunks, and the document's postings, from the chunks' text. */
export function buildPostings(chunks: readonly string[], stopWords: boolean): { lengths: number[]; postings: DocumentPostings } {
  // Each distinct term gets a number on first sight; each (term, chunk) pair is one occurrence,
  // recorded in chunk order in growable typed arrays (no array or map per term or per chunk).
  const ids = new Map<string, number>();
  const byId: string[] = [];
  let lastChunk = new Int32Array(1024);
  let lastOccurrence = new Int32Array(1024);
  let occurrenceTerm = new Int32Array(4096);
  let occurrenceChunk = new Uint32Array(4096);
  let occurrenceTf = new Uint32Array(4096);
  let occurrences = 0;
  const lengths: number[] = [];
  chunks.forEach((text, ordinal) => {
    const tokens = tokenize(text, { stopWords });
    lengths.push(tokens.length);
    for (const term of tokens) {
      let id = ids.get(term);
      if (id === undefined) {
        id = byId.length;
        ids.set(term, id);
        byId.push(term);
        if (id === lastChunk.length) {
          lastChunk = grow(lastChunk);
          lastOccurrence = grow(lastOccurrence);
        }
        lastChunk[id] = -1;
      }
      if (lastChunk[id] === ordinal) {
        const at = lastOccurrence[id] as number;
        occurrenceTf[at] = (occurrenceTf[at] as number) + 1;
        continue;
      }
      if (occurrences === occurrenceTerm.length) {
        occurrenceTerm = grow(occurrenceTerm);
        occurrenceChunk = grow(occurrenceChunk);
        occurrenceTf = grow(occurrenceTf);
      }
      lastChunk[id] = ordinal;
      lastOccurrence[id] = occurrences;
      occurrenceTerm[occurrences] = id;
      occurrenceChunk[occurrences] = ordinal;
      occurrenceTf[occurrences] = 1;
      occurrences += 1;
    }
  });
  // Code-unit order, as stored keys; each term's entries follow in chunk order (occurrences are).
  const order = sortedOrder(byId);
  const terms: string[] = new Array(byId.length);
  const rankById = new Uint32Array(byId.length);
  for (let rank = 0; rank < order.length; rank += 1) {
    const id = order[rank] as number;
    terms[rank] = byId[id] as string;
    rankById[id] = rank;
  }
  const offsets = new Uint32Array(terms.length + 1);
  for (let at = 0; at < occurrences; at += 1) {
    const rank = rankById[occurrenceTerm[at] as number] as number;
    offsets[rank + 1] = (offsets[rank + 1] as number) + 1;
  }
  for (let rank = 0; rank < terms.length; rank += 1) offsets[rank + 1] = (offsets[rank + 1] as number) + (offsets[rank] as number);
  const fill = offsets.slice(0, terms.length);
  const entries = new Uint8Array(occurrences * ENTRY_BYTES);
  const view = new DataView(entries.buffer);
  for (let at = 0; at < occurrences; at += 1) {
    const rank = rankById[occurrenceTerm[at] as number] as number;
    const entry = fill[rank] as number;
    fill[rank] = entry + 1;
    const ordinal = occurrenceChunk[at] as number;
    writeEntry(view, entry, ordinal, occurrenceTf[at] as number, lengths[ordinal] as number);
  }
  const hashes = new Uint32Array(terms.length);
  for (let rank = 0; rank < terms.length; rank += 1) hashes[rank] = termHash(terms[rank] as string);
  return { lengths, postings: { terms, offsets, entries, hashes } };
}

/** Items sortedOrder numbers within a float's exact integers (keys are below 2^33, so key × 2^20 + index is exact). */
const ORDER_BITS = 2 ** 20;

/**
 * The positions of `strings` (distinct, non-empty) in code-unit order, as Array.prototype.sort
 * orders them, sorted faster: by their first two code units as numbers first (a native numeric
 * sort), then each run sharing those by comparing the strings themselves, so few string
 * comparisons are made.
 */
export function sortedOrder(strings: readonly string[]): Uint32Array {
  const count = strings.length;
  if (count >= ORDER_BITS) {
    const ids = Array.from({ length: count }, (_, index) => index);
    ids.sort((left, right) => compareStrings(strings[left] as string, strings[right] as string));
    return Uint32Array.from(ids);
  }
  // Key: first code unit, then the second plus one (0 when there is none: a prefix sorts first).
  const keyed = new Float64Array(count);
  for (let id = 0; id < count; id += 1) {
    const text = strings[id] as string;
    const key = text.charCodeAt(0) * 65_537 + (text.length > 1 ? text.charCodeAt(1) + 1 : 0);
    keyed[id] = key * ORDER_BITS + id;
  }
  keyed.sort();
  const order = new Uint32Array(count);
  for (let at = 0; at < count; at += 1) order[at] = (keyed[at] as number) % ORDER_BITS;
  // Runs of equal keys: sorted by the strings (insertion sort: runs are short).
  let start = 0;
  while (start < count) {
    const key = Math.floor((keyed[start] as number) / ORDER_BITS);
    let end = start + 1;
    while (end < count && Math.floor((keyed[end] as number) / ORDER_BITS) === key) end += 1;
    if (end - start > 32) {
      const run = Array.from(order.subarray(start, end));
      run.sort((left, right) => compareStrings(strings[left] as string, strings[right] as string));
      order.set(run, start);
    } else {
      for (let at = start + 1; at < end; at += 1) {
        const id = order[at] as number;
        const text = strings[id] as string;
        let before = at - 1;
        while (before >= start && (strings[order[before] as number] as string) > text) {
          order[before + 1] = order[before] as number;
          before -= 1;
        }
        order[before + 1] = id;
      }
    }
    start = end;
  }
  return order;
}

function compareStrings(left: string, right: string): number {
  return left < right ? -1 : left > right ? 1 : 0;
}

/** A typed array twice as long with the same first elements. */
function grow<T extends Int32Array | Uint32Array>(array: T): T {
  const larger = new (array.constructor as new (length: number) => T)(array.length * 2);
  larger.set(array);
  return larger;
}

function writeEntry(view: DataView, entry: number, offset: number, tf: number, length: number): void {
  const at = entry * ENTRY_BYTES;
  view.setUint32(at, offset, true);
  view.setUint16(at + 4, Math.min(tf, U16_MAX), true);
  view.setUint16(at + 6, Math.min(length, U16_MAX), true);
}

/** Number of entries in a block. */
export function entryCount(block: Uint8Array): number {
  return block.byteLength / ENTRY_BYTES;
}

/** A reader over one block's entries. */
export class BlockReader {
  private readonly view: DataView;
  readonly count: number;

  constructor(block: Uint8Array) {
    this.view = new DataView(block.buffer, block.byteOffset, block.byteLength);
    this.count = block.byteLength / ENTRY_BYTES;
  }

  offset(entry: number): number {
    return this.view.getUint32(entry * ENTRY_BYTES, true);
  }

  tf(entry: number): number {
    return this.view.getUint16(entry * ENTRY_BYTES + 4, true);
  }

  length(entry: number): number {
    return this.view.getUint16(entry * ENTRY_BYTES + 6, true);
  }

  /** The entry of a chunk offset, or -1 (binary search: entries are sorted by offset). */
  find(offset: number): number {
    let low = 0;
    let high = this.count - 1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      const value = this.offset(middle);
      if (value === offset) return middle;
      if (value < offset) low = middle + 1;
      else high = middle - 1;
    }
    return -1;
  }
}

/**
 * A part of a merge: one segment's block of a term, as words `from` to `to` of `words` (two
 * 32-bit words per entry, little-endian), its chunk offsets to be moved by `shift`; `first` is
 * its segment's first chunk.
 */
export interface MergePart {
  words: Uint32Array;
  from: number;
  to: number;
  shift: number;
  first: number;
}

/**
 * Concatenates blocks of consecutive segments into one block of a merged segment, written to
 * `out` from word `at` (room for every part's words is the caller's): each part's offsets are
 * moved by its shift, entries whose chunk is dead are dropped (and their chunks noted in
 * `dropped`). Parts must be in chunk order (segments are merged in the order they were written).
 * Answers the word after the last one written.
 */
export function mergeInto(
  parts: readonly MergePart[],
  dead: ReadonlySet<number>,
  dropped: Set<number>,
  out: Uint32Array,
  at: number,
): number {
  if (!LITTLE_ENDIAN) return mergeIntoPortable(parts, dead, dropped, out, at);
  // Entries are little-endian, as this machine's words: copied two 32-bit words at a time.
  const checkDead = dead.size > 0;
  let write = at;
  for (const { words, from, to, shift, first } of parts) {
    for (let word = from; word < to; word += 2) {
      const offset = words[word] as number;
      if (checkDead && dead.has(first + offset)) {
        dropped.add(first + offset);
        continue;
      }
      out[write] = offset + shift;
      out[write + 1] = words[word + 1] as number;
      write += 2;
    }
  }
  return write;
}

/** A block's bytes as a merge part's words (copied when not 4-byte aligned). */
export function blockWords(block: Uint8Array): Uint32Array {
  const aligned = block.byteOffset % 4 === 0 ? block : new Uint8Array(block);
  return new Uint32Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 4);
}

/** mergeInto for blocks given as bytes, answering the merged block. */
export function mergeBlocks(
  parts: Array<{ block: Uint8Array; shift: number; first: number }>,
  dead: ReadonlySet<number>,
  dropped: Set<number>,
): Uint8Array {
  let total = 0;
  const wordParts = parts.map(({ block, shift, first }) => {
    const words = blockWords(block);
    total += words.length;
    return { words, from: 0, to: words.length, shift, first };
  });
  const out = new Uint32Array(total);
  const end = mergeInto(wordParts, dead, dropped, out, 0);
  return new Uint8Array(out.buffer, 0, end * 4);
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** mergeInto through DataView reads and writes, for big-endian machines. */
function mergeIntoPortable(
  parts: readonly MergePart[],
  dead: ReadonlySet<number>,
  dropped: Set<number>,
  out: Uint32Array,
  at: number,
): number {
  const target = new DataView(out.buffer, out.byteOffset, out.byteLength);
  let write = at;
  for (const { words, from, to, shift, first } of parts) {
    const source = new DataView(words.buffer, words.byteOffset, words.byteLength);
    for (let word = from; word < to; word += 2) {
      const offset = source.getUint32(word * 4, true);
      if (dead.has(first + offset)) {
        dropped.add(first + offset);
        continue;
      }
      target.setUint32(write * 4, offset + shift, true);
      target.setUint32(write * 4 + 4, source.getUint32(word * 4 + 4, true), true);
      write += 2;
    }
  }
  return write;
}
