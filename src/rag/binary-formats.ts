/**
 * Text from the binary formats the knowledge base accepts: PDF (Mozilla's PDF.js, one section per page)
 * and Word .docx (mammoth, one section). Both libraries are loaded on first use only.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PDFDocumentProxy, TextContent, TextItem } from 'pdfjs-dist/types/src/display/api.js';

/** One extracted part of a document: a PDF page (page is 1-based) or, for formats without pages, the whole text. */
export interface DocumentSection {
  text: string;
  page?: number;
}

/** The text of a document in sections, and the title it declares about itself, if any. */
export interface ExtractedDocument {
  title: string | undefined;
  sections: DocumentSection[];
}

/**
 * A file whose text cannot be extracted: reason is a short human sentence fragment, e.g.
 * "has no extractable text (a scanned PDF without a text layer?)" or "is not a readable PDF (Invalid PDF structure)".
 */
export class UnprocessableDocument extends Error {
  constructor(readonly reason: string) {
    super(`The document ${reason}`);
    this.name = 'UnprocessableDocument';
  }
}

/** A library's error message, first sentence only and bounded, for a reason. */
function briefly(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const line = (message.split(/\n|(?<=[.?!])\s+(?=[A-Z])/)[0] ?? '').trim().replace(/\.$/, '');
  if (line === '') return error instanceof Error ? error.name : 'unknown error';
  return line.length > 120 ? `${line.slice(0, 119)}…` : line;
}

