/**
 * POST /api/rag/documents: one document as JSON, or files as multipart/form-data, answered
 * as one JSON reply or, with `Accept: application/x-ndjson`, as one progress line per stage of
 * every document and a summary line. Each file of an upload stands alone: the ones that go in stay
 * in when another fails.
 */
import { getMultipartBoundary, MaxPartsExceededError, type MultipartPart, MultipartParser } from '@remix-run/multipart-parser';
import * as v from 'valibot';
import { parseWith } from '../auth/validation.js';
import { loopBusyFor, nextTurn } from '../core/loop-share.js';
import { ApiError } from '../errors.js';
import type { HttpContext } from '../http/types.js';
import { formatFromFileName, type DocumentFormat } from '../rag/extract.js';
import { COLLECTION_PATTERN, DEFAULT_COLLECTION, type DocumentInput, type IngestOutcome } from '../rag/knowledge-base.js';
import type { Services } from '../services.js';
import { NO_STORE } from './headers.js';

const NDJSON = 'application/x-ndjson';
/** Documents of one upload prepared at once. */
const UPLOAD_CONCURRENCY = 4;

const CollectionSchema = v.pipe(v.string(), v.regex(COLLECTION_PATTERN, 'must be 1-64 letters, digits, "_" or "-"'));

export const IngestBody = v.strictObject({
  title: v.pipe(v.string(), v.trim(), v.minLength(1, 'must not be empty'), v.maxLength(300, 'must be at most 300 characters')),
  text: v.pipe(
    v.string(),
    v.check((text) => text.trim().length > 0, 'must not be empty'),
  ),
  url: v.optional(v.pipe(v.string(), v.maxLength(2048, 'must be at most 2048 characters'), v.url('must be an absolute URL'))),
  collection: v.optional(CollectionSchema),
  format: v.optional(v.picklist(['text', 'markdown', 'html'], 'must be one of text, markdown, html')),
});

/** Formats by the media type a client sent, when the file name says nothing. */
const MEDIA_TYPES: Record<string, DocumentFormat> = {
  'text/plain': 'text',
  'text/markdown': 'markdown',
  'text/html': 'html',
  'application/pdf': 'pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
};

interface UploadedFile {
  name: string;
  format: DocumentFormat;
  bytes: Buffer;
}

/** Longest run of upload parsing before the event loop is let through. */
const LOOP_SHARE_MS = 5;

function isMultipart(contentType: string | undefined): boolean {
  return contentType?.split(';', 1)[0]?.trim().toLowerCase() === 'multipart/form-data';
}

/** The body limit of the route: uploads may be as large as rag.max_upload_bytes, JSON keeps the server's. */
export function uploadBodyLimit(services: Services): (headers: Readonly<Record<string, string>>) => number | undefined {
  return (headers) => (isMultipart(headers['content-type']) ? services.config.rag.maxUploadBytes : undefined);
}

function mebibytes(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;
}

/**
 * One file's bytes from the views the parser collected. They are views of the request body's
 * buffer when it was read into one (a declared length): when they lie end to end, the file is one
 * more view of it, with no copy. A file that is a small part of a large body is copied, so that
 * handing it to a worker thread (which copies the whole buffer under a view) copies no more than
 * the file.
 */
function joined(chunks: readonly Uint8Array[]): Buffer {
  const first = chunks[0];
  if (first === undefined) return Buffer.alloc(0);
  let end = first.byteOffset + first.length;
  for (let index = 1; index < chunks.length; index += 1) {
    const chunk = chunks[index] as Uint8Array;
    if (chunk.buffer !== first.buffer || chunk.byteOffset !== end) return Buffer.concat(chunks);
    end += chunk.length;
  }
  const length = end - first.byteOffset;
  if (length * 2 < first.buffer.byteLength) return Buffer.concat(chunks, length);
  return Buffer.from(first.buffer, first.byteOffset, length);
}

/** Most files one upload may hold, and most parts (files and fields) in all. */
const MAX_FILES = 1000;
const MAX_PARTS = 1100;

/** A body the parser cannot read: a missing boundary, a broken part, bytes that are not UTF-8 in a part's headers. */
function unreadable(error: unknown): ApiError {
  const reason = error instanceof Error ? error.message.replace(/\.$/, '') : String(error);
  return new ApiError('invalid_request', `The multipart body cannot be read: ${reason}.`);
}

/**
 * The body's first piece from its first delimiter on: text before it (a preamble, which MIME
 * allows and readers ignore) is dropped when the piece holds the delimiter, on a line of its own.
 */
