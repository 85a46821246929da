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
  close(): Promise<void>;
}

/** One stored turn of a chat session. */
export interface SessionMessage {
  role: 'user' | 'assistant';
  content: string;
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
