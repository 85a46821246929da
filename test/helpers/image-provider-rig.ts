/**
 * The shared setup of the image provider tests: one fixture image upstream and a server pointed at
 * it, started once per describe block, with the upstream's record cleared before each test.
 */
import { after, before, beforeEach } from 'node:test';
import type { ConfigFile } from '../../src/config/index.js';
import { startImageUpstream, type ImageUpstream } from './image-upstreams.js';
import { bootServer, type TestServer } from './server.js';

/** The JSON body of a successful POST /api/chat/image. */
export interface ImageReply {
  images: Array<{ mime_type: string; width: number; height: number; b64_json: string }>;
  model: string;
  note?: string;
  remaining: number;
}

/** The JSON body of an error reply. */
export interface ErrorReply {
  error: { code: string; message: string };
}

export interface ImageProviderRig {
  readonly upstream: ImageUpstream;
  readonly server: TestServer;
  /** The caller's remaining quota, to prove a failed generation gave it back. */
  remaining(): Promise<number>;
}

/**
 * Registers before/after/beforeEach hooks in the calling describe block. `images` builds the
 * images config from the upstream's base url; the plan allows 100 so refunds stay visible.
 */
export function useImageProvider(options: {
  images: (upstreamUrl: string) => NonNullable<ConfigFile['images']>;
  env: Record<string, string>;
}): ImageProviderRig {
  let upstream: ImageUpstream | undefined;
  let server: TestServer | undefined;
  const rig: ImageProviderRig = {
    get upstream() {
      if (!upstream) throw new Error('the image upstream starts in before()');
      return upstream;
    },
    get server() {
      if (!server) throw new Error('the server starts in before()');
      return server;
    },
    async remaining() {
      return ((await (await rig.server.fetch('/api/chat/quota/me')).json()) as { remaining: number }).remaining;
    },
  };

  before(async () => {
    upstream = await startImageUpstream();
    server = await bootServer({
      config: { plans: { free: { quota: 100, window_seconds: 86400 } }, images: options.images(upstream.url) },
      env: options.env,
    });
  });
  after(async () => {
    await server?.close();
    await upstream?.close();
  });
  beforeEach(() => {
    rig.upstream.requests.length = 0;
    rig.upstream.handlers.clear();
  });
  return rig;
}
