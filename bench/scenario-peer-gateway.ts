/**
 * Scenario 4: the same mock upstream through a peer gateway (Portkey's, installed on demand) and
 * through Colloquy, same placement, same load: throughput and latency side by side, and whether
 * each streams correctly.
 */
import { MOCK_MODEL_ID, startColloquy } from './colloquy.js';
import { round, startGatewayMock, type GoalCheck, type Row, type RunOptions, type Scenario, type ScenarioResult } from './harness.js';
import { compareSaturation, runFixedRate, type LoadRequest } from './load.js';
import { ensurePeerInstalled, startPeer } from './peer-gateway.js';
import { SseStream, type Dialect } from './sse-client.js';
import { skippedUnlessReady } from './scenario-builtin-chat.js';
import { gatewayTargets } from './scenario-gateway-overhead.js';
import { loadRow } from './scenario-health.js';

const MESSAGE = 'Say hello to the benchmark.';

/** Streams one reply and says whether it arrived whole. */
async function streamCheck(
  port: number,
  path: string,
  body: unknown,
  headers: Record<string, string>,
  dialect: Dialect,
  expected: number,
): Promise<string> {
  const stream = new SseStream({ port, path, body, headers, dialect });
  const timer = setTimeout(() => stream.destroy(), 10_000);
  await stream.finished;
  clearTimeout(timer);
  if (stream.error) return `fails: ${stream.error}`;
  if (!stream.completed) return 'fails: no final event';
  return stream.deltas >= expected
    ? `ok (${stream.deltas} deltas, first after ${round(stream.firstDeltaAt - stream.startedAt, 2)} ms)`
    : `incomplete: ${stream.deltas}/${expected} deltas`;
}

export const peerGatewayScenario: Scenario = {
  id: 'peer-gateway',
  number: 4,
  title: 'peer gateway (Portkey, npm) vs Colloquy on the same mock upstream',
  async run(options: RunOptions): Promise<ScenarioResult> {
    const installed = await ensurePeerInstalled();
    const mock = await startGatewayMock();
    const server = await startColloquy({ upstreamPort: mock.port, profileDir: options.profileDir });
    const peer = await startPeer();
    try {
      const ours = await gatewayTargets(server.url, mock.port);
      const skipped = skippedUnlessReady('POST /api/chat/ (openai provider)', ours.probeStatus, ours.probeBody);
      if (skipped) return skipped;
      const theirs: Omit<LoadRequest, 'connections' | 'durationSeconds'> = {
        url: `${peer.url}/v1/chat/completions`,
        method: 'POST',
        headers: peer.headersFor(mock.port),
        bodies: [JSON.stringify({ model: MOCK_MODEL_ID, messages: [{ role: 'user', content: MESSAGE }] })],
      };
      const check = await fetch(theirs.url, { method: 'POST', headers: theirs.headers, body: theirs.bodies![0] });
      const checkText = await check.text();
      const rows: Row[] = [];
      const notes: string[] = [`peer: ${installed}, started with --headless, NODE_ENV=production, pinned like Colloquy`];
      const goals: GoalCheck[] = [];
      if (check.status !== 200) notes.push(`peer non-streaming probe answered ${check.status}: ${checkText.slice(0, 200)}`);

      const seconds = options.duration;
      await runFixedRate({ ...theirs, connections: 32, durationSeconds: 1, rate: 500 });
      await runFixedRate({ ...ours.gateway, connections: 32, durationSeconds: 1, rate: 500 });
      const peerFixed = await runFixedRate({ ...theirs, connections: 32, durationSeconds: seconds, rate: 1000 });
      const oursFixed = await runFixedRate({ ...ours.gateway, connections: 32, durationSeconds: seconds, rate: 1000 });
      rows.push(loadRow('peer gateway', peerFixed, { mode: 'JSON', load: '1000 req/s' }));
      rows.push(loadRow('colloquy', oursFixed, { mode: 'JSON', load: '1000 req/s' }));

      const best = await compareSaturation(
        [
          { name: 'peer gateway', request: { ...theirs, connections: 50, durationSeconds: seconds } },
          { name: 'colloquy', request: { ...ours.gateway, connections: 50, durationSeconds: seconds } },
        ],
        1,
        1,
      );
      const peerMax = best.get('peer gateway')!;
      const oursMax = best.get('colloquy')!;
      const ratio = round(oursMax.rps / Math.max(1, peerMax.rps), 2);
      rows.push(loadRow('peer gateway', peerMax, { mode: 'JSON', load: 'saturation', ratio: 1 }));
      rows.push(loadRow('colloquy', oursMax, { mode: 'JSON', load: 'saturation', ratio }));
      goals.push({
        goal: 'throughput ≥ 12× the peer gateway',
        measured: `${ratio}× (${oursMax.rps} vs ${peerMax.rps} req/s)`,
        met: ratio >= 12 && oursMax.non2xx === 0,
      });

      // Streaming: correctness first (the peer's streaming is known to break on some Node versions).
      const directive = `${MESSAGE} [mock chunks=8 interval_ms=5]`;
      const peerStream = await streamCheck(
        peer.port,
        '/v1/chat/completions',
        { model: MOCK_MODEL_ID, stream: true, messages: [{ role: 'user', content: directive }] },
        theirs.headers!,
        'openai',
        8,
      );
      const oursStream = await streamCheck(
        server.port,
        '/api/chat/stream',
        { message: directive, model: MOCK_MODEL_ID },
        {},
        'colloquy',
        8,
      );
      notes.push(`streaming on Node ${process.version}: peer ${peerStream}; colloquy ${oursStream}`);
      if (!peerStream.startsWith('ok')) {
        const reason = peer.child
          .stderr()
          .split('\n')
          .find((line) => /Error/.test(line));
        if (reason) notes.push(`peer's own log for the failed stream: ${reason.trim().slice(0, 200)}`);
      }
      const streamTargets = [];
      if (peerStream.startsWith('ok')) {
        streamTargets.push({
          name: 'peer gateway',
          request: {
            ...theirs,
            bodies: [JSON.stringify({ model: MOCK_MODEL_ID, stream: true, messages: [{ role: 'user', content: MESSAGE }] })],
            connections: 50,
            durationSeconds: seconds,
          },
        });
      }
      if (oursStream.startsWith('ok')) {
        streamTargets.push({
          name: 'colloquy',
          request: { ...ours.gateway, url: `${server.url}/api/chat/stream`, connections: 50, durationSeconds: seconds },
        });
      }
      const streamed = await compareSaturation(streamTargets, 1, 1);
      for (const [name, result] of streamed) rows.push(loadRow(name, result, { mode: 'SSE', load: 'saturation' }));
      if (!peerStream.startsWith('ok'))
        rows.push({ target: 'peer gateway', mode: 'SSE', load: 'saturation', 'req/s': 'n/a', note: peerStream });
      return { rows, goals, notes };
    } finally {
      await peer.stop();
      await server.stop();
      await mock.child.stop();
    }
  },
};
