/** Raw-socket HTTP helpers for tests that need to control bytes on the wire. */
import { connect, type Socket } from 'node:net';

/** Opens a TCP connection to the server. */
export function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Collects everything the server sends until it closes or `ms` pass. */
export function readFor(socket: Socket, ms: number): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const done = () => {
      clearTimeout(timer);
      socket.off('data', onData);
      resolve(text);
    };
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1');
    };
    const timer = setTimeout(done, ms);
    socket.on('data', onData);
    socket.once('close', done);
  });
}

/** Reads until the accumulated text contains `marker` (or rejects after `ms`). */
export function readUntil(socket: Socket, marker: string, ms = 3000): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes(marker)) finish();
    };
    const finish = () => {
      clearTimeout(timer);
      socket.off('data', onData);
      resolve(text);
    };
    const timer = setTimeout(() => {
      socket.off('data', onData);
      reject(new Error(`timed out waiting for ${JSON.stringify(marker)}; got ${JSON.stringify(text.slice(0, 300))}`));
    }, ms);
    socket.on('data', onData);
  });
}
