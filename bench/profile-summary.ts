/**
 * `node dist/bench/profile-summary.js FILE.cpuprofile [N]`: the N functions with the most self
 * time in a V8 CPU profile (from `npm run bench -- --profile`), to find the hot path quickly.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

/** Self-time share per function, largest first. */
export function summarise(profile: { nodes: ProfileNode[] }, limit: number): string[] {
  const byFunction = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    total += hits;
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url ? `${url.replace(/^file:\/\/.*?\/(dist|node_modules)\//, '$1/')}:${lineNumber + 1}` : '';
    const key = `${functionName || '(anonymous)'} ${where}`.trim();
    byFunction.set(key, (byFunction.get(key) ?? 0) + hits);
  }
  return [...byFunction]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([name, hits]) => `${((hits / Math.max(1, total)) * 100).toFixed(1).padStart(5)}%  ${name}`);
}

const [file, count] = process.argv.slice(2);
if (file) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[] };
  process.stdout.write(`${summarise(profile, Number(count ?? 30)).join('\n')}\n`);
}
