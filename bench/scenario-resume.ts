/**
 * Scenario 9: resuming a dropped resumable stream beside 1,000 open ones. Each probe starts a
 * resumable chat, reads two deltas, drops its connection, and reconnects with Last-Event-ID; the
 * resume latency is from the reconnect's request to the first replayed event.
 */
import http from 'node:http';
import { MOCK_MODEL_ID, startColloquy } from './colloquy.js';
import { percentile, round, sleep, startNodeHelper, type Row, type RunOptions, type Scenario, type ScenarioResult } from './harness.js';
import { openStreams } from './sse-client.js';
import { errorSummary } from './scenario-streams.js';

const OPEN = 1000;
const PROBES = 100;

/** Reads a response body until `stop` says so, then destroys the socket (the client "drops"). */
function readUntil(request: http.ClientRequest, stop: (text: string) => boolean): Promise<{ text: string; firstEventAt: number }> {
  return new Promise((resolve, reject) => {
    let text = '';
    let firstEventAt = 0;
    request.on('response', (response) => {
      if (response.statusCode !== 200) {
        reject(new Error(`status ${response.statusCode}`));
        response.destroy();
        return;
      }
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        text += chunk;
        if (firstEventAt === 0 && text.includes('event: ')) firstEventAt = performance.now();
        if (stop(text)) {
          response.destroy();
          resolve({ text, firstEventAt });
        }
      });
      response.on('end', () => resolve({ text, firstEventAt }));
      response.on('error', () => resolve({ text, firstEventAt }));
    });
    request.on('error', reject);
  });
}

/** POSTs a resumable chat stream on its own connection. */
function startResumable(port: number, message: string): http.ClientRequest {
  const body = JSON.stringify({ message, model: MOCK_MODEL_ID, resumable: true });
  const request = http.request({
    host: '127.0.0.1',
    port,
    path: '/api/chat/stream',
    method: 'POST',
    agent: false,
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': Buffer.byteLength(body) },
  });
  request.end(body);
  return request;
}

/** One probe: start, read two deltas, drop, resume; the resume latency in ms. */
async function probe(port: number): Promise<number> {
  const start = startResumable(port, 'Resume me. [mock chunks=30 interval_ms=20 size=8]');
  const first = await readUntil(start, (text) => (text.match(/event: delta/g) ?? []).length >= 2);
  const lastId = [...first.text.matchAll(/^id: (.*)$/gm)].at(-1)?.[1];
  const streamId = lastId?.split(':')[0];
  if (!lastId || !streamId) throw new Error('no event id before the drop');
  const sentAt = performance.now();
  const again = http.request({
    host: '127.0.0.1',
    port,
    path: `/api/chat/stream/${streamId}`,
    agent: false,
    headers: { accept: 'text/event-stream', 'last-event-id': lastId },
  });
  again.end();
  const resumed = await readUntil(again, (text) => text.includes('event: '));
  if (resumed.firstEventAt === 0) throw new Error('the resume replayed nothing');
  return resumed.firstEventAt - sentAt;
}

/** One cancel probe: start, read a delta, POST …/cancel; ms from the cancel request to the stream's `done`. */
async function cancelProbe(port: number): Promise<number> {
  const start = startResumable(port, 'Cancel me. [mock chunks=200 interval_ms=20 size=8]');
  let cancelledAt = 0;
  let sent = false;
  const read = await readUntil(start, (text) => {
    if (!sent && text.includes('event: delta')) {
      sent = true;
      const streamId = /"stream_id":"(st_[0-9a-f]+)"/.exec(text)?.[1];
      cancelledAt = performance.now();
      const cancel = http.request({ host: '127.0.0.1', port, path: `/api/chat/stream/${streamId}/cancel`, method: 'POST', agent: false });
      cancel.on('response', (response) => response.resume());
      cancel.end();
    }
    return text.includes('"finish_reason":"cancelled"');
  });
  if (!read.text.includes('"finish_reason":"cancelled"')) throw new Error('the stream did not end cancelled');
  return performance.now() - cancelledAt;
}

export const resumeScenario: Scenario = {
  id: 'resume',
  number: 9,
  title: `resume latency: a dropped resumable stream reconnects beside ${OPEN} open streams`,
  async run(options: RunOptions): Promise<ScenarioResult> {
    const mock = await startNodeHelper('mock-upstream', 'load', 'mock-upstream.js', ['--port', '0']);
    const server = await startColloquy({ upstreamPort: mock.port, profileDir: options.profileDir });
    try {
      const holdSeconds = options.quick ? 15 : 45;
      // The open streams: resumable too, paced so they stay open for the whole run.
      const streams = await openStreams(OPEN, 500, () => ({
        port: server.port,
        path: '/api/chat/stream',
        body: { message: `Keep going. [mock chunks=${holdSeconds * 4} interval_ms=250 size=8]`, model: MOCK_MODEL_ID, resumable: true },
        dialect: 'colloquy',
      }));
      await sleep(1000);
      const openAtStart = streams.filter((stream) => stream.firstDeltaAt > 0 && !stream.completed && !stream.error).length;
      const latencies: number[] = [];
      const failures: string[] = [];
      const probes = options.quick ? PROBES / 4 : PROBES;
      for (let index = 0; index < probes; index += 1) {
        try {
          latencies.push(await probe(server.port));
        } catch (error) {
          failures.push((error as Error).message);
        }
      }
      const cancels: number[] = [];
      for (let index = 0; index < probes / 2; index += 1) {
        try {
          cancels.push(await cancelProbe(server.port));
        } catch (error) {
          failures.push((error as Error).message);
        }
      }
      const openAtEnd = streams.filter((stream) => stream.firstDeltaAt > 0 && !stream.completed && !stream.error).length;
      for (const stream of streams) stream.destroy();
      const rows: Row[] = [
        {
          'open streams (start/end)': `${openAtStart}/${openAtEnd}`,
          resumes: latencies.length,
          'resume p50 ms': round(percentile(latencies, 0.5), 2),
          'resume p99 ms': round(percentile(latencies, 0.99), 2),
          cancels: cancels.length,
          'cancel → done p50 ms': round(percentile(cancels, 0.5), 2),
          'cancel → done p99 ms': round(percentile(cancels, 0.99), 2),
          failures: failures.length,
          ...(failures.length > 0 ? { error: failures.slice(0, 3).join('; ') } : {}),
        },
      ];
      return {
        rows,
        goals: [],
        notes: [
          'each probe: POST a resumable stream, read two deltas, drop the socket, GET /api/chat/stream/{id} with Last-Event-ID; latency from that request to its first replayed event',
          'each cancel probe: POST a resumable stream, on its first delta POST …/cancel; latency from that request to the `done` (finish_reason cancelled) on the stream',
          `open streams: ${OPEN} resumable SSE streams paced at 250 ms; errors among them: ${errorSummary(streams) || 'none'}`,
        ],
      };
    } finally {
      await server.stop();
      await mock.child.stop();
    }
  },
};
