#!/usr/bin/env node
/** The `colloquy` command line: `serve` starts the server; other commands work on the data directory. */
import { ConfigError, loadConfig } from './config.js';
import { serve } from './cli/serve.js';

const USAGE = `usage: colloquy <command>

commands:
  serve            start the HTTP server (HOST, PORT, WORKERS, COLLOQUY_DATA_DIR, COLLOQUY_CONFIG)
`;

/** Runs one CLI invocation and returns its exit code (undefined while a server keeps running). */
export async function main(argv: string[]): Promise<number | undefined> {
  const [command] = argv;
  try {
    switch (command) {
      case 'serve':
        await serve();
        return undefined;
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
    if (error instanceof ConfigError) {
      process.stderr.write(`colloquy: ${error.message}\n`);
      return 78;
    }
    throw error;
  }
}

const code = await main(process.argv.slice(2));
if (code !== undefined) process.exitCode = code;
