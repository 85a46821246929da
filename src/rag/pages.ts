/**
 * Posting pages: how a segment's posting blocks are stored. Blocks are packed in term order into
 * pages of about PAGE_BYTES (a larger block fills a page of its own), so a segment costs one
 * storage key per page instead of one per term. Most terms are rare and their blocks are a few
 * entries long; a merge reads, writes and later deletes every key of the segments it folds, so
 * with a key per term it paid per distinct term rather than per byte.
 *
 * A segment's page directory, each page's first term in the order the pages were written, finds a
 * term's page. It is written with the segment, and readers keep it: a segment never changes once
 * written. Pure code, no storage.
 *
 * A page, little-endian: u16 record count n; n × u16 term length in bytes; n × u32 block length in
 * bytes; the n terms (UTF-8) back to back; zero bytes up to a multiple of 8; the n blocks back to
 * back (so a block is as aligned as its page, and is read without a copy).
 */

/**
 * Bytes a page holds at most, unless one block is larger: two 4 KiB LMDB pages less the overflow
 * page's header, so a full page wastes no storage.
 */
export const PAGE_BYTES = 8192 - 64;

/** Bytes of a page's header per record (term length, block length). */
const RECORD_HEADER = 6;
/** Blocks start at a multiple of this (an entry's size). */
const ALIGN = 8;

function aligned(offset: number): number {
  return Math.ceil(offset / ALIGN) * ALIGN;
}

/** The rag-blocks key of page `page` of a segment (after the keys of the one-key-per-term layout, `${segment}\0${term}`). */
export function pageKey(segment: string, page: number): string {
  return `${segment}\u0001${page.toString(36).padStart(6, '0')}`;
}

/** The rag-blocks key range of every page and every per-term block of a segment. */
export function segmentBlockRange(segment: string): { start: string; end: string } {
  return { start: `${segment}\u0000`, end: `${segment}\u0002` };
}

/** The rag-blocks key range of a segment's pages, in page order. */
export function pageRange(segment: string): { start: string; end: string } {
  return { start: `${segment}\u0001`, end: `${segment}\u0002` };
}

/** Packs a segment's (term, block) pairs, given in term order, into pages handed to `emit`. */
export class PageWriter {
  private terms: string[] = [];
  private termLengths: number[] = [];
  private blockLengths: number[] = [];
  /** The page's blocks so far, back to back (copied in, so a caller may reuse its buffer). */
  private staged = new Uint8Array(PAGE_BYTES);
  private stagedBytes = 0;
  /** The page's size without the padding before its blocks. */
  private bytes = 2;
  private readonly firsts: string[] = [];

  constructor(
    private readonly segment: string,
    private readonly emit: (key: string, page: Buffer) => void,
  ) {}

  /** Adds the next term's block (its bytes are copied). */
  add(term: string, block: Uint8Array): void {
    const termLength = Buffer.byteLength(term);
    const size = RECORD_HEADER + termLength + block.byteLength;
    if (this.terms.length > 0 && this.bytes + size + ALIGN > PAGE_BYTES) this.flush();
    if (this.stagedBytes + block.byteLength > this.staged.length) {
      const larger = new Uint8Array(Math.max(this.staged.length * 2, this.stagedBytes + block.byteLength));
      larger.set(this.staged.subarray(0, this.stagedBytes));
      this.staged = larger;
    }
    this.staged.set(block, this.stagedBytes);
    this.stagedBytes += block.byteLength;
    this.terms.push(term);
    this.termLengths.push(termLength);
    this.blockLengths.push(block.byteLength);
    this.bytes += size;
  }

  /** Writes the last page; answers the directory (every page's first term, joined by '\n'). */
  finish(): string {
    if (this.terms.length > 0) this.flush();
    return this.firsts.join('\n');
  }

