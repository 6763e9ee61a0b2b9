/**
 * Cold start on a live fleet: the sandbox brings a RunnerDeployment or RunnerSet of N idle runners
 * (registered, pods Running; a RunnerSet's are N StatefulSets of one pod each) up under paddock,
 * then paddock is stopped and started again, as after a crash or an upgrade. One JSON line per run:
 * spawn → first 200 on /readyz (informer caches synced), the GitHub requests of the first 10 s after
 * that (a restart must not cost a burst: about one runner listing per scope), and RSS after them.
 * paddock is restarted `--restarts` times (default 5); the figures are the medians, and the
 * samples are listed (one start is noisy on a shared 2-core machine).
 *
 *   node bench/cold-start.ts [--runs runnerdeployment:100,runnerset:1000] [--restarts N] [--json] [--profile]
 *     [--node-flags "..."]   (Node/V8 flags for paddock instead of the image's, to weigh one)
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { fleetRuns } from '../src/sandbox/fleet-runs.ts';
import { Sandbox } from '../src/sandbox/sandbox.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: 'runnerdeployment:100,runnerset:1000' },
    json: { type: 'boolean', default: false },
    restarts: { type: 'string', default: '5' },
    profile: { type: 'boolean', default: false },
    'node-flags': { type: 'string' },
  },
});
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const say = (l: string) => {
  if (!values.json) process.stderr.write(`${l}\n`);
};

for (const { kind, runners } of fleetRuns(values)) {
  const sandbox = new Sandbox({
    kind,
    runners,
    jobRate: 0,
    jobDurationMs: 30_000,
    ephemeral: false,
    startupDelayMs: 0,
    simulate: true,
    chaos: {
      podKillsPerMinute: 0,
      github5xxRate: 0,
      rateLimitPerHour: undefined,
      nodeLossAfterMs: undefined,
    },
    log: say,
    nodeFlags: values['node-flags'] ? values['node-flags'].split(' ').filter(Boolean) : undefined,
    paddockArgs: ['--log-level', 'warn'],
    profileDir: values.profile
      ? path.join(root, 'out', 'profile', `cold-start-${kind}-${runners}`)
      : undefined,
  });
  const began = Date.now();
  try {
    await sandbox.start();
    // The whole fleet up and idle first: a restart of paddock over a running fleet is what is measured.
    for (const deadline = Date.now() + 900_000; ; ) {
      const owner = await sandbox.ownerFigures();
      if ((owner.ready ?? 0) >= runners) break;
      if (Date.now() > deadline)
        throw new Error(`${kind} ${runners}: only ${owner.ready} ready after 15 min`);
      await new Promise((r) => setTimeout(r, 2000));
    }
    const fleetUpSeconds = Math.round((Date.now() - began) / 1000);
    say(`[cold-start] ${kind} ${runners}: fleet up in ${fleetUpSeconds} s; restarting paddock`);
    const samples = [];
    for (let i = 0; i < Math.max(1, Number(values.restarts)); i++)
      samples.push(await sandbox.restartPaddock());
    const median = <T>(xs: T[], key: (x: T) => number) =>
      [...xs].sort((a, b) => key(a) - key(b))[Math.floor(xs.length / 2)]!;
    const r = median(samples, (x) => x.readyMs);
    const heapSnapshot = values.profile ? await sandbox.heapSnapshot() : undefined;
    process.stdout.write(
      `${JSON.stringify({
        bench: 'cold-start',
        kind,
        runners,
        startToReadyMs: r.readyMs,
        startToReadyMsSamples: samples.map((x) => x.readyMs),
        // The median start's own record of its steps (ms since its process began).
        startupStepsMs: r.startupStepsMs,
        githubRequestsFirst10s: median(samples, (x) => x.githubRequests).githubRequests,
        githubRequestsFirst10sMax: Math.max(...samples.map((x) => x.githubRequests)),
        githubRequestsByRoute: r.githubRequestsByRoute,
        rssAfter10sMiB: r.rssAfterSettleMiB,
        fleetUpSeconds,
        loadAverage1m: Math.round(os.loadavg()[0]! * 100) / 100,
        cpus: os.cpus().length,
        ...(values['node-flags'] ? { nodeFlags: values['node-flags'] } : {}),
        ...(heapSnapshot ? { profile: { heapSnapshot } } : {}),
      })}\n`,
    );
  } finally {
    await sandbox.stop();
  }
}
