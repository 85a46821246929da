/**
 * Resumable streams over HTTP: a `resumable: true` chat stream follows its generation from the
 * start; `GET /api/chat/stream/{stream_id}` (SSE, `Last-Event-ID` or `?after=`) and
 * `GET /api/chat/progress/{stream_id}?after=` (NDJSON) replay what came after a sequence number and
 * follow live; `POST /api/chat/stream/{stream_id}/cancel` stops the generation on purpose. A stream
 * that is unknown, someone else's or expired answers 204 (the SSE signal to stop reconnecting).
 */
import { Cancelled, type Follower, type ResumableRun, type StreamEntry } from '../core/resumable-runs.js';
import type { HttpContext, ResponseStream, Route } from '../http/types.js';
import type { Services } from '../services.js';
import type { StreamMeta } from '../store/types.js';
import type { AdmittedChat } from './admit.js';
import { NdjsonEncoder, SseEncoder } from './chat-encoders.js';
import type { ChatReplies } from './chat-replies.js';
import { identify } from './admit.js';
import { NO_STORE } from './headers.js';

const STREAM_ID = /^st_[0-9a-f]{24}$/;
const SSE_HEARTBEAT = { intervalMs: 15_000, frame: ': ping\n\n' };
/** How often a follower in another process than the generation looks for new events. */
const POLL_MS = 100;

type Surface = 'sse' | 'ndjson';

/** Frames one follower writes: SSE with `id: <stream>:<seq>`, NDJSON lines with `seq`. */
class FollowerEncoder {
  private readonly sse: SseEncoder | undefined;
  private readonly ndjson: NdjsonEncoder | undefined;

  constructor(
    private readonly streamId: string,
    surface: Surface,
    startedAt: number,
  ) {
    if (surface === 'sse') this.sse = new SseEncoder(streamId);
    else this.ndjson = new NdjsonEncoder(startedAt, streamId);
  }

  /** Feeds an entry the follower already has (its encoder state only), or the frame to write. */
  frame(entry: StreamEntry, write: boolean): string | undefined {
    if (this.sse) {
      const frame = this.sse.encode(entry.event);
      return write && frame !== undefined ? `id: ${this.streamId}:${entry.seq}\n${frame}` : undefined;
    }
    const line = this.ndjson?.encode(entry.event, { seq: entry.seq, result: entry.result });
    return write ? line : undefined;
  }
}

function isLast(entry: StreamEntry): boolean {
  return entry.event.type === 'done' || entry.event.type === 'error';
}

function parseEntry(json: string): StreamEntry {
  return JSON.parse(json) as StreamEntry;
}

/** The stream's entries after `seq`: from memory when the run is here and still has them, else from the log. */
async function entriesAfter(services: Services, streamId: string, run: ResumableRun | undefined, seq: number): Promise<StreamEntry[]> {
  const inMemory = run?.entriesAfter(seq);
  if (inMemory) return inMemory;
  // What memory no longer holds was written to the log (or is being written now).
  await run?.flushNow();
  const entries: StreamEntry[] = [];
  for await (const logged of services.resumable.log.after(streamId, seq)) entries.push(parseEntry(logged.json));
  return entries;
}

/**
 * Writes the stream to one client from `after` on, live until its last event. Earlier kept events
 * (from `firstKept`, the log's first) only prime the encoder (the SSE `sources` event carries the
 * search summary that came before it).
 */
async function follow(
  services: Services,
  stream: ResponseStream,
  streamId: string,
  surface: Surface,
  after: number,
  firstKept: number,
  attached?: Follower,
): Promise<void> {
  const encoder = new FollowerEncoder(streamId, surface, performance.now());
  let run = services.resumable.live(streamId);
  const follower = attached ?? run?.attach(after);
  try {
    if (after > 0) {
      for (const entry of await entriesAfter(services, streamId, run, Math.max(0, firstKept - 1))) {
        if (entry.seq > after) break;
        encoder.frame(entry, false);
      }
    }
    let cursor = after;
    for (;;) {
      const entries = await entriesAfter(services, streamId, run, cursor);
      const first = entries[0];
      if (first && first.seq > cursor + 1) {
        // The log moved past this reader (it fell behind a detached generation): say so, no gap.
        const error = { code: 'stream_expired', message: `The events after ${cursor} are no longer kept (resumable.max_bytes).` };
        await stream.write(
          surface === 'sse'
            ? `event: error\ndata: ${JSON.stringify({ error })}\n\n`
            : `${JSON.stringify({ type: 'error', error, seq: cursor })}\n`,
        );
        return;
      }
      for (const entry of entries) {
        cursor = entry.seq;
        const frame = encoder.frame(entry, true);
        if (frame !== undefined) {
          const written = stream.write(frame);
          if (written !== true && !(await written)) return;
        }
        follower?.advance(cursor);
        if (isLast(entry)) return;
      }
      if (run) {
        if (run.ended && run.lastSeq <= cursor) return;
        await run.waitAfter(cursor);
        continue;
      }
      // The generation runs in another process (or ended): read its log until it ends.
      const current = await services.resumable.log.metaOf(streamId);
      if (!current || (current.ended_at !== null && current.last_seq <= cursor)) return;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      run = services.resumable.live(streamId);
    }
  } finally {
    follower?.leave();
  }
}

