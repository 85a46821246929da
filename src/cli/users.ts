/** `colloquy users add|list|set-plan`. */
import { userIdProblem } from '../auth/validation.js';
import { CommandError, expectPositionals, parseArgs, table, UsageError, usageOnlyExit } from './args.js';
import { withDataDir, type DataDir } from './data-dir.js';

const USERS_USAGE = `usage:
  colloquy users add USER_ID [--plan PLAN] [--json]
  colloquy users list [--limit N] [--after USER_ID] [--json]
  colloquy users set-plan USER_ID PLAN [--json]
`;

function checkPlan(data: DataDir, plan: string): void {
  if (!data.config.plans[plan]) {
    throw new UsageError(`unknown plan "${plan}"; configured plans: ${Object.keys(data.config.plans).join(', ')}`);
  }
}

function checkUserId(userId: string): void {
  const problem = userIdProblem(userId);
  if (problem) throw new UsageError(problem);
}

/** Runs one `users` subcommand; returns the exit code. */
export async function runUsers(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, ['plan', 'limit', 'after']);
  const usageExit = usageOnlyExit(sub, args, USERS_USAGE);
  if (usageExit !== undefined) return usageExit;
  switch (sub) {
    case 'add': {
      const [userId] = expectPositionals(args, ['USER_ID']) as [string];
      checkUserId(userId);
      return withDataDir(async (data) => {
        const plan = args.options.get('plan') ?? data.config.defaultPlan;
        checkPlan(data, plan);
        if (!(await data.users.create(userId, plan))) throw new CommandError(`user "${userId}" already exists`);
        const user = (await data.users.get(userId))!;
        process.stdout.write(args.json ? `${JSON.stringify(user)}\n` : `created user ${user.user_id} (plan ${user.plan})\n`);
        return 0;
      });
    }
    case 'list': {
      expectPositionals(args, []);
      const limitText = args.options.get('limit') ?? '100';
      const limit = Number(limitText);
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError('--limit must be an integer from 1 to 10000');
      return withDataDir(async (data) => {
        const users = await data.users.list({ limit, after: args.options.get('after') });
        if (args.json) process.stdout.write(`${JSON.stringify({ users })}\n`);
        else
          process.stdout.write(
            table(
              ['USER_ID', 'PLAN', 'CREATED'],
              users.map((user) => [user.user_id, user.plan, user.created]),
            ),
          );
        return 0;
      });
    }
    case 'set-plan': {
      const [userId, plan] = expectPositionals(args, ['USER_ID', 'PLAN']) as [string, string];
      return withDataDir(async (data) => {
        checkPlan(data, plan);
        const user = await data.users.setPlan(userId, plan);
        if (!user) throw new CommandError(`no user "${userId}"`);
        process.stdout.write(args.json ? `${JSON.stringify(user)}\n` : `user ${user.user_id} is now on plan ${user.plan}\n`);
        return 0;
      });
    }
    default:
      throw new UsageError(`unknown users command "${sub}"`);
  }
}
