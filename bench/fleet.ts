/**
 * Fleet benchmark on the sandbox: for each (kind, fleet size), a RunnerDeployment or RunnerSet of
 * ephemeral runners under a steady job load for a fixed time, then one JSON line of figures.
 *
 *   node bench/fleet.ts [--runs runnerdeployment:100,runnerset:100,runnerdeployment:1000]
 *   node bench/fleet.ts [--kinds runnerdeployment,runnerset] [--runners 100,1000] [--seconds 120] [--json]
 *   node bench/fleet.ts --profile …   also a CPU profile and a heap snapshot of paddock per run, in
 *                                     out/profile/fleet-<kind>-<runners>/ (open them in Chrome DevTools)
 *
 * `--runs` names each run; otherwise every kind runs at every size (src/sandbox/fleet-runs.ts). The
 * default is the runs above: both kinds at 100 runners and the RunnerDeployment at 1,000. RunnerSet at
 * 1,000 is left out of the default to keep `make bench` to a few minutes on 2 cores; ask for it with
 * `--runs runnerset:1000`.
 *
 * Replacement latency is the same measure for both kinds: from an ephemeral runner exiting after its
 * job to the next new runner pod the simulated kubelet sees (the pod object created, not yet Running).
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { fleetRuns } from '../src/sandbox/fleet-runs.ts';
import { Sandbox } from '../src/sandbox/sandbox.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string' },
    kinds: { type: 'string' },
    runners: { type: 'string' },
    seconds: { type: 'string', default: '120' },
    json: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    /** Node/V8 flags for paddock, e.g. --node-flags=--max-semi-space-size=2. */
    'node-flags': { type: 'string' },
  },
});

const seconds = Number(values.seconds);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** With --profile: where paddock's CPU profile (written when it exits) and heap snapshot go. */
function profileDir(kind: string, runners: number): string | undefined {
  return values.profile ? path.join(root, 'out', 'profile', `fleet-${kind}-${runners}`) : undefined;
}

for (const { kind, runners } of fleetRuns(values)) {
  const started = Date.now();
  const sandbox = new Sandbox({
    kind,
    runners,
    // Keep about half of the fleet busy: jobs of ~30 s arriving at runners per minute.
    jobRate: runners,
    jobDurationMs: 30_000,
    // The same jobs every run, so that two runs' spend and latency can be compared.
    workloadSeed: runners,
    ephemeral: true,
    startupDelayMs: 2000,
    simulate: true,
    chaos: {
      podKillsPerMinute: 0,
      github5xxRate: 0,
      rateLimitPerHour: undefined,
      nodeLossAfterMs: undefined,
    },
    log: (l) => {
      if (!values.json) process.stderr.write(`${l}\n`);
    },
    paddockArgs: ['--log-level', 'warn'],
    profileDir: profileDir(kind, runners),
    nodeFlags: values['node-flags'] ? String(values['node-flags']).split(' ').filter(Boolean) : undefined,
  });
  let result: Record<string, unknown>;
  try {
    await sandbox.start();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const s = await sandbox.summarize();
    const heapSnapshot = values.profile ? await sandbox.heapSnapshot() : undefined;
    result = {
      kind,
      runners,
      githubRateLimitedRequestsPerRunnerHour: s.github.rateLimitedRequestsPerRunnerHour,
      githubRequestsByRoute: s.github.byRoute,
      githubListingsByReason: s.github.listingsByReason ?? null,
      replacementLatencyMsP50: s.replacementLatencyMs.p50,
      replacementLatencyMsP99: s.replacementLatencyMs.p99,
      jobsCancelledByController: s.jobs.cancelledByController,
      leakedRunners: s.leakedRunners,
      controllerRssMiB: s.controller.rssMiB,
      controllerRssSteadyMiB: s.controller.rssSteadyMiB ?? null,
      controllerRssPeakMiB: s.controller.rssPeakMiB ?? null,
      controllerRssAnonMiB: s.controller.rssAnonMiB ?? null,
      controllerRssFileMiB: s.controller.rssFileMiB ?? null,
      controllerCpuSeconds: s.controller.cpuSeconds ?? null,
      // The machine's load over the last minute: latency figures on a shared 2-core machine depend on it.
      loadAverage1m: Math.round(os.loadavg()[0]! * 100) / 100,
      cpus: os.cpus().length,
      jobsCompleted: s.jobs.completed,
      // Queued but not started when the run ends: the fleet falling behind the load.
      jobsWaitingAtEnd: s.jobs.created - s.jobs.started,
      replacements: s.replacementLatencyMs.count,
      readyAtEnd: s.owner?.ready ?? null,
      measuredSeconds: s.durationSeconds,
      wallSeconds: Math.round((Date.now() - started) / 1000),
      ...(heapSnapshot ? { profile: { heapSnapshot, cpuProfileDir: profileDir(kind, runners) } } : {}),
    };
  } finally {
    await sandbox.stop();
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
