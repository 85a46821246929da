/** `colloquy usage export`: the usage history as CSV (one line per counted request), from the data directory. */
import { UsageLog, usagePeriod } from '../quota/usage.js';
import { ApiError } from '../errors.js';
import { expectPositionals, parseArgs, UsageError, usageOnlyExit } from './args.js';
import { withDataDir } from './data-dir.js';

const USAGE_USAGE = `usage:
  colloquy usage export [--from DATE] [--to DATE] [--user USER_ID] > usage.csv

  DATE is a day (2026-11-01) or an ISO 8601 time; --to is exclusive (a day counts whole).
  Defaults: the 30 days up to now, every user.
`;

const COLUMNS = ['time', 'user_id', 'key_id', 'model', 'route', 'input_tokens', 'output_tokens', 'status'] as const;

/** A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180). */
function csvField(value: string | number | null): string {
  const text = value === null ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** Runs one `usage` subcommand; returns the exit code. */
export async function runUsage(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, ['from', 'to', 'user']);
  const usageExit = usageOnlyExit(sub, args, USAGE_USAGE);
  if (usageExit !== undefined) return usageExit;
  if (sub !== 'export') throw new UsageError(`unknown usage command "${sub}"`);
  expectPositionals(args, []);
  return withDataDir(async (data) => {
    let period: { from: number; to: number };
    try {
      period = usagePeriod({ from: args.options.get('from'), to: args.options.get('to') }, Date.now());
    } catch (error) {
      if (error instanceof ApiError) throw new UsageError(error.message);
      throw error;
    }
    for (const name of ['from', 'to'] as const) {
      const value = args.options.get(name);
      if (value !== undefined && Number.isNaN(Date.parse(value))) throw new UsageError(`--${name} must be a date or an ISO 8601 time`);
    }
    const log = new UsageLog(data.usageStore, { retentionDays: data.config.usageRetentionDays });
    const out: string[] = [COLUMNS.join(',')];
    for await (const record of log.records(period.from, period.to, args.options.get('user'))) {
      out.push(
        [
          new Date(record.time).toISOString(),
          record.subject,
          record.key_id,
          record.model,
          record.route,
          record.input_tokens,
          record.output_tokens,
          record.status,
        ]
          .map(csvField)
          .join(','),
      );
      // Written in slices so a large export does not build one huge string.
      if (out.length >= 1000) process.stdout.write(`${out.splice(0).join('\n')}\n`);
    }
    if (out.length > 0) process.stdout.write(`${out.join('\n')}\n`);
    return 0;
  });
}
