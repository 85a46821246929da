/** The structured logger (pino). Request lines carry method, route, status and ms; never keys or bodies. */
import { pino, type Logger } from 'pino';

export type { Logger };

/** Creates the process logger at the given level (`silent` in tests). */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'colloquy' },
    redact: { paths: ['authorization', 'headers.authorization', '*.api_key', '*.apiKey', 'key'], remove: true },
  });
}
