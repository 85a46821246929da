/**
 * The reference point for scenario 3's gateway cost: the barest gateway built from the libraries the
 * service uses, with nothing of the service around it. uWS takes `POST /*` with a JSON body
 * `{message, model}`, asks the upstream at `--upstream PORT` for a streamed chat completion through
 * one undici Pool (keep-alive), reads its SSE frames (eventsource-parser, as the service, and
 * `JSON.parse` of each event), and answers
 * `{reply}` as JSON. No authentication, quota, storage, session, validation, timeouts, logging or
 * metrics: what is left is the HTTP server, the upstream client and the frames, the part of a
 * proxied request no gateway avoids. With `--quota DIR` it also does what the service's storage
 * does per request, with the service's own store classes on an LMDB environment in DIR: the quota
 * take (its decision before the upstream request, its durable commit before the reply) and a
 * usage record riding the next take's commit. Prints `{"port":N}` once listening.
 */
import uWS from '@trufflesuite/uws-js-unofficial';
import { StringDecoder } from 'node:string_decoder';
import { createParser } from 'eventsource-parser';
import { Pool } from 'undici';
import { LmdbStorage } from '../src/store/lmdb.js';
import { LmdbQuotaCounters } from '../src/store/lmdb-quota.js';
import { LmdbUsageStore } from '../src/store/lmdb-usage.js';
import { listenAndReport } from './reference-server.js';

const args = process.argv.slice(2);
const quotaDir = args.includes('--quota') ? args[args.indexOf('--quota') + 1] : undefined;
const storage = quotaDir ? new LmdbStorage(quotaDir) : undefined;
const counters = storage ? new LmdbQuotaCounters(storage) : undefined;
const usage = storage ? new LmdbUsageStore(storage) : undefined;
const HOUR = { start: 0, lengthMs: 3_600_000 };
/** Every request comes from one anonymous caller, as the bench's load does. */
const SUBJECT = 'anonymous:127.0.0.1';
const upstreamPort = Number(args[args.indexOf('--upstream') + 1]);
const requested = Number(args.includes('--port') ? args[args.indexOf('--port') + 1] : 0);
const pool = new Pool(`http://127.0.0.1:${upstreamPort}`, { connections: 256, pipelining: 1 });

async function complete(message: string, model: string): Promise<string> {
  const { statusCode, body } = await pool.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: message }], stream: true }),
  });
  if (statusCode !== 200) {
    await body.dump();
    throw new Error(`upstream ${statusCode}`);
  }
  let reply = '';
  // SSE parsed by eventsource-parser, as the service parses it.
  const parser = createParser({
    onEvent(event) {
      if (event.data === '[DONE]') return;
      const content = JSON.parse(event.data)?.choices?.[0]?.delta?.content;
      if (typeof content === 'string') reply += content;
    },
  });
  // Bytes decoded as the service decodes them (a character split between reads held back).
  const decoder = new StringDecoder('utf8');
  for await (const chunk of body as AsyncIterable<Buffer>) parser.feed(decoder.write(chunk));
  parser.feed(decoder.end());
  return reply;
}

/** The reply, after the quota take (when kept) was decided and made durable; then its usage record. */
async function answer(message: string, model: string): Promise<string> {
  if (!counters || !usage) return complete(message, model);
  const take = await counters.take(SUBJECT, HOUR, Number.MAX_SAFE_INTEGER, 1);
  const reply = await complete(message, model);
  await take.durable;
  void usage.record({
    time: Date.now(),
    subject: SUBJECT,
    key_id: null,
    model,
    route: '/api/chat/',
    input_tokens: 12,
    output_tokens: 8,
    status: 200,
  });
  return reply;
}

const app = uWS.App();
app.post('/*', (response) => {
  let aborted = false;
  const chunks: Buffer[] = [];
  response.onAborted(() => {
    aborted = true;
  });
  response.onData((chunk, last) => {
    chunks.push(Buffer.from(chunk.slice(0)));
    if (!last) return;
    const request = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { message: string; model: string };
    answer(request.message, request.model).then(
      (reply) => {
        if (aborted) return;
        response.cork(() => {
          response.writeHeader('Content-Type', 'application/json');
          response.end(JSON.stringify({ reply }));
        });
      },
      () => {
        if (aborted) return;
        response.cork(() => response.writeStatus('502 Bad Gateway').end('{"error":"upstream"}'));
      },
    );
  });
});
listenAndReport(app, 'bare-proxy', requested);
