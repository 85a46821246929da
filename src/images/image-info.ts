/**
 * Reads what an image says about itself (format and dimensions) from its header, so the reply
 * reports the real size of what an upstream returned rather than the size that was asked for.
 */
import { crc32 } from 'node:zlib';
import { ApiError } from '../errors.js';
import type { GeneratedImage } from './types.js';

interface ImageInfo {
  mimeType: 'image/png';
  width: number;
  height: number;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** A PNG dimension is a 31-bit integer; anything bigger than this is not an image we should pass on. */
const MAX_DIMENSION = 16_384;

/**
 * Returns the format and size of a PNG, or undefined when the bytes are not a well-formed PNG
 * start (signature, then an IHDR chunk whose CRC matches).
 */
function readImageInfo(bytes: Uint8Array): ImageInfo | undefined {
  // Signature (8) + IHDR length and type (8) + IHDR data (13) + CRC (4), then at least IEND (12).
  if (bytes.length < 8 + 8 + 13 + 4 + 12) return undefined;
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (!buffer.subarray(0, 8).equals(PNG_SIGNATURE)) return undefined;
  if (buffer.readUInt32BE(8) !== 13 || buffer.toString('latin1', 12, 16) !== 'IHDR') return undefined;
  const storedCrc = buffer.readUInt32BE(29);
  if (crc32(buffer.subarray(12, 29)) !== storedCrc) return undefined;
  const width = buffer.readUInt32BE(16);
  const height = buffer.readUInt32BE(20);
  if (width < 1 || height < 1 || width > MAX_DIMENSION || height > MAX_DIMENSION) return undefined;
  return { mimeType: 'image/png', width, height };
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * Turns one base64 image from an upstream reply into a GeneratedImage, reading the real format and
 * size from its header. Anything that is not a PNG is refused as an upstream error.
 */
export function imageFromBase64(value: unknown, label: string): GeneratedImage {
  if (typeof value !== 'string')
    throw new ApiError('upstream_error', `The image provider (${label}) sent an image entry without base64 data.`);
  // Some servers answer with a data URL; the payload after the comma is the same base64.
  const payload = (value.startsWith('data:') ? value.slice(value.indexOf(',') + 1) : value).replace(/\s+/g, '');
  if (!BASE64.test(payload)) throw new ApiError('upstream_error', `The image provider (${label}) sent image data that is not base64.`);
  const bytes = Buffer.from(payload, 'base64');
  const info = readImageInfo(bytes);
  if (!info) throw new ApiError('upstream_error', `The image provider (${label}) sent data that is not a PNG image.`);
  return { mime_type: info.mimeType, width: info.width, height: info.height, b64_json: bytes.toString('base64') };
}
