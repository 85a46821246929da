/** `colloquy quota show USER`: a user's (or `anon:<address>`'s) standing in the current window. */
import { CommandError, expectPositionals, parseArgs, table, UsageError, usageOnlyExit } from './args.js';
import { withDataDir } from './data-dir.js';

const QUOTA_USAGE = `usage:
  colloquy quota show USER_ID|anon:ADDRESS [--json]
`;

/** Runs one `quota` subcommand; returns the exit code. */
export async function runQuota(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, []);
  const usageExit = usageOnlyExit(sub, args, QUOTA_USAGE);
  if (usageExit !== undefined) return usageExit;
  if (sub !== 'show') throw new UsageError(`unknown quota command "${sub}"`);
  const [subject] = expectPositionals(args, ['USER_ID']) as [string];
  return withDataDir(async (data) => {
    let plan: string;
    if (subject.startsWith('anon:')) plan = data.config.anonymousPlan;
    else {
      const user = await data.users.get(subject);
      if (!user) throw new CommandError(`no user "${subject}"`);
      plan = user.plan;
    }
    const status = { user_id: subject, ...(await data.quota.status({ id: subject, plan })) };
    if (args.json) process.stdout.write(`${JSON.stringify(status)}\n`);
    else {
      process.stdout.write(
        table(
          ['USER_ID', 'PLAN', 'LIMIT', 'USED', 'REMAINING', 'RESET'],
          [[status.user_id, status.plan, String(status.limit), String(status.used), String(status.remaining), status.reset]],
        ),
      );
    }
    return 0;
  });
}
