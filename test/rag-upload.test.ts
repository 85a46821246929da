/**
 * Files into the knowledge base over HTTP: multipart/form-data uploads of text, Markdown, HTML,
 * PDF and Word files, answered as JSON or as NDJSON progress; each file stands alone; the limits
 * answer with clear 413s; and a chat question is answered from a PDF with its page cited.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { makeDocx, makePdf, makeScannedPdf } from './helpers/documents.js';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'rag-upload-admin-token-0123456789abcdef';
const auth = { authorization: `Bearer ${ADMIN}` };

interface ProgressLine {
  type: 'progress' | 'summary' | 'error';
  index?: number;
  file?: string;
  stage?: string;
  document_id?: string;
  chunks?: number;
  error?: { code: string; message: string };
  status?: number;
  indexed?: number;
  failed?: number;
}

function form(files: Array<[string, Buffer | string, string?]>, collection?: string): FormData {
  const body = new FormData();
  if (collection !== undefined) body.append('collection', collection);
  for (const [name, content, type] of files) body.append('file', new Blob([content], { type: type ?? 'application/octet-stream' }), name);
  return body;
}

/** A refusal's status, catalogue code and message. */
async function refusal(response: Response): Promise<{ status: number; code: string; message: string }> {
  const body = (await response.json()) as { error: { code: string; message: string } };
  return { status: response.status, code: body.error.code, message: body.error.message };
}

/**
 * Sends a multipart body chunked, a kilobyte at a time with pauses, over a raw socket, and stops
 * writing as soon as the server answers; resolves with the answer's status and error code.
 */