function withoutPreamble(piece: Buffer, boundary: string): Buffer {
  const delimiter = `--${boundary}`;
  if (piece.subarray(0, delimiter.length).toString('latin1') === delimiter) return piece;
  const at = piece.indexOf(`\r\n${delimiter}`);
  return at < 0 ? piece : piece.subarray(at + 2);
}

/**
 * The files and the collection of a multipart body; refuses the whole request on a limit or an
 * unreadable type. The parser finds boundaries with Buffer.indexOf and hands out views of the
 * pieces it was given, so a body costs a few searches, not a pass over every byte in JavaScript.
 */
async function parseMultipart(
  contentType: string,
  pieces: AsyncIterable<Buffer>,
  maxFileBytes: number,
): Promise<{ files: UploadedFile[]; collection: string | undefined }> {
  const boundary = getMultipartBoundary(contentType);
  if (!boundary) throw unreadable('the Content-Type header names no boundary');
  // The request body's own limit (rag.max_upload_bytes) bounds what the parser holds; a file over
  // rag.max_file_bytes is refused below by name, after its part ended.
  const parser = new MultipartParser(boundary, {
    maxFileSize: Number.POSITIVE_INFINITY,
    maxTotalSize: Number.POSITIVE_INFINITY,
    maxParts: MAX_PARTS,
  });
  const files: UploadedFile[] = [];
  const problems: ApiError[] = [];
  let fileCount = 0;
  let collection: string | undefined;
  const take = (part: MultipartPart): void => {
    if (!part.isFile) {
      if (part.name === 'collection') collection = part.text;
      return;
    }
    fileCount += 1;
    if (fileCount > MAX_FILES) {
      if (fileCount === MAX_FILES + 1) problems.push(new ApiError('payload_too_large', `An upload may hold at most ${MAX_FILES} files.`));
      return;
    }
    const name = part.filename || 'upload';
    if (part.size > maxFileBytes) {
      problems.push(
        new ApiError('payload_too_large', `${name} is larger than the ${mebibytes(maxFileBytes)} file limit (rag.max_file_bytes).`),
      );
      return;
    }
    const format = formatFromFileName(name) ?? MEDIA_TYPES[(part.mediaType ?? '').toLowerCase()];
    if (!format) {
      problems.push(
        new ApiError('unsupported_media_type', `${name} is not a file type the knowledge base reads (.txt, .md, .html, .pdf, .docx).`),
      );
      return;
    }
    files.push({ name, format, bytes: joined(part.content) });
  };
  // True once the closing boundary was read: what follows it is an epilogue, which readers ignore
  // (RFC 2046), and the parser refuses any write after its end (finish() throws until then).
  let ended = false;
  const hasEnded = (): boolean => {
    try {
      parser.finish();
      return true;
    } catch {
      return false;
    }
  };
  const feed = (piece: Buffer | undefined): void => {
    if (ended) return;
    try {
      if (piece === undefined) parser.finish();
      else {
        for (const part of parser.write(piece)) take(part);
        ended = hasEnded();
      }
    } catch (error) {
      if (error instanceof MaxPartsExceededError) throw new ApiError('payload_too_large', `An upload may hold at most ${MAX_PARTS} parts.`);
      throw unreadable(error);
    }
  };
  // Parsed as it arrives, a turn at a time when the loop is busy: many uploads that arrive together
  // never leave their whole parsing for the moment their last bytes land.
  let first = true;
  for await (const piece of pieces) {
    // Asked before the work, not after: when many uploads end in the same turn, each one's parse
    // (and the file it completes) waits for a turn of its own once the loop has been busy.
    if (loopBusyFor(LOOP_SHARE_MS)) await nextTurn();
    if (piece.length === 0) continue;
    feed(first ? withoutPreamble(piece, boundary) : piece);
    first = false;
  }
  feed(undefined);
  const refusal = problems.find((problem) => problem.code === 'payload_too_large') ?? problems[0];
  if (refusal) throw refusal;
  if (collection !== undefined && !COLLECTION_PATTERN.test(collection)) {
    throw new ApiError('invalid_request', undefined, {
      details: [{ path: 'collection', message: 'must be 1-64 letters, digits, "_" or "-"' }],
    });
  }
  if (files.length === 0)
    throw new ApiError('invalid_request', 'The upload holds no file.', { details: [{ path: 'files', message: 'is required' }] });
  return { files, collection };
}

