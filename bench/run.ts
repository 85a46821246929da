/**
 * `npm run bench [-- SCENARIO… ] [--duration S] [--quick] [--profile]`: runs the scenarios in
 * order, prints a table per scenario, and writes bench/results/<id>.json plus latest.json and
 * latest.md for the whole run. Every figure is a ratio or a comparison measured in this run.
 */
import { join } from 'node:path';
import { abortScenario } from './scenario-abort.js';
import { builtinChatScenario } from './scenario-builtin-chat.js';
import { gatewayOverheadScenario } from './scenario-gateway-overhead.js';
import { healthScenario } from './scenario-health.js';
import { peerGatewayScenario } from './scenario-peer-gateway.js';
import { ragScenario } from './scenario-rag.js';
import { redisNodesScenario } from './scenario-redis.js';
import { ingestLoadScenario } from './scenario-ingest-load.js';
import { resumeScenario } from './scenario-resume.js';
import { slowReadersScenario } from './scenario-slow-readers.js';
import { streamsScenario } from './scenario-streams.js';
import {
  formatTable,
  killAllChildrenNow,
  machineInfo,
  markdownTable,
  pinSelfToLoadCpu,
  REPO_ROOT,
  stopAllChildren,
  takeUnexpectedExits,
  writeResult,
  type GoalCheck,
  type MachineInfo,
  type RunOptions,
  type Scenario,
  type ScenarioResult,
} from './harness.js';
import { readFileSync, writeFileSync } from 'node:fs';

/** Every scenario, in the order of the issue. New scenarios register here. */
export const SCENARIOS: Scenario[] = [
  healthScenario,
  builtinChatScenario,
  gatewayOverheadScenario,
  peerGatewayScenario,
  streamsScenario,
  slowReadersScenario,
  abortScenario,
  ragScenario,
  resumeScenario,
  ingestLoadScenario,
  redisNodesScenario,
];

/** Safety stop per scenario (each is designed to finish inside two minutes; this only catches a hang). */
const SCENARIO_TIMEOUT_MS = 300_000;
/** With --scale (the RAG scenario's 1M-chunk step is designed to finish inside 15 minutes). */
const SCALE_TIMEOUT_MS = 1_200_000;

interface Outcome {
  id: string;
  number: number;
  title: string;
  status: 'ok' | 'failed' | 'skipped';
  seconds: number;
  error?: string;
  result?: ScenarioResult;
}

const USAGE = `usage: npm run bench -- [SCENARIO...] [--duration SECONDS] [--quick] [--profile]

scenarios (default: all, in this order):
${SCENARIOS.map((scenario) => `  ${String(scenario.number).padStart(2)}  ${scenario.id.padEnd(18)} ${scenario.title}`).join('\n')}

  --duration S  seconds per measured load step (default 5)
  --quick       shorter steps and smaller stream counts (checks the harness, figures are rough)
  --profile     start the server under test with --cpu-prof (bench/results/profiles/<scenario>/)
  --scale       add the largest steps: the RAG scenario's 1M-chunk index (up to 15 minutes)
  --update-docs replace the results section of docs/benchmarks.md with this run (full runs only)
`;

const DOCS_START = '<!-- bench:results:start -->';
const DOCS_END = '<!-- bench:results:end -->';

/** Puts this run's Markdown between the markers in docs/benchmarks.md. */
function updateDocs(markdown: string): void {
  const path = join(REPO_ROOT, 'docs', 'benchmarks.md');
  const text = readFileSync(path, 'utf8');
  const start = text.indexOf(DOCS_START);
  const end = text.indexOf(DOCS_END);
  if (start < 0 || end < start) throw new Error(`docs/benchmarks.md has no ${DOCS_START} … ${DOCS_END} section`);
  writeFileSync(path, `${text.slice(0, start + DOCS_START.length)}\n${markdown}${text.slice(end)}`);
}

function parseArgs(argv: string[]): { selected: Scenario[]; options: RunOptions; updateDocs: boolean } | undefined {
  const options: RunOptions = { duration: 5, quick: false, profileDir: undefined, scale: false };
  let docs = false;
  const wanted: string[] = [];
  for (let index = 0; index < argv.length; index += 1) {
    const arg = argv[index]!;
    if (arg === '--help' || arg === '-h') return undefined;
    if (arg === '--quick') options.quick = true;
    else if (arg === '--scale') options.scale = true;
    else if (arg === '--update-docs') docs = true;
    else if (arg === '--profile') options.profileDir = join(REPO_ROOT, 'bench', 'results', 'profiles');
    else if (arg === '--duration') {
      const value = Number(argv[++index]);
      if (!Number.isFinite(value) || value <= 0 || value > 30) throw new Error('--duration takes seconds between 1 and 30');
      options.duration = value;
    } else wanted.push(arg);
  }
  if (options.quick && !argv.includes('--duration')) options.duration = 2;
  const selected =
    wanted.length === 0
      ? SCENARIOS
      : wanted.map((name) => {
          const found = SCENARIOS.find((scenario) => scenario.id === name || String(scenario.number) === name);
          if (!found) throw new Error(`unknown scenario "${name}"`);
          return found;
        });
  if (docs && (wanted.length > 0 || options.quick)) throw new Error('--update-docs needs a full run (all scenarios, no --quick)');
  return { selected, options, updateDocs: docs };
}

