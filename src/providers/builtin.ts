/**
 * The offline, deterministic model `builtin-extractive`. With sources it answers by quoting the
 * sentences most relevant to the question, each cited as [n]; without any it says plainly that no
 * upstream model is configured and how to configure one. Paced, it streams word by word; unpaced,
 * clause by clause (few deltas, each readable on its own), so every route works (and can be
 * load-tested) with nothing configured.
 */
import type { Source } from '../domain/types.js';
import { abortableSleep } from '../upstream/abortable-sleep.js';
import { type Passage, passagesOf, questionTerms, rankPassages } from './passages.js';
import type { ChatProvider, ProviderEvent, ProviderRequest } from './types.js';
import type { CancelSignal } from '../domain/cancel.js';

/** Sentences quoted at most; enough to answer, short enough to read. */
const MAX_SENTENCES = 3;
/** A further sentence is quoted only when it scores at least this share of the best one. */
const KEEP_SHARE = 0.5;

/** A rough token count (about four characters per token) for usage when nothing better exists. */
export function estimateTokens(text: string): number {
  return estimateTokensFromChars(text.length);
}

/** The same estimate from a character count, for text that was streamed on and not kept. */
export function estimateTokensFromChars(chars: number): number {
  return Math.ceil(chars / 4);
}

interface Candidate {
  source: Source;
  passage: Passage;
  score: number;
}

/** The sentences that answer the question best, best first: the top one and those close to it. */
function rankSentences(question: string, sources: readonly Source[]): Candidate[] {
  const candidates = sources.flatMap((source) => passagesOf(source.snippet).map((passage) => ({ item: source, passage })));
  const ranked = rankPassages(question, candidates);
  const best = ranked[0]?.score ?? 0;
  return ranked
    .filter((candidate) => candidate.score >= best * KEEP_SHARE)
    .map((candidate) => ({ source: candidate.item, passage: candidate.passage, score: candidate.score }));
}

function question(request: ProviderRequest): string {
  for (let at = request.messages.length - 1; at >= 0; at--) {
    const message = request.messages[at]!;
    if (message.role === 'user') return message.content;
  }
  return '';
}

/** The builtin's reasoning (deep thinking) and answer for a request; pure and deterministic. */
export function composeAnswer(request: ProviderRequest): { thinking: string; answer: string } {
  const asked = question(request);
  if (request.sources.length === 0 && request.searched) {
    return {
      thinking: 'Retrieval or search ran but found nothing to answer from.',
      answer:
        'I found nothing about this in the knowledge base or the search results, so I cannot answer it from sources. ' +
        `This reply comes from the built-in offline model (${request.model.id}); configure an upstream model ` +
        '(OPENAI_BASE_URL, ANTHROPIC_API_KEY, OLLAMA_HOST, or "models" in the config file) for open questions.',
    };
  }
  if (request.sources.length === 0) {
    return {
      thinking: 'There are no retrieved passages or search results to answer from, and no upstream model is configured.',
      answer:
        `No upstream model is configured, so this reply comes from the built-in offline model (${request.model.id}), ` +
        'which can only answer from retrieved documents or search results. To chat with a real model, set ' +
        'OPENAI_BASE_URL (and OPENAI_API_KEY) for any OpenAI-compatible server, ANTHROPIC_API_KEY, or OLLAMA_HOST, ' +
        'or list models in the config file named by COLLOQUY_CONFIG ("models": [{"id", "provider", "base_url", "api_key_env"}]). ' +
        'You can also ask with "rag": true or "web_search": true to get an answer drawn from the knowledge base.',
    };
  }
  const ranked = rankSentences(asked, request.sources);
  const terms = [...new Set(questionTerms(asked))];
  if (ranked.length === 0) {
    const first = request.sources[0]!;
    const opening = passagesOf(first.snippet)[0]?.text ?? first.snippet;
    return {
      thinking: `Looked for ${terms.join(', ') || 'the question'} in ${request.sources.length} source(s); none of their sentences mention it.`,
      answer: `The sources found do not answer this directly. The closest one, "${first.title}", says: ${opening} [${first.index}]`,
    };
  }
  // The best sentences, then put back in reading order so the answer flows like the sources.
  // The answer leads with the sentence that answers best; the others follow in order of strength.
  const chosen = ranked.slice(0, MAX_SENTENCES);
  const answer = chosen.map((candidate) => `${candidate.passage.text} [${candidate.source.index}]`).join(' ');
  const cited = [...new Set(chosen.map((candidate) => `[${candidate.source.index}]`))].join(', ');
  return {
    thinking: `Looked for ${terms.join(', ')} in ${request.sources.length} source(s); the most relevant sentences come from ${cited}.`,
    answer: `According to the sources: ${answer}`,
  };
}

