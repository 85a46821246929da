/**
 * Reading sources the way a person skims them for an answer: Markdown structure is taken apart
 * (headings become the context of what follows them instead of sentences, list items and table
 * rows become sentences of their own, emphasis and link syntax go), then the sentences are ranked
 * by the question's words, rarer words weighing more. Used by the built-in extractive model.
 */

const STOPWORDS = new Set(
  (
    'a an and are as at be but by can de did do does for from had has have how i if in into is it its la le me my no not of on or our ' +
    'she so than that the their them then there these they this to un une us was we were what when where which who why will with you your'
  ).split(' '),
);

/** Words that shape a question ("how long", "how many") but are not what it is about. */
const QUESTION_WORDS = new Set('many much long far often should could would must may might shall need'.split(' '));

/** A light stem: plurals and -ed/-ing endings go (a doubled last consonant with them), so "submitted" meets "submit". */
function stem(word: string): string {
  if (word.length <= 3 || !/^[a-z]+$/.test(word)) return word;
  let stemmed = word.replace(/(es|s)$/, '');
  if (stemmed.length > 5 && /(ed|ing)$/.test(stemmed)) {
    stemmed = stemmed.replace(/(ed|ing)$/, '');
    if (/([b-df-hj-np-tv-z])\1$/.test(stemmed)) stemmed = stemmed.slice(0, -1);
  }
  return stemmed;
}

/** Lower-cased content words, lightly stemmed, so "indexes" meets "index". */
export function contentTerms(text: string): string[] {
  const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  return words.filter((word) => word.length > 1 && !STOPWORDS.has(word)).map(stem);
}

/** The words a question is about: its content words without the ones that only shape it. */
export function questionTerms(text: string): string[] {
  return contentTerms(text).filter((term) => !QUESTION_WORDS.has(term));
}

/** One readable sentence of a source, with the heading it sits under. */
export interface Passage {
  text: string;
  heading: string;
  /** Position in the source, for reading order. */
  position: number;
}

const HEADING = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/;
const LIST_ITEM = /^\s*(?:[-*+•]|\d{1,3}[.)])\s+(.*)$/;
const TABLE_SEPARATOR = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

/** Markdown inline syntax removed: emphasis, code ticks, links and images keep their text. */
function plain(text: string): string {
  return text
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/(\*\*|__)(.+?)\1/g, '$2')
    .replace(/(^|[^\p{L}\p{N}])[*_](\S(?:.*?\S)?)[*_](?=[^\p{L}\p{N}]|$)/gu, '$1$2')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/\s+/g, ' ')
    .trim();
}

function tableCells(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split('|')
    .map((cell) => plain(cell))
    .filter((cell) => cell.length > 0);
}

const segmenter = new Intl.Segmenter('en', { granularity: 'sentence' });

/** Web snippets join fragments of a page with " ... " and keep heading marks inline: both end a sentence. */
const FRAGMENT_BREAK = /\s(?:\.\.\.|…)\s|(?:^|\s)#{1,6}\s/;

function sentencesOf(text: string): string[] {
  return text
    .split(FRAGMENT_BREAK)
    .flatMap((fragment) => [...segmenter.segment(fragment)].map((part) => part.segment.replace(/\s+/g, ' ').trim()))
    .filter((part) => /[\p{L}\p{N}]/u.test(part));
}

/** The sentences of a source text, Markdown structure taken apart. */
export function passagesOf(text: string): Passage[] {
  const passages: Passage[] = [];
  let heading = '';
  let paragraph: string[] = [];
  const lines = text.split(/\r?\n/);
  const flush = (): void => {
    if (paragraph.length === 0) return;
    for (const sentence of sentencesOf(plain(paragraph.join(' ')))) passages.push({ text: sentence, heading, position: passages.length });
    paragraph = [];
  };
  lines.forEach((line, index) => {
    const headingMatch = HEADING.exec(line);
    if (headingMatch) {
      flush();
      heading = plain(headingMatch[1] ?? '');
      return;
    }
    if (TABLE_SEPARATOR.test(line) && line.includes('-')) return;
    if (line.trim().startsWith('|')) {
      flush();
      // A header row (the line before a separator) names the columns; it answers nothing.
      if (TABLE_SEPARATOR.test(lines[index + 1] ?? '')) return;
      const cells = tableCells(line);
      if (cells.length > 0)
        passages.push({ text: `${cells[0]}: ${cells.slice(1).join(', ')}`.replace(/: $/, ''), heading, position: passages.length });
      return;
    }
    const item = LIST_ITEM.exec(line);
    if (item) {
      flush();
      for (const sentence of sentencesOf(plain(item[1] ?? ''))) passages.push({ text: sentence, heading, position: passages.length });
      return;
    }
    if (line.trim().length === 0) flush();
    else paragraph.push(line.trim());
  });
  flush();
  return passages;
}

/** A passage with its score for a question. */
export interface Ranked<T> {
  item: T;
  passage: Passage;
  score: number;
}

/** What a heading's words count for, against a word of the sentence itself. */
const HEADING_WEIGHT = 0.5;

/**
 * Ranks passages by the question's content words, each weighted by how rare it is among the
 * passages (a word every sentence has tells nothing), headings counting half; best first.
 */
export function rankPassages<T>(question: string, candidates: ReadonlyArray<{ item: T; passage: Passage }>): Array<Ranked<T>> {
  const wanted = [...new Set(questionTerms(question))];
  const termSets = candidates.map(({ passage }) => ({
    own: new Set(contentTerms(passage.text)),
    heading: new Set(contentTerms(passage.heading)),
  }));
  const documentFrequency = new Map<string, number>();
  for (const term of wanted) documentFrequency.set(term, termSets.filter((terms) => terms.own.has(term) || terms.heading.has(term)).length);
  const total = Math.max(1, candidates.length);
  const ranked: Array<Ranked<T>> = [];
  candidates.forEach((candidate, index) => {
    const terms = termSets[index];
    if (!terms) return;
    let score = 0;
    for (const term of wanted) {
      const weight = Math.log(1 + total / (documentFrequency.get(term) ?? 1));
      if (terms.own.has(term)) score += weight;
      else if (terms.heading.has(term)) score += weight * HEADING_WEIGHT;
    }
    // Sentences that only mention a heading's words, or ask questions themselves, answer less.
    const ownMatches = wanted.some((term) => terms.own.has(term));
    if (score > 0 && ownMatches) {
      const questionPenalty = candidate.passage.text.endsWith('?') ? 0.5 : 1;
      ranked.push({ ...candidate, score: (questionPenalty * score) / Math.sqrt(1 + terms.own.size / 12) });
    }
  });
  return ranked.sort((a, b) => b.score - a.score || a.passage.position - b.passage.position);
}
