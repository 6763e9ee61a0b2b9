/**
 * Fleet benchmark on the sandbox: for each fleet size, a RunnerSet of ephemeral runners under a
 * steady job load for a fixed time, then one JSON line of figures.
 *
 *   node bench/fleet.ts [--runners 100,1000] [--seconds 120] [--json]
 */
import { parseArgs } from 'node:util';
import { Sandbox } from '../src/sandbox/sandbox.ts';

const { values } = parseArgs({
  options: {
    runners: { type: 'string', default: '100,1000' },
    seconds: { type: 'string', default: '120' },
    json: { type: 'boolean', default: false },
  },
});
const sizes = values.runners.split(',').map(Number);
const seconds = Number(values.seconds);

for (const runners of sizes) {
  const started = Date.now();
  const sandbox = new Sandbox({
    runners,
    // Keep about half of the fleet busy: jobs of ~30 s arriving at runners per minute.
    jobRate: runners,
    jobDurationMs: 30_000,
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
    // The seed's defaults, except a registration re-check interval that fits a short run.
    paddockArgs: ['--log-level', 'warn'],
  });
  let result: Record<string, unknown>;
  try {
    await sandbox.start();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const s = sandbox.summary();
    result = {
      runners,
      githubRateLimitedRequestsPerRunnerHour: s.github.rateLimitedRequestsPerRunnerHour,
      githubRequestsByRoute: s.github.byRoute,
      replacementLatencyMsP50: s.replacementLatencyMs.p50,
      replacementLatencyMsP99: s.replacementLatencyMs.p99,
      jobsCancelledByController: s.jobs.cancelledByController,
      leakedRunners: s.leakedRunners,
      controllerRssMiB: s.controller.rssMiB,
      jobsCompleted: s.jobs.completed,
      replacements: s.replacementLatencyMs.count,
      measuredSeconds: s.durationSeconds,
      wallSeconds: Math.round((Date.now() - started) / 1000),
    };
  } finally {
    await sandbox.stop();
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
