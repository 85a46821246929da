/**
 * The first step of ingestion: a document's content, in any format the knowledge base reads, as
 * text sections (a PDF's pages, or one section). PDF and Word readers load only when such a file
 * arrives. Runs in the worker pool; answers with an outcome instead of throwing.
 */
import type { ErrorCode, ErrorDetail } from '../errors.js';
import { extractText, isFileFormat, type DocumentFormat } from './extract.js';
import type { Section } from './prepare.js';

export interface ExtractTask {
  /** Text for text formats, the file's bytes for PDF and Word. */
  content: string | Uint8Array;
  format: DocumentFormat;
  /** How the document is named in errors (a file name, or the title). */
  name: string;
}

export type ExtractOutcome =
  | { ok: true; title: string | undefined; sections: Section[]; pages: number | undefined }
  | { ok: false; code: ErrorCode; message: string; details?: ErrorDetail[] | undefined };

/** Text sections of a document. */
export async function extractSections(task: ExtractTask): Promise<ExtractOutcome> {
  if (!isFileFormat(task.format)) {
    const text = typeof task.content === 'string' ? task.content : new TextDecoder().decode(task.content);
    const extracted = extractText(text, task.format);
    return { ok: true, title: extracted.title, sections: [{ text: extracted.text }], pages: undefined };
  }
  const bytes = typeof task.content === 'string' ? new TextEncoder().encode(task.content) : task.content;
  const formats = await import('./binary-formats.js');
  try {
    const document = task.format === 'pdf' ? await formats.extractPdf(bytes) : await formats.extractDocx(bytes);
    const pages = task.format === 'pdf' ? Math.max(0, ...document.sections.map((section) => section.page ?? 0)) : undefined;
    return { ok: true, title: document.title, sections: document.sections, pages };
  } catch (error) {
    if (error instanceof formats.UnprocessableDocument) {
      return { ok: false, code: 'unprocessable_document', message: `${task.name} ${error.reason}.` };
    }
    return { ok: false, code: 'unprocessable_document', message: `${task.name} could not be read (${(error as Error).message}).` };
  }
}
