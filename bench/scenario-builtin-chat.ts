/**
 * Scenario 2: POST /api/chat/ with the built-in model, non-streaming, each request reserving
 * quota and appending to a persisted session, against the bare uWS hello in the same run. The same
 * chat without a session, alternated with it, shows what the session's read and append cost.
 */
import { probe, startColloquy } from './colloquy.js';
import { round, startNodeHelper, type RunOptions, type Scenario, type ScenarioResult } from './harness.js';
import { compareSaturation } from './load.js';
import { loadRow } from './scenario-health.js';

/** Sessions the load rotates through (each request appends a turn pair to one of them). */
const SESSIONS = 1000;
/** What every request asks. */
const QUESTION = 'What does Colloquy store for a session?';

/** A skipped result when the route does not answer 200 (a misconfigured server), or undefined when it does. */
export function skippedUnlessReady(route: string, status: number, body: unknown): ScenarioResult | undefined {
  if (status === 200) return undefined;
  const reason = `answered ${status}: ${JSON.stringify(body).slice(0, 300)}`;
  return { rows: [], goals: [], notes: [`skipped: ${route} ${reason}`] };
}

export const builtinChatScenario: Scenario = {
  id: 'builtin-chat',
  number: 2,
  title: 'built-in chat with quota and session persisted vs bare uWS hello',
  async run(options: RunOptions): Promise<ScenarioResult> {
    const hello = await startNodeHelper('hello-uws', 'server', 'hello-uws.js', ['0']);
    const server = await startColloquy({ profileDir: options.profileDir });
    try {
      const bodies = Array.from({ length: SESSIONS }, (_, index) =>
        JSON.stringify({
          message: QUESTION,
          model: 'builtin-extractive',
          session_id: `bench-session-${index}`,
        }),
      );
      const check = await probe(`${server.url}/api/chat/`, JSON.parse(bodies[0]!));
      const skipped = skippedUnlessReady('POST /api/chat/', check.status, check.body);
      if (skipped) return skipped;
      const connections = 50;
      const sessionless = JSON.stringify({ message: QUESTION, model: 'builtin-extractive' });
      const best = await compareSaturation(
        [
          { name: 'bare uWS hello', request: { url: `http://127.0.0.1:${hello.port}/`, connections, durationSeconds: options.duration } },
          {
            name: 'POST /api/chat/ (builtin)',
            request: {
              url: `${server.url}/api/chat/`,
              method: 'POST',
              headers: { 'Content-Type': 'application/json' },
              bodies,
              connections,
              durationSeconds: options.duration,
            },
          },
          {
            name: 'POST /api/chat/ (builtin, no session)',
            request: {
              url: `${server.url}/api/chat/`,
              method: 'POST',
              headers: { 'Content-Type': 'application/json' },
              bodies: [sessionless],
              connections,
              durationSeconds: options.duration,
            },
          },
        ],
        options.quick ? 1 : 2,
        options.quick ? 1 : 2,
      );
      const bare = best.get('bare uWS hello')!;
      const chat = best.get('POST /api/chat/ (builtin)')!;
      const alone = best.get('POST /api/chat/ (builtin, no session)')!;
      const ratio = round(chat.rps / bare.rps, 3);
      const session = await fetch(`${server.url}/api/chat/session/bench-session-1`);
      const stored = session.status === 200 ? ((await session.json()) as { message_count?: number }).message_count : undefined;
      return {
        rows: [
          loadRow('bare uWS hello', bare, { ratio: 1 }),
          loadRow('POST /api/chat/ (builtin)', chat, { ratio }),
          loadRow('POST /api/chat/ (builtin, no session)', alone, { ratio: round(alone.rps / bare.rps, 3) }),
        ],
        goals: [
          {
            goal: 'built-in chat with persistence ≥ 0.1× bare uWS',
            measured: `${ratio}×`,
            met: ratio >= 0.1 && chat.non2xx === 0 && chat.errors === 0,
          },
        ],
        notes: [
          `${connections} connections; each request names one of ${SESSIONS} sessions (anonymous caller, plan quota 1e9, reserved per request in LMDB)`,
          `the no-session row (not the goal) is the same chat with its quota reserved and its usage recorded, but no session read or appended; with the session, the chat runs at ${round(chat.rps / alone.rps, 3)}× that throughput`,
          `answer: ${JSON.stringify((check.body as { response?: string }).response ?? '').slice(0, 120)}`,
          stored === undefined
            ? `session read-back: GET /api/chat/session answered ${session.status}`
            : `session bench-session-1 holds ${stored} messages after the run`,
        ],
      };
    } finally {
      await server.stop();
      await hello.child.stop();
    }
  },
};
