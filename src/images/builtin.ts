/**
 * The offline image provider: draws an abstract composition (a gradient ground, soft discs, rings,
 * bars and waves) seeded by a hash of the prompt, and encodes it as a real PNG with pngjs. It is
 * not a generative model: the same prompt always gives the same picture, and the picture does not
 * depict the prompt. The reply says so in `note`.
 */
import { createHash } from 'node:crypto';
import { PNG } from 'pngjs';
import { ApiError } from '../errors.js';
import type { GeneratedImage, ImageProgress, ImageProvider, ImageRequest } from './types.js';
import type { CancelSignal } from '../domain/cancel.js';

const BUILTIN_IMAGE_MODEL_ID = 'builtin-abstract';

const BUILTIN_IMAGE_NOTE =
  'builtin-abstract is not a generative model: it draws a deterministic abstract composition seeded by the prompt. Configure an image provider for generated images.';

type Rgb = [number, number, number];

/** mulberry32: small, fast and good enough to spread a 32-bit seed over shape parameters. */
function createRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 15), mixed | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function hslToRgb(hue: number, saturation: number, lightness: number): Rgb {
  const h = ((hue % 1) + 1) % 1;
  const q = lightness < 0.5 ? lightness * (1 + saturation) : lightness + saturation - lightness * saturation;
  const p = 2 * lightness - q;
  const channel = (offset: number): number => {
    let t = h + offset;
    if (t < 0) t += 1;
    if (t > 1) t -= 1;
    let value: number;
    if (t < 1 / 6) value = p + (q - p) * 6 * t;
    else if (t < 1 / 2) value = q;
    else if (t < 2 / 3) value = p + (q - p) * (2 / 3 - t) * 6;
    else value = p;
    return Math.round(value * 255);
  };
  return [channel(1 / 3), channel(0), channel(-1 / 3)];
}

/** An RGB canvas (3 bytes per pixel) with alpha blending; shapes work in 0..1 coordinates. */
class Canvas {
  readonly pixels: Buffer;

  constructor(
    readonly width: number,
    readonly height: number,
  ) {
    this.pixels = Buffer.alloc(width * height * 3);
  }

  /** Linear gradient from `from` to `to` along `angle` (radians). */
  gradient(from: Rgb, to: Rgb, angle: number): void {
    const { width, height, pixels } = this;
    const dx = Math.cos(angle) / width;
    const dy = Math.sin(angle) / height;
    // Normalise t to 0..1 over the four corners whatever the angle.
    const corners = [0, width * dx, height * dy, width * dx + height * dy];
    const low = Math.min(...corners);
    const span = Math.max(...corners) - low || 1;
    for (let y = 0; y < height; y += 1) {
      let t = (y * dy - low) / span;
      const step = dx / span;
      let offset = y * width * 3;
      for (let x = 0; x < width; x += 1, t += step, offset += 3) {
        pixels[offset] = from[0] + (to[0] - from[0]) * t;
        pixels[offset + 1] = from[1] + (to[1] - from[1]) * t;
        pixels[offset + 2] = from[2] + (to[2] - from[2]) * t;
      }
    }
  }

  /**
   * A disc (or a ring when `thickness` < 1) centred at (cx, cy) with radius r, all in 0..1 of the
   * shorter side; the edge is feathered over about one pixel so it does not look jagged.
   */
  disc(cx: number, cy: number, r: number, color: Rgb, alpha: number, thickness = 1): void {
    const scale = Math.min(this.width, this.height);
    const centerX = cx * this.width;
    const centerY = cy * this.height;
    const radius = r * scale;
    const inner = radius * (1 - thickness);
    const x0 = Math.max(0, Math.floor(centerX - radius - 1));
    const x1 = Math.min(this.width - 1, Math.ceil(centerX + radius + 1));
    const y0 = Math.max(0, Math.floor(centerY - radius - 1));
    const y1 = Math.min(this.height - 1, Math.ceil(centerY + radius + 1));
    for (let y = y0; y <= y1; y += 1) {
      const ddy = y + 0.5 - centerY;
      for (let x = x0; x <= x1; x += 1) {
        const ddx = x + 0.5 - centerX;
        const distance = Math.sqrt(ddx * ddx + ddy * ddy);
        let coverage = Math.min(1, Math.max(0, radius - distance + 0.5));
        if (thickness < 1) coverage *= Math.min(1, Math.max(0, distance - inner + 0.5));
        if (coverage > 0) this.blend((y * this.width + x) * 3, color, alpha * coverage);
      }
    }
  }

  /** An axis-aligned bar from (x, y) with size (w, h), all in 0..1 of the canvas. */
  bar(x: number, y: number, w: number, h: number, color: Rgb, alpha: number): void {
    const x0 = Math.max(0, Math.round(x * this.width));
    const x1 = Math.min(this.width, Math.round((x + w) * this.width));
    const y0 = Math.max(0, Math.round(y * this.height));
    const y1 = Math.min(this.height, Math.round((y + h) * this.height));
    for (let row = y0; row < y1; row += 1) {
      for (let column = x0; column < x1; column += 1) this.blend((row * this.width + column) * 3, color, alpha);
    }
  }

