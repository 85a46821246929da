/**
 * `node dist/bench/storage-commit.js [DIR…]`: what a chat request's storage work costs, without
 * HTTP. In one process, 50 concurrent loops run what the built-in chat of scenario 2 does to
 * storage, in four shapes: the quota take alone, the take with the usage record, the take, the
 * usage record and a session (its turns read, then a turn pair of the scenario's size appended,
 * rotating over 1000 sessions), and that last shape again with every session already holding its
 * 200 kept turns, so each append also drops the oldest (with a session cache large enough for all
 * of them: this shape measures the append, not reads of sessions from storage). Each shape runs
 * for a few seconds on a fresh LMDB environment in each directory given (default: one under the
 * system's temporary directory; give a tmpfs such as /dev/shm beside it to see what the disk's
 * writeback costs), and prints
 * requests/s and the process's CPU per request (every thread: lmdb-js commits on its own).
 * Run it pinned to one core (`taskset -c 0`) to compare with the server, which the bench pins.
 */
import { LmdbQuotaCounters } from '../src/store/lmdb-quota.js';
import { LmdbSessionStore } from '../src/store/lmdb-sessions.js';
import { LmdbStorage } from '../src/store/lmdb.js';
import { LmdbUsageStore } from '../src/store/lmdb-usage.js';
import { tmpdir } from 'node:os';
import type { SessionMessage } from '../src/store/types.js';
import { round, scratchDir } from './harness.js';

const LOOPS = 50;
const SECONDS = 4;
const SESSIONS = 1000;
/** The turns scenario 2 stores per request: its question, and an answer of the built-in model's length. */
const QUESTION = 'What does Colloquy store for a session?';
const ANSWER = 'x'.repeat(520);
const WINDOW = { start: 0, lengthMs: 86_400_000 };

type Shape = 'take' | 'take+usage' | 'take+usage+session' | 'take+usage+full session';
const SHAPES: Shape[] = ['take', 'take+usage', 'take+usage+session', 'take+usage+full session'];
const MAX_TURNS = 200;

/** Fills every session to its cap before a shape that starts from full sessions. */
async function fillSessions(sessions: LmdbSessionStore): Promise<void> {
  const now = new Date().toISOString();
  const turns: SessionMessage[] = [];
  for (let index = 0; index < MAX_TURNS / 2; index++) {
    turns.push({ role: 'user', content: QUESTION, timestamp: now }, { role: 'assistant', content: ANSWER, timestamp: now });
  }
  for (let index = 0; index < SESSIONS; index += 50) {
    await Promise.all(Array.from({ length: 50 }, (_, offset) => sessions.append('anonymous', `bench-session-${index + offset}`, turns)));
  }
}

async function measure(parent: string, shape: Shape): Promise<{ rps: number; cpuUs: number }> {
  const dir = scratchDir('colloquy-storage-', parent);
  const storage = new LmdbStorage(dir.path);
  const quota = new LmdbQuotaCounters(storage);
  const usage = new LmdbUsageStore(storage);
  // Full sessions of this size outgrow the server's default cache (48 M characters): the shape gets
  // one that holds them all, so it measures the append to a full session, not reads from storage.
  const full = shape === 'take+usage+full session';
  const sessions = full ? new LmdbSessionStore(storage, MAX_TURNS, 512 * 1024 * 1024) : new LmdbSessionStore(storage, MAX_TURNS);
  if (full) await fillSessions(sessions);
  let done = 0;
  let turn = 0;
  const busy = new Set<number>();
  const end = performance.now() + SECONDS * 1000;
  async function loop(): Promise<void> {
    while (performance.now() < end) {
      const take = await quota.take('anonymous', WINDOW, 1e9, 1);
      if (shape !== 'take') {
        void usage.record({
          time: Date.now(),
          subject: 'anonymous',
          key_id: null,
          model: 'builtin',
          route: '/api/chat/',
          input_tokens: 9,
          output_tokens: 90,
          status: 200,
        });
      }
      if (shape === 'take+usage+session' || shape === 'take+usage+full session') {
        // One session per loop at a time, as in the scenario (its sessions are never asked twice at once).
        let index = turn++ % SESSIONS;
        while (busy.has(index)) index = (index + 1) % SESSIONS;
        busy.add(index);
        const id = `bench-session-${index}`;
        await sessions.get('anonymous', id);
        await take.durable;
        const now = new Date().toISOString();
        const pair: SessionMessage[] = [
          { role: 'user', content: QUESTION, timestamp: now },
          { role: 'assistant', content: ANSWER, timestamp: now },
        ];
        await sessions.append('anonymous', id, pair);
        busy.delete(index);
      } else {
        await take.durable;
      }
      done += 1;
    }
  }
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(Array.from({ length: LOOPS }, loop));
  const used = process.cpuUsage(cpu);
  const seconds = (performance.now() - started) / 1000;
  await storage.close();
  dir.remove();
  return { rps: Math.round(done / seconds), cpuUs: round((used.user + used.system) / done, 1) };
}

const parents = process.argv.slice(2);
for (const parent of parents.length > 0 ? parents : [undefined]) {
  for (const shape of SHAPES) {
    const { rps, cpuUs } = await measure(parent ?? tmpdir(), shape);
    console.log(
      `${(parent ?? 'tmpdir').padEnd(12)} ${shape.padEnd(20)} ${String(rps).padStart(7)} req/s ${String(cpuUs).padStart(6)} µs CPU/request`,
    );
  }
}
