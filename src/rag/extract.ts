/**
 * Plain text from the formats the knowledge base accepts. HTML goes through a real parser
 * (htmlparser2: entities decoded, script/style skipped, block elements become paragraph breaks);
 * Markdown is read line by line so headings, lists and fences keep their paragraph structure.
 */
import { Parser } from 'htmlparser2';

/** Formats read as text. */
export type TextFormat = 'text' | 'markdown' | 'html';
/** Every format the knowledge base reads: text formats and files (PDF, Word .docx). */
export type DocumentFormat = TextFormat | 'pdf' | 'docx';

/** True for the formats that arrive as bytes rather than text. */
export function isFileFormat(format: DocumentFormat): format is 'pdf' | 'docx' {
  return format === 'pdf' || format === 'docx';
}

export interface ExtractedText {
  /** A title found in the document itself (<title>, first <h1>, first `# ` heading). */
  title: string | undefined;
  text: string;
}

/** Elements whose content is never text a reader sees. */
const SKIPPED = new Set(['script', 'style', 'noscript', 'template', 'svg', 'math', 'iframe', 'object', 'canvas', 'head']);
/** Elements that start and end a paragraph. */
const BLOCKS = new Set([
  'address',
  'article',
  'aside',
  'blockquote',
  'body',
  'dd',
  'details',
  'div',
  'dl',
  'dt',
  'fieldset',
  'figcaption',
  'figure',
  'footer',
  'form',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'header',
  'hr',
  'li',
  'main',
  'nav',
  'ol',
  'p',
  'pre',
  'section',
  'summary',
  'table',
  'tbody',
  'td',
  'tfoot',
  'th',
  'thead',
  'tr',
  'ul',
  'caption',
]);

/** The format implied by a file name, or undefined when it is not one the knowledge base reads. */
export function formatFromFileName(name: string): DocumentFormat | undefined {
  const lower = name.toLowerCase();
  if (lower.endsWith('.txt') || lower.endsWith('.text')) return 'text';
  if (lower.endsWith('.md') || lower.endsWith('.markdown')) return 'markdown';
  if (lower.endsWith('.html') || lower.endsWith('.htm')) return 'html';
  if (lower.endsWith('.pdf')) return 'pdf';
  if (lower.endsWith('.docx')) return 'docx';
  return undefined;
}

/** Visible text of an HTML document with block structure kept as blank lines. */
export function extractHtml(html: string): ExtractedText {
  const paragraphs: string[] = [];
  let paragraph = '';
  let skipDepth = 0;
  let inTitle = false;
  let title = '';
  let firstHeading: string | undefined;
  let headingText: string | undefined;
  const breakParagraph = () => {
    const clean = paragraph.replace(/\s+/g, ' ').trim();
    if (clean) paragraphs.push(clean);
    paragraph = '';
  };
  const parser = new Parser(
    {
      onopentag(name) {
        if (name === 'title') inTitle = true;
        if (SKIPPED.has(name)) skipDepth += 1;
        if (skipDepth > 0) return;
        if (name === 'td' || name === 'th') paragraph += ' ';
        else if (BLOCKS.has(name)) breakParagraph();
        else if (name === 'br') paragraph += '\n';
        if (name === 'h1' && firstHeading === undefined) headingText = '';
      },
      ontext(text) {
        if (inTitle) title += text;
        if (skipDepth > 0) return;
        paragraph += text;
        if (headingText !== undefined) headingText += text;
      },
      onclosetag(name) {
        if (name === 'title') inTitle = false;
        if (SKIPPED.has(name)) {
          skipDepth = Math.max(0, skipDepth - 1);
          return;
        }
        if (skipDepth > 0) return;
        if (name === 'h1' && headingText !== undefined) {
          firstHeading = headingText.replace(/\s+/g, ' ').trim() || undefined;
          headingText = undefined;
        }
        // Cells of one row stay on one line; every other block ends its paragraph.
        if (name === 'td' || name === 'th') paragraph += ' ';
        else if (BLOCKS.has(name)) breakParagraph();
      },
    },
    { decodeEntities: true, lowerCaseTags: true, recognizeSelfClosing: true },
  );
  parser.write(html);
  parser.end();
  breakParagraph();
  const cleanTitle = title.replace(/\s+/g, ' ').trim();
  return { title: cleanTitle || firstHeading, text: paragraphs.join('\n\n') };
}

/** Inline Markdown to plain text: links and images keep their text, emphasis and code marks go. */
function markdownInline(line: string): string {
  return line
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]+)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]+)\]\[[^\]]*\]/g, '$1')
    .replace(/<\/?[A-Za-z][^>]*>/g, '')
    .replace(/(\*\*|__)(.+?)\1/g, '$2')
    .replace(/(^|[^\w*])[*_]([^*_\s][^*_]*?)[*_](?=[^\w*]|$)/g, '$1$2')
    .replace(/`([^`]+)`/g, '$1')
    .replace(/~~(.+?)~~/g, '$1');
}

/** Plain text of a Markdown document; headings, list items and fenced blocks become paragraphs. */
export function extractMarkdown(markdown: string): ExtractedText {
  const lines = markdown.replace(/\r\n?/g, '\n').split('\n');
  const out: string[] = [];
  let title: string | undefined;
  let fence: string | undefined;
  let index = 0;
  // Front matter is metadata, not text.
  if (lines[0]?.trim() === '---') {
    const end = lines.indexOf('---', 1);
    if (end > 0) index = end + 1;
  }
  for (; index < lines.length; index += 1) {
    const line = lines[index]!;
    const fenceMatch = /^\s*(```+|~~~+)/.exec(line);
    if (fenceMatch) {
      if (fence === undefined) fence = fenceMatch[1]!.slice(0, 3);
      else if (fenceMatch[1]!.startsWith(fence)) fence = undefined;
      out.push('');
      continue;
    }
    if (fence !== undefined) {
      out.push(line);
      continue;
    }
    const heading = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const text = markdownInline(heading[2]!);
      if (heading[1] === '#' && title === undefined) title = text;
      out.push('', text, '');
      continue;
    }
    if (/^\s*([-*_]\s*){3,}$/.test(line) || /^\s*[=-]{3,}\s*$/.test(line)) {
      out.push('');
      continue;
    }
    const item = /^\s*(?:[-*+]|\d+[.)])\s+(.*)$/.exec(line);
    if (item) {
      out.push('', markdownInline(item[1]!));
      continue;
    }
    const quoted = line.replace(/^\s*>\s?/, '');
    if (/^\s*\|.*\|\s*$/.test(quoted)) {
      if (/^\s*\|[\s:|-]+\|\s*$/.test(quoted)) continue;
      out.push(markdownInline(quoted.replace(/\|/g, ' ')));
      continue;
    }
    out.push(markdownInline(quoted));
  }
  const text = out
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
  return { title, text };
}

/** Plain text of a document in the given format. */
export function extractText(content: string, format: TextFormat): ExtractedText {
  switch (format) {
    case 'html':
      return extractHtml(content);
    case 'markdown':
      return extractMarkdown(content);
    case 'text':
      return { title: undefined, text: content.replace(/\r\n?/g, '\n').trim() };
  }
}