/** The documents a request brings: one from JSON, or every file of a multipart body. */
async function documentsOf(
  services: Services,
  context: HttpContext,
): Promise<{ inputs: DocumentInput[]; names: string[]; multipart: boolean }> {
  const contentType = context.request.headers['content-type'];
  if (isMultipart(contentType)) {
    const { files, collection } = await parseMultipart(contentType as string, context.bodyPieces(), services.config.rag.maxFileBytes);
    const inputs = files.map((file) => ({
      // No title: the document's own (<title>, first heading, PDF metadata), else the file name.
      title: '',
      defaultTitle: file.name.replace(/\.[^.]+$/, '') || file.name,
      name: file.name,
      text: file.bytes,
      format: file.format,
      collection: collection ?? DEFAULT_COLLECTION,
      // Uploading a file of the same name into the same collection replaces it.
      key: `file:${file.name}`,
    }));
    return { inputs, names: files.map((file) => file.name), multipart: true };
  }
  const body = parseWith(IngestBody, await context.readJson());
  const maxBytes = services.config.rag.maxDocumentBytes;
  const bytes = Buffer.byteLength(body.text, 'utf8');
  if (bytes > maxBytes) {
    throw new ApiError(
      'payload_too_large',
      `The document text is ${bytes} bytes; the limit is ${maxBytes} bytes (rag.max_document_bytes). Upload larger documents as files (multipart/form-data).`,
    );
  }
  const input = {
    title: body.title,
    text: body.text,
    url: body.url,
    collection: body.collection ?? DEFAULT_COLLECTION,
    format: body.format,
  };
  return { inputs: [input], names: [body.title], multipart: false };
}

function documentLine(name: string, outcome: Extract<IngestOutcome, { ok: true }>) {
  const { result } = outcome;
  return {
    file: name,
    document_id: result.document_id,
    chunks: result.chunks,
    collection: result.collection,
    title: result.title,
    replaced: result.replaced,
  };
}

/** Handles POST /api/rag/documents once the caller is known to be an admin. */
export async function ingestDocuments(services: Services, context: HttpContext): Promise<void> {
  const { inputs, names, multipart } = await documentsOf(services, context);
  const knowledge = services.knowledge;
  if (context.request.headers.accept?.toLowerCase().includes(NDJSON)) {
    const stream = context.stream({ contentType: NDJSON, headers: NO_STORE });
    const write = (value: unknown) => void stream.write(`${JSON.stringify(value)}\n`);
    try {
      const outcomes = await knowledge.addMany(inputs, {
        concurrency: UPLOAD_CONCURRENCY,
        signal: context.signal,
        onStage: (index, stage) => write({ type: 'progress', index, file: names[index], stage }),
        onOutcome: (index, outcome) =>
          write(
            outcome.ok
              ? { type: 'progress', index, stage: 'done', ...documentLine(names[index] as string, outcome) }
              : {
                  type: 'progress',
                  index,
                  file: names[index],
                  stage: 'error',
                  error: { code: outcome.error.code, message: outcome.error.message },
                },
          ),
      });
      const indexed = outcomes.filter((outcome) => outcome.ok).length;
      const chunks = outcomes.reduce((sum, outcome) => sum + (outcome.ok ? outcome.result.chunks : 0), 0);
      write({ type: 'summary', status: indexed === outcomes.length ? 201 : 422, indexed, failed: outcomes.length - indexed, chunks });
    } catch (error) {
      const apiError = error instanceof ApiError ? error : new ApiError('internal');
      if (!(error instanceof ApiError) && !context.signal.aborted) services.logger.error({ err: error }, 'document upload failed');
      write({ type: 'error', error: { code: apiError.code, message: apiError.message } });
    } finally {
      stream.end();
    }
    return;
  }
  const outcomes = await knowledge.addMany(inputs, { concurrency: UPLOAD_CONCURRENCY, signal: context.signal });
  if (!multipart) {
    const outcome = outcomes[0] as IngestOutcome;
    if (!outcome.ok) throw outcome.error;
    const { file: _file, ...document } = documentLine(names[0] as string, outcome);
    context.json(201, document, NO_STORE);
    return;
  }
  const files = outcomes.map((outcome, index) =>
    outcome.ok
      ? { status: 'done', ...documentLine(names[index] as string, outcome) }
      : { status: 'error', file: names[index], error: { code: outcome.error.code, message: outcome.error.message } },
  );
  const failed = outcomes.filter((outcome) => !outcome.ok) as Array<Extract<IngestOutcome, { ok: false }>>;
  if (failed.length === 0) {
    context.json(201, { documents: files }, NO_STORE);
    return;
  }
  // One file: its own error. Several: 422 with every file's outcome.
  if (outcomes.length === 1) throw (failed[0] as Extract<IngestOutcome, { ok: false }>).error;
  const error = new ApiError(
    'unprocessable_document',
    `${failed.length} of ${outcomes.length} files could not be indexed; the others were.`,
    {
      details: outcomes.flatMap((outcome, index) => (outcome.ok ? [] : [{ path: names[index] as string, message: outcome.error.message }])),
    },
  );
  context.json(error.status, { ...error.toBody(), documents: files }, NO_STORE);
}
