/**
 * The structured logger (pino). Request lines carry method, route, status and ms; never keys or
 * bodies. Lines go to stdout through an asynchronous destination (a buffered writer off the
 * request path); `flushLogs` writes out what is buffered before the process exits.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

/** Bytes buffered before a write to stdout; a quiet server still flushes on its own timer. */
const BUFFER_BYTES = 4096;
const destinations = new WeakMap<Logger, ReturnType<typeof pino.destination>>();

/** Creates the process logger at the given level (`silent` in tests). */
export function createLogger(level: string): Logger {
  const destination = pino.destination({ dest: 1, sync: false, minLength: BUFFER_BYTES });
  const logger = pino(
    {
      level,
      base: { service: 'colloquy' },
      redact: { paths: ['authorization', 'headers.authorization', '*.api_key', '*.apiKey', 'key'], remove: true },
    },
    destination,
  );
  destinations.set(logger, destination);
  // Without this a quiet server could keep its last lines in the buffer for a long time.
  const timer = setInterval(() => destination.flush(), 1000);
  timer.unref();
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
