/**
 * Fault suite: bulk ingestion. 40 uploads of 500 KB arrive at once (the case that once held
 * /health for 265 s) at a server running as its own process, while /health and a chat are asked
 * all along. Extraction, chunking and tokenising run in worker threads and every write
 * transaction is short, so the server's event loop stays free: the figures (/health latency, the
 * server's own event-loop delay from /metrics) are printed for docs/reliability.md; the test
 * asserts generous bounds only (the machine is shared).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { proseDocument } from '../../bench/prose.js';

const ADMIN = 'bulk-ingestion-admin-token-0123456789';
const UPLOADS = 40;
const DOCUMENT_BYTES = 500 * 1024;

let server: ServerProcess;
let base: string;

before(async () => {
  server = await startServerProcess({ env: { COLLOQUY_ADMIN_TOKEN: ADMIN } });
  base = server.url;
});

after(async () => {
  await server.close();
});

function percentile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

describe('bulk ingestion', () => {
  test('40 uploads of 500 KB at once go in while /health and chat keep answering', async () => {
    const auth = { authorization: `Bearer ${ADMIN}` };
    const bodies = Array.from({ length: UPLOADS }, (_, index) => proseDocument(index + 1, DOCUMENT_BYTES));
    await server.eventLoopDelay();
    const health: number[] = [];
    const chats: number[] = [];
    let uploading = true;
    const started = performance.now();
    const probing = (async () => {
      while (uploading) {
        const asked = performance.now();
        const response = await fetch(`${base}/health`);
        assert.equal(response.status, 200);
        await response.arrayBuffer();
        health.push(performance.now() - asked);
        if (health.length % 10 === 0) {
          const chatAsked = performance.now();
          const chat = await fetch(`${base}/api/chat/`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ message: 'are you there?' }),
          });
          assert.equal(chat.status, 200);
          await chat.arrayBuffer();
          chats.push(performance.now() - chatAsked);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const statuses = await Promise.all(
      bodies.map(async (text, index) => {
        const form = new FormData();
        form.append('collection', 'bulk');
        form.append('file', new Blob([text], { type: 'text/plain' }), `document-${index}.txt`);
        const response = await fetch(`${base}/api/rag/documents`, { method: 'POST', headers: auth, body: form });
        await response.arrayBuffer();
        return response.status;
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    uploading = false;
    await probing;
    const delay = await server.eventLoopDelay();
    assert.deepEqual(new Set(statuses), new Set([201]));
    const figures = {
      uploads: UPLOADS,
      seconds: Math.round(seconds * 10) / 10,
      mb_per_s: Math.round(((UPLOADS * DOCUMENT_BYTES) / 1024 ** 2 / seconds) * 10) / 10,
      health_probes: health.length,
      health_p50_ms: Math.round(percentile(health, 0.5) * 10) / 10,
      health_p99_ms: Math.round(percentile(health, 0.99) * 10) / 10,
      health_max_ms: Math.round(Math.max(...health) * 10) / 10,
      chat_p99_ms: Math.round(percentile(chats, 0.99) * 10) / 10,
      server_event_loop_p99_ms: delay.p99_ms,
      server_event_loop_max_ms: delay.max_ms,
    };
    console.log(`bulk ingestion: ${JSON.stringify(figures)}`);
    // Generous bounds: the goals (p99 ≤ 10 ms, max ≤ 50 ms) are figures in docs/reliability.md.
    assert.ok(figures.health_p99_ms < 500, `/health p99 ${figures.health_p99_ms} ms`);
    assert.ok(figures.server_event_loop_max_ms < 1000, `event-loop delay max ${figures.server_event_loop_max_ms} ms`);
    const stats = (await (await fetch(`${base}/api/chat/rag/stats`)).json()) as { documents: number };
    assert.equal(stats.documents, UPLOADS);
  });
});
