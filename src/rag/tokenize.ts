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
  return foldLatinPlural(word);
}

/** foldPlural for a word known to be lower-case Latin letters only, longer than three. */
function foldLatinPlural(word: string): string {
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

const NON_ASCII = /[\u0080-\uffff]/;

/**
 * tokenize for ASCII text, which most documents are: compatibility normalisation and accent
 * stripping leave it as it is, its letters and digits are [a-z0-9] once lower-cased and it has no
 * CJK, so words are found by a scan of character codes instead of a Unicode regular expression.
 * The terms are exactly those of the general path.
 */
function tokenizeAscii(text: string, dropStopWords: boolean, terms: string[]): string[] {
  const lower = text.toLowerCase();
  const length = lower.length;
  let start = -1;
  let digits = false;
  for (let index = 0; index <= length; index += 1) {
    const code = index < length ? lower.charCodeAt(index) : 0;
    if (code >= 97 && code <= 122) {
      if (start < 0) {
        start = index;
        digits = false;
      }
      continue;
    }
    if (code >= 48 && code <= 57) {
      if (start < 0) start = index;
      digits = true;
      continue;
    }
    if (start < 0) continue;
    const size = index - start;
    if (size <= MAX_TOKEN_LENGTH) {
      const word = lower.slice(start, index);
      if (!dropStopWords || !ENGLISH_STOP_WORDS.has(word)) terms.push(size <= 3 || digits ? word : foldLatinPlural(word));
    }
    start = -1;
  }
  return terms;
}

/** The index terms of a text, in order, duplicates kept (term frequency matters). */
export function tokenize(text: string, options: TokenizeOptions = {}): string[] {
  const dropStopWords = options.stopWords ?? true;
  const terms: string[] = [];
  if (!NON_ASCII.test(text)) return tokenizeAscii(text, dropStopWords, terms);
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
