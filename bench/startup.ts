/**
 * Cold start and idle memory of the `paddock run` binary on the test control plane (CRDs installed
 * beforehand, default GitHub credentials on the GitHub double, no webhook): the time from spawning
 * the process to its first 200 on /readyz, and its resident set (VmRSS) and peak resident set (VmHWM)
 * from /proc `--settle` seconds after that, with no objects to manage. Each figure is the median of
 * `--runs` starts (default 3). The binary runs the compiled dist/ when it exists, else the sources.
 *
 * Also the floor under any Node.js controller here: a bare `node` process that only keeps an HTTPS
 * connection to the API server busy and serves HTTP (no paddock code, no npm module), measured the
 * same way. paddock's memory above that floor is what its own code and dependencies cost.
 *
 *   node bench/startup.ts [--json] [--runs N] [--settle SECONDS] [--bin path/to/paddock.js] [--node-flags "..."]
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PADDOCK_NODE_FLAGS, PADDOCK_PROCESS_ENV } from '../src/cli/node-flags.ts';
import { installCrds } from '../src/cli/run.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { freePort, startControlPlane } from '../src/testenv/control-plane.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { startManagedProcess } from '../src/testenv/processes.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    runs: { type: 'string', default: '3' },
    settle: { type: 'string', default: '10' },
    bin: { type: 'string', default: path.join(root, 'bin/paddock.js') },
    /** Node/V8 flags for paddock instead of the image's (PADDOCK_NODE_FLAGS), e.g. --node-flags=--jitless. */
    'node-flags': { type: 'string' },
  },
});
const runs = Number(values.runs);
const settleMs = Number(values.settle) * 1000;
const say = (s: string) => {
  if (!values.json) process.stderr.write(`${s}\n`);
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (kib: number) => Math.round((kib / 1024) * 10) / 10;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

/** A `/proc/<pid>/status` field in KiB. */
async function statusKiB(pid: number, field: string): Promise<number> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]);
}

async function once(kubeconfig: string, github: { url: string; token: string }, logFile: string) {
  const port = await freePort();
  const started = performance.now();
  const paddock = startManagedProcess({
    name: 'paddock',
    command: process.execPath,
    args: [
      ...(values['node-flags']
        ? String(values['node-flags']).split(' ').filter(Boolean)
        : PADDOCK_NODE_FLAGS),
      values.bin,
      'run',
      '--metrics-addr',
      `127.0.0.1:${port}`,
      '--health-probe-addr',
      '0',
      '--webhook-addr',
      '0',
    ],
    logFile,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...PADDOCK_PROCESS_ENV,
      KUBECONFIG: kubeconfig,
      GITHUB_TOKEN: github.token,
      GITHUB_URL: github.url,
      LOG_LEVEL: 'warn',
    },
  });
  try {
    for (;;) {
      if (!paddock.running()) {
        throw new Error(`paddock run exited ${await paddock.exited}: ${await readFile(logFile, 'utf8')}`);
      }
      if (performance.now() - started > 60_000) throw new Error(`not ready after 60 s (log ${logFile})`);
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`)
        .then((r) => r.status === 200)
        .catch(() => false);
      if (ok) break;
      await sleep(10);
    }
    const readyMs = performance.now() - started;
    await sleep(settleMs);
    const rollup = await readFile(`/proc/${paddock.pid}/smaps_rollup`, 'utf8');
    const anonKiB = Number(/^Anonymous:\s+(\d+) kB/m.exec(rollup)?.[1] ?? NaN);
    return {
      readyMs,
      anonKiB,
      rssKiB: await statusKiB(paddock.pid, 'VmRSS'),
      hwmKiB: await statusKiB(paddock.pid, 'VmHWM'),
    };
  } finally {
    await paddock.stop();
  }
}

/** What `node` itself needs to talk HTTPS to the API server and serve HTTP, in its resident set. */
const FLOOR_SCRIPT = `
import https from 'node:https';
import http from 'node:http';
const server = http.createServer((q, r) => r.end('ok')).listen(0, '127.0.0.1');
const agent = new https.Agent({ keepAlive: true });
const poll = () => https.get(new URL('/readyz', process.env.SERVER), { agent, rejectUnauthorized: false }, (r) => {
  let body = '';
  r.on('data', (d) => { body += d; });
  r.on('end', () => { JSON.stringify({ body, status: r.statusCode }); });
}).on('error', () => {});
poll();
setInterval(poll, 200);
server.on('listening', () => http.get('http://127.0.0.1:' + server.address().port, (r) => r.resume()));
`;

async function floor(server: string, logFile: string) {
  const child = startManagedProcess({
    name: 'node-floor',
    command: process.execPath,
    args: ['--input-type=module', '-e', FLOOR_SCRIPT],
    logFile,
    env: { PATH: process.env.PATH, SERVER: server },
  });
  try {
    await sleep(settleMs);
    if (!child.running()) throw new Error(`the floor process exited: ${await readFile(logFile, 'utf8')}`);
    return await statusKiB(child.pid, 'VmRSS');
  } finally {
    await child.stop();
  }
}

const plane = await startControlPlane({ controllerManager: false, log: say });
const double = new GitHubDouble();
try {
  // Installed once here (as a chart does): the figures are paddock's own start, not CRD establishment.
  const http = new KubeHttp(plane.kubeConfig);
  await installCrds(http);
  http.close();
  await double.start();
  double.addOrg('acme');
  const github = { url: double.apiUrl, token: double.addToken().token };
  const results = [];
  for (let i = 0; i < runs; i++) {
    const r = await once(plane.kubeconfigPath, github, path.join(plane.dataDir, `paddock-${i}.log`));
    say(
      `run ${i + 1}: ready in ${Math.round(r.readyMs)} ms, VmRSS ${mib(r.rssKiB)} MiB (anonymous ${mib(r.anonKiB)}), VmHWM ${mib(r.hwmKiB)} MiB`,
    );
    results.push(r);
  }
  const floorKiB = await floor(plane.server, path.join(plane.dataDir, 'floor.log'));
  say(`floor (bare node: HTTPS client and HTTP server): VmRSS ${mib(floorKiB)} MiB`);
  const result = {
    bench: 'startup',
    runs,
    startToReadyMs: Math.round(median(results.map((r) => r.readyMs))),
    idleRssMiB: mib(median(results.map((r) => r.rssKiB))),
    // The rest of the resident set is file-backed: mostly the node binary's own pages.
    idleAnonymousMiB: mib(median(results.map((r) => r.anonKiB))),
    peakRssMiB: mib(median(results.map((r) => r.hwmKiB))),
    nodeFloorRssMiB: mib(floorKiB),
  };
  if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
  else console.table(result);
} finally {
  await double.stop();
  await plane.stop();
}
