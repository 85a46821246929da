/**
 * Asks a server started with `--inspect=127.0.0.1:0` to collect garbage and report its memory,
 * over the DevTools protocol. RSS alone cannot tell memory a stalled stream holds from garbage
 * left by the bytes that went through; after a full collection, what is left is what is held.
 * Node 20 has no WebSocket client built in, so a minimal one (text frames, client masking) is here.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

/** The debugger URL a node process prints on stderr when started with --inspect. */
export function inspectorUrlFrom(stderr: string): string | undefined {
  return /ws:\/\/127\.0\.0\.1:\d+\/[0-9a-f-]+/.exec(stderr)?.[0];
}

export interface ProcessMemory {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

/** One DevTools protocol session. */
export class InspectorSession {
  private buffer: Buffer = Buffer.alloc(0);
  private nextId = 1;
  private readonly waiting = new Map<number, (message: { result?: unknown; error?: { message: string } }) => void>();

  private constructor(private readonly socket: Socket) {
    socket.on('data', (data: Buffer) => this.onData(data));
  }

  /** Opens the WebSocket handshake to the debugger URL. */
  static open(url: string): Promise<InspectorSession> {
    const parsed = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = connect({ host: parsed.hostname, port: Number(parsed.port) });
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.write(
          [
            `GET ${parsed.pathname} HTTP/1.1`,
            `Host: ${parsed.host}`,
            'Upgrade: websocket',
            'Connection: Upgrade',
            `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
            'Sec-WebSocket-Version: 13',
            '',
            '',
          ].join('\r\n'),
        );
      });
      let head = Buffer.alloc(0);
      const onHead = (data: Buffer) => {
        head = Buffer.concat([head, data]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        socket.off('data', onHead);
        if (!head.subarray(0, 12).toString().includes('101')) {
          reject(new Error(`inspector refused the upgrade: ${head.subarray(0, end).toString()}`));
          socket.destroy();
          return;
        }
        const session = new InspectorSession(socket);
        if (end + 4 < head.length) session.onData(head.subarray(end + 4));
        resolve(session);
      };
      socket.on('data', onHead);
    });
  }

  /** Sends one protocol command and resolves with its result. */
  call(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.nextId++;
    const payload = Buffer.from(JSON.stringify({ id, method, params }));
    const mask = randomBytes(4);
    let header: Buffer;
    if (payload.length < 126) header = Buffer.from([0x81, 0x80 | payload.length]);
    else if (payload.length < 65_536) {
      header = Buffer.alloc(4);
      header[0] = 0x81;
      header[1] = 0x80 | 126;
      header.writeUInt16BE(payload.length, 2);
    } else {
      header = Buffer.alloc(10);
      header[0] = 0x81;
      header[1] = 0x80 | 127;
      header.writeBigUInt64BE(BigInt(payload.length), 2);
    }
    for (let index = 0; index < payload.length; index += 1) payload[index]! ^= mask[index % 4]!;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, (message) => (message.error ? reject(new Error(message.error.message)) : resolve(message.result)));
      this.socket.write(Buffer.concat([header, mask, payload]));
    });
  }

  /** Full garbage collection, then process.memoryUsage() of the inspected process. */
  async memoryAfterGc(): Promise<ProcessMemory> {
    await this.call('HeapProfiler.collectGarbage');
    await this.call('HeapProfiler.collectGarbage');
    const result = (await this.call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true })) as {
      result: { value: string };
    };
    return JSON.parse(result.result.value) as ProcessMemory;
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(data: Buffer): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, data]) : data;
    for (;;) {
      if (this.buffer.length < 2) return;
      let length = this.buffer[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.buffer.length < 4) return;
        length = this.buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (this.buffer.length < 10) return;
        length = Number(this.buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (this.buffer.length < offset + length) return;
      const opcode = this.buffer[0]! & 0x0f;
      const payload = this.buffer.subarray(offset, offset + length);
      this.buffer = this.buffer.subarray(offset + length);
      if (opcode !== 1) continue;
      const message = JSON.parse(payload.toString('utf8')) as { id?: number; result?: unknown; error?: { message: string } };
      if (message.id !== undefined) {
        const resolve = this.waiting.get(message.id);
        this.waiting.delete(message.id);
        resolve?.(message);
      }
    }
  }
}
