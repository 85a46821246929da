/**
 * The events one chat request produces. The pipeline yields them as an AsyncIterable and every
 * encoder (JSON collector, SSE, NDJSON progress) consumes the same sequence.
 */
import type { ErrorCode } from '../errors.js';

/** A numbered source cited in an answer as [index]. */
export interface Source {
  index: number;
  kind: 'document' | 'web';
  title: string;
  url?: string;
  snippet: string;
}

export type FinishReason = 'stop' | 'length' | 'error';

export interface Usage {
  input_tokens: number;
  output_tokens: number;
}

/** Quota state handed out with every chat reply. */
export interface QuotaStamp {
  plan: string;
  limit: number;
  remaining: number;
  /** ISO 8601 end of the current window. */
  reset: string;
  /** Seconds until reset, for the RateLimit-Reset header. */
  resetSeconds: number;
}

export type ProgressStage = 'accepted' | 'history' | 'retrieval' | 'search' | 'thinking' | 'generating' | 'saving';

export type ChatEvent =
  | { type: 'start'; model: string; sessionId: string | undefined; quota: QuotaStamp }
  | { type: 'progress'; stage: ProgressStage; message: string; outputTokens?: number }
  | { type: 'sources'; sources: Source[] }
  | { type: 'search'; provider: string; query: string; resultCount: number }
  | { type: 'thinking'; text: string }
  | { type: 'delta'; text: string }
  | { type: 'done'; finishReason: FinishReason; usage: Usage; timestamp: string }
  | { type: 'error'; code: ErrorCode; message: string };

/** Compile-time proof that a switch over ChatEvent handled every case. */
export function assertNever(value: never): never {
  throw new Error(`unhandled case: ${JSON.stringify(value)}`);
}
