/**
 * `colloquy serve`. With WORKERS > 1 (or on one CPU, see wantsSingleThreadedGc) the primary forks
 * that many processes (node:cluster), started with a larger young generation (YOUNG_GENERATION);
 * each runs a whole server on the same port. uWS listens with SO_REUSEPORT, so the kernel spreads new
 * connections across the workers without the primary relaying anything. All workers open the
 * same LMDB environment: quota takes, key revocations and sessions are shared through it.
 */
import cluster, { type Worker } from 'node:cluster';
import inspector from 'node:inspector';
import { createServer, type AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import type { Config } from '../config/index.js';
import { ConfigError, loadConfig } from '../config/index.js';
import { CommandError } from './args.js';
import { createLogger, flushLogs, type Logger } from '../logger.js';

/** Message a worker sends the primary once it listens. */
interface ListeningMessage {
  type: 'colloquy:listening';
  port: number;
}

function isListening(message: unknown): message is ListeningMessage {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === 'colloquy:listening';
}

/** The V8 flag that keeps garbage collection on the thread that runs JavaScript. */
const SINGLE_THREADED_GC = '--single-threaded-gc';

/**
 * The young generation a worker gets (MiB per semi-space; V8's own default is 16). A streaming
 * server keeps every open stream's small state (pending reads, the last frames) alive from one
 * delta to the next, and each young collection copies that state: twice the space means half the
 * collections. Measured on one CPU: 6% less CPU per streamed delta with 2,000 open streams, 9%
 * less per proxied chat at 4,000 req/s, about 30 MiB more RSS per worker (docs/benchmarks.md).
 */
const YOUNG_GENERATION = '--max-semi-space-size=32';

/** True when the operator already sized the young generation (command line or NODE_OPTIONS). */
function youngGenerationGiven(nodeOptions: readonly string[]): boolean {
  const given = (flag: string) => flag.startsWith('--max-semi-space-size') || flag.startsWith('--semi-space');
  return process.execArgv.some(given) || nodeOptions.some(given);
}

/** The V8 flags a worker starts with: the primary's, then ours unless the operator set them. */
function workerExecArgv(singleThreadedGc: boolean, nodeOptions: readonly string[]): string[] {
  const flags = [...process.execArgv];
  if (singleThreadedGc) flags.push(SINGLE_THREADED_GC);
  if (!youngGenerationGiven(nodeOptions)) flags.push(YOUNG_GENERATION);
  return flags;
}

/**
 * True when the server should run in worker processes started with single-threaded garbage
 * collection: on one CPU, V8's helper threads cannot run beside the event loop, they only take the
 * core from it (while 100 documents of 500 KB go in at once, /health p99 20–34 ms with the flag,
 * 30–60 ms without; docs/benchmarks.md). V8 takes the flag only when Node starts, hence a worker
 * process under a primary (which restarts it like any worker). Not when the flag is already given,
 * nor under a debugger or a profiler: they stay with the process they were given to.
 */
function wantsSingleThreadedGc(): boolean {
  const { execArgv } = process;
  return (
    availableParallelism() === 1 &&
    !execArgv.includes(SINGLE_THREADED_GC) &&
    inspector.url() === undefined &&
    !execArgv.some((flag) => flag.startsWith('--inspect') || flag.startsWith('--cpu-prof') || flag.startsWith('--heap-prof'))
  );
}

/** A worker restarted more often than this within RESTART_WINDOW_MS is left down (crash loop). */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

/** Runs one server in this process until SIGTERM/SIGINT; tells the primary its port when clustered. */
async function serveOne(config: Readonly<Config>): Promise<void> {
  const base = createLogger(config.logLevel);
  const logger = cluster.isWorker ? base.child({ worker: cluster.worker?.id, pid: process.pid }) : base;
  // Loaded here, not at the top: a primary process never runs a server itself.
  const { startServer } = await import('../server.js');
  const server = await startServer(config, { logger });
  if (cluster.isWorker) process.send?.({ type: 'colloquy:listening', port: server.port } satisfies ListeningMessage);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    server.close().then(
      () => {
        flushLogs(base);
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        flushLogs(base);
        process.exit(1);
      },
    );
  };
  // `on`, not `once`: a second signal during the drain must find a handler (and be ignored),
  // or Node's default action would end the process and cut the drain short.
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/**
 * A free port for PORT=0. uSockets only sets SO_REUSEPORT on a non-zero port, so the workers must
 * all be given the same concrete port rather than each asking for port 0.
 */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, host, () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Forks the workers, all on one port. */
async function servePrimary(config: Readonly<Config>, logger: Logger): Promise<void> {
  const port = config.port === 0 ? await freePort(config.host) : config.port;
  let stopping = false;
  let ready = false;
  const restarts: number[] = [];
  const workers = new Set<Worker>();
  const exit = (code: number): never => {
    flushLogs(logger);
    process.exit(code);
  };

  const fork = (): Promise<number> =>
    new Promise((resolve, reject) => {
      const worker = cluster.fork({ PORT: String(port) });
      workers.add(worker);
      const onMessage = (message: unknown) => {
        if (!isListening(message)) return;
        worker.off('message', onMessage);
        resolve(message.port);
      };
      worker.on('message', onMessage);
      worker.once('exit', (code, signal) => {
        workers.delete(worker);
        reject(new Error(`a worker exited before listening (code ${code ?? 'none'}, signal ${signal ?? 'none'})`));
        if (!ready) {
          // A start-up failure (port taken, storage unreadable) would fail again: stop them all.
          stopping = true;
          for (const other of workers) other.process.kill('SIGTERM');
          return;
        }
        if (stopping) {
          if (workers.size === 0) exit(0);
          return;
        }
        const now = Date.now();
        while (restarts.length > 0 && now - restarts[0]! > RESTART_WINDOW_MS) restarts.shift();
        if (restarts.length >= MAX_RESTARTS) {
          logger.error({ code, signal }, 'worker keeps crashing; not restarting it');
          if (workers.size === 0) exit(1);
          return;
        }
        restarts.push(now);
        logger.warn({ code, signal }, 'worker exited; restarting it');
        fork().catch((error: unknown) => logger.error({ err: error }, 'worker restart failed'));
      });
    });

  await Promise.all(Array.from({ length: config.workers }, () => fork()));
  ready = true;
  logger.info({ host: config.host, port, workers: config.workers, version: config.version }, 'workers listening');

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, workers: workers.size }, 'shutting down workers');
    // Each worker drains its own in-flight requests within shutdown_grace_ms, then exits.
    for (const worker of workers) worker.process.kill('SIGTERM');
    if (workers.size === 0) exit(0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/**
 * Refuses a port another server holds. The listening socket shares its port (SO_REUSEPORT, so the
 * workers of one server can), which would let a second, separate server start on the same port
 * and split requests and quotas with the first: an exclusive probe finds that out first.
 */
async function ensurePortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') reject(new CommandError(`port ${port} is in use on ${host}; stop the other server or set PORT`));
      else if (error.code === 'EACCES')
        reject(new CommandError(`port ${port} on ${host} needs privileges this process does not have; set PORT`));
      else reject(new CommandError(`cannot listen on ${host}:${port} (${error.code ?? error.message})`));
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** A start-up failure as one line a person can act on (never a stack trace). */
function startFailure(error: unknown): Error {
  if (error instanceof CommandError || error instanceof ConfigError) return error;
  const code = (error as NodeJS.ErrnoException).code;
  const message = error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
  return new CommandError(`could not start: ${code ? `${code} ` : ''}${message}`);
}

/** Starts serving: one process, or a primary and WORKERS workers (also for one worker on one CPU, see wantsSingleThreadedGc). */
export async function serve(): Promise<void> {
  const config = loadConfig();
  if (cluster.isPrimary) await ensurePortFree(config.host, config.port);
  const singleThreadedGc = cluster.isPrimary && wantsSingleThreadedGc();
  if (cluster.isPrimary && (config.workers > 1 || singleThreadedGc)) {
    const logger = createLogger(config.logLevel);
    cluster.setupPrimary({ execArgv: workerExecArgv(singleThreadedGc, config.nodeOptions) });
    if (singleThreadedGc) logger.info('one CPU: the server runs in worker processes with single-threaded garbage collection');
    try {
      await servePrimary(config, logger);
    } catch (error) {
      flushLogs(logger);
      throw startFailure(error);
    }
    return;
  }
  try {
    await serveOne(config);
  } catch (error) {
    throw startFailure(error);
  }
}
