/**
 * The peer gateway for scenario 4: Portkey's open-source AI gateway from npm, installed on demand
 * into a scratch folder outside the repository (never committed) and started as a pinned child.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startChild, waitForHttp, type Child } from './harness.js';

export const PEER_PACKAGE = '@portkey-ai/gateway';
/** Pinned so that runs compare like with like. */
export const PEER_VERSION = '1.15.2';
const PEER_DIR = join(tmpdir(), 'colloquy-bench-peer');

function installedVersion(): string | undefined {
  const manifest = join(PEER_DIR, 'node_modules', PEER_PACKAGE, 'package.json');
  if (!existsSync(manifest)) return undefined;
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version?: string }).version;
}

/** Installs the peer into the scratch folder unless that version is already there; returns how. */
export async function ensurePeerInstalled(): Promise<string> {
  if (installedVersion() === PEER_VERSION) return `${PEER_PACKAGE}@${PEER_VERSION} (cached in ${PEER_DIR})`;
  mkdirSync(PEER_DIR, { recursive: true });
  const manifest = join(PEER_DIR, 'package.json');
  if (!existsSync(manifest)) writeFileSync(manifest, JSON.stringify({ name: 'colloquy-bench-peer', private: true }, null, 2));
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    execFile(
      'npm',
      ['install', '--no-audit', '--no-fund', '--loglevel=error', `${PEER_PACKAGE}@${PEER_VERSION}`],
      { cwd: PEER_DIR, timeout: 90_000 },
      (error, _stdout, stderr) => (error ? reject(new Error(`npm install ${PEER_PACKAGE} failed: ${stderr || error.message}`)) : resolve()),
    );
  });
  if (installedVersion() !== PEER_VERSION) throw new Error(`${PEER_PACKAGE}@${PEER_VERSION} did not install into ${PEER_DIR}`);
  return `${PEER_PACKAGE}@${PEER_VERSION} (installed into ${PEER_DIR} in ${((performance.now() - started) / 1000).toFixed(1)} s)`;
}

export interface PeerGateway {
  url: string;
  port: number;
  child: Child;
  /** Headers that route a request through the peer to an OpenAI-compatible upstream. */
  headersFor(upstreamPort: number): Record<string, string>;
  stop(): Promise<void>;
}

/** Starts the peer (headless, production mode) on a free port, pinned like the service. */
export async function startPeer(): Promise<PeerGateway> {
  const port = await freePort();
  const entry = join(PEER_DIR, 'node_modules', PEER_PACKAGE, 'build', 'start-server.js');
  const child = startChild('peer-gateway', 'server', process.execPath, [entry, `--port=${port}`, '--headless'], {
    cwd: PEER_DIR,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' },
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/`, 30_000, child);
  } catch (error) {
    await child.stop();
    throw error;
  }
  return {
    url,
    port,
    child,
    headersFor: (upstreamPort) => ({
      'Content-Type': 'application/json',
      Authorization: 'Bearer sk-bench-loopback',
      'x-portkey-provider': 'openai',
      'x-portkey-custom-host': `http://127.0.0.1:${upstreamPort}/v1`,
    }),
    stop: () => child.stop(),
  };
}