  /** A horizontal sine band: centre line at `y`, amplitude and band half-height in 0..1 of the height. */
  wave(y: number, amplitude: number, cycles: number, phase: number, halfHeight: number, color: Rgb, alpha: number): void {
    const { width, height } = this;
    for (let x = 0; x < width; x += 1) {
      const center = (y + amplitude * Math.sin(phase + (cycles * 2 * Math.PI * x) / width)) * height;
      const half = halfHeight * height;
      const top = Math.max(0, Math.floor(center - half - 1));
      const bottom = Math.min(height - 1, Math.ceil(center + half + 1));
      for (let row = top; row <= bottom; row += 1) {
        const coverage = Math.min(1, Math.max(0, half - Math.abs(row + 0.5 - center) + 0.5));
        if (coverage > 0) this.blend((row * width + x) * 3, color, alpha * coverage);
      }
    }
  }

  private blend(offset: number, color: Rgb, alpha: number): void {
    const pixels = this.pixels;
    pixels[offset] = pixels[offset]! + (color[0] - pixels[offset]!) * alpha;
    pixels[offset + 1] = pixels[offset + 1]! + (color[1] - pixels[offset + 1]!) * alpha;
    pixels[offset + 2] = pixels[offset + 2]! + (color[2] - pixels[offset + 2]!) * alpha;
  }
}

/** Draws image `index` for `prompt` into an RGB canvas; the same inputs always give the same pixels. */
function drawComposition(prompt: string, index: number, width: number, height: number): Canvas {
  const digest = createHash('sha256').update(prompt.trim().toLowerCase()).update(`\u0000${index}`).digest();
  const random = createRandom(digest.readUInt32BE(0) ^ digest.readUInt32BE(4));
  const baseHue = digest.readUInt16BE(8) / 65_536;
  // An analogous palette with one complementary accent keeps compositions coherent but varied.
  const palette: Rgb[] = [
    hslToRgb(baseHue, 0.55, 0.18),
    hslToRgb(baseHue + 0.08, 0.6, 0.42),
    hslToRgb(baseHue - 0.08, 0.7, 0.6),
    hslToRgb(baseHue + 0.5, 0.75, 0.55),
    hslToRgb(baseHue + 0.03, 0.35, 0.88),
  ];
  const pick = (): Rgb => palette[1 + Math.floor(random() * (palette.length - 1))]!;

  const canvas = new Canvas(width, height);
  canvas.gradient(palette[0]!, palette[1]!, random() * Math.PI * 2);

  const waves = 1 + Math.floor(random() * 2);
  for (let i = 0; i < waves; i += 1) {
    canvas.wave(
      0.2 + random() * 0.6,
      0.03 + random() * 0.12,
      0.5 + random() * 2.5,
      random() * Math.PI * 2,
      0.02 + random() * 0.06,
      pick(),
      0.35 + random() * 0.3,
    );
  }
  const bars = Math.floor(random() * 3);
  for (let i = 0; i < bars; i += 1) {
    const vertical = random() < 0.5;
    const long = 0.3 + random() * 0.5;
    const short = 0.02 + random() * 0.08;
    canvas.bar(random() * 0.8, random() * 0.8, vertical ? short : long, vertical ? long : short, pick(), 0.4 + random() * 0.4);
  }
  const discs = 3 + Math.floor(random() * 5);
  for (let i = 0; i < discs; i += 1) {
    const ring = random() < 0.3;
    canvas.disc(random(), random(), 0.05 + random() * 0.22, pick(), 0.45 + random() * 0.45, ring ? 0.12 + random() * 0.2 : 1);
  }
  return canvas;
}

/** Encodes an RGB canvas as PNG; deflate runs on the libuv pool so the event loop keeps serving. */
function encodePng(canvas: { width: number; height: number; pixels: Buffer }): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // Fixed Sub filtering is far cheaper than pngjs's per-row adaptive choice and compresses
    // smooth gradients well; RGB output drops the alpha channel nobody needs.
    const png = new PNG({
      width: canvas.width,
      height: canvas.height,
      colorType: 2,
      inputColorType: 2,
      inputHasAlpha: false,
      filterType: 1,
      deflateLevel: 6,
    });
    png.data = canvas.pixels;
    const chunks: Buffer[] = [];
    png
      .pack()
      .on('data', (chunk: Buffer) => chunks.push(chunk))
      .on('end', () => resolve(Buffer.concat(chunks)))
      .on('error', reject);
  });
}

/** The built-in renderer behind the ImageProvider interface. */
export class BuiltinImageProvider implements ImageProvider {
  readonly name = 'builtin';
  readonly model = BUILTIN_IMAGE_MODEL_ID;
  readonly note = BUILTIN_IMAGE_NOTE;
  readonly reportsProgress = true;

  async generate(request: ImageRequest, signal: CancelSignal, onProgress?: (progress: ImageProgress) => void): Promise<GeneratedImage[]> {
    const images: GeneratedImage[] = [];
    for (let index = 0; index < request.n; index += 1) {
      // A client that left stops the work between images; the route discards the result.
      if (signal.aborted) throw new ApiError('unavailable', 'The image request was cancelled.');
      const bytes = await encodePng(drawComposition(request.prompt, index, request.width, request.height));
      images.push({ mime_type: 'image/png', width: request.width, height: request.height, b64_json: bytes.toString('base64') });
      onProgress?.({ progress: (index + 1) / request.n, etaSeconds: undefined });
    }
    return images;
  }
}