  private flush(): void {
    const count = this.terms.length;
    const blocksAt = aligned(this.bytes - this.stagedBytes);
    const page = Buffer.alloc(blocksAt + this.stagedBytes);
    page.writeUInt16LE(count, 0);
    let at = 2 + count * RECORD_HEADER;
    for (let index = 0; index < count; index += 1) {
      page.writeUInt16LE(this.termLengths[index] as number, 2 + index * 2);
      page.writeUInt32LE(this.blockLengths[index] as number, 2 + count * 2 + index * 4);
      at += page.write(this.terms[index] as string, at, 'utf8');
    }
    page.set(this.staged.subarray(0, this.stagedBytes), blocksAt);
    this.emit(pageKey(this.segment, this.firsts.length), page);
    this.firsts.push(this.terms[0] as string);
    this.terms = [];
    this.termLengths = [];
    this.blockLengths = [];
    // A page of one very large block grew the staging buffer: it is not kept at that size.
    if (this.staged.length > 2 * PAGE_BYTES) this.staged = new Uint8Array(PAGE_BYTES);
    this.stagedBytes = 0;
    this.bytes = 2;
  }
}

/** Finds a term's page by the directory of a segment. */
export class PageDirectory {
  private readonly firsts: string[];

  constructor(directory: string) {
    this.firsts = directory === '' ? [] : directory.split('\n');
  }

  /** The only page that can hold `term`: the last one whose first term is not after it; -1 when none. */
  pageOf(term: string): number {
    let low = 0;
    let high = this.firsts.length - 1;
    let found = -1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      if ((this.firsts[middle] as string) <= term) {
        found = middle;
        low = middle + 1;
      } else high = middle - 1;
    }
    return found;
  }
}

/** The block of a term in a page, as a view into it; undefined when the page does not hold the term. */
export function findInPage(page: Uint8Array, term: string): Uint8Array | undefined {
  const view = new DataView(page.buffer, page.byteOffset, page.byteLength);
  const count = view.getUint16(0, true);
  const wanted = Buffer.from(term, 'utf8');
  let termAt = 2 + count * RECORD_HEADER;
  let blockAt = termAt;
  for (let index = 0; index < count; index += 1) blockAt += view.getUint16(2 + index * 2, true);
  blockAt = aligned(blockAt);
  for (let index = 0; index < count; index += 1) {
    const termLength = view.getUint16(2 + index * 2, true);
    const blockLength = view.getUint32(2 + count * 2 + index * 4, true);
    if (termLength === wanted.length && sameBytes(page, termAt, wanted)) return page.subarray(blockAt, blockAt + blockLength);
    termAt += termLength;
    blockAt += blockLength;
  }
  return undefined;
}

function sameBytes(page: Uint8Array, at: number, wanted: Uint8Array): boolean {
  for (let index = 0; index < wanted.length; index += 1) if (page[at + index] !== wanted[index]) return false;
  return true;
}

/** One record of a page: a term and its block, as words `from` to `to` of the page's words. */
export interface PageRecord {
  term: string;
  words: Uint32Array;
  from: number;
  to: number;
}

/** Every record of a page in order. */
export function pageRecords(stored: Buffer): PageRecord[] {
  // Values read in a range are their own aligned copies; anything else is copied once.
  const page = stored.byteOffset % 4 === 0 ? stored : Buffer.from(new Uint8Array(stored));
  const count = page.readUInt16LE(0);
  const records: PageRecord[] = [];
  const termsAt = 2 + count * RECORD_HEADER;
  let termsEnd = termsAt;
  for (let index = 0; index < count; index += 1) termsEnd += page.readUInt16LE(2 + index * 2);
  const blocksAt = aligned(termsEnd);
  const words = new Uint32Array(page.buffer, page.byteOffset, (page.byteLength - (page.byteLength % 4)) / 4);
  // Terms are decoded at once; when they are all ASCII, a term's bytes are its characters.
  const text = page.toString('utf8', termsAt, termsEnd);
  const ascii = text.length === termsEnd - termsAt;
  let termAt = termsAt;
  let word = blocksAt / 4;
  for (let index = 0; index < count; index += 1) {
    const termLength = page.readUInt16LE(2 + index * 2);
    const blockWords = page.readUInt32LE(2 + count * 2 + index * 4) / 4;
    const term = ascii ? text.slice(termAt - termsAt, termAt - termsAt + termLength) : page.toString('utf8', termAt, termAt + termLength);
    records.push({ term, words, from: word, to: word + blockWords });
    termAt += termLength;
    word += blockWords;
  }
  return records;
}
