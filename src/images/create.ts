/** Builds the configured image provider (the built-in renderer when none is configured). */
import type { Config } from '../config/index.js';
import { Automatic1111ImageProvider } from './automatic1111.js';
import { BuiltinImageProvider } from './builtin.js';
import { OpenAiImageProvider } from './openai.js';
import type { UpstreamObserver } from '../upstream/observer.js';
import type { ImageProvider } from './types.js';

/** The one image provider of a running server, from `config.images`. */
export function createImageProvider(images: Readonly<Config['images']>, observer?: UpstreamObserver): ImageProvider {
  switch (images.provider) {
    case 'openai':
      return new OpenAiImageProvider({
        baseUrl: images.baseUrl,
        apiKey: images.apiKey,
        model: images.model,
        timeoutMs: images.timeoutMs,
        observer,
      });
    case 'automatic1111':
      return new Automatic1111ImageProvider({
        baseUrl: images.baseUrl,
        apiKey: images.apiKey,
        model: images.model,
        timeoutMs: images.timeoutMs,
      });
    case 'builtin':
      return new BuiltinImageProvider();
  }
}
