/**
 * The usage history: every quota-counted request leaves one record (who, which key, which model,
 * which route, tokens in and out, the status, when), kept `usage_retention_days`, and totals are
 * read back grouped by day, model or key. Recording never delays a reply: the write rides the next
 * commit and a failure is logged.
 */
import type { Caller, Clock } from '../domain/types.js';
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';
import { USAGE_SCAN_LIMIT, type UsageRecord, type UsageStore } from '../store/types.js';

export type UsageGrouping = 'day' | 'model' | 'key';

/** One line of the totals. */
export interface UsageGroup {
  key: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  /** Requests that ended with a status of 400 or more (499: the client left). */
  errors: number;
}

/** What one request used, as the route that served it saw it. */
export interface UsageEntry {
  caller: Caller;
  route: string;
  model: string | null;
  inputTokens: number;
  outputTokens: number;
  status: number;
}

const DAY_MS = 86_400_000;
/** A period asked for spans at most this many days. */
const MAX_DAYS = 366;
/** How often old records are swept away. */
const SWEEP_INTERVAL_MS = 3_600_000;

/** Records usage and answers totals. */
export class UsageLog {
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: UsageStore,
    private readonly options: { retentionDays: number; logger?: Logger | undefined; clock?: Clock | undefined },
  ) {}

  /** "Now" by the log's clock (tests move it). */
  now(): number {
    return (this.options.clock ?? Date.now)();
  }

  /** Records one request, without waiting for the write. */
  record(entry: UsageEntry): void {
    const record: UsageRecord = {
      time: (this.options.clock ?? Date.now)(),
      subject: entry.caller.id,
      key_id: entry.caller.kind === 'user' ? entry.caller.keyId : null,
      model: entry.model,
      route: entry.route,
      input_tokens: Math.max(0, Math.round(entry.inputTokens)),
      output_tokens: Math.max(0, Math.round(entry.outputTokens)),
      status: entry.status,
    };
    this.store.record(record).catch((error: unknown) => this.options.logger?.error({ err: error }, 'recording usage failed'));
  }

  /** The records in [from, to), a subject's or everyone's. */
  records(from: number, to: number, subject: string | undefined): Iterable<UsageRecord> | AsyncIterable<UsageRecord> {
    return this.store.range(from, to, subject);
  }

  /** Totals over [from, to) grouped as asked; `truncated` when the scan bound was reached. */
  async totals(
    from: number,
    to: number,
    subject: string | undefined,
    groupBy: UsageGrouping,
  ): Promise<{ total: UsageGroup; groups: UsageGroup[]; truncated: boolean }> {
    const groups = new Map<string, UsageGroup>();
    const total: UsageGroup = { key: 'total', requests: 0, input_tokens: 0, output_tokens: 0, errors: 0 };
    let scanned = 0;
    for await (const record of this.store.range(from, to, subject)) {
      scanned += 1;
      const key =
        groupBy === 'day'
          ? new Date(Math.floor(record.time / DAY_MS) * DAY_MS).toISOString().slice(0, 10)
          : groupBy === 'model'
            ? (record.model ?? '(none)')
            : (record.key_id ?? '(no key)');
      let group = groups.get(key);
      if (!group) {
        group = { key, requests: 0, input_tokens: 0, output_tokens: 0, errors: 0 };
        groups.set(key, group);
      }
      for (const target of [group, total]) {
        target.requests += 1;
        target.input_tokens += record.input_tokens;
        target.output_tokens += record.output_tokens;
        if (record.status >= 400) target.errors += 1;
      }
    }
    const sorted = [...groups.values()].sort((a, b) =>
      groupBy === 'day' ? a.key.localeCompare(b.key) : b.requests - a.requests || a.key.localeCompare(b.key),
    );
    return { total, groups: sorted, truncated: scanned >= USAGE_SCAN_LIMIT };
  }

  /** Removes records past the retention period now and every hour after (the timer does not hold the process). */
  startSweeping(): void {
    const sweep = () => {
      this.sweep().catch((error: unknown) => this.options.logger?.error({ err: error }, 'sweeping old usage failed'));
    };
    sweep();
    this.sweeper = setInterval(sweep, SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  /** Removes the records older than the retention period; resolves to how many went. */
  sweep(): Promise<number> {
    return this.store.sweep(this.now() - this.options.retentionDays * DAY_MS);
  }

  /** Stops the sweeping timer. */
  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}

/** The period a query names: `to` defaults to now, `from` to 30 days before `to`. */
export function usagePeriod(query: { from?: string | undefined; to?: string | undefined }, now: number): { from: number; to: number } {
  const to = query.to ? Date.parse(query.to) + (query.to.length === 10 ? DAY_MS : 0) : now;
  const from = query.from ? Date.parse(query.from) : to - 30 * DAY_MS;
  if (from >= to)
    throw new ApiError('invalid_request', '`from` must come before `to`.', { details: [{ path: 'from', message: 'must be before to' }] });
  if (to - from > MAX_DAYS * DAY_MS) {
    throw new ApiError('invalid_request', `A period spans at most ${MAX_DAYS} days.`, {
      details: [{ path: 'from', message: `must be within ${MAX_DAYS} days of to` }],
    });
  }
  return { from, to };
}
