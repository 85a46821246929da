/**
 * POST /api/chat/image: caller → validated request → quota (cost `costs.image`) → the configured
 * image provider → JSON, or NDJSON progress lines then the result when the client asks for
 * `application/x-ndjson`. A failed generation gives the quota back.
 */
import { ApiError, toApiError } from '../errors.js';
import type { HttpContext, ResponseStream, Route } from '../http/types.js';
import type { GeneratedImage, ImageProgress, ImageRequest } from '../images/types.js';
import type { QuotaStamp } from '../domain/types.js';
import type { Services } from '../services.js';
import { admitImage } from './admit.js';
import { rateLimitHeaders } from './headers.js';
import type { CancelSignal } from '../domain/cancel.js';

const NDJSON = 'application/x-ndjson';

/** The reply body shared by the JSON answer and the NDJSON `result` line. */
function replyBody(services: Services, images: GeneratedImage[], stamp: QuotaStamp): Record<string, unknown> {
  const provider = services.images;
  return {
    images,
    model: provider.model,
    ...(provider.note ? { note: provider.note } : {}),
    plan: stamp.plan,
    remaining: stamp.remaining,
    ...(stamp.tokens ? { remaining_tokens: stamp.tokens.remaining } : {}),
    reset: stamp.reset,
    timestamp: new Date().toISOString(),
  };
}

/** Runs the provider with metrics and logs around it. */
async function generate(
  services: Services,
  request: ImageRequest,
  signal: CancelSignal,
  onProgress?: (progress: ImageProgress) => void,
): Promise<GeneratedImage[]> {
  const provider = services.images;
  const started = performance.now();
  try {
    const images = await provider.generate(request, signal, onProgress);
    services.metrics.imageDuration.observe({ provider: provider.name, outcome: 'ok' }, (performance.now() - started) / 1000);
    services.metrics.imagesGenerated.inc({ provider: provider.name }, images.length);
    return images;
  } catch (error) {
    const cancelled = signal.aborted;
    const code = error instanceof ApiError ? error.code : 'internal';
    const outcome = cancelled ? 'cancelled' : code;
    services.metrics.imageDuration.observe({ provider: provider.name, outcome }, (performance.now() - started) / 1000);
    if (!cancelled)
      services.logger.warn({ provider: provider.name, code, ms: Math.round(performance.now() - started) }, 'image generation failed');
    throw error;
  }
}

/**
 * Writes progress lines, keeping only the newest report while a write waits on a slow client, so
 * a reader that falls behind sees fewer lines instead of making a queue grow.
 */
class ProgressLines {
  private latest: ImageProgress | undefined;
  /** True while a write is queued but has not picked its report yet (so a newer one just replaces it). */
  private queued = false;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly stream: ResponseStream,
    private readonly started: number,
  ) {}

  offer(progress: ImageProgress): void {
    this.latest = progress;
    if (this.queued) return;
    this.queued = true;
    this.chain = this.chain.then(() => this.writeLatest());
  }

  /** Resolves once every offered report was written (or dropped for a newer one). */
  flush(): Promise<void> {
    return this.chain;
  }

  private async writeLatest(): Promise<void> {
    this.queued = false;
    const report = this.latest;
    this.latest = undefined;
    if (!report || this.stream.closed) return;
    const { progress, etaSeconds } = report;
    await this.stream.write(
      line({
        type: 'progress',
        stage: 'generating',
        message: `Generating: ${Math.round(progress * 100)}%`,
        elapsed_ms: elapsed(this.started),
        progress: Math.round(progress * 1000) / 1000,
        ...(etaSeconds === undefined ? {} : { eta_s: Math.round(etaSeconds * 10) / 10 }),
      }),
    );
  }
}

function line(value: unknown): string {
  return `${JSON.stringify(value)}\n`;
}

function elapsed(started: number): number {
  return Math.round(performance.now() - started);
}

function wantsNdjson(accept: string | undefined): boolean {
  return accept?.toLowerCase().includes(NDJSON) ?? false;
}

async function streamImages(
  services: Services,
  context: HttpContext,
  request: ImageRequest,
  stamp: QuotaStamp,
  refund: () => Promise<void>,
  started: number,
): Promise<void> {
  const stream = context.stream({ contentType: NDJSON, headers: rateLimitHeaders(stamp) });
  services.metrics.activeStreams.inc();
  try {
    await stream.write(line({ type: 'progress', stage: 'accepted', message: 'Image request accepted.', elapsed_ms: elapsed(started) }));
    const provider = services.images;
    const plural = request.n === 1 ? 'image' : 'images';
    await stream.write(
      line({
        type: 'progress',
        stage: 'generating',
        message: `Generating ${request.n} ${plural} with ${provider.model}.`,
        elapsed_ms: elapsed(started),
        ...(provider.reportsProgress ? { progress: 0 } : {}),
      }),
    );
    const progress = new ProgressLines(stream, started);
    let images: GeneratedImage[];
    try {
      images = await generate(services, request, context.signal, provider.reportsProgress ? (report) => progress.offer(report) : undefined);
    } finally {
      await progress.flush();
    }
    await stream.write(line({ type: 'result', ...replyBody(services, images, stamp) }));
  } catch (error) {
    await refund();
    const apiError = toApiError(error);
    if (!(error instanceof ApiError)) services.logger.error({ err: error, route: context.request.route }, 'image stream failed');
    // The status line already went out: the error becomes the last line, then a clean end.
    await stream.write(line({ type: 'error', error: { code: apiError.code, message: apiError.message } }));
  } finally {
    stream.end();
    services.metrics.activeStreams.dec();
  }
}

/** The image generation route. */
export function imageRoutes(services: Services): Route[] {
  return [
    {
      method: 'POST',
      path: '/api/chat/image',
      handler: async (context) => {
        const started = performance.now();
        const ndjson = wantsNdjson(context.request.headers.accept);
        // Quota is taken only for a valid request, and before any upstream work starts.
        const { caller, request, reservation, release } = await admitImage(services, context, { stream: ndjson });
        // The usage record: 200 once images went out, the error's status otherwise, 499 when the client left.
        let status = 499;
        try {
          if (context.signal.aborted) {
            // The client left while the quota was being taken: nothing will be produced for it.
            await reservation.refund();
            return;
          }
          if (ndjson) {
            // The stream's first line is an acknowledgement: it waits for the quota take to be on disk.
            await reservation.durable;
            await streamImages(services, context, request, reservation.stamp, async () => void (await reservation.refund()), started);
            if (!context.signal.aborted) status = 200;
            return;
          }
          let images: GeneratedImage[];
          try {
            images = await generate(services, request, context.signal);
          } catch (error) {
            const refunded = await reservation.refund();
            if (error instanceof ApiError)
              throw new ApiError(error.code, error.message, {
                details: error.details,
                headers: { ...error.headers, ...rateLimitHeaders(refunded) },
              });
            throw error;
          }
          await reservation.durable;
          context.json(200, replyBody(services, images, reservation.stamp), rateLimitHeaders(reservation.stamp));
          status = 200;
        } catch (error) {
          status = toApiError(error).status;
          throw error;
        } finally {
          release();
          services.usage.record({
            caller,
            route: context.request.route,
            model: services.images.model,
            inputTokens: 0,
            outputTokens: 0,
            status,
          });
        }
      },
    },
  ];
}
