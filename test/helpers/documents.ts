/**
 * PDF and Word fixtures written in code: a minimal PDF writer (Helvetica text, or one raw image for a
 * "scanned" page) and a small ZIP writer for .docx packages, so no binary files are committed.
 */
import { deflateRawSync } from 'node:zlib';

// ---------------------------------------------------------------------------------------------------
// PDF

/** A PDF literal string: ( ) and \ escaped, characters outside Latin-1 refused (the font is WinAnsi). */
function pdfString(text: string): string {
  if ([...text].some((character) => character.charCodeAt(0) > 0xff))
    throw new Error(`makePdf: text outside Latin-1: ${JSON.stringify(text)}`);
  return `(${text.replace(/[()\\]/g, (character) => `\\${character}`).replace(/\r/g, '\\r')})`;
}

/** A PDF text string for metadata: a literal when ASCII, otherwise UTF-16BE with a byte-order mark. */
function pdfTextString(text: string): string {
  if (/^[\u0020-\u007e]*$/.test(text)) return pdfString(text);
  const utf16 = Buffer.from(`\ufeff${text}`, 'utf16le').swap16();
  return `<${utf16.toString('hex').toUpperCase()}>`;
}

/** A stream object body: the dictionary entries, /Length, then the bytes. */
function pdfStream(dictionary: string, data: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`<< ${dictionary} /Length ${data.length} >>\nstream\n`, 'latin1'), data, Buffer.from('\nendstream')]);
}

/**
 * A complete PDF file from its object bodies: object n is bodies[n - 1]. Writes the header,
 * the objects, a cross-reference table with the byte offset of each, and the trailer.
 */
function writePdf(bodies: (string | Buffer)[], root: number, info?: number, trailerExtra = ''): Buffer {
  const parts: Buffer[] = [Buffer.from('%PDF-1.4\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
  let length = parts[0]!.length;
  const offsets: number[] = [];
  bodies.forEach((body, index) => {
    offsets.push(length);
    const object = Buffer.concat([
      Buffer.from(`${index + 1} 0 obj\n`, 'latin1'),
      typeof body === 'string' ? Buffer.from(body, 'latin1') : body,
      Buffer.from('\nendobj\n', 'latin1'),
    ]);
    parts.push(object);
    length += object.length;
  });
  const entries = offsets.map((offset) => `${String(offset).padStart(10, '0')} 00000 n \n`).join('');
  const infoEntry = info === undefined ? '' : ` /Info ${info} 0 R`;
  parts.push(
    Buffer.from(
      `xref\n0 ${bodies.length + 1}\n0000000000 65535 f \n${entries}` +
        `trailer\n<< /Size ${bodies.length + 1} /Root ${root} 0 R${infoEntry}${trailerExtra} >>\nstartxref\n${length}\n%%EOF\n`,
      'latin1',
    ),
  );
  return Buffer.concat(parts);
}

/**
 * A valid PDF with one page per entry of `pages`, each drawn in 12 pt Helvetica; a "\n" in a page's
 * text starts a new line (T*). The title, when given, goes into the document information dictionary.
 */
export function makePdf(pages: string[], options: { title?: string } = {}): Buffer {
  // Objects: 1 catalog, 2 page tree, 3 font, then a page and its content stream per page, then the info.
  const pageNumbers = pages.map((_, index) => 4 + index * 2);
  const bodies: (string | Buffer)[] = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Kids [${pageNumbers.map((number) => `${number} 0 R`).join(' ')}] /Count ${pages.length} >>`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>',
  ];
  for (const [index, text] of pages.entries()) {
    const lines = text.split('\n').map((line) => `${pdfString(line)} Tj`);
    const content = `BT\n/F1 12 Tf\n14 TL\n72 720 Td\n${lines.join('\nT*\n')}\nET`;
    bodies.push(
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${pageNumbers[index]! + 1} 0 R >>`,
      pdfStream('', Buffer.from(content, 'latin1')),
    );
  }
  let info: number | undefined;
  if (options.title !== undefined) {
    bodies.push(`<< /Title ${pdfTextString(options.title)} /Producer (Colloquy tests) >>`);
    info = bodies.length;
  }
  return writePdf(bodies, 1, info);
}

