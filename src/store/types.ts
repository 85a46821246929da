/**
 * The storage seam. Routes and domain code depend on these interfaces; the LMDB implementation
 * lives in lmdb-*.ts files, so another engine can be added without touching routes.
 */
export interface StorageHealth {
  ok: boolean;
  engine: string;
  latency_ms: number;
  detail?: string;
}

/** The storage environment itself: health, flush and close. */
export interface Storage {
  readonly engine: string;
  /** A real read, used by /health. */
  check(): Promise<StorageHealth>;
  /** Waits for every pending write to be durable. */
  flush(): Promise<void>;
  /**
   * Called as a request starts reading: the reads that follow see every write committed before,
   * by this process or another one (a worker beside it, the CLI).
   */
  freshen(): void;
  close(): Promise<void>;
}

/** A tool call as a stored assistant turn carries it (OpenAI's shape, as /v1 clients send it back). */
export interface StoredToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** One stored turn of a chat session. */
export interface SessionMessage {
  /** `tool` turns (a tool's result) are recorded from /v1 conversations only. */
  role: 'user' | 'assistant' | 'tool';
  content: string;
  /** The tools an assistant turn called (/v1). */
  tool_calls?: StoredToolCall[];
  /** Which call a `tool` turn answers (/v1). */
  tool_call_id?: string;
  /** ISO 8601. */
  timestamp: string;
  /** Set on an assistant turn that was cut short (client left or upstream failed). */
  incomplete?: boolean;
}

export interface SessionRecord {
  session_id: string;
  created: string;
  updated: string;
  message_count: number;
  messages: SessionMessage[];
}

/** Owner-scoped chat sessions: another owner's id is simply not found. */
export interface SessionStore {
  /** The session with at most the newest `limit` messages, or undefined. */
  get(owner: string, sessionId: string, limit?: number): Promise<SessionRecord | undefined>;
  /** Appends turns atomically (creating the session), trimming to the configured cap. */
  append(owner: string, sessionId: string, messages: SessionMessage[]): Promise<void>;
  /** Deletes; false when it did not exist for this owner. */
  delete(owner: string, sessionId: string): Promise<boolean>;
  /** The owner's sessions, most recently updated first, at most `limit`. */
  list(owner: string, limit: number): Promise<SessionSummary[]>;
}

/** One line of a session listing. */
export interface SessionSummary {
  session_id: string;
  message_count: number;
  created: string;
  updated: string;
}

/** A user known to the service (created by the admin API or the CLI). */
export interface UserRecord {
  user_id: string;
  plan: string;
  /** ISO 8601. */
  created: string;
}

/** A stored API key: never the key itself, only the hash of its secret. */
export interface ApiKeyRecord {
  key_id: string;
  user_id: string;
  /** SHA-256 of the secret part. */
  hash: Uint8Array;
  name: string | undefined;
  created: string;
  last_used: string | undefined;
  revoked_at: string | undefined;
}

/** What a key listing shows: everything but the hash. */
export interface ApiKeyInfo {
  key_id: string;
  prefix: string;
  name: string | null;
  created: string;
  last_used: string | null;
  revoked: boolean;
  revoked_at: string | null;
}

export interface UserStore {
  get(userId: string): Promise<UserRecord | undefined>;
  /** Creates the user; false when the id is taken. */
  create(userId: string, plan: string): Promise<boolean>;
  /** Changes the plan; the updated record, or undefined when there is no such user. */
  setPlan(userId: string, plan: string): Promise<UserRecord | undefined>;
  /** Users in id order after `after`, at most `limit`. */
  list(options: { limit: number; after?: string }): Promise<UserRecord[]>;
}

export interface ApiKeyStore {
  /** Looked up by id (no scan). */
  get(keyId: string): Promise<ApiKeyRecord | undefined>;
  /** Stores a new key for a user. */
  add(record: ApiKeyRecord): Promise<void>;
  /** A user's keys in id order, at most `limit`. */
  listForUser(userId: string, limit: number): Promise<ApiKeyRecord[]>;
  /** Marks a key revoked; false when it does not exist or belongs to someone else. */
  revoke(userId: string, keyId: string): Promise<boolean>;
  /** Records use of a key (throttled by the caller; best effort). */
  touch(keyId: string, at: string): void;
}

/**
 * A fixed window as the service computed it from its own clock. An engine shared by many nodes
 * (Redis) places the take in the window containing its own time instead, so nodes whose clocks
 * differ still count in one window, and says which window it used.
 */
export interface CounterWindow {
  /** Epoch ms. */
  start: number;
  lengthMs: number;
}

/** Outcome of one atomic take from a counter. */
export interface CounterTake {
  ok: boolean;
  /** The window the take counted in (epoch ms). */
  windowStart: number;
  /** The token window the take counted in, with a token take. */
  tokenWindowStart?: number;
  /** Units used in the window after the take (or at refusal). */
  used: number;
  /** Tokens used in the token window after the take (or at refusal), with a token take. */
  tokensUsed?: number;
  /** At a refusal: the dimension that did not fit. */
  refusedBy?: 'requests' | 'tokens';
  /**
   * Resolves once the take is durable on disk. The decision is known before that, so upstream work
   * may start at once; nothing may be sent to the client before this resolves.
   */
  durable: Promise<void>;
}

/**
 * Fixed-window counters in storage. Each call is one write transaction that reads the counter
 * inside it, so concurrent callers and other processes on the same environment cannot overspend.
 */
/** One counted request in the usage history. */
export interface UsageRecord {
  /** Epoch ms. */
  time: number;
  subject: string;
  key_id: string | null;
  model: string | null;
  route: string;
  input_tokens: number;
  output_tokens: number;
  status: number;
}

