/**
 * How the upstream client opens its sockets: undici's own connector (connect timeout, TCP
 * keep-alive, no Nagle, TLS session reuse), except that a plain-TCP socket reads in small pieces.
 * Node reads a socket up to 64 KiB at a time into a buffer of its own, and undici pauses a reply by
 * leaving the unparsed part of a read in the socket, a view that keeps the whole read alive, with
 * up to 64 KiB more buffered behind it (undici's highWaterMark): a reply whose consumer stopped
 * reading held two or three such reads. Here every read lands in one shared buffer and is copied
 * out at its real length, at most READ_BYTES, and the socket stops reading once READ_BYTES are
 * buffered, so a paused reply holds a few small reads. TLS sockets keep undici's defaults (TLS
 * hands over records of at most 16 KiB).
 */
import type { Socket } from 'node:net';
import { buildConnector } from 'undici';

/** The most a plain-TCP upstream socket reads at once, and what it buffers before it stops reading. */
export const READ_BYTES = 4 * 1024;

/**
 * The buffer every plain-TCP upstream read lands in. One is enough for all sockets: Node hands a
 * read to `copyRead` as soon as it completed, before the next read into the buffer begins.
 */
const readBuffer = Buffer.allocUnsafe(READ_BYTES);

/** A read landed in the shared buffer: its bytes go to the socket's readable side, where undici reads them. */
function copyRead(this: Socket, length: number, buffer: Buffer): boolean {
  const bytes = Buffer.allocUnsafe(length);
  buffer.copy(bytes, 0, 0, length);
  // false once READ_BYTES are buffered: Node stops reading until undici reads again.
  return this.push(bytes);
}

/** The connector the upstream client's agent opens sockets with; `timeoutMs` bounds the connect. */
export function upstreamConnector(timeoutMs: number): buildConnector.connector {
  // net.Socket takes `highWaterMark` (undici sets 64 KiB); Node's connect types do not list it.
  const plainOptions: buildConnector.BuildOptions & { highWaterMark: number } = {
    timeout: timeoutMs,
    highWaterMark: READ_BYTES,
    onread: { buffer: readBuffer, callback: copyRead },
  };
  const plain = buildConnector(plainOptions);
  const secure = buildConnector({ timeout: timeoutMs });
  return (options, callback) => (options.protocol === 'https:' ? secure(options, callback) : plain(options, callback));
}
