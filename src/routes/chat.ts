/**
 * POST /api/chat/ (JSON), /api/chat/stream (SSE), /api/chat/progress (NDJSON) and
 * /api/chat/search (JSON, or SSE with Accept: text/event-stream): one admission step, one core
 * pipeline, and an encoder per route.
 */
import type { ChatKind } from '../core/chat-job.js';
import type { HttpContext, Route } from '../http/types.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { Services } from '../services.js';
import { admitChat, type AdmittedChat } from './admit.js';
import { ChatResultCollector, NdjsonEncoder, SseEncoder } from './chat-encoders.js';
import { type ChatReplies, holdsSearch } from './chat-replies.js';
import { serveResumable } from './resumable.js';

const SSE_HEARTBEAT = { intervalMs: 15_000, frame: ': ping\n\n' };

type Reply = (context: HttpContext, admitted: AdmittedChat) => Promise<void>;

/** The chat route group over the shared replies. */
export function chatRoutes(services: Services, registry: ProviderRegistry, replies: ChatReplies): Route[] {
  const json: Reply = (context, admitted) => replies.json(context, admitted, new ChatResultCollector());

  const sse: Reply = (context, admitted) => {
    if (admitted.job.request.resumable) return serveResumable(services, replies, context, admitted, 'sse');
    const encoder = new SseEncoder();
    return replies.stream(
      context,
      admitted,
      { contentType: 'text/event-stream; charset=utf-8', heartbeat: SSE_HEARTBEAT, encode: (event) => encoder.encode(event) },
      { untilSources: holdsSearch(admitted) },
    );
  };

  const ndjson: Reply = (context, admitted) => {
    if (admitted.job.request.resumable) return serveResumable(services, replies, context, admitted, 'ndjson');
    const encoder = new NdjsonEncoder(admitted.acceptedAt);
    return replies.stream(
      context,
      admitted,
      { contentType: 'application/x-ndjson; charset=utf-8', encode: (event) => encoder.encode(event) },
      { untilSources: false },
    );
  };

  /** Admits, replies, and gives the request's slots back however the reply ended. */
  const serve =
    (kind: ChatKind, choose: (context: HttpContext) => Reply) =>
    async (context: HttpContext): Promise<void> => {
      const reply = choose(context);
      const admitted = await admitChat(services, registry, context, kind, { stream: reply !== json });
      try {
        await reply(context, admitted);
      } finally {
        admitted.release();
      }
    };
  return [
    { method: 'POST', path: '/api/chat', handler: serve('chat', () => json) },
    { method: 'POST', path: '/api/chat/stream', handler: serve('chat', () => sse) },
    { method: 'POST', path: '/api/chat/progress', handler: serve('chat', () => ndjson) },
    { method: 'POST', path: '/api/chat/search', handler: serve('search', (context) => (wantsEventStream(context) ? sse : json)) },
  ];
}

function wantsEventStream(context: HttpContext): boolean {
  return (context.request.headers.accept ?? '').toLowerCase().includes('text/event-stream');
}
