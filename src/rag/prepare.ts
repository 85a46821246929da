/**
 * The CPU-heavy part of ingestion after extraction, with no storage and no I/O: a document's text
 * sections are cut into chunks and tokenised into posting blocks. It runs in the worker-thread pool
 * (ingest-worker.ts) so the event loop keeps serving while documents go in, and answers with an
 * outcome rather than throwing, because errors lose their code on the way back from a worker.
 */
import type { ErrorCode, ErrorDetail } from '../errors.js';
import { chunkText } from './chunk.js';
import { buildPostings, joinedTerms, type DocumentPostings } from './postings.js';

/** How sections are cut and tokenised. */
export interface ChunkOptions {
  chunkSize: number;
  chunkOverlap: number;
  stopWords: boolean;
  /** Largest extracted text kept, in UTF-8 bytes. */
  maxTextBytes: number;
}

/** The second step of ingestion: extracted sections to chunks and posting blocks. */
export interface ChunkTask extends ChunkOptions {
  sections: Section[];
  title: string | undefined;
}

/** A document's text cut into chunks, with its postings. */
export interface PreparedContent {
  /** A title the document names itself (<title>, a first heading, PDF metadata). */
  title: string | undefined;
  /** Characters of extracted text. */
  chars: number;
  texts: string[];
  /** Token length of each chunk (the BM25 document length). */
  lengths: number[];
  /** The page each chunk comes from (PDFs); undefined for formats without pages. */
  pages: number[] | undefined;
  postings: DocumentPostings;
}

export type PrepareOutcome =
  | { ok: true; content: PreparedContent }
  | { ok: false; code: ErrorCode; message: string; details?: ErrorDetail[] | undefined };

/** A part of a document: a page of a PDF, or the whole text. */
export interface Section {
  text: string;
  page?: number | undefined;
}

/** Chunks and tokenises extracted sections; a chunk never straddles two sections. */
export function prepareSections(sections: readonly Section[], title: string | undefined, options: ChunkOptions): PrepareOutcome {
  let chars = 0;
  let bytes = 0;
  for (const section of sections) {
    chars += section.text.length;
    bytes += Buffer.byteLength(section.text, 'utf8');
  }
  if (bytes > options.maxTextBytes) {
    return {
      ok: false,
      code: 'payload_too_large',
      message: `The document's text is ${bytes} bytes; the limit is ${options.maxTextBytes} bytes (rag.max_extracted_bytes).`,
    };
  }
  const texts: string[] = [];
  const pages: number[] = [];
  const paged = sections.some((section) => section.page !== undefined);
  for (const section of sections) {
    for (const piece of chunkText(section.text, { size: options.chunkSize, overlap: options.chunkOverlap })) {
      texts.push(piece);
      if (paged) pages.push(section.page ?? 0);
    }
  }
  if (texts.length === 0) {
    return {
      ok: false,
      code: 'invalid_request',
      message: 'The document contains no text to index.',
      details: [{ path: 'text', message: 'contains no text to index' }],
    };
  }
  const { lengths, postings } = buildPostings(texts, options.stopWords);
  return { ok: true, content: { title, chars, texts, lengths, pages: paged ? pages : undefined, postings } };
}

/**
 * A PrepareOutcome as it comes back from a worker thread: the postings' terms as one string
 * ('\n' never occurs in a term), because structured cloning one string costs far less, on both
 * threads, than cloning thousands of short ones.
 */
export type PackedPrepareOutcome =
  | Exclude<PrepareOutcome, { ok: true }>
  | { ok: true; content: Omit<PreparedContent, 'postings'> & { postings: Omit<DocumentPostings, 'terms'> & { terms: string } } };

export function packOutcome(outcome: PrepareOutcome): PackedPrepareOutcome {
  if (!outcome.ok) return outcome;
  const { postings } = outcome.content;
  return { ok: true, content: { ...outcome.content, postings: { ...postings, terms: joinedTerms(postings) } } };
}

export function unpackOutcome(packed: PackedPrepareOutcome): PrepareOutcome {
  if (!packed.ok) return packed;
  const { terms: termText, offsets, entries, hashes } = packed.content.postings;
  // The list is split only if something reads it: the LMDB writer plans from the string itself.
  let terms: string[] | undefined;
  const postings: DocumentPostings = {
    offsets,
    entries,
    hashes,
    termText,
    get terms() {
      terms ??= termText.length === 0 ? [] : termText.split('\n');
      return terms;
    },
  };
  return { ok: true, content: { ...packed.content, postings } };
}
