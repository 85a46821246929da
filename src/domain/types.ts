/**
 * The shared vocabulary of the service: who is calling, what a quota decision says, and the events
 * one chat request produces. Every room imports these from here, below itself; nothing in this
 * file knows about HTTP, storage engines or upstream dialects.
 */
import type { ErrorCode } from '../errors.js';

/** Who is calling: resolved once per request from `Authorization: Bearer`, or the client address. */
export type Caller =
  | { kind: 'user'; id: string; plan: string; keyId: string }
  | { kind: 'anonymous'; id: string; plan: string }
  | { kind: 'admin'; id: 'admin'; plan: string };

/** A source of "now" in epoch milliseconds; injectable so tests can move across a window edge. */
export type Clock = () => number;

/** Session ids as the contract defines them. */
export const SESSION_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** What an accepted request paid for, with which cost. */
export type Operation = 'chat' | 'search' | 'image' | 'embeddings';

/** Quota state handed out with every quota-counted reply. */
export interface QuotaStamp {
  plan: string;
  limit: number;
  remaining: number;
  /** ISO 8601 end of the current window. */
  reset: string;
  /** Seconds until reset, for the RateLimit-Reset header. */
  resetSeconds: number;
  /** The token budget's standing, when the plan has one. */
  tokens?: { limit: number; remaining: number; reset: string; resetSeconds: number };
}

/** An accepted quota decision: the units are taken; `refund` gives them back at most once. */
export interface QuotaReservation {
  stamp: QuotaStamp;
  /** Resolves once the take is durable; no byte of the reply may reach the client before it. */
  durable: Promise<void>;
  /** Gives the cost back (the upstream failed before producing anything); resolves to the refunded stamp. */
  refund(): Promise<QuotaStamp>;
  /**
   * Settles the token estimate on what the request really used (prompt plus answer tokens): the
   * difference is given back, or charged as debt. At most once; resolves to the settled stamp
   * (the reserved one when the plan has no token budget).
   */
  settle(tokens: number): Promise<QuotaStamp>;
}

/** A source's snippet, from the knowledge base or a web engine, is at most this long (the model reads it; clients show it). */
export const SNIPPET_MAX_CHARS = 1200;

/** A numbered source cited in an answer as [index]. */
export interface Source {
  index: number;
  kind: 'document' | 'web';
  title: string;
  url?: string;
  /** The PDF page a knowledge-base passage comes from. */
  page?: number;
  snippet: string;
}

/** `tool_calls` only when the request offered tools (the /v1 surface) and the model called one. */
export type FinishReason = 'stop' | 'length' | 'error' | 'tool_calls' | 'cancelled';

/**
 * One fragment of a tool call as the model streams it: the first fragment of each call carries
 * `id` and `name`, later ones only more of `arguments` (JSON text). `index` orders the calls.
 */
export interface ToolCallFragment {
  index: number;
  id?: string;
  name?: string;
  arguments: string;
}

/** A whole tool call, as it is stored and sent back by clients. */
export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as JSON text, exactly as the model wrote them. */
  arguments: string;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
}

/**
 * A model tried before the one that answered: it failed before producing any part of the answer
 * (`error_code` from the catalogue), or it was skipped while cooling down (`cooling_down`).
 */
export interface Attempt {
  model: string;
  error_code: ErrorCode | 'cooling_down';
}

/** The progress stages, in the order a request passes them (docs/api.md lists the same order). */
const PROGRESS_STAGES = ['accepted', 'history', 'retrieval', 'search', 'thinking', 'generating', 'saving'] as const;
type ProgressStage = (typeof PROGRESS_STAGES)[number];

/** What the search step reports beside its sources. */
export interface SearchSummary {
  provider: string;
  query: string;
  resultCount: number;
}

/** The events of one chat request, in order; every encoder is a view of this sequence. */
export type ChatEvent =
  | { type: 'start'; model: string; sessionId: string | undefined; quota: QuotaStamp }
  | { type: 'progress'; stage: ProgressStage; message: string; outputTokens?: number }
  | { type: 'sources'; sources: Source[] }
  | ({ type: 'search' } & SearchSummary)
  | { type: 'thinking'; text: string }
  | { type: 'delta'; text: string }
  | ({ type: 'tool_call' } & ToolCallFragment)
  | {
      type: 'done';
      finishReason: FinishReason;
      usage: Usage;
      timestamp: string;
      model: string;
      attempts: Attempt[];
      /** The quota after the token budget was settled on the real usage. */
      quota: QuotaStamp;
    }
  | { type: 'error'; code: ErrorCode; message: string; quota?: QuotaStamp };

/** Compile-time proof that a switch over a union handled every case. */
export function assertNever(value: never): never {
  throw new Error(`unhandled case: ${JSON.stringify(value)}`);
}

/**
 * Takes one batch of what a producer pushes: true when it took it and wants more, false once it
 * stopped, or a promise of either while it cannot take more yet (the producer waits on it).
 */
export type BatchTaker<T> = (batch: T[]) => boolean | Promise<boolean>;
