import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { extractDocx, extractPdf, UnprocessableDocument } from '../src/rag/binary-formats.js';
import { docxParts, makeDocx, makeEncryptedPdf, makePdf, makeScannedPdf, makeZip } from './helpers/documents.js';

/** Asserts that the promise rejects with UnprocessableDocument and returns its reason. */
async function reasonOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof UnprocessableDocument, `expected UnprocessableDocument, got ${String(error)}`);
    return error.reason;
  }
  assert.fail('expected the extraction to fail');
}

describe('PDF text extraction', () => {
  it('gives one section per page with 1-based page numbers, the text of each page and the title', async () => {
    const pdf = makePdf(['The first page.', 'Second page (with brackets) and a \\ backslash.', 'Page three.'], {
      title: 'A Handbook',
    });
    const document = await extractPdf(pdf);
    assert.equal(document.title, 'A Handbook');
    assert.deepEqual(document.sections, [
      { text: 'The first page.', page: 1 },
      { text: 'Second page (with brackets) and a \\ backslash.', page: 2 },
      { text: 'Page three.', page: 3 },
    ]);
  });

  it('keeps the lines of a page with several lines', async () => {
    const document = await extractPdf(makePdf(['Opening hours\nMonday to Friday 9 to 17\nClosed on holidays']));
    assert.deepEqual(document.sections, [{ text: 'Opening hours\nMonday to Friday 9 to 17\nClosed on holidays', page: 1 }]);
  });

  it('reads a non-ASCII title, leaves out pages without text and has no title when the PDF has none', async () => {
    assert.equal((await extractPdf(makePdf(['Text'], { title: 'Café Łódź' }))).title, 'Café Łódź');
    const document = await extractPdf(makePdf(['One', '', 'Three']));
    assert.equal(document.title, undefined);
    assert.deepEqual(document.sections, [
      { text: 'One', page: 1 },
      { text: 'Three', page: 3 },
    ]);
  });

  it('leaves the caller’s bytes usable (PDF.js is given a copy)', async () => {
    const pdf = makePdf(['Same text twice']);
    const bytes = new Uint8Array(pdf);
    await extractPdf(bytes);
    assert.equal(bytes.byteLength, pdf.length);
    assert.deepEqual((await extractPdf(bytes)).sections, [{ text: 'Same text twice', page: 1 }]);
  });

  it('refuses a scanned PDF (an image, no text layer) as having no extractable text', async () => {
    const reason = await reasonOf(extractPdf(makeScannedPdf()));
    assert.match(reason, /no extractable text/);
  });

  it('refuses random bytes and a truncated PDF as unreadable', async () => {
    assert.match(await reasonOf(extractPdf(randomBytes(2048))), /not a readable PDF/);
    const pdf = makePdf(['Some text that will be cut off.', 'And a second page.']);
    const truncated = pdf.subarray(0, Math.floor(pdf.length / 3));
    assert.match(await reasonOf(extractPdf(truncated)), /PDF/);
    assert.match(await reasonOf(extractPdf(new Uint8Array(0))), /PDF/);
  });

  it('refuses an encrypted PDF as password-protected', async () => {
    assert.equal(await reasonOf(extractPdf(makeEncryptedPdf())), 'is password-protected');
  });
});

describe('Word .docx text extraction', () => {
  it('gives one section without a page, the paragraphs separated by blank lines', async () => {
    const document = await extractDocx(makeDocx(['Terms & conditions', 'Refunds within <30> days.', 'Contact "support".']));
    assert.equal(document.title, undefined);
    assert.deepEqual(document.sections, [{ text: 'Terms & conditions\n\nRefunds within <30> days.\n\nContact "support".' }]);
  });

  it('refuses a document without text', async () => {
    assert.equal(await reasonOf(extractDocx(makeDocx(['', '   ']))), 'has no text');
  });

  it('refuses random bytes and a zip without word/document.xml as unreadable Word documents', async () => {
    assert.match(await reasonOf(extractDocx(randomBytes(2048))), /^is not a readable Word document \(.+\)$/);
    const withoutBody = makeZip(docxParts(['Lost']).filter((part) => part.name !== 'word/document.xml'));
    assert.match(await reasonOf(extractDocx(withoutBody)), /^is not a readable Word document \(.+\)$/);
  });
});