async function runOne(scenario: Scenario, options: RunOptions): Promise<Outcome> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const result = await Promise.race([
      scenario.run(options),
      new Promise<never>((_, reject) => {
        const limit = options.scale ? SCALE_TIMEOUT_MS : SCENARIO_TIMEOUT_MS;
        timer = setTimeout(() => reject(new Error(`timed out after ${limit / 1000} s`)), limit);
      }),
    ]);
    const skipped = result.rows.length === 0 && result.notes.some((note) => note.startsWith('skipped'));
    const deaths = takeUnexpectedExits();
    if (deaths.length > 0) result.notes.push(...deaths.map((death) => `server died during the scenario: ${death}`));
    return {
      id: scenario.id,
      number: scenario.number,
      title: scenario.title,
      status: skipped ? 'skipped' : 'ok',
      seconds: (performance.now() - started) / 1000,
      result,
    };
  } catch (error) {
    const deaths = takeUnexpectedExits();
    const message = [...deaths, (error as Error).stack ?? String(error)].join('\n');
    return {
      id: scenario.id,
      number: scenario.number,
      title: scenario.title,
      status: 'failed',
      seconds: (performance.now() - started) / 1000,
      error: message,
    };
  } finally {
    clearTimeout(timer);
    // A scenario that failed half-way may leave children behind: stop them by pid.
    await stopAllChildren();
  }
}

function goalLine(goal: GoalCheck): string {
  const verdict = goal.met === null ? 'n/a' : goal.met ? 'met' : 'MISSED';
  return `${goal.goal}: ${goal.measured} (${verdict})${goal.note ? ` ${goal.note}` : ''}`;
}

/** Renders the whole run as Markdown (the source of the table in docs/benchmarks.md). */
function renderMarkdown(machine: MachineInfo, outcomes: Outcome[]): string {
  const parts: string[] = [];
  parts.push(`Run ${machine.date} · commit ${machine.commit ?? 'n/a'}${machine.dirty ? ' (uncommitted changes)' : ''}`);
  parts.push('');
  parts.push(
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memory_gib} GiB, ${machine.kernel}, Node ${machine.node}; load average ${machine.load_average.join(' / ')} at the start. ${machine.placement}. Load generators: ${machine.load_generators.join(', ')}.`,
  );
  parts.push('');
  parts.push('| goal | measured | verdict |');
  parts.push('| --- | --- | --- |');
  for (const outcome of outcomes) {
    for (const goal of outcome.result?.goals ?? []) {
      parts.push(
        `| ${goal.goal} | ${goal.measured}${goal.note ? ` (${goal.note})` : ''} | ${goal.met === null ? 'n/a' : goal.met ? 'met' : '**missed**'} |`,
      );
    }
  }
  for (const outcome of outcomes) {
    parts.push('');
    parts.push(`### ${outcome.number}. ${outcome.title} (${outcome.status}, ${outcome.seconds.toFixed(0)} s)`);
    parts.push('');
    if (outcome.error) parts.push(`\`\`\`\n${outcome.error.split('\n').slice(0, 6).join('\n')}\n\`\`\``);
    if (outcome.result) {
      const table = markdownTable(outcome.result.rows);
      if (table) parts.push(table);
      if (outcome.result.notes.length > 0) {
        parts.push('');
        for (const note of outcome.result.notes) parts.push(`- ${note}`);
      }
    }
  }
  return `${parts.join('\n')}\n`;
}

async function main(): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`bench: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (!parsed) {
    process.stdout.write(USAGE);
    return 0;
  }
  const { selected, options, updateDocs: docs } = parsed;
  pinSelfToLoadCpu();
  const machine = machineInfo();
  process.stdout.write(
    `machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memory_gib} GiB, ${machine.kernel}, node ${machine.node}, load average ${machine.load_average.join(' ')}\n`,
  );
  process.stdout.write(
    `placement: ${machine.placement}\nload: ${machine.load_generators.join(', ')}\ncommit: ${machine.commit ?? 'n/a'}${machine.dirty ? ' (dirty)' : ''}\n\n`,
  );

  const outcomes: Outcome[] = [];
  for (const scenario of selected) {
    process.stdout.write(`== ${scenario.number}. ${scenario.title} ==\n`);
    // One profile folder per scenario, so a profile says which load produced it.
    const outcome = await runOne(scenario, {
      ...options,
      profileDir: options.profileDir ? join(options.profileDir, scenario.id) : undefined,
    });
    outcomes.push(outcome);
    if (outcome.result) {
      process.stdout.write(`${formatTable(outcome.result.rows)}\n`);
      for (const goal of outcome.result.goals) process.stdout.write(`goal  ${goalLine(goal)}\n`);
      for (const note of outcome.result.notes) process.stdout.write(`note  ${note}\n`);
    }
    if (outcome.error) process.stdout.write(`FAILED: ${outcome.error}\n`);
    process.stdout.write(`(${outcome.status}, ${outcome.seconds.toFixed(1)} s)\n\n`);
    writeResult(scenario.id, { machine, options, ...outcome });
  }
  const summary = { machine, options, outcomes };
  writeResult('latest', summary);
  writeResult(`run-${machine.date.replace(/[:.]/g, '-')}`, summary);
  const markdown = renderMarkdown(machine, outcomes);
  writeFileSync(join(REPO_ROOT, 'bench', 'results', 'latest.md'), markdown);
  process.stdout.write('results: bench/results/latest.json, bench/results/latest.md\n');
  if (docs) {
    updateDocs(markdown);
    process.stdout.write('docs/benchmarks.md updated from this run\n');
  }
  return outcomes.some((outcome) => outcome.status === 'failed') ? 1 : 0;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killAllChildrenNow();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  });
}
process.once('exit', () => killAllChildrenNow());
process.exitCode = await main();
// Load-generator sockets and timers may linger; the run is over.
process.exit(process.exitCode);
