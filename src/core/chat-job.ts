/**
 * What the chat core is handed for one request: everything the edge decided (who calls, what
 * they asked, which model, the quota already taken) and the long-lived parts it works with.
 * Nothing here is HTTP: no context, no header, no status.
 */
import type { ModelConfig } from '../config/index.js';
import type { BatchTaker, Caller, ChatEvent, QuotaReservation } from '../domain/types.js';
import type { Logger } from '../logger.js';
import type { ModelCooldowns } from '../providers/cooldown.js';
import type { ResolvedModel } from '../providers/registry.js';
import type { ChatProvider, GenerationOptions, ProviderMessage } from '../providers/types.js';
import type { Retriever } from '../rag/types.js';
import type { SearchProvider } from '../search/types.js';
import type { SessionMessage, SessionStore } from '../store/types.js';
import type { ChatRequest } from './chat-request.js';

/** Which route asked: the search route forces the search step and pays the `search` cost. */
export type ChatKind = 'chat' | 'search';

/**
 * A conversation the client sends whole every time (the OpenAI-compatible surface): the model
 * reads exactly these messages, no stored turn is prepended, and a session records only `turn`.
 */
export interface GivenConversation {
  readonly messages: ProviderMessage[];
  /** The new part of the conversation (the last user message, or the tool results) a session records. */
  readonly turn: SessionMessage[];
}

/** One admitted chat request: validated, resolved to a model, with its quota reserved. */
export interface ChatJob {
  readonly kind: ChatKind;
  readonly caller: Caller;
  readonly request: ChatRequest;
  readonly model: ModelConfig;
  readonly provider: ChatProvider;
  readonly reservation: QuotaReservation;
  /** The whole conversation as the client sent it, instead of system + session + history + message. */
  readonly given?: GivenConversation;
  /** Options beyond the /api fields (tools, stop, response format…), passed to the provider. */
  readonly options?: GenerationOptions;
  /** Pass on reasoning whenever the upstream sends any, not only when deep thinking was asked for. */
  readonly alwaysShowReasoning?: boolean;
  /** The model's fallbacks, tried in order when an upstream fails before any part of the answer came. */
  readonly fallbacks?: readonly ResolvedModel[];
}

/** Where a job's events go, a batch at a time (never empty); a client that reads slowly answers with a promise. */
export type ChatSink = BatchTaker<ChatEvent>;

/** The long-lived parts the chat stages use. */
export interface ChatDependencies {
  readonly sessions: SessionStore;
  readonly retriever: Retriever;
  readonly search: SearchProvider;
  readonly logger: Logger;
  /** Stored turns read back into a conversation at most. */
  readonly sessionMaxTurns: number;
  /** Largest answer kept, in bytes (`max_answer_bytes`); past it the reply ends with `length`. */
  readonly maxAnswerBytes: number;
  /** Models cooling down after failing in a row: skipped while another candidate is left. */
  readonly cooldowns: ModelCooldowns;
  /** Records each attempt's outcome (metrics). */
  readonly onAttempt?: (model: string, outcome: 'ok' | 'failed' | 'skipped', fellBack: boolean) => void;
}
