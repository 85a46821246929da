import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { Caller } from '../src/domain/types.js';
import { bootServer, type TestServer } from './helpers/server.js';
import { parseSse, type RecordedRequest, type ReplayUpstream, startUpstream } from './helpers/upstream-replay.js';

/**
 * Token budgets beside request quotas: a request reserves its prompt (characters / 4) plus its
 * max_tokens before any upstream work, in the same transaction as the request count, and settles
 * on the upstream's real usage when the reply ends: the difference goes back, or stays as debt.
 */

const ADMIN = { authorization: 'Bearer admin-tokens' };
const BUDGET = 10_000;
let upstream: ReplayUpstream;
let server: TestServer;

/** The upstream reports the usage the test asks for in the message: "usage P C". */
function usageAsked(recorded: RecordedRequest): { prompt: number; completion: number } | undefined {
  const text: string = recorded.body?.messages?.at(-1)?.content ?? '';
  const match = /usage (\d+) (\d+)/.exec(text);
  return match ? { prompt: Number(match[1]), completion: Number(match[2]) } : undefined;
}

function chunk(delta: Record<string, unknown>, finish: string | null = null, usage: unknown = null): string {
  return `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: finish === 'none' ? [] : [{ index: 0, delta, finish_reason: finish }], usage })}\n\n`;
}

