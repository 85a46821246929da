/**
 * Quota counters in LMDB: sub-database `quota`, subject → {window_start, used} plus, for plans
 * with a token budget, {tokens_window_start, tokens_used}. A counter whose window start is older
 * than the current window counts as zero, so windows roll over without any sweeping job.
 */
import type { Database } from 'lmdb';
import type { LmdbStorage } from './lmdb.js';
import { entriesInPages } from './lmdb-pages.js';
import type { CounterRecord, CounterTake, CounterWindow, QuotaCounterStore, RecordTransfer, TokenTake, WindowUse } from './types.js';

interface Counter {
  window_start: number;
  used: number;
  tokens_window_start?: number;
  tokens_used?: number;
}

const noop = (): void => undefined;

function tokensIn(counter: Counter | undefined, windowStart: number): number {
  return counter !== undefined && counter.tokens_window_start === windowStart ? (counter.tokens_used ?? 0) : 0;
}

/** The LMDB-backed quota counters. */
export class LmdbQuotaCounters implements QuotaCounterStore, RecordTransfer<CounterRecord> {
  private readonly db: Database<Counter, string>;

  constructor(private readonly storage: LmdbStorage) {
    this.db = storage.database<Counter, string>('quota', { sharedStructures: true });
  }

  take(subject: string, window: CounterWindow, limit: number, cost: number, tokens?: TokenTake): Promise<CounterTake> {
    const windowStart = window.start;
    const tokenWindowStart = tokens?.window.start;
    // The read happens inside the write transaction: LMDB holds its single writer lock (shared by
    // every process on the environment) from this read to the commit, so no other take interleaves.
    // The decision is handed out as soon as the transaction body ran, with `durable` resolving
    // after the commit reached the disk: the caller starts upstream work during the fsync and
    // sends nothing before it, so an acknowledged take is never lost.
    return new Promise<CounterTake>((resolve, reject) => {
      const decision: CounterTake = { ok: false, used: 0, windowStart, durable: Promise.resolve() };
      if (tokenWindowStart !== undefined) decision.tokenWindowStart = tokenWindowStart;
      let decided = false;
      // Deferred writes (usage records of earlier requests) join this take's commit.
      this.storage.runDeferred();
      decision.durable = this.db
        .transaction(() => {
          const current = this.db.get(subject);
          const used = current !== undefined && current.window_start === windowStart ? current.used : 0;
          const requestsFit = used + cost <= limit;
          const tokensUsed = tokenWindowStart !== undefined ? tokensIn(current, tokenWindowStart) : 0;
          // A token debt (used past the limit by an earlier settle) refuses until the window resets.
          const tokensFit = !tokens || tokensUsed + tokens.cost <= tokens.limit;
          decision.ok = requestsFit && tokensFit;
          decision.used = decision.ok ? used + cost : used;
          if (tokens) decision.tokensUsed = decision.ok ? tokensUsed + tokens.cost : tokensUsed;
          if (!decision.ok) decision.refusedBy = requestsFit ? 'tokens' : 'requests';
          if (decision.ok && (cost > 0 || (tokens && tokens.cost > 0))) {
            const next: Counter = { window_start: windowStart, used: decision.used };
            if (tokenWindowStart !== undefined) {
              next.tokens_window_start = tokenWindowStart;
              next.tokens_used = decision.tokensUsed ?? 0;
            } else if (current?.tokens_window_start !== undefined) {
              next.tokens_window_start = current.tokens_window_start;
              next.tokens_used = current.tokens_used ?? 0;
            }
            this.db.put(subject, next);
          }
          decided = true;
          // lmdb-js runs this body in its write batch, after `durable` was assigned; a waiter resumes later still.
          resolve(decision);
        })
        .then(noop);
      decision.durable.catch((error: unknown) => {
        if (!decided) reject(error);
      });
    });
  }

  giveBack(subject: string, windowStart: number, cost: number): Promise<number | undefined> {
    return this.db.transaction(() => {
      const current = this.db.get(subject);
      if (current === undefined || current.window_start !== windowStart) return undefined;
      const used = Math.max(0, current.used - Math.max(0, cost));
      if (used !== current.used) this.db.put(subject, { ...current, used });
      return used;
    });
  }

  adjustTokens(subject: string, windowStart: number, delta: number): Promise<number | undefined> {
    return this.db.transaction(() => {
      const current = this.db.get(subject);
      if (current === undefined || current.tokens_window_start !== windowStart) return undefined;
      const tokensUsed = Math.max(0, (current.tokens_used ?? 0) + delta);
      if (tokensUsed !== current.tokens_used) this.db.put(subject, { ...current, tokens_used: tokensUsed });
      return tokensUsed;
    });
  }

  async used(subject: string, window: CounterWindow): Promise<WindowUse> {
    const current = this.db.get(subject);
    return { used: current !== undefined && current.window_start === window.start ? current.used : 0, windowStart: window.start };
  }

  async tokensUsed(subject: string, window: CounterWindow): Promise<WindowUse> {
    return { used: tokensIn(this.db.get(subject), window.start), windowStart: window.start };
  }

  async *exportRecords(): AsyncGenerator<CounterRecord> {
    for await (const { key, value } of entriesInPages(this.db)) yield { subject: key, ...value };
  }

  async importRecord(record: CounterRecord): Promise<void> {
    const counter: Counter = { window_start: record.window_start, used: record.used };
    if (record.tokens_window_start !== undefined) {
      counter.tokens_window_start = record.tokens_window_start;
      counter.tokens_used = record.tokens_used ?? 0;
    }
    await this.db.put(record.subject, counter);
  }
}
