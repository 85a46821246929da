/**
 * Planning a segment's posting blocks: every distinct term of the documents written together
 * numbered on first sight, its occurrences chained in document order through typed arrays, the
 * terms sorted once; then each term's block copied out as 32-bit words. Shared by both engines'
 * writers (ingestion.ts for LMDB, redis-index.ts for Redis).
 */
import type { DocumentFormat } from './extract.js';
import { sortedOrder, termCount, termHash } from './postings.js';
import type { PreparedContent } from './prepare.js';

/** A document ready to be written: its identity and its prepared content. */
export interface DocumentToWrite {
  id: string;
  key: string;
  title: string;
  url: string | undefined;
  collection: string;
  format: DocumentFormat;
  content: PreparedContent;
  vectors?: Float32Array[] | undefined;
  pages?: number | undefined;
  /** When it was first indexed (an imported document keeps its time); default: when it is published. */
  indexedAt?: string | undefined;
}

/**
 * Term insertions between yields while a segment is planned: about a millisecond of numbering on
 * a fast core (a 500 KB document holds about 8,000 distinct terms, so a step ends inside one).
 */
const PLAN_STEP = 4096;

/**
 * How a segment's blocks are assembled: its terms sorted, their document frequencies, and for each
 * term the documents that hold it, as a list threaded through typed arrays (no per-term objects).
 */
export interface SegmentPlan {
  terms: string[];
  /** Chunks of the segment that hold terms[i]. */
  counts: Uint32Array;
  /** First occurrence of terms[i] (an index into `documentOf`, `indexIn` and `next`). */
  heads: Int32Array;
  /** Per occurrence: the document's position in the segment, the term's index in that document's postings, and the next occurrence of the same term (-1 after the last). Occurrences of a term are in document order. */
  documentOf: Uint32Array;
  indexIn: Uint32Array;
  next: Int32Array;
  /** Each document's entries as 32-bit words (two per entry), for copying. */
  words: Uint32Array[];
  /** Chunks before each document in the segment. */
  shifts: number[];
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** A document's entries as 32-bit words (a copy only when they are not 4-byte aligned). */
function entryWords(entries: Uint8Array): Uint32Array {
  const aligned = entries.byteOffset % 4 === 0 ? entries : new Uint8Array(entries);
  return new Uint32Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 4);
}

/**
 * Numbers distinct terms in order of first sight: an open-addressing table over the terms' hashes
 * (brought from the worker thread with the postings), so a term already seen costs a hash
 * comparison and one string comparison, not hashing the string again.
 */
class TermNumbers {
  readonly terms: string[] = [];
  private hashes = new Uint32Array(1024);
  private slots = new Int32Array(2048).fill(-1);
  private mask = 2047;

  /** The number of `term` (whose termHash is `hash`), given on first sight. */
  number(term: string, hash: number): number {
    return this.numberIn(term, 0, term.length, hash);
  }

  /** number() of text.slice(start, end), sliced only when the term is new. */
  numberIn(text: string, start: number, end: number, hash: number): number {
    const length = end - start;
    for (let slot = hash & this.mask; ; slot = (slot + 1) & this.mask) {
      const id = this.slots[slot] as number;
      if (id === -1) {
        const added = this.terms.length;
        this.terms.push(start === 0 && end === text.length ? text : text.slice(start, end));
        if (added === this.hashes.length) this.grow();
        this.hashes[added] = hash;
        // At most half full: a free slot is near.
        if (this.terms.length * 2 > this.slots.length) this.rehash();
        else this.slots[slot] = added;
        return added;
      }
      if (this.hashes[id] === hash) {
        const known = this.terms[id] as string;
        if (known.length === length && text.startsWith(known, start)) return id;
      }
    }
  }

  private grow(): void {
    const hashes = new Uint32Array(this.hashes.length * 2);
    hashes.set(this.hashes);
    this.hashes = hashes;
  }

  /** Twice the slots, every term placed again (the last one added included). */
  private rehash(): void {
    this.slots = new Int32Array(this.slots.length * 2).fill(-1);
    this.mask = this.slots.length - 1;
    for (let id = 0; id < this.terms.length; id += 1) {
      let slot = (this.hashes[id] as number) & this.mask;
      while (this.slots[slot] !== -1) slot = (slot + 1) & this.mask;
      this.slots[slot] = id;
    }
  }
}

/** The occurrences of a segment's terms as they are numbered: each term's chain in document order. */
class Occurrences {
  readonly numbers = new TermNumbers();
  readonly documentOf: Uint32Array;
  readonly indexIn: Uint32Array;
  readonly next: Int32Array;
  readonly headById: Int32Array;
  readonly countById: Uint32Array;
  private readonly tailById: Int32Array;
  private occurrence = 0;

  constructor(total: number) {
    this.documentOf = new Uint32Array(total);
    this.indexIn = new Uint32Array(total);
    this.next = new Int32Array(total);
    this.headById = new Int32Array(total);
    this.tailById = new Int32Array(total);
    this.countById = new Uint32Array(total);
  }