async function answer(recorded: RecordedRequest, response: ServerResponse): Promise<void> {
  const text: string = recorded.body?.messages?.at(-1)?.content ?? '';
  if (text.includes('fail')) {
    response.writeHead(500).end();
    return;
  }
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  if (text.includes('slow')) {
    // Forty words, one every 50 ms: a client that leaves after the first pays for what came.
    for (let index = 0; index < 40 && !response.destroyed; index += 1) {
      response.write(chunk({ content: `word${index} ` }));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    response.end();
    return;
  }
  const usage = usageAsked(recorded) ?? { prompt: 10, completion: 4 };
  response.write(chunk({ role: 'assistant', content: 'Four words of answer.' }));
  response.write(chunk({}, 'stop'));
  response.write(
    chunk({}, 'none', { prompt_tokens: usage.prompt, completion_tokens: usage.completion, total_tokens: usage.prompt + usage.completion }),
  );
  response.end('data: [DONE]\n\n');
}

before(async () => {
  upstream = await startUpstream((_request, response, recorded) => answer(recorded, response));
  server = await bootServer({
    env: { COLLOQUY_ADMIN_TOKEN: 'admin-tokens' },
    config: {
      models: [{ id: 'metered', provider: 'openai', base_url: `${upstream.url}/v1` }],
      default_model: 'metered',
      default_max_tokens: 500,
      upstream: { retries: 0, idle_timeout_ms: 2000 },
      plans: {
        free: { quota: 1000, window_seconds: 86_400 },
        metered: { quota: 1000, window_seconds: 86_400, tokens: { quota: BUDGET, window_seconds: 3600 } },
      },
    },
  });
});

after(async () => {
  await server.close();
  await upstream.close();
});

async function userWithKey(userId: string, plan: string): Promise<Record<string, string>> {
  assert.equal((await server.post('/api/admin/users', { user_id: userId, plan }, ADMIN)).status, 201);
  const { key } = (await (await server.post(`/api/admin/users/${userId}/keys`, '', ADMIN)).json()) as { key: string };
  return { authorization: `Bearer ${key}` };
}

async function tokensUsed(userId: string): Promise<number> {
  const status = (await (await server.fetch(`/api/chat/quota/${userId}`, { headers: ADMIN })).json()) as any;
  return status.tokens.used;
}

describe('token budgets', () => {
  test('reservations never pass the budget under a 160-way concurrent burst, and exactly fill it', async () => {
    const caller: Caller = { kind: 'user', id: 'burst-tokens', plan: 'metered', keyId: 'k' };
    const outcomes = await Promise.allSettled(Array.from({ length: 160 }, () => server.services.quota.reserve(caller, 'chat', 125)));
    const taken = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    assert.equal(taken.length, BUDGET / 125);
    const refusals = outcomes.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
    for (const refusal of refusals) assert.match(String(refusal.reason.message), /token budget/);
    const remaining = taken.map((outcome) => (outcome as PromiseFulfilledResult<any>).value.stamp.tokens.remaining).sort((a, b) => a - b);
    assert.deepEqual(
      remaining,
      Array.from({ length: 80 }, (_, index) => index * 125),
    );
    // A reservation is decided before its commit; the standing is read once every take is durable.
    await Promise.all(taken.map((outcome) => (outcome as PromiseFulfilledResult<any>).value.durable));
    assert.equal((await server.services.quota.status({ id: 'burst-tokens', plan: 'metered' })).tokens?.used, BUDGET);
  });

  test('a reply settles on the real usage: the unused estimate goes back', async () => {
    const headers = await userWithKey('settler', 'metered');
    // Estimate: ceil(16 / 4) + 200 = 204 tokens; the upstream reports 10 + 5.
    const response = await server.post('/api/chat', { message: 'usage 10 5 here', max_tokens: 200 }, headers);
    assert.equal(response.status, 200);
    // The headers went out with the reservation (the estimate taken), in both header styles.
    assert.equal(response.headers.get('ratelimit-policy'), `"requests";q=1000, "tokens";q=${BUDGET}`);
    assert.match(response.headers.get('ratelimit') ?? '', new RegExp(`^"requests";r=999;t=\\d+, "tokens";r=${BUDGET - 204};t=\\d+$`));
    const body = (await response.json()) as any;
    assert.equal(body.remaining, 999);
    assert.equal(body.remaining_tokens, BUDGET - 15);
    assert.equal(await tokensUsed('settler'), 15);
    const status = (await (await server.fetch('/api/chat/quota/settler', { headers: ADMIN })).json()) as any;
    assert.deepEqual(Object.keys(status.tokens).sort(), ['limit', 'remaining', 'reset', 'used', 'window_seconds']);
    assert.equal(status.tokens.remaining, BUDGET - 15);
  });

  test('usage above the estimate is charged as debt that refuses the next requests until the window resets', async () => {
    const headers = await userWithKey('debtor', 'metered');
    const first = await server.post('/api/chat', { message: `usage 100 ${BUDGET}`, max_tokens: 50 }, headers);
    assert.equal(first.status, 200);
    assert.equal(((await first.json()) as any).remaining_tokens, 0);
    assert.equal(await tokensUsed('debtor'), BUDGET + 100);
    const refused = await server.post('/api/chat', { message: 'usage 1 1', max_tokens: 1 }, headers);
    assert.equal(refused.status, 429);
    const error = ((await refused.json()) as any).error;
    assert.equal(error.code, 'quota_exceeded');
    assert.match(error.message, /token budget/);
    assert.match(refused.headers.get('ratelimit') ?? '', /"tokens";r=0;/);
    assert.equal(refused.headers.get('retry-after'), /"tokens";r=0;t=(\d+)/.exec(refused.headers.get('ratelimit') ?? '')?.[1]);
  });

  test('a request that could never fit says so in tokens before any upstream work', async () => {
    const headers = await userWithKey('dreamer', 'metered');
    const before = upstream.requests.length;
    const response = await server.post('/api/chat', { message: 'hello', max_tokens: 20_000 }, headers);
    assert.equal(response.status, 429);
    assert.match(((await response.json()) as any).error.message, /may use 20002 tokens .* more than the 10000 tokens/);
    assert.equal(upstream.requests.length, before);
  });

  test('an upstream that fails before answering costs nothing: the estimate goes back with the request unit', async () => {
    const headers = await userWithKey('unlucky', 'metered');
    const response = await server.post('/api/chat', { message: 'please fail', max_tokens: 300 }, headers);
    assert.equal(response.status, 502);
    assert.equal(await tokensUsed('unlucky'), 0);
    const status = (await (await server.fetch('/api/chat/quota/unlucky', { headers: ADMIN })).json()) as any;
    assert.equal(status.used, 0);
  });

  test('a client that leaves mid-stream pays its prompt and what was produced, not the whole estimate', async () => {
    const headers = await userWithKey('leaver', 'metered');
    const controller = new AbortController();
    const response = await server.fetch('/api/chat/stream', {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'slow answer please', max_tokens: 4000 }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    let seen = '';
    while (!seen.includes('event: delta')) seen += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    // The settle lands once the server saw the client go.
    let used = 0;
    for (let wait = 0; wait < 100; wait += 1) {
      used = await tokensUsed('leaver');
      if (used < 4000) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const prompt = Math.ceil('slow answer please'.length / 4);
    assert.ok(used >= prompt, `paid ${used}, at least the prompt (${prompt})`);
    assert.ok(used < 100, `paid ${used}: the prompt and a few words, not the ${4000 + prompt} reserved`);
  });

  test('streams report remaining_tokens at the start (reserved) and at done (settled); /v1 in its quota field', async () => {
    const headers = await userWithKey('streamer', 'metered');
    const events = parseSse(await (await server.post('/api/chat/stream', { message: 'usage 7 3', max_tokens: 100 }, headers)).text());
    const start = events.find((event) => event.event === 'start');
    const done = events.find((event) => event.event === 'done');
    assert.equal(start?.data.remaining_tokens, BUDGET - (Math.ceil('usage 7 3'.length / 4) + 100));
    assert.equal(done?.data.remaining_tokens, BUDGET - 10);
    const completion = (await (
      await server.post('/v1/chat/completions', { messages: [{ role: 'user', content: 'usage 2 2' }], max_tokens: 10 }, headers)
    ).json()) as any;
    assert.equal(completion.quota.remaining_tokens, BUDGET - 14);
  });

  test('an image request takes no tokens and still reports the plan’s token standing', async () => {
    const headers = await userWithKey('painter', 'metered');
    await server.post('/api/chat', { message: 'usage 20 30', max_tokens: 40 }, headers);
    const image = await server.post('/api/chat/image', { prompt: 'a cat', size: '256x256' }, headers);
    assert.equal(image.status, 200);
    assert.equal(((await image.json()) as any).remaining_tokens, BUDGET - 50);
    assert.match(image.headers.get('ratelimit') ?? '', new RegExp(`"tokens";r=${BUDGET - 50};`));
    assert.equal(await tokensUsed('painter'), 50);
  });

  test('a plan without a token budget reports none and reserves none', async () => {
    const headers = await userWithKey('plain', 'free');
    const response = await server.post('/api/chat', { message: 'usage 5 5' }, headers);
    const body = (await response.json()) as any;
    assert.equal(body.remaining_tokens, undefined);
    assert.equal(response.headers.get('ratelimit-policy'), '"requests";q=1000');
    const status = (await (await server.fetch('/api/chat/quota/plain', { headers: ADMIN })).json()) as any;
    assert.equal(status.tokens, undefined);
  });
});