/** Records scanned by one usage query at most: a bound, not a page (the totals say when it was reached). */
export const USAGE_SCAN_LIMIT = 1_000_000;

/** The usage history: one record per quota-counted request, kept for the retention period. */
export interface UsageStore {
  /** Adds one record; resolves once written. */
  record(entry: UsageRecord): Promise<void>;
  /** The records in [from, to) epoch ms, one subject's or everyone's, oldest first, at most `limit`. */
  range(from: number, to: number, subject: string | undefined, limit?: number): Iterable<UsageRecord> | AsyncIterable<UsageRecord>;
  /** Removes every record older than `before` (epoch ms); resolves to how many went. */
  sweep(before: number): Promise<number>;
}

/** The token dimension of a take: its own window, limit and cost (an estimate, settled later). */
export interface TokenTake {
  window: CounterWindow;
  limit: number;
  cost: number;
}

export interface QuotaCounterStore {
  /**
   * Adds `cost` to the subject's window unless that would pass `limit`; with `tokens`, adds the
   * token estimate too in the same transaction, and takes neither unless both fit.
   */
  take(subject: string, window: CounterWindow, limit: number, cost: number, tokens?: TokenTake): Promise<CounterTake>;
  /**
   * Moves the subject's token count by `delta` (a settle: negative gives back, positive is charged
   * even past the limit, as debt the next requests pay first), only in the same token window;
   * the tokens used after it (undefined: the window moved on). Never below zero.
   */
  adjustTokens(subject: string, windowStart: number, delta: number): Promise<number | undefined>;
  /** Tokens used in the current token window (as the engine's clock places it). */
  tokensUsed(subject: string, window: CounterWindow): Promise<WindowUse>;
  /** Gives `cost` back, only if the subject is still in the same window; units used after it (undefined: the window moved on). */
  giveBack(subject: string, windowStart: number, cost: number): Promise<number | undefined>;
  /** Units used in the current window (0 when the stored counter belongs to an older one). */
  used(subject: string, window: CounterWindow): Promise<WindowUse>;
}

/** What a counter holds in one window. */
export interface WindowUse {
  used: number;
  /** The window it was read in (epoch ms). */
  windowStart: number;
}

/** What is known of one resumable stream. */
export interface StreamMeta {
  owner: string;
  /** The oldest sequence number still kept (1 before anything was dropped). */
  first_seq: number;
  /** The newest sequence number written (0: none yet). */
  last_seq: number;
  bytes: number;
  /** Epoch ms when the generation ended; null while it runs. */
  ended_at: number | null;
  /** Set by a cancel that reached another process; the process running it stops it. */
  cancel_requested?: boolean;
}

/** One logged event: its JSON text as written, with its sequence number. */
export interface LoggedEvent {
  seq: number;
  json: string;
}

/**
 * The event logs of resumable streams, on the configured engine so that any process sharing it can
 * resume (and cancel) a stream another one runs. Each log keeps at most the engine's byte bound:
 * past it the oldest events go and `first_seq` moves up. Ended logs go after their TTL.
 */
export interface StreamLogStore {
  /** Starts a log. */
  create(streamId: string, owner: string): Promise<void>;
  /**
   * Appends events (in order) and drops the oldest past the byte bound, atomically; with `endedAt`
   * marks the log ended in the same step. The meta after it, or undefined for an unknown log.
   */
  append(streamId: string, entries: readonly LoggedEvent[], endedAt?: number): Promise<StreamMeta | undefined>;
  /** Asks the process running the stream to stop it; false when it already ended or is unknown. */
  requestCancel(streamId: string): Promise<boolean>;
  /** The stream's meta, or undefined. */
  metaOf(streamId: string): Promise<StreamMeta | undefined>;
  /** Which of these streams a cancel was requested for (one look for every run of a process). */
  cancelsRequested(streamIds: readonly string[]): Promise<string[]>;
  /** The kept events after `afterSeq`, oldest first. */
  after(streamId: string, afterSeq: number): Iterable<LoggedEvent> | AsyncIterable<LoggedEvent>;
  /** Tells the engine these logs are still being written by a live process (they are not swept). */
  keepAlive(streamIds: readonly string[]): Promise<void>;
  /**
   * Removes the logs that ended before `before` (epoch ms); an engine shared by many nodes also
   * removes logs whose process went away before ending them. At most `limit` per call; resolves to
   * how many went.
   */
  sweep(before: number, limit?: number): Promise<number>;
}

/**
 * A store whose records can all be read out and written back as they are, on any engine: what
 * `colloquy storage copy` moves between deployments. Reads are bounded pages, never the whole store.
 */
export interface RecordTransfer<T> {
  /** Every record, in pages. */
  exportRecords(): AsyncIterable<T>;
  /** Writes one exported record exactly as it is (replacing one with its identity), atomically. */
  importRecord(record: T): Promise<void>;
}

/** A quota counter as stored: the windows it counts in and what was used in them. */
export interface CounterRecord {
  subject: string;
  /** Epoch ms. */
  window_start: number;
  used: number;
  /** Epoch ms, for plans with a token budget. */
  tokens_window_start?: number;
  tokens_used?: number;
}

/** A session as stored: its owner, meta and every kept turn (the oldest kept is turn `first`). */
export interface ExportedSession {
  owner: string;
  session_id: string;
  created: string;
  updated: string;
  /** Sequence numbers of the oldest kept turn and of the next turn: message_count is next - first. */
  first: number;
  next: number;
  messages: SessionMessage[];
}