/** A one-page PDF whose page only paints a 2x2 RGB image: what a scan without a text layer looks like. */
export function makeScannedPdf(): Buffer {
  const pixels = Buffer.from([0xff, 0, 0, 0, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
  return writePdf(
    [
      '<< /Type /Catalog /Pages 2 0 R >>',
      '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im1 5 0 R >> >> /Contents 4 0 R >>',
      pdfStream('', Buffer.from('q\n468 0 0 648 72 72 cm\n/Im1 Do\nQ', 'latin1')),
      pdfStream('/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceRGB /BitsPerComponent 8', pixels),
    ],
    1,
  );
}

/**
 * A one-page PDF under the standard security handler (RC4, revision 2) whose stored password hashes
 * match neither an empty user password nor any owner password: a reader has to ask for the password.
 */
export function makeEncryptedPdf(): Buffer {
  const hash = (byte: number) => `<${byte.toString(16).padStart(2, '0').repeat(32)}>`;
  return writePdf(
    [
      '<< /Type /Catalog /Pages 2 0 R >>',
      '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>',
      pdfStream('', Buffer.from('BT ET', 'latin1')),
      `<< /Filter /Standard /V 1 /R 2 /O ${hash(0x11)} /U ${hash(0x22)} /P -4 >>`,
    ],
    1,
    undefined,
    ` /Encrypt 5 0 R /ID [${hash(0x33)} ${hash(0x33)}]`,
  );
}

// ---------------------------------------------------------------------------------------------------
// ZIP and DOCX

const CRC_TABLE = Uint32Array.from({ length: 256 }, (_, index) => {
  let value = index;
  for (let bit = 0; bit < 8; bit++) value = value & 1 ? 0xedb88320 ^ (value >>> 1) : value >>> 1;
  return value >>> 0;
});

/** CRC-32 (IEEE 802.3, as ZIP uses it). */
export function crc32(data: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of data) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** A ZIP archive of the given files, each deflated, with local headers, a central directory and its end record. */
export function makeZip(files: { name: string; data: string | Buffer }[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  // 1 January 2024, 00:00, in MS-DOS date and time fields.
  const dosTime = 0;
  const dosDate = ((2024 - 1980) << 9) | (1 << 5) | 1;
  for (const file of files) {
    const name = Buffer.from(file.name, 'utf8');
    const data = typeof file.data === 'string' ? Buffer.from(file.data, 'utf8') : file.data;
    const compressed = deflateRawSync(data);
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed to extract
    local.writeUInt16LE(0x0800, 6); // flags: names are UTF-8
    local.writeUInt16LE(8, 8); // deflate
    local.writeUInt16LE(dosTime, 10);
    local.writeUInt16LE(dosDate, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(compressed.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28); // extra field length
    locals.push(local, name, compressed);

    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4); // version made by
    central.writeUInt16LE(20, 6); // version needed to extract
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(8, 10);
    central.writeUInt16LE(dosTime, 12);
    central.writeUInt16LE(dosDate, 14);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(compressed.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(name.length, 28);
    // extra, comment, disk number, internal and external attributes stay 0
    central.writeUInt32LE(offset, 42);
    centrals.push(central, name);

    offset += local.length + name.length + compressed.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(files.length, 8);
  end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

function xmlEscape(text: string): string {
  return text.replace(/[<>&"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

const CONTENT_TYPES = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
</Types>`;

const PACKAGE_RELATIONSHIPS = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
</Relationships>`;

const DOCUMENT_RELATIONSHIPS = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"></Relationships>`;

/** The parts of a minimal .docx with one paragraph per entry; `makeDocx` zips them. */
export function docxParts(paragraphs: string[]): { name: string; data: string }[] {
  const body = paragraphs.map((text) => `<w:p><w:r><w:t xml:space="preserve">${xmlEscape(text)}</w:t></w:r></w:p>`).join('');
  const document = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${body}<w:sectPr/></w:body></w:document>`;
  return [
    { name: '[Content_Types].xml', data: CONTENT_TYPES },
    { name: '_rels/.rels', data: PACKAGE_RELATIONSHIPS },
    { name: 'word/document.xml', data: document },
    { name: 'word/_rels/document.xml.rels', data: DOCUMENT_RELATIONSHIPS },
  ];
}

/** A minimal valid Word .docx with one plain paragraph per entry (text XML-escaped). */
export function makeDocx(paragraphs: string[]): Buffer {
  return makeZip(docxParts(paragraphs));
}