function openStream(context: HttpContext, surface: Surface, headers: Record<string, string> = {}): ResponseStream {
  return surface === 'sse'
    ? context.stream({
        contentType: 'text/event-stream; charset=utf-8',
        headers: { ...headers, 'X-Accel-Buffering': 'no' },
        heartbeat: SSE_HEARTBEAT,
      })
    : context.stream({ contentType: 'application/x-ndjson; charset=utf-8', headers: { ...headers, 'X-Accel-Buffering': 'no' } });
}

/** Starts a resumable generation for an admitted stream request and follows it from its first event. */
export async function serveResumable(
  services: Services,
  replies: ChatReplies,
  context: HttpContext,
  admitted: AdmittedChat,
  surface: Surface,
): Promise<void> {
  // Nothing goes out before the quota take is on disk.
  await admitted.job.reservation.durable;
  const run = await replies.startResumable(context, admitted);
  // The first client follows from the first event on, attached before anything else is awaited: a
  // burst of the upstream may otherwise fill the log past max_bytes before it reads, and the
  // client that started the stream would be told its start was no longer kept.
  const follower = run.attach(0);
  if (context.signal.aborted) {
    follower.leave();
    return;
  }
  const stream = openStream(context, surface, admitted.headers);
  services.metrics.activeStreams.inc();
  try {
    if (surface === 'sse' && !(await stream.write('retry: 1000\n\n'))) return;
    await follow(services, stream, run.id, surface, 0, 1, follower);
  } finally {
    follower.leave();
    services.metrics.activeStreams.dec();
    stream.end();
  }
}

/** The sequence number a resume starts after: `Last-Event-ID: <stream>:<seq>`, else `?after=`. */
function resumePoint(context: HttpContext, streamId: string): number {
  const lastEventId = context.request.headers['last-event-id'];
  const fromHeader = lastEventId?.startsWith(`${streamId}:`) ? lastEventId.slice(streamId.length + 1) : undefined;
  const text = fromHeader ?? context.request.query.get('after') ?? '0';
  const seq = Number(text);
  return Number.isSafeInteger(seq) && seq >= 0 ? seq : 0;
}

/** The resume and cancel routes. */
export function resumableRoutes(services: Services): Route[] {
  /** The stream as the caller may see it, or undefined (answered 204 by the callers). */
  const visibleStream = async (context: HttpContext): Promise<{ streamId: string; meta: StreamMeta } | undefined> => {
    const caller = await identify(services, context);
    const streamId = context.request.params.stream_id ?? '';
    if (!STREAM_ID.test(streamId)) return undefined;
    const meta = await services.resumable.visible(streamId, caller.id, Date.now());
    return meta ? { streamId, meta } : undefined;
  };

  const resume = (surface: Surface) => async (context: HttpContext) => {
    const found = await visibleStream(context);
    if (!found) {
      context.send(204, 'text/plain', '', NO_STORE);
      return;
    }
    const { streamId, meta } = found;
    const after = resumePoint(context, streamId);
    services.metrics.streamResumes.inc();
    const stream = openStream(context, surface, NO_STORE);
    services.metrics.activeStreams.inc();
    try {
      if (surface === 'sse' && !(await stream.write('retry: 1000\n\n'))) return;
      if (after + 1 < meta.first_seq) {
        // Asked for events the log no longer keeps: say so once, never a silent gap.
        const message = `The events after ${after} are no longer kept; this stream's log starts at ${meta.first_seq} (resumable.max_bytes).`;
        const error = { code: 'stream_expired', message };
        await stream.write(
          surface === 'sse'
            ? `event: error\ndata: ${JSON.stringify({ error })}\n\n`
            : `${JSON.stringify({ type: 'error', error, seq: meta.first_seq - 1 })}\n`,
        );
        return;
      }
      await follow(services, stream, streamId, surface, after, meta.first_seq);
    } finally {
      services.metrics.activeStreams.dec();
      stream.end();
    }
  };

  return [
    { method: 'GET', path: '/api/chat/stream/:stream_id', handler: resume('sse') },
    { method: 'GET', path: '/api/chat/progress/:stream_id', handler: resume('ndjson') },
    {
      method: 'POST',
      path: '/api/chat/stream/:stream_id/cancel',
      handler: async (context) => {
        const found = await visibleStream(context);
        if (!found) {
          context.send(204, 'text/plain', '', NO_STORE);
          return;
        }
        const run = services.resumable.live(found.streamId);
        let cancelled = false;
        if (run && !run.ended) {
          run.stop(new Cancelled());
          cancelled = true;
        } else if (!run) {
          // Running in another process: it sees the request within a quarter of a second.
          cancelled = await services.resumable.log.requestCancel(found.streamId);
        }
        context.json(200, { stream_id: found.streamId, cancelled }, NO_STORE);
      },
    },
  ];
}
