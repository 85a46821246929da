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
