#!/usr/bin/env node
/** The `colloquy` command line: `serve` starts the server; other commands work on the data directory. */
import { ConfigError } from './config/index.js';
import { CommandError, UsageError } from './cli/args.js';
import { runKeys } from './cli/keys.js';
import { runQuota } from './cli/quota.js';
import { runRag } from './cli/rag.js';
import { serve } from './cli/serve.js';
import { runStorage } from './cli/storage.js';
import { runUsage } from './cli/usage.js';
import { runUsers } from './cli/users.js';

const USAGE = `usage: colloquy <command>

commands:
  serve            start the HTTP server (HOST, PORT, WORKERS, COLLOQUY_DATA_DIR, COLLOQUY_CONFIG)
  users            add|list|set-plan users (on COLLOQUY_DATA_DIR)
  keys             create|list|revoke API keys
  quota            show USER: quota used in the current window
  rag              add FILE...|list|delete|stats: the knowledge base (.txt, .md, .html)
  usage            export [--from] [--to] [--user]: the usage history as CSV
  storage          copy --from SOURCE --to TARGET: everything stored, between data directories and Redis

Data commands take --json for machine-readable output and exit 0 on success, 1 when the operation
fails (no such user, already exists), 2 on a usage mistake, 78 on a configuration error.
`;

/** Runs one CLI invocation and returns its exit code (undefined while a server keeps running). */
export async function main(argv: string[]): Promise<number | undefined> {
  const [command] = argv;
  try {
    switch (command) {
      case 'serve':
        await serve();
        return undefined;
      case 'users':
        return await runUsers(argv.slice(1));
      case 'keys':
        return await runKeys(argv.slice(1));
      case 'quota':
        return await runQuota(argv.slice(1));
      case 'rag':
        return await runRag(argv.slice(1));
      case 'usage':
        return await runUsage(argv.slice(1));
      case 'storage':
        return await runStorage(argv.slice(1));
      case undefined:
      case 'help':
      case '--help':
        process.stdout.write(USAGE);
        return 0;
      default:
        process.stderr.write(`colloquy: unknown command "${command}"\n\n${USAGE}`);
        return 2;
    }
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`colloquy: ${error.message} (see "colloquy ${command} --help")\n`);
      return 2;
    }
    if (error instanceof CommandError) {
      process.stderr.write(`colloquy: ${error.message}\n`);
      return 1;
    }
    if (error instanceof ConfigError) {
      process.stderr.write(`colloquy: ${error.message}\n`);
      return 78;
    }
    throw error;
  }
}

const code = await main(process.argv.slice(2));
if (code !== undefined) process.exitCode = code;
