/**
 * Fault suite: slow clients. Hundreds of connections drip a request's headers (slowloris) or its
 * body a byte at a time, never finishing. The server keeps answering everyone else (a body still
 * arriving holds its caller's parallel slot, so the drips only starve their own address), and
 * closes the dripping connections itself (the binding's idle timeout, about ten seconds) instead
 * of holding them forever; the figures are printed for docs/reliability.md.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';

const DRIPPERS = 300;
const DRIP_MS = 500;
/** The test's own bound: the server must have closed every dripping connection by then. */
const DEADLINE_MS = 25_000;

let server: ServerProcess;
/** The other caller: the drips come from this address, and hold (only) its anonymous slots. */
let user: Record<string, string>;

before(async () => {
  server = await startServerProcess({
    env: { COLLOQUY_ADMIN_TOKEN: 'admin-slow' },
    config: { plans: { free: { quota: 100_000, window_seconds: 86_400 } } },
  });
  const admin = { authorization: 'Bearer admin-slow' };
  assert.equal((await server.post('/api/admin/users', { user_id: 'patient' }, admin)).status, 201);
  const created = (await (await server.post('/api/admin/users/patient/keys', '', admin)).json()) as { key: string };
  user = { authorization: `Bearer ${created.key}` };
});

after(async () => {
  await server.close();
});

interface Dripper {
  socket: net.Socket;
  closedAfterMs: number | undefined;
}

function dripper(head: string): Dripper {
  const socket = net.connect(server.port, '127.0.0.1');
  const started = performance.now();
  const entry: Dripper = { socket, closedAfterMs: undefined };
  socket.on('error', () => undefined);
  socket.on('close', () => {
    entry.closedAfterMs = performance.now() - started;
  });
  socket.write(head);
  return entry;
}

function percentile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

describe('slow clients', () => {
  test('dripped headers and bodies are closed by the server while everyone else is served', async () => {
    const headers = Array.from({ length: DRIPPERS }, () => dripper('POST /api/chat HTTP/1.1\r\nHost: colloquy\r\n'));
    const bodies = Array.from({ length: DRIPPERS }, () =>
      dripper('POST /api/chat HTTP/1.1\r\nHost: colloquy\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{'),
    );
    const all = [...headers, ...bodies];
    const drip = setInterval(() => {
      for (const entry of headers) if (entry.closedAfterMs === undefined) entry.socket.write('X');
      for (const entry of bodies) if (entry.closedAfterMs === undefined) entry.socket.write(' ');
    }, DRIP_MS);
    const health: number[] = [];
    let chats = 0;
    await server.eventLoopDelay();
    const started = performance.now();
    try {
      while (performance.now() - started < DEADLINE_MS && all.some((entry) => entry.closedAfterMs === undefined)) {
        const asked = performance.now();
        const response = await server.fetch('/health');
        assert.equal(response.status, 200);
        await response.arrayBuffer();
        health.push(performance.now() - asked);
        const chat = await server.post('/api/chat', { message: 'still there?' }, user);
        assert.equal(chat.status, 200);
        await chat.arrayBuffer();
        chats += 1;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      clearInterval(drip);
      for (const entry of all) entry.socket.destroy();
    }
    const delay = await server.eventLoopDelay();
    const open = all.filter((entry) => entry.closedAfterMs === undefined).length;
    const closedAt = all.map((entry) => entry.closedAfterMs ?? Number.POSITIVE_INFINITY);
    console.log(
      `slow clients: ${DRIPPERS} header drips + ${DRIPPERS} body drips; all closed by the server within ` +
        `${Math.round(Math.max(...closedAt))} ms (p50 ${Math.round(percentile(closedAt, 0.5))} ms); ` +
        `meanwhile ${health.length} /health (p50 ${percentile(health, 0.5).toFixed(1)} ms, p99 ${percentile(health, 0.99).toFixed(1)} ms) and ${chats} chats answered; ` +
        `server event-loop delay p99 ${delay.p99_ms} ms, max ${delay.max_ms} ms`,
    );
    assert.equal(open, 0, `${open} dripping connections were still open after ${DEADLINE_MS} ms`);
    assert.ok(chats > 0);
  });
});
