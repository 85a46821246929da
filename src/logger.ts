/**
 * The structured logger (pino). Request lines carry method, route, status and ms; never keys or
 * bodies. Lines go to stdout through an asynchronous destination (written off the request path);
 * `flushLogs` writes out what is still queued before the process exits.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

const destinations = new WeakMap<Logger, ReturnType<typeof pino.destination>>();

/** Creates the process logger at the given level (`silent` in tests). */
export function createLogger(level: string): Logger {
  // Asynchronous: a line is queued and written in the background, lines queued during one write go
  // out together in the next, so a busy server pays no write call per request.
  const destination = pino.destination({ dest: 1, sync: false });
  const logger = pino(
    {
      level,
      base: { service: 'colloquy' },
      redact: { paths: ['authorization', 'headers.authorization', '*.api_key', '*.apiKey', 'key'], remove: true },
    },
    destination,
  );
  destinations.set(logger, destination);
  return logger;
}

/** Writes out every buffered line synchronously (before exit, on a fatal error). */
export function flushLogs(logger: Logger): void {
  const destination = destinations.get(logger);
  try {
    destination?.flushSync();
  } catch {
    // A destination that is not ready yet has nothing buffered.
  }
}
