/**
 * Posting blocks: the postings of one term within one segment, as fixed-width binary entries
 * sorted by chunk. An entry is 8 bytes: the chunk's offset from the segment's first chunk (u32),
 * the term's frequency in the chunk (u16) and the chunk's token length (u16), little-endian.
 * Fixed width lets a lookup binary-search a block without decoding it. Pure code, no storage:
 * worker threads build blocks, the index writer stores them as they are.
 */
import { termFrequencies } from './tokenize.js';

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
}

/** Token lengths of the chunks, and the document's postings, from the chunks' text. */
export function buildPostings(chunks: readonly string[], stopWords: boolean): { lengths: number[]; postings: DocumentPostings } {
  const perTerm = new Map<string, number[]>();
  const lengths: number[] = [];
  let entryCount = 0;
  chunks.forEach((text, ordinal) => {
    const frequencies = termFrequencies(text, { stopWords });
    let length = 0;
    for (const count of frequencies.values()) length += count;
    lengths.push(length);
    for (const [term, tf] of frequencies) {
      let list = perTerm.get(term);
      if (!list) {
        list = [];
        perTerm.set(term, list);
      }
      list.push(ordinal, tf);
      entryCount += 1;
    }
  });
  const terms = [...perTerm.keys()].sort();
  const offsets = new Uint32Array(terms.length + 1);
  const entries = new Uint8Array(entryCount * ENTRY_BYTES);
  const view = new DataView(entries.buffer);
  let entry = 0;
  terms.forEach((term, index) => {
    offsets[index] = entry;
    const list = perTerm.get(term) as number[];
    for (let at = 0; at < list.length; at += 2) {
      const ordinal = list[at] as number;
      writeEntry(view, entry, ordinal, list[at + 1] as number, lengths[ordinal] as number);
      entry += 1;
    }
  });
  offsets[terms.length] = entry;
  return { lengths, postings: { terms, offsets, entries } };
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
 * Concatenates blocks of consecutive segments into one block of a merged segment: each part's
 * offsets are moved by its shift, entries whose chunk is dead are dropped (and their chunks noted
 * in `dropped`). Parts must be in
 * chunk order (segments are merged in the order they were written).
 */
export function mergeBlocks(
  parts: Array<{ block: Uint8Array; shift: number; first: number }>,
  dead: ReadonlySet<number>,
  dropped: Set<number>,
): Uint8Array {
  let total = 0;
  for (const part of parts) total += part.block.byteLength;
  if (!LITTLE_ENDIAN) return mergeBlocksPortable(parts, dead, dropped, total);
  // Entries are little-endian, as this machine's words: copied two 32-bit words at a time.
  const out = new Uint32Array(total / 4);
  let write = 0;
  for (const part of parts) {
    const { block, shift, first } = part;
    const aligned = block.byteOffset % 4 === 0 ? block : new Uint8Array(block);
    const words = new Uint32Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 4);
    for (let word = 0; word < words.length; word += 2) {
      const offset = words[word] as number;
      if (dead.size > 0 && dead.has(first + offset)) {
        dropped.add(first + offset);
        continue;
      }
      out[write] = offset + shift;
      out[write + 1] = words[word + 1] as number;
      write += 2;
    }
  }
  return new Uint8Array(out.buffer, 0, write * 4);
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** mergeBlocks through DataView reads and writes, for big-endian machines. */
function mergeBlocksPortable(
  parts: Array<{ block: Uint8Array; shift: number; first: number }>,
  dead: ReadonlySet<number>,
  dropped: Set<number>,
  total: number,
): Uint8Array {
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let entry = 0;
  for (const part of parts) {
    const reader = new BlockReader(part.block);
    for (let index = 0; index < reader.count; index += 1) {
      const offset = reader.offset(index);
      if (dead.size > 0 && dead.has(part.first + offset)) {
        dropped.add(part.first + offset);
        continue;
      }
      writeEntry(view, entry, offset + part.shift, reader.tf(index), reader.length(index));
      entry += 1;
    }
  }
  return out.subarray(0, entry * ENTRY_BYTES);
}
