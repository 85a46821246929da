/**
 * Tokenisation shared by indexing and querying, so both sides fold text identically: Unicode
 * compatibility normalisation, accent stripping, lower-casing, words as runs of letters and
 * digits in any script, CJK runs as overlapping character bigrams (those scripts do not separate
 * words with spaces), optional stop words and a light plural fold for Latin-script words.
 */
import { ENGLISH_STOP_WORDS } from './stop-words.js';

export interface TokenizeOptions {
  /** Drop English stop words (default true). */
  stopWords?: boolean;
}

const WORD = /[\p{L}\p{N}]+/gu;
const MARKS = /\p{M}+/gu;
const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
const LATIN_WORD = /^[a-z]+$/;
/** Tokens longer than this are noise (hashes, base64) and would bloat the term dictionary. */
const MAX_TOKEN_LENGTH = 48;

/** Folds case and accents: `Café` and `CAFE` become `cafe`. */
function foldText(text: string): string {
  return text.normalize('NFKD').replace(MARKS, '').toLowerCase();
}

/**
 * Folds regular English plurals so `servers` finds `server`. Deliberately conservative: only
 * suffixes whose removal is unambiguous, the same rule on both sides of the index.
 */
function foldPlural(word: string): string {
  if (word.length <= 3 || !LATIN_WORD.test(word)) return word;
  if (word.endsWith('ies') && word.length > 4) return `${word.slice(0, -3)}y`;
  if (word.endsWith('sses')) return word.slice(0, -2);
  if (word.endsWith('s') && !word.endsWith('ss') && !word.endsWith('us') && !word.endsWith('is')) return word.slice(0, -1);
  return word;
}

/** Splits a run of CJK characters into overlapping bigrams (a single character stays a unigram). */
function cjkBigrams(run: string, out: string[]): void {
  const chars = Array.from(run);
  if (chars.length === 1) {
    out.push(run);
    return;
  }
  for (let index = 0; index + 1 < chars.length; index += 1) out.push(chars[index]! + chars[index + 1]!);
}

/** The index terms of a text, in order, duplicates kept (term frequency matters). */
export function tokenize(text: string, options: TokenizeOptions = {}): string[] {
  const dropStopWords = options.stopWords ?? true;
  const terms: string[] = [];
  for (const match of foldText(text).matchAll(WORD)) {
    const word = match[0];
    if (CJK.test(word)) {
      // Mixed runs (`api接口`) are split into their CJK and non-CJK parts.
      let buffer = '';
      let cjk = '';
      for (const char of word) {
        if (CJK.test(char)) {
          if (buffer) terms.push(foldPlural(buffer));
          buffer = '';
          cjk += char;
        } else {
          if (cjk) cjkBigrams(cjk, terms);
          cjk = '';
          buffer += char;
        }
      }
      if (buffer) terms.push(foldPlural(buffer));
      if (cjk) cjkBigrams(cjk, terms);
      continue;
    }
    if (word.length > MAX_TOKEN_LENGTH) continue;
    if (dropStopWords && ENGLISH_STOP_WORDS.has(word)) continue;
    terms.push(foldPlural(word));
  }
  return terms;
}

/** Term → count for one text. */
export function termFrequencies(text: string, options: TokenizeOptions = {}): Map<string, number> {
  const counts = new Map<string, number>();
  for (const term of tokenize(text, options)) counts.set(term, (counts.get(term) ?? 0) + 1);
  return counts;
}
