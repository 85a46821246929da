/**
 * The Redis engine's connection: one client per process (node-redis), shared by every Redis store,
 * plus a second connection for pub/sub once a store subscribes. Every key is `${prefix}${name}`.
 *
 * Redis being away must fail fast and closed: the offline queue is off (a command sent while the
 * connection is down is refused at once instead of queued), every command has a timeout, and the
 * client reconnects by itself in the background. Stores run their commands through `call()`,
 * which turns any connection failure into 503 `unavailable`: never free requests, never a 401 or
 * a 500, never a hang. The node recovers by itself when Redis returns.
 */
import { RESP_TYPES, createClient, type RedisArgument, type RedisClientType } from 'redis';
import { ApiError } from '../errors.js';
import type { Storage, StorageHealth } from './types.js';

/** The Redis client type the stores use (default modules, RESP2). */
export type RedisClient = RedisClientType;

/** A command argument (string or Buffer). */
export type { RedisArgument };

/** Command options that answer bulk strings as Buffers (binary values: posting blocks, vectors). */
export const BINARY_REPLIES = { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } };

export interface RedisStorageOptions {
  url: string;
  /** Put before every key and channel name (several deployments can share one Redis). */
  keyPrefix: string;
  /** A command not answered within this many ms fails (then the request gets a 503). */
  commandTimeoutMs?: number;
  /** Connecting must succeed within this many ms. */
  connectTimeoutMs?: number;
  /** Told about connection losses and recoveries (once per change, not per retry). */
  onStateChange?: (state: 'lost' | 'restored', detail: string) => void;
}

/** Seconds a client is told to wait before retrying a request refused because Redis is away. */
const RETRY_AFTER_SECONDS = '1';

/** The 503 sent when Redis cannot be reached. */
export function redisUnavailable(detail: string): ApiError {
  return new ApiError('unavailable', `The storage (Redis) cannot be reached right now: ${detail}. Retry shortly.`, {
    headers: { 'Retry-After': RETRY_AFTER_SECONDS },
  });
}

/** The reason of a failed Redis command, as /health and logs say it. */
function reason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.length > 0 ? message : 'connection lost';
}

function clientFor(options: RedisStorageOptions): RedisClient {
  return createClient({
    url: options.url,
    disableOfflineQueue: true,
    commandOptions: { timeout: options.commandTimeoutMs ?? 2000 },
    socket: {
      connectTimeout: options.connectTimeoutMs ?? 2000,
      // Retry for ever, quickly at first, at most once a second: the node recovers by itself.
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 1000),
    },
  }) as unknown as RedisClient;
}

export class RedisStorage implements Storage {
  readonly engine = 'redis';
  /** Command options that answer bulk strings as Buffers, for stores that only import this class's type. */
  readonly binaryReplies = BINARY_REPLIES;
  readonly client: RedisClient;
  readonly prefix: string;
  private subscriber: RedisClient | undefined;
  private readonly subscriptions = new Map<string, (message: string) => void>();
  private readonly onSubscriberReady = new Set<() => void>();
  private up = false;
  private lastError = 'not connected yet';
  private closed = false;

  private constructor(private readonly options: RedisStorageOptions) {
    this.prefix = options.keyPrefix;
    this.client = clientFor(options);
    this.client.on('ready', () => this.mark(true, 'connected'));
    this.client.on('error', (error: unknown) => this.mark(false, reason(error)));
    this.client.on('end', () => this.mark(false, 'connection closed'));
  }

  /**
   * Connects. A Redis that is away at start does not stop the node: it starts, answers 503
   * `unavailable` where it needs storage, and connects in the background when Redis comes.
   */
  static async open(options: RedisStorageOptions): Promise<RedisStorage> {
    const storage = new RedisStorage(options);
    const connected = storage.client.connect().then(
      () => true,
      () => false,
    );
    // Wait a moment for a first connection so a healthy start is ready at once.
    await Promise.race([connected, new Promise((resolve) => setTimeout(resolve, options.connectTimeoutMs ?? 2000).unref())]);
    return storage;
  }

  private mark(up: boolean, detail: string): void {
    if (!up) this.lastError = detail;
    if (up === this.up) return;
    this.up = up;
    this.options.onStateChange?.(up ? 'restored' : 'lost', detail);
  }

  /** Whether the connection is up right now. */
  get connected(): boolean {
    return this.up && this.client.isReady;
  }

  /** A key with the deployment's prefix. */
  key(name: string): string {
    return `${this.prefix}${name}`;
  }

  /**
   * Runs Redis commands; a connection failure (refused while disconnected, timed out, socket
   * closed) becomes 503 `unavailable`. Other errors (a script error) pass through as they are.
   */
  async call<T>(work: (client: RedisClient) => Promise<T>): Promise<T> {
    if (!this.client.isReady) throw redisUnavailable(this.lastError);
    try {
      return await work(this.client);
    } catch (error) {
      if (error instanceof ApiError) throw error;
      const name = error instanceof Error ? error.name : '';
      const message = reason(error);
      if (
        !this.client.isReady ||
        /Timeout|ClientClosed|ClientOffline|SocketClosed|Connection|Reconnect/i.test(name) ||
        /ECONNREFUSED|ECONNRESET|EPIPE|timeout|closed|offline|LOADING|MISCONF|OOM/i.test(message)
      ) {
        throw redisUnavailable(message);
      }
      throw error;
    }
  }

  /**
   * Listens on a channel (prefixed). `onResubscribed` runs whenever the subscription connection
   * (re)connects: messages sent while it was down are lost, so a listener drops what it cached.
   */
  async subscribe(channel: string, listener: (message: string) => void, onResubscribed?: () => void): Promise<void> {
    const name = this.key(channel);
    this.subscriptions.set(name, listener);
    if (onResubscribed) this.onSubscriberReady.add(onResubscribed);
    if (!this.subscriber) {
      const subscriber = clientFor(this.options);
      this.subscriber = subscriber;
      subscriber.on('error', () => undefined);
      subscriber.on('ready', () => {
        for (const callback of this.onSubscriberReady) callback();
      });
      subscriber.connect().catch(() => undefined);
    }
    await this.subscriber.subscribe(name, listener).catch(() => {
      // Not connected yet: node-redis subscribes again on its own when the connection comes up.
    });
  }

  /** Publishes on a channel (prefixed); a lost message is covered by the listeners' flush on reconnect. */
  async publish(channel: string, message: string): Promise<void> {
    await this.call((client) => client.publish(this.key(channel), message));
  }

  async check(): Promise<StorageHealth> {
    const started = performance.now();
    try {
      const answer = await this.call((client) => client.ping());
      const latency_ms = Math.round((performance.now() - started) * 1000) / 1000;
      if (answer !== 'PONG') return { ok: false, engine: this.engine, latency_ms, detail: `PING answered "${answer}"` };
      return { ok: true, engine: this.engine, latency_ms };
    } catch (error) {
      const latency_ms = Math.round((performance.now() - started) * 1000) / 1000;
      return { ok: false, engine: this.engine, latency_ms, detail: error instanceof ApiError ? this.lastError : reason(error) };
    }
  }

  /** Every write was acknowledged by Redis before its call resolved: nothing is pending here. */
  async flush(): Promise<void> {}

  /** Every read goes to the server, which has every acknowledged write. */
  freshen(): void {}

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const quit = async (client: RedisClient | undefined) => {
      if (!client) return;
      try {
        if (client.isOpen) await client.close();
      } catch {
        client.destroy();
      }
    };
    await Promise.all([quit(this.client), quit(this.subscriber)]);
  }
}