/** Whitespace runs within lines collapsed, lines trimmed, at most one blank line in a row, ends trimmed. */
function tidy(text: string): string {
  return text
    .replace(/[^\S\n]+/g, ' ')
    .replace(/ ?\n ?/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

// ---------------------------------------------------------------------------------------------------
// PDF

type Pdfjs = typeof import('pdfjs-dist/legacy/build/pdf.mjs');

let pdfjs: Promise<Pdfjs> | undefined;

/**
 * PDF.js, imported once. In Node it runs its worker code in the same thread (a "fake worker") and
 * imports it from GlobalWorkerOptions.workerSrc, set here to the installed file so it resolves the same
 * from any caller, worker_threads workers included. Its module body needs DOMMatrix, which Node lacks:
 * PDF.js takes it from its optional dependency @napi-rs/canvas, and fails to load without it.
 */
function loadPdfjs(): Promise<Pdfjs> {
  pdfjs ??= import('pdfjs-dist/legacy/build/pdf.mjs').then(
    (module) => {
      module.GlobalWorkerOptions.workerSrc = import.meta.resolve('pdfjs-dist/legacy/build/pdf.worker.mjs');
      return module;
    },
    (error: unknown) => {
      const hint = /DOMMatrix|Path2D|ImageData/.test(String(error)) ? ' (is the optional package @napi-rs/canvas installed?)' : '';
      throw new Error(`PDF.js could not be loaded: ${briefly(error)}${hint}`, { cause: error });
    },
  );
  return pdfjs;
}

/** Folders of the CMaps (CJK text in non-embedded fonts) and standard font data shipped with pdfjs-dist, as paths. */
function pdfjsDataFolders(): { cMapUrl: string; standardFontDataUrl: string } {
  const root = dirname(fileURLToPath(import.meta.resolve('pdfjs-dist/package.json')));
  return { cMapUrl: `${join(root, 'cmaps')}/`, standardFontDataUrl: `${join(root, 'standard_fonts')}/` };
}

function isTextItem(item: TextContent['items'][number]): item is TextItem {
  return 'str' in item;
}

/**
 * A page's text items as lines: a newline after an item that ends a line (hasEOL), and between other
 * items a space or newline where their positions show a gap that PDF.js did not fill with whitespace.
 */
function pageText(content: TextContent): string {
  let text = '';
  let previous: TextItem | undefined;
  for (const item of content.items) {
    if (!isTextItem(item)) continue;
    if (previous && !previous.hasEOL && item.str !== '' && !/\s$/.test(text) && !/^\s/.test(item.str)) {
      text += separator(previous, item);
    }
    text += item.str;
    if (item.hasEOL) text += '\n';
    if (item.str !== '' || item.hasEOL) previous = item;
  }
  return tidy(text);
}

/** What goes between two items not already separated: nothing when they touch on one line, else a space or a newline. */
function separator(previous: TextItem, next: TextItem): string {
  const [a, b, c, d, x, y] = previous.transform as number[];
  const [, , , , nextX, nextY] = next.transform as number[];
  // Only unrotated, unskewed text is judged by position; anything else gets a space.
  if (b !== 0 || c !== 0 || a === undefined || d === undefined || x === undefined || y === undefined) return ' ';
  if (nextX === undefined || nextY === undefined) return ' ';
  const size = Math.abs(d) || Math.abs(a) || 1;
  if (Math.abs(nextY - y) > size / 2) return '\n';
  const gap = Math.sign(a) * (nextX - x) - previous.width;
  return gap > size * 0.15 ? ' ' : '';
}

/** The document's own title: the information dictionary's Title, else the XMP dc:title. */
async function pdfTitle(document: PDFDocumentProxy): Promise<string | undefined> {
  const { info, metadata } = await document.getMetadata();
  for (const candidate of [(info as { Title?: unknown }).Title, metadata?.get('dc:title')]) {
    if (typeof candidate === 'string' && candidate.trim() !== '') return candidate.trim();
  }
  return undefined;
}

function pdfReason(error: unknown): string {
  const name = error instanceof Error ? error.name : '';
  if (name === 'PasswordException') return 'is password-protected';
  if (name === 'InvalidPDFException') return `is not a readable PDF (${briefly(error)})`;
  return `could not be read as a PDF (${briefly(error)})`;
}

/**
 * The text of a PDF, one section per page that has text (page numbers are 1-based), and the title from
 * its metadata. Throws UnprocessableDocument for a file PDF.js cannot open (damaged, encrypted) and
 * for one without any text (a scan without a text layer).
 */
export async function extractPdf(bytes: Uint8Array): Promise<ExtractedDocument> {
  const { getDocument } = await loadPdfjs();
  const loadingTask = getDocument({
    data: new Uint8Array(bytes), // a copy: pdfjs transfers (detaches) the buffer it is given
    isEvalSupported: false,
    disableFontFace: true,
    useSystemFonts: false,
    verbosity: 0, // errors only
    ...pdfjsDataFolders(),
  });
  try {
    let document: PDFDocumentProxy;
    try {
      document = await loadingTask.promise;
    } catch (error) {
      throw new UnprocessableDocument(pdfReason(error));
    }
    try {
      const sections: DocumentSection[] = [];
      for (let page = 1; page <= document.numPages; page++) {
        const proxy = await document.getPage(page);
        const text = pageText(await proxy.getTextContent());
        proxy.cleanup();
        if (text !== '') sections.push({ text, page });
      }
      if (sections.length === 0) throw new UnprocessableDocument('has no extractable text (a scanned PDF without a text layer?)');
      return { title: await pdfTitle(document), sections };
    } catch (error) {
      if (error instanceof UnprocessableDocument) throw error;
      throw new UnprocessableDocument(pdfReason(error));
    }
  } finally {
    await loadingTask.destroy();
  }
}

// ---------------------------------------------------------------------------------------------------
// Word

/**
 * The text of a Word .docx as one section, paragraphs separated by a blank line. No title: the
 * package's docProps/core.xml is not read. Throws UnprocessableDocument for a file that is not a
 * Word package and for one without text.
 */
export async function extractDocx(bytes: Uint8Array): Promise<ExtractedDocument> {
  const { default: mammoth } = await import('mammoth');
  let raw: string;
  try {
    const result = await mammoth.extractRawText({ buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) });
    raw = result.value;
  } catch (error) {
    throw new UnprocessableDocument(`is not a readable Word document (${briefly(error)})`);
  }
  const text = tidy(raw);
  if (text === '') throw new UnprocessableDocument('has no text');
  return { title: undefined, sections: [{ text }] };
}