  /**
   * Numbers terms [from, to) of the document at `position`; `start` is where term `from` begins in
   * its joined term text (terms from a worker thread), and the return is where term `to` begins.
   * Synchronous, so the hot loop stays one optimised function while the caller yields between steps.
   */
  take(document: DocumentToWrite, position: number, from: number, to: number, start: number): number {
    const { postings } = document.content;
    const { offsets, hashes, termText } = postings;
    // Terms that came from a worker thread are read from their joined string: only a term not
    // seen before in the segment becomes a string of its own.
    const terms = hashes && termText !== undefined ? undefined : postings.terms;
    const { numbers, documentOf, indexIn, next, headById, tailById, countById } = this;
    const byId = numbers.terms;
    let occurrence = this.occurrence;
    for (let index = from; index < to; index += 1) {
      const known = byId.length;
      let id: number;
      if (terms) {
        const term = terms[index] as string;
        id = numbers.number(term, hashes ? (hashes[index] as number) : termHash(term));
      } else {
        const text = termText as string;
        let end = text.indexOf('\n', start);
        if (end < 0) end = text.length;
        id = numbers.numberIn(text, start, end, (hashes as Uint32Array)[index] as number);
        start = end + 1;
      }
      if (id === known) headById[id] = occurrence;
      else next[tailById[id] as number] = occurrence;
      tailById[id] = occurrence;
      next[occurrence] = -1;
      countById[id] = (countById[id] as number) + (offsets[index + 1] as number) - (offsets[index] as number);
      documentOf[occurrence] = position;
      indexIn[occurrence] = index;
      occurrence += 1;
    }
    this.occurrence = occurrence;
    return start;
  }
}

/**
 * Plans a segment in steps that yield to the event loop (a batch of large documents holds
 * hundreds of thousands of terms): each distinct term gets a number on first sight, its
 * occurrences are chained in document order, and the distinct terms are sorted once.
 */
export async function planSegment(documents: readonly DocumentToWrite[], yieldBetween: () => Promise<void>): Promise<SegmentPlan> {
  let total = 0;
  for (const document of documents) total += termCount(document.content.postings);
  const occurrences = new Occurrences(total);
  const { documentOf, indexIn, next, headById, countById } = occurrences;
  const byId = occurrences.numbers.terms;
  let work = 0;
  for (const [position, document] of documents.entries()) {
    const count = termCount(document.content.postings);
    let start = 0;
    for (let from = 0; from < count; ) {
      const to = Math.min(count, from + PLAN_STEP - work);
      start = occurrences.take(document, position, from, to, start);
      work += to - from;
      from = to;
      if (work === PLAN_STEP) {
        work = 0;
        await yieldBetween();
      }
    }
  }
  const shifts: number[] = [];
  let shift = 0;
  for (const document of documents) {
    shifts.push(shift);
    shift += document.content.texts.length;
  }
  await yieldBetween();
  // Code-unit order, as the documents' own term lists and the stored keys.
  const order = sortedOrder(byId);
  await yieldBetween();
  const terms: string[] = new Array(order.length);
  const counts = new Uint32Array(order.length);
  const heads = new Int32Array(order.length);
  for (let at = 0; at < order.length; at += 1) {
    const id = order[at] as number;
    terms[at] = byId[id] as string;
    counts[at] = countById[id] as number;
    heads[at] = headById[id] as number;
  }
  const words = documents.map((document) => entryWords(document.content.postings.entries));
  return { terms, counts, heads, documentOf, indexIn, next, words, shifts };
}

/**
 * Copies the block of plan.terms[at] (every document's entries in chunk order, each document's
 * offsets moved by the chunks before it) into `out` (32-bit words) from word `position`; returns
 * the word after it. The block is plan.counts[at] entries long.
 */
export function copyTermBlock(
  plan: SegmentPlan,
  documents: readonly DocumentToWrite[],
  at: number,
  out: Uint32Array,
  position: number,
): number {
  let write = position;
  for (let occurrence = plan.heads[at] as number; occurrence !== -1; occurrence = plan.next[occurrence] as number) {
    const document = plan.documentOf[occurrence] as number;
    const index = plan.indexIn[occurrence] as number;
    const { offsets } = (documents[document] as DocumentToWrite).content.postings;
    const source = plan.words[document] as Uint32Array;
    const end = (offsets[index + 1] as number) * 2;
    const moved = plan.shifts[document] as number;
    for (let word = (offsets[index] as number) * 2; word < end; word += 2) {
      out[write] = moved === 0 || !LITTLE_ENDIAN ? (source[word] as number) : (source[word] as number) + moved;
      out[write + 1] = source[word + 1] as number;
      write += 2;
    }
    if (moved !== 0 && !LITTLE_ENDIAN) {
      const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
      for (let word = write - (end - (offsets[index] as number) * 2); word < write; word += 2)
        view.setUint32(word * 4, view.getUint32(word * 4, true) + moved, true);
    }
  }
  return write;
}