/** What the built-in model says when tools were offered: it never calls one, and says so first. */
function toolNotice(request: ProviderRequest): string {
  const tools = request.options?.tools ?? [];
  if (tools.length === 0 || request.options?.toolChoice === 'none') return '';
  const names = tools.map((tool) => tool.name).join(', ');
  return `The built-in offline model (${request.model.id}) cannot call tools, so ${names} ${tools.length === 1 ? 'was' : 'were'} not called. `;
}

/** The length of `texts.join('\n')`, without building the string (a session's turns run to many kilobytes). */
function joinedLength(texts: readonly string[]): number {
  let length = texts.length > 0 ? texts.length - 1 : 0;
  for (const text of texts) length += text.length;
  return length;
}

/** True when a word (with its trailing space) ends a clause: its last visible character is , ; : . ! or ?. */
function endsClause(word: string): boolean {
  let at = word.length - 1;
  while (at > 0 && word.charCodeAt(at) <= 32) at -= 1;
  switch (word.charCodeAt(at)) {
    case 44: // ,
    case 59: // ;
    case 58: // :
    case 46: // .
    case 33: // !
    case 63: // ?
      return true;
    default:
      return false;
  }
}

/**
 * The words joined into clauses, each ending after a word that ends one. Every delta costs a trip
 * through the pipeline and, when streamed, a frame: a clause keeps the stream progressive at a
 * tenth of the events of one per word, and never splits a word.
 */
export function clausesOf(words: readonly string[]): string[] {
  const clauses: string[] = [];
  let clause = '';
  for (const word of words) {
    clause += word;
    if (endsClause(word)) {
      clauses.push(clause);
      clause = '';
    }
  }
  if (clause.length > 0) clauses.push(clause);
  return clauses;
}

/** The offline model: streams composeAnswer word by word (paced) or clause by clause (unpaced). */
export class BuiltinProvider implements ChatProvider {
  readonly name = 'builtin' as const;

  /** `delayMs` paces the words (config builtin_delay_ms), 0 streams them as fast as the client reads. */
  constructor(private readonly delayMs: number) {}

  async *stream(request: ProviderRequest, signal: CancelSignal): AsyncIterable<ProviderEvent[]> {
    const composed = composeAnswer(request);
    const { thinking } = composed;
    const answer = toolNotice(request) + composed.answer;
    const promptLength =
      joinedLength(request.messages.map((message) => message.content)) + joinedLength(request.sources.map((source) => source.snippet));
    const words = answer.match(/\S+\s*/g) ?? [];
    const limit = Math.min(words.length, request.maxTokens ?? Number.POSITIVE_INFINITY);
    const opening: ProviderEvent[] = request.deepThinking ? [{ type: 'thinking', text: thinking }] : [];
    const finish: ProviderEvent = {
      type: 'finish',
      reason: limit < words.length ? 'length' : 'stop',
      usage: { inputTokens: estimateTokensFromChars(promptLength), outputTokens: limit },
    };
    if (this.delayMs === 0) {
      // Unpaced, the whole answer is one batch: nothing is waited for between clauses.
      const deltas = clausesOf(limit < words.length ? words.slice(0, limit) : words).map(
        (text): ProviderEvent => ({ type: 'delta', text }),
      );
      yield [...opening, ...deltas, finish];
      return;
    }
    if (opening.length > 0) yield opening;
    for (const word of words.slice(0, limit)) {
      await abortableSleep(this.delayMs, signal);
      yield [{ type: 'delta', text: word }];
    }
    yield [finish];
  }
}
