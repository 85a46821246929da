#!/usr/bin/env node
/** The `colloquy` command line: `serve` starts the server; other commands work on the data directory. */
import { ConfigError } from './config/index.js';
import { CommandError, UsageError } from './cli/args.js';

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

/**
 * Runs one CLI invocation and returns its exit code (undefined while a server keeps running). A
 * command's module is loaded when it runs, so a command loads only what it needs (the primary
 * process of a clustered server only forks and watches its workers).
 */
export async function main(argv: string[]): Promise<number | undefined> {
  const [command] = argv;
  try {
    switch (command) {
      case 'serve':
        await (await import('./cli/serve.js')).serve();
        return undefined;
      case 'users':
        return await (await import('./cli/users.js')).runUsers(argv.slice(1));
      case 'keys':
        return await (await import('./cli/keys.js')).runKeys(argv.slice(1));
      case 'quota':
        return await (await import('./cli/quota.js')).runQuota(argv.slice(1));
      case 'rag':
        return await (await import('./cli/rag.js')).runRag(argv.slice(1));
      case 'usage':
        return await (await import('./cli/usage.js')).runUsage(argv.slice(1));
      case 'storage':
        return await (await import('./cli/storage.js')).runStorage(argv.slice(1));
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