async function sendSlowlyUntilAnswered(url: URL, body: FormData): Promise<{ status: number; code: string }> {
  const encoded = new Request('http://encoder.invalid/', { method: 'POST', body });
  const bytes = Buffer.from(await encoded.arrayBuffer());
  const socket = connect(Number(url.port), url.hostname);
  let answer = '';
  const answered = new Promise<void>((resolve) => {
    socket.on('data', (data: Buffer) => {
      answer += data.toString('latin1');
    });
    // The server closes the connection after a refusal; a reset after the answer is expected.
    socket.on('error', () => resolve());
    socket.on('close', () => resolve());
  });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(
    `POST /api/rag/documents HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${ADMIN}\r\n` +
      `Content-Type: ${encoded.headers.get('content-type')}\r\nTransfer-Encoding: chunked\r\n\r\n`,
  );
  for (let offset = 0; offset < bytes.length && answer.length === 0 && !socket.destroyed; offset += 1024) {
    if (offset % (1024 * 16) === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const piece = bytes.subarray(offset, offset + 1024);
    socket.write(`${piece.length.toString(16)}\r\n`);
    socket.write(piece);
    socket.write('\r\n');
  }
  if (answer.length === 0 && !socket.destroyed) socket.write('0\r\n\r\n');
  await answered;
  const [head = '', json = ''] = answer.split('\r\n\r\n');
  const status = Number(head.split(' ')[1]);
  // A body sent with Content-Length (the server's JSON replies) is whole once the connection closed.
  return { status, code: (JSON.parse(json) as { error: { code: string } }).error.code };
}

const HANDBOOK = makePdf(
  [
    'Staff handbook\nThis handbook covers the office.',
    'Holidays\nEvery employee receives twenty-seven days of paid leave each year.',
    'Equipment\nLaptops are replaced every four years.',
  ],
  { title: 'Staff handbook' },
);

describe('uploading files to the knowledge base', () => {
  let server: TestServer;
  before(async () => {
    server = await bootServer({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN },
      config: { rag: { max_file_bytes: 200_000, max_extracted_bytes: 100_000, max_upload_bytes: 400_000 } },
    });
  });
  after(() => server.close());

  it('indexes several files of every format with one progress line per stage and a summary line', async () => {
    const response = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: { ...auth, accept: 'application/x-ndjson' },
      body: form(
        [
          ['notes.txt', 'The boiler is serviced every October.', 'text/plain'],
          ['guide.md', '# Kitchen guide\n\nThe dishwasher runs at night.'],
          ['page.html', '<html><head><title>Parking</title></head><body><p>Bicycles park in the basement.</p></body></html>'],
          ['handbook.pdf', HANDBOOK, 'application/pdf'],
          ['policy.docx', makeDocx(['Travel policy', 'Trains are booked in second class.'])],
        ],
        'office',
      ),
    });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /application\/x-ndjson/);
    const lines = (await response.text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as ProgressLine);
    for (let index = 0; index < 5; index += 1) {
      const stages = lines.filter((line) => line.index === index).map((line) => line.stage);
      assert.deepEqual(stages, ['extracting', 'chunking', 'indexing', 'done'], `file ${index}`);
      const done = lines.find((line) => line.index === index && line.stage === 'done');
      assert.match(done?.document_id ?? '', /^doc_[0-9a-f]{24}$/);
      assert.ok((done?.chunks ?? 0) >= 1);
    }
    assert.deepEqual(lines.at(-1), { type: 'summary', status: 201, indexed: 5, failed: 0, chunks: lines.at(-1)?.chunks });
    const listed = (await (await server.fetch('/api/rag/documents?collection=office', { headers: auth })).json()) as {
      documents: Array<{ title: string; format: string; pages?: number }>;
    };
    const byTitle = new Map(listed.documents.map((document) => [document.title, document]));
    assert.deepEqual([...byTitle.keys()].sort(), ['Kitchen guide', 'Parking', 'Staff handbook', 'notes', 'policy']);
    assert.equal(byTitle.get('Staff handbook')?.pages, 3);
    assert.equal(byTitle.get('policy')?.format, 'docx');
  });

  it('answers a chat question from a PDF and cites the page', async () => {
    const body = (await (
      await server.post('/api/chat/', { message: 'How many days of paid leave does an employee receive?', rag: { collection: 'office' } })
    ).json()) as { sources: Array<{ title: string; page?: number; snippet: string }>; response: string };
    assert.equal(body.sources[0]?.title, 'Staff handbook');
    assert.equal(body.sources[0]?.page, 2);
    assert.match(body.sources[0]?.snippet ?? '', /twenty-seven days/);
    assert.match(body.response, /twenty-seven days/);
  });

  it('keeps the files that went in when others cannot be read, and lists every outcome in a 422', async () => {
    const response = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: auth,
      body: form(
        [
          ['good.txt', 'Visitors sign in at the front desk.'],
          ['scan.pdf', makeScannedPdf()],
          ['broken.docx', Buffer.from('this is not a zip archive')],
        ],
        'mixed',
      ),
    });
    assert.equal(response.status, 422);
    const body = (await response.json()) as {
      error: { code: string; message: string; details: Array<{ path: string; message: string }> };
      documents: Array<{ status: string; file: string; error?: { code: string; message: string } }>;
    };
    assert.equal(body.error.code, 'unprocessable_document');
    assert.deepEqual(
      body.documents.map((document) => [document.file, document.status, document.error?.code]),
      [
        ['good.txt', 'done', undefined],
        ['scan.pdf', 'error', 'unprocessable_document'],
        ['broken.docx', 'error', 'unprocessable_document'],
      ],
    );
    assert.match(body.documents[1]?.error?.message ?? '', /^scan\.pdf has no extractable text/);
    assert.match(body.documents[2]?.error?.message ?? '', /^broken\.docx /);
    assert.deepEqual(
      body.error.details.map((detail) => detail.path),
      ['scan.pdf', 'broken.docx'],
    );
    const listed = (await (await server.fetch('/api/rag/documents?collection=mixed', { headers: auth })).json()) as {
      documents: Array<{ title: string }>;
    };
    assert.deepEqual(
      listed.documents.map((document) => document.title),
      ['good'],
    );
  });

  it('answers a single unreadable file with its own 422 and keeps nothing of it', async () => {
    const response = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: auth,
      body: form([['scan.pdf', makeScannedPdf()]], 'scans'),
    });
    assert.equal(response.status, 422);
    const body = (await response.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'unprocessable_document');
    assert.match(body.error.message, /scan\.pdf has no extractable text/);
    assert.equal((await server.fetch('/api/rag/documents?collection=scans', { headers: auth })).status, 404);
  });

  it('refuses a file over rag.max_file_bytes, text over rag.max_extracted_bytes and an upload over rag.max_upload_bytes with 413s', async () => {
    const big = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: auth,
      body: form([
        ['small.txt', 'fine'],
        ['huge.txt', 'x '.repeat(150_000)],
      ]),
    });
    assert.equal(big.status, 413);
    const bigRefusal = await refusal(big);
    assert.equal(bigRefusal.code, 'payload_too_large');
    assert.match(bigRefusal.message, /huge\.txt is larger than .*rag\.max_file_bytes/);

    const wordy = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: auth,
      body: form([['wordy.txt', 'word '.repeat(30_000)]]),
    });
    assert.equal(wordy.status, 413);
    const wordyRefusal = await refusal(wordy);
    assert.equal(wordyRefusal.code, 'payload_too_large');
    assert.match(wordyRefusal.message, /rag\.max_extracted_bytes/);

    const upload = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: auth,
      body: form([
        ['a.txt', 'y '.repeat(90_000)],
        ['b.txt', 'z '.repeat(90_000)],
        ['c.txt', 'w '.repeat(90_000)],
      ]),
    });
    assert.equal(upload.status, 413);
    const uploadRefusal = await refusal(upload);
    assert.equal(uploadRefusal.code, 'payload_too_large');
    assert.match(uploadRefusal.message, /400000 bytes/);
  });

  it('refuses a file type it cannot read with 415, and an upload without the admin token with 401', async () => {
    const response = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: auth,
      body: form([['photo.png', Buffer.from([137, 80, 78, 71])]]),
    });
    assert.equal(response.status, 415);
    const typeRefusal = await refusal(response);
    assert.equal(typeRefusal.code, 'unsupported_media_type');
    assert.match(typeRefusal.message, /photo\.png/);
    const anonymous = await server.fetch('/api/rag/documents', { method: 'POST', body: form([['a.txt', 'text']]) });
    assert.equal(anonymous.status, 401);
    assert.equal((await refusal(anonymous)).code, 'unauthorized');
  });

  it('answers a malformed upload with 400 invalid_request naming what is wrong, and a body of another type with 415', async () => {
    const noFile = await refusal(await server.fetch('/api/rag/documents', { method: 'POST', headers: auth, body: form([], 'empty') }));
    assert.deepEqual([noFile.status, noFile.code], [400, 'invalid_request']);
    assert.match(noFile.message, /no file/);

    const badCollection = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: auth,
      body: form([['a.txt', 'text']], 'no spaces'),
    });
    assert.equal(badCollection.status, 400);
    const badBody = (await badCollection.json()) as { error: { code: string; details: Array<{ path: string }> } };
    assert.equal(badBody.error.code, 'invalid_request');
    assert.deepEqual(
      badBody.error.details.map((detail) => detail.path),
      ['collection'],
    );

    const noBoundary = await refusal(
      await server.fetch('/api/rag/documents', { method: 'POST', headers: { ...auth, 'content-type': 'multipart/form-data' }, body: 'x' }),
    );
    assert.deepEqual([noBoundary.status, noBoundary.code], [400, 'invalid_request']);
    assert.match(noBoundary.message, /multipart body cannot be read/);

    const plain = await refusal(
      await server.fetch('/api/rag/documents', { method: 'POST', headers: { ...auth, 'content-type': 'text/plain' }, body: 'just text' }),
    );
    assert.deepEqual([plain.status, plain.code], [415, 'unsupported_media_type']);
    const listed = await server.fetch('/api/rag/documents?collection=empty', { headers: auth });
    assert.equal(listed.status, 404, 'nothing was indexed');
  });

  it('reports the same progress lines for one JSON document with Accept: application/x-ndjson', async () => {
    const response = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', accept: 'application/x-ndjson' },
      body: JSON.stringify({ title: 'Printer', text: 'The printer is on the second floor.', collection: 'json' }),
    });
    assert.equal(response.status, 200);
    const lines = (await response.text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as ProgressLine);
    assert.deepEqual(
      lines.map((line) => line.stage ?? line.type),
      ['extracting', 'chunking', 'indexing', 'done', 'summary'],
    );
    assert.equal(lines[3]?.file, 'Printer');
    assert.match(lines[3]?.document_id ?? '', /^doc_[0-9a-f]{24}$/);
    assert.deepEqual(lines[4], { type: 'summary', status: 201, indexed: 1, failed: 0, chunks: 1 });
  });

  it('parses an upload that arrives slowly in small chunked pieces, and refuses one that passes the upload limit mid-way', async () => {
    // The form encoded as fetch would send it, then sent with Transfer-Encoding: chunked, a kilobyte
    // at a time with pauses: the server parses as it comes.
    const sendSlowly = async (body: FormData): Promise<Response> => {
      const encoded = new Request('http://encoder.invalid/', { method: 'POST', body });
      const bytes = new Uint8Array(await encoded.arrayBuffer());
      let offset = 0;
      const trickle = new ReadableStream<Uint8Array>({
        async pull(controller: ReadableStreamDefaultController<Uint8Array>) {
          // A refused upload cancels the stream; pull is then not called again.
          if (offset % (1024 * 16) === 0) await new Promise((resolve) => setTimeout(resolve, 5));
          controller.enqueue(bytes.slice(offset, offset + 1024));
          offset += 1024;
          if (offset >= bytes.length) controller.close();
        },
      });
      return server.fetch('/api/rag/documents', {
        method: 'POST',
        headers: { ...auth, 'content-type': encoded.headers.get('content-type') as string },
        body: trickle,
        duplex: 'half',
      } as RequestInit);
    };
    const notes = 'Slow uploads arrive in many pieces. The kettle in room four is descaled every Friday.\n'.repeat(600);
    const response = await sendSlowly(
      form(
        [
          ['kettle.txt', notes, 'text/plain'],
          ['small.md', '# Small\nA second file.'],
        ],
        'slow',
      ),
    );
    assert.equal(response.status, 201, await response.clone().text());
    const reply = (await response.json()) as { documents: Array<{ document_id: string; chunks: number }> };
    assert.equal(reply.documents.length, 2);
    const passages = await server.services.knowledge.retrieve('kettle descaled', { topK: 1, collection: 'slow' });
    assert.match(passages[0]?.text ?? '', /kettle in room four is descaled every Friday/);

    // The refused upload is sent by a client that stops writing once the answer arrives: the
    // server closes the connection after its 413, and a client still writing then may see the
    // reset before it reads the answer (fetch reports "fetch failed").
    const { status, code } = await sendSlowlyUntilAnswered(
      new URL(server.url),
      form([
        ['big.txt', 'x'.repeat(150_000)],
        ['big2.txt', 'y'.repeat(150_000)],
        ['big3.txt', 'z'.repeat(150_000)],
      ]),
    );
    assert.deepEqual([status, code], [413, 'payload_too_large']);
    assert.equal((await server.services.knowledge.retrieve('xxxx', { topK: 1 })).length, 0);
  });

  it('reads every file of one body byte for byte, a file that is most of the body and small ones beside it', async () => {
    // A PDF and a Word file are parsed from their exact bytes; the text file holds what a boundary
    // begins with, so a parser that lost or moved a byte would show it.
    const pages = Array.from(
      { length: 40 },
      (_, page) => `Ledger page ${page + 1}\nThe ledger of the harbour office lists ship ${page + 1}.`,
    );
    const ledger = makePdf(pages, { title: 'Harbour ledger' });
    const notes = 'Line one\r\n--not a boundary\r\n-\r\nThe lighthouse keeper rows out at dawn.\r';
    const response = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: auth,
      body: form(
        [
          ['ledger.pdf', ledger, 'application/pdf'],
          ['rota.docx', makeDocx(['The ferry rota changes on Mondays.'])],
          ['notes.txt', notes, 'text/plain'],
        ],
        'harbour',
      ),
    });
    assert.equal(response.status, 201, await response.clone().text());
    const search = async (query: string) =>
      (await server.services.knowledge.retrieve(query, { topK: 1, collection: 'harbour' }))[0]?.text ?? '';
    assert.match(await search('ledger ship 37'), /lists ship 37\./);
    assert.match(await search('ferry rota Mondays'), /The ferry rota changes on Mondays\./);
    assert.match(await search('lighthouse keeper dawn'), /--not a boundary[\s\S]*The lighthouse keeper rows out at dawn\./);
  });

  it('keeps a file name sent in UTF-8, raw or as filename*, and answers a body cut off or not UTF-8 in its part headers with 400', async () => {
    const boundary = 'colloquy-test-boundary';
    const raw = (parts: string[], ending = `--${boundary}--\r\n`) =>
      Buffer.concat([...parts.map((part) => Buffer.from(`--${boundary}\r\n${part}\r\n`)), Buffer.from(ending)]);
    const send = (body: Buffer) =>
      server.fetch('/api/rag/documents', {
        method: 'POST',
        headers: { ...auth, 'content-type': `multipart/form-data; boundary=${boundary}` },
        body,
      });
    const named = await send(
      raw([
        'Content-Disposition: form-data; name="collection"\r\n\r\nnames',
        'Content-Disposition: form-data; name="file"; filename="Ωmega notes.txt"\r\nContent-Type: text/plain\r\n\r\nThe omega notes list the tides.',
        `Content-Disposition: form-data; name="file"; filename="fallback.txt"; filename*=UTF-8''${encodeURIComponent('Über den Hafen.md')}\r\n\r\n# Harbour\nThe harbour closes at dusk.`,
      ]),
    );
    assert.equal(named.status, 201, await named.clone().text());
    const documents = ((await named.json()) as { documents: Array<{ file: string; title: string; collection: string }> }).documents;
    assert.deepEqual(
      documents.map((document) => [document.file, document.collection]),
      [
        ['Ωmega notes.txt', 'names'],
        ['Über den Hafen.md', 'names'],
      ],
    );
    assert.equal(documents[0]?.title, 'Ωmega notes');

    const cut = await refusal(
      await send(raw(['Content-Disposition: form-data; name="file"; filename="cut.txt"\r\n\r\nThis file never ends'], '')),
    );
    assert.deepEqual([cut.status, cut.code], [400, 'invalid_request']);
    assert.match(cut.message, /multipart body cannot be read/);

    const latin1 = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="caf`),
      Buffer.from([0xe9]),
      Buffer.from(`.txt"\r\n\r\nCoffee.\r\n--${boundary}--\r\n`),
    ]);
    const notUtf8 = await refusal(await send(latin1));
    assert.deepEqual([notUtf8.status, notUtf8.code], [400, 'invalid_request']);
    assert.equal((await server.fetch('/api/rag/documents?collection=names', { headers: auth })).status, 200);
  });

  it('ignores a preamble and what follows the closing boundary, even when that arrives in a piece of its own', async () => {
    const boundary = 'colloquy-epilogue-boundary';
    const body = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="epilogue.txt"\r\n\r\n` +
        `The epilogue notes say the gate opens at six.\r\n--${boundary}--`,
    );
    const pieces = [body, Buffer.from('\r\n'), Buffer.from('an epilogue, which readers ignore\r\n')];
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller: ReadableStreamDefaultController<Uint8Array>) {
        const piece = pieces.shift();
        if (piece === undefined) {
          controller.close();
          return;
        }
        controller.enqueue(new Uint8Array(piece));
        // Apart in time, so the server reads each piece on its own.
        await new Promise((resolve) => setTimeout(resolve, 20));
      },
    });
    const response = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: { ...auth, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    assert.equal(response.status, 201, await response.clone().text());
    const passages = await server.services.knowledge.retrieve('epilogue gate opens', { topK: 1 });
    assert.match(passages[0]?.text ?? '', /gate opens at six/);

    // Text before the first delimiter (a preamble) is ignored too.
    const preamble = await server.fetch('/api/rag/documents', {
      method: 'POST',
      headers: { ...auth, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body: `This is a MIME preamble.\r\n${body.toString()}\r\n`,
    });
    assert.equal(preamble.status, 201, await preamble.clone().text());
  });

  it('refuses an upload of more than 1000 files, or 1100 parts, with 413 and indexes none of them', async () => {
    const files = Array.from({ length: 1001 }, (_, index): [string, string] => [`tiny-${index}.txt`, `Tiny file ${index}.`]);
    const response = await refusal(await server.fetch('/api/rag/documents', { method: 'POST', headers: auth, body: form(files, 'tiny') }));
    assert.deepEqual([response.status, response.code], [413, 'payload_too_large']);
    assert.match(response.message, /at most 1000 files/);
    assert.equal((await server.fetch('/api/rag/documents?collection=tiny', { headers: auth })).status, 404);

    // Parts of any kind count too: 1101 fields and one file.
    const crowded = form([['one.txt', 'One file among many fields.']], 'tiny');
    for (let index = 0; index < 1100; index += 1) crowded.append(`note${index}`, 'x');
    const parts = await refusal(await server.fetch('/api/rag/documents', { method: 'POST', headers: auth, body: crowded }));
    assert.deepEqual([parts.status, parts.code], [413, 'payload_too_large']);
    assert.match(parts.message, /at most 1100 parts/);
    assert.equal((await server.fetch('/api/rag/documents?collection=tiny', { headers: auth })).status, 404);
  });

  it('replaces a file uploaded again under the same name into the same collection', async () => {
    const first = (await (
      await server.fetch('/api/rag/documents', { method: 'POST', headers: auth, body: form([['faq.txt', 'Lunch is at noon.']], 'faq') })
    ).json()) as { documents: Array<{ document_id: string; replaced: boolean }> };
    const second = (await (
      await server.fetch('/api/rag/documents', { method: 'POST', headers: auth, body: form([['faq.txt', 'Lunch is at one.']], 'faq') })
    ).json()) as { documents: Array<{ document_id: string; replaced: boolean }> };
    assert.equal(second.documents[0]?.document_id, first.documents[0]?.document_id);
    assert.equal(second.documents[0]?.replaced, true);
    const passages = await server.services.knowledge.retrieve('lunch', { topK: 3, collection: 'faq' });
    assert.deepEqual(
      passages.map((passage) => passage.text),
      ['Lunch is at one.'],
    );
  });
});
