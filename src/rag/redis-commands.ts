/**
 * The knowledge base's access to Redis: its key names, commands and Lua scripts, every one run
 * through RedisStorage.call so an unreachable Redis becomes 503 `unavailable`.
 */
import type { RedisArgument, RedisStorage } from '../store/redis.js';
import type { Script } from './redis-scripts.js';

/** Fields written per command while a segment is built. */
const WRITE_BATCH = 1000;

/** Runs commands and scripts on the shared connection (every one through RedisStorage.call). */
export class RedisCommands {
  constructor(readonly storage: RedisStorage) {}

  /** A key of the knowledge base. */
  key(name: string): string {
    return this.storage.key(`rag:${name}`);
  }

  send<T>(args: RedisArgument[]): Promise<T> {
    return this.storage.call((client) => client.sendCommand<T>(args));
  }

  sendBinary<T>(args: RedisArgument[]): Promise<T> {
    return this.storage.call((client) => client.sendCommand<T>(args, this.storage.binaryReplies));
  }

  /** Runs a script (EVALSHA, then EVAL when Redis has forgotten it); the prefix is its first argument. */
  async script<T>(script: Script, args: RedisArgument[], binary = false): Promise<T> {
    const tail: RedisArgument[] = ['0', this.storage.key(''), ...args];
    const options = binary ? this.storage.binaryReplies : undefined;
    return this.storage.call(async (client) => {
      try {
        return await client.sendCommand<T>(['EVALSHA', script.sha, ...tail], options);
      } catch (error) {
        if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
        return client.sendCommand<T>(['EVAL', script.source, ...tail], options);
      }
    });
  }

  /** A hash's fields and values (HGETALL), values as Buffers when `binary`. */
  async entries<T extends string | Buffer = string>(key: string, binary = false): Promise<Array<[string, T]>> {
    const reply = binary
      ? await this.sendBinary<Record<string, T>>(['HGETALL', key])
      : await this.send<Record<string, T>>(['HGETALL', key]);
    return Object.entries(reply);
  }

  /** HSET of many fields, WRITE_BATCH at a time, pipelined. */
  async hashSet(key: string, fields: Array<[string, RedisArgument]>): Promise<void> {
    const writes: Array<Promise<unknown>> = [];
    for (let from = 0; from < fields.length; from += WRITE_BATCH) {
      const args: RedisArgument[] = ['HSET', key];
      for (const [field, value] of fields.slice(from, from + WRITE_BATCH)) args.push(field, value);
      writes.push(this.send(args));
    }
    await Promise.all(writes);
  }
}
