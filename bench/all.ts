/**
 * `make bench`: every benchmark, one after the other (they share the machine's two cores), each
 * printing JSON lines; the lines go to stdout and to bench/results.jsonl (committed with the README, so
 * the table can be checked against the lines it came from), then bench/report.ts rewrites the README's
 * table from them.
 *
 *   node bench/all.ts [--only startup,cold-start,fleet,runtime,github,autoscale] [--profile]
 */
import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    only: { type: 'string', default: 'startup,cold-start,fleet,runtime,github,autoscale' },
    profile: { type: 'boolean', default: false },
  },
});
const only = new Set(String(values.only).split(','));
const profile = values.profile ? ['--profile'] : [];
const BENCHES: [string, string[]][] = [
  ['startup', ['bench/startup.ts', '--json']],
  ['cold-start', ['bench/cold-start.ts', '--json', ...profile]],
  ['fleet', ['bench/fleet.ts', '--json', ...profile]],
  ['runtime', ['bench/runtime.ts', '--json']],
  ['github', ['bench/github.ts', '--json']],
  ['autoscale', ['bench/autoscale.ts', '--json']],
];

// What ships is the compiled dist/ (bin/paddock.js runs it when present): measure that. A dist/ made
// here is removed afterwards, so later tests do not run a stale build.
const hadDist = existsSync(path.join(root, 'dist'));
process.stderr.write('[bench] compiling dist/ (npm run build)\n');
execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
process.on('exit', () => {
  if (!hadDist) rmSync(path.join(root, 'dist'), { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(130));

/**
 * Where each line comes from, recorded on the line: a table assembled from lines of several runs
 * (a partial `--only` run keeps the others') names each line's own commit, day and machine.
 */
function measuredFrom(): { commit: string; machine: string } {
  let commit = 'unknown';
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim();
    commit = git('rev-parse', '--short', 'HEAD');
    // The bench's own outputs do not count: they change as it runs.
    const changed = git(
      'status',
      '--porcelain',
      '--untracked-files=no',
      '--',
      '.',
      ':!bench/results.jsonl',
      ':!README.md',
    );
    if (changed !== '') commit += '+changes';
  } catch {}
  const cpus = os.cpus();
  return {
    commit,
    machine: `${cpus.length} × ${cpus[0]?.model.trim() ?? 'CPU'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Linux ${os.release()}, Node.js ${process.versions.node}`,
  };
}

const now = () => new Date().toISOString().slice(0, 16).replace('T', ' ');
// Taken once, before any line is written: the code measured is the code at the start.
const provenance = measuredFrom();
const results = path.join(root, 'bench', 'results.jsonl');
// A partial run (--only) keeps the other benchmarks' last lines, so the table stays whole.
const kept = existsSync(results)
  ? readFileSync(results, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .filter((l) => {
        const suite = (JSON.parse(l) as { suite?: unknown }).suite;
        return typeof suite === 'string' && !only.has(suite);
      })
  : [];
writeFileSync(results, kept.map((l) => `${l}\n`).join(''));
let failed = 0;
for (const [name, args] of BENCHES) {
  if (!only.has(name)) continue;
  process.stderr.write(`[bench] ${name}: node ${args.join(' ')}\n`);
  const code = await new Promise<number>((resolve) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
    let rest = '';
    child.stdout.on('data', (d: Buffer) => {
      rest += d.toString();
      const lines = rest.split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) {
        process.stdout.write(`${line}\n`);
        if (line.startsWith('{')) {
          const measured = {
            suite: name,
            ...(JSON.parse(line) as object),
            ...provenance,
            measuredAt: now(),
          };
          appendFileSync(results, `${JSON.stringify(measured)}\n`);
        }
      }
    });
    child.on('exit', (c) => resolve(c ?? 1));
  });
  if (code !== 0) {
    failed++;
    process.stderr.write(`[bench] ${name} failed with exit code ${code}\n`);
  }
}
const report = spawn(process.execPath, ['bench/report.ts', results], { cwd: root, stdio: 'inherit' });
const reportCode = await new Promise<number>((resolve) => report.on('exit', (c) => resolve(c ?? 1)));
process.exit(failed > 0 || reportCode !== 0 ? 1 : 0);
