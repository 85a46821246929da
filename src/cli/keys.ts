/** `colloquy keys create|list|revoke`. The key is printed once, at creation; only its hash is stored. */
import { createKey, listKeys, type CreatedKey } from '../auth/key-service.js';
import { isKeyId } from '../auth/keys.js';
import { ApiError } from '../errors.js';
import { CommandError, expectPositionals, parseArgs, table, UsageError, usageOnlyExit } from './args.js';
import { withDataDir } from './data-dir.js';

const KEYS_USAGE = `usage:
  colloquy keys create USER_ID [--name NAME] [--json]
  colloquy keys list USER_ID [--json]
  colloquy keys revoke KEY_ID [--json]
`;

/** Runs one `keys` subcommand; returns the exit code. */
export async function runKeys(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, ['name']);
  const usageExit = usageOnlyExit(sub, args, KEYS_USAGE);
  if (usageExit !== undefined) return usageExit;
  switch (sub) {
    case 'create': {
      const [userId] = expectPositionals(args, ['USER_ID']) as [string];
      const name = args.options.get('name');
      if (name !== undefined && name.length > 64) throw new UsageError('--name must be at most 64 characters');
      return withDataDir(async (data) => {
        if (!(await data.users.get(userId))) throw new CommandError(`no user "${userId}" (create it with: colloquy users add ${userId})`);
        let created: CreatedKey;
        try {
          created = await createKey(data.apiKeys, userId, name);
        } catch (error) {
          if (error instanceof ApiError) throw new CommandError(error.message);
          throw error;
        }
        if (args.json) process.stdout.write(`${JSON.stringify({ user_id: userId, ...created })}\n`);
        else {
          process.stdout.write(`${created.key}\n`);
          process.stderr.write(`created key ${created.key_id} for ${userId}; it is shown only now, store it safely\n`);
        }
        return 0;
      });
    }
    case 'list': {
      const [userId] = expectPositionals(args, ['USER_ID']) as [string];
      return withDataDir(async (data) => {
        if (!(await data.users.get(userId))) throw new CommandError(`no user "${userId}"`);
        const keys = await listKeys(data.apiKeys, userId);
        if (args.json) process.stdout.write(`${JSON.stringify({ user_id: userId, keys })}\n`);
        else {
          const rows = keys.map((key) => [
            key.key_id,
            key.prefix,
            key.name ?? '-',
            key.created,
            key.last_used ?? 'never',
            key.revoked ? 'revoked' : 'active',
          ]);
          process.stdout.write(table(['KEY_ID', 'PREFIX', 'NAME', 'CREATED', 'LAST_USED', 'STATUS'], rows));
        }
        return 0;
      });
    }
    case 'revoke': {
      const [keyId] = expectPositionals(args, ['KEY_ID']) as [string];
      // Accept the visible prefix too (`ck_<id>`), as listings show it.
      const id = keyId.startsWith('ck_') ? keyId.slice(3) : keyId;
      if (!isKeyId(id)) throw new UsageError(`"${keyId}" is not a key id (16 hex characters, as "keys list" shows)`);
      return withDataDir(async (data) => {
        const record = await data.apiKeys.get(id);
        if (!record || !(await data.apiKeys.revoke(record.user_id, id))) throw new CommandError(`no key "${id}"`);
        if (args.json) process.stdout.write(`${JSON.stringify({ key_id: id, user_id: record.user_id, revoked: true })}\n`);
        else process.stdout.write(`revoked key ${id} of ${record.user_id}\n`);
        return 0;
      });
    }
    default:
      throw new UsageError(`unknown keys command "${sub}"`);
  }
}
