/**
 * Autoscaling benchmarks on the sandbox (issue 12), one JSON line each:
 *
 *   burst      100 jobs queued at once against a RunnerDeployment at zero, webhook-driven: from each
 *              workflow_job delivery to a runner pod created (the k-th pod against the k-th delivery),
 *              p50/p99/max, and when the 100th pod existed.
 *   pull       TotalNumberOfQueuedAndInProgressWorkflowRuns over 10 repositories with ARC's 1 min sync
 *              period under 0.5 and 6 jobs a minute: rate-limited requests per HRA-hour, against what ARC's
 *              algorithm spends on the same demand (both statuses of every repository each sync,
 *              plus one job list per queued or running run).
 *   delivery   webhook-driven supply against demand with clean deliveries, then with 10 % dropped and
 *              10 % duplicated, with and without the repair pass: idle runner-minutes and queued
 *              job-minutes per job.
 *
 *   node bench/autoscale.ts [--only burst,pull,delivery] [--seconds 240] [--json]
 */
import { parseArgs } from 'node:util';
import { SANDBOX_ORG, Sandbox, type SandboxOptions } from '../src/sandbox/sandbox.ts';

const { values } = parseArgs({
  options: {
    only: { type: 'string', default: 'burst,pull,delivery' },
    seconds: { type: 'string', default: '240' },
    json: { type: 'boolean', default: false },
  },
});
const only = new Set(String(values.only).split(','));
const seconds = Number(values.seconds);
const say = (l: string) => {
  if (!values.json) process.stderr.write(`${l}\n`);
};
/** paddock's log level (its log file is named on stderr): PADDOCK_LOG_LEVEL=debug to see the timeline. */
const LOG_LEVEL = process.env.PADDOCK_LOG_LEVEL ?? 'warn';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(xs: number[], p: number): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? null;
}

function sandbox(o: Partial<SandboxOptions>): Sandbox {
  return new Sandbox({
    kind: 'RunnerDeployment',
    runners: 100,
    jobRate: 0.001,
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
    log: say,
    paddockArgs: ['--log-level', LOG_LEVEL],
    // Every run gets the same jobs: spend per hour follows demand, and an unseeded 4-minute window at
    // 0.5 jobs a minute saw anywhere from 2 to 6 jobs.
    workloadSeed: 14,
    ...o,
  });
}

async function burst(): Promise<Record<string, unknown>> {
  const sb = sandbox({ autoscale: 'webhook', runners: 100, scaleDownDelaySeconds: 600 });
  try {
    await sb.start();
    await sleep(3000); // the HRA seen by paddock's caches
    const t0 = Date.now();
    for (let i = 0; i < 100; i++) {
      sb.double.createJob({ owner: SANDBOX_ORG, repo: 'app', labels: ['self-hosted', 'sandbox'] });
    }
    const seen = () => sb.events.filter((e) => e.type === 'pod-seen' && e.at >= t0).map((e) => e.at);
    const deadline = Date.now() + 120_000;
    while (seen().length < 100 && Date.now() < deadline) await sleep(200);
    const pods = seen().sort((a, b) => a - b);
    const scraped = await fetch(`${sb.metricsUrl}/metrics`).then((r) => r.text());
    const writes = Object.fromEntries(
      [...scraped.matchAll(/paddock_capacity_reservation_writes_total\{result="(\w+)"\} (\d+)/g)].map((m) => [
        m[1],
        Number(m[2]),
      ]),
    );
    const sent = [...sb.webhooks!.queuedSentAt.values()].filter((t) => t >= t0).sort((a, b) => a - b);
    const latencies = pods.slice(0, sent.length).map((p, k) => p - sent[k]!);
    const answered = [...sb.webhooks!.queuedAnsweredAt.entries()].map(
      ([job, at]) => at - sb.webhooks!.queuedSentAt.get(job)!,
    );
    return {
      bench: 'autoscale-burst',
      jobs: 100,
      deliveries: sent.length,
      podsCreated: pods.length,
      deliveryToPodMsP50: percentile(latencies, 50),
      deliveryToPodMsP99: percentile(latencies, 99),
      deliveryToPodMsMax: percentile(latencies, 100),
      // How long paddock took to answer the deliveries (GitHub waits at most 10 s).
      deliveryAnsweredMsP50: percentile(answered, 50),
      deliveryAnsweredMsP99: percentile(answered, 99),
      lastPodAfterMs: pods.length ? pods[pods.length - 1]! - t0 : null,
      reservationWrites: writes,
      controllerRssMiB: sb.summary().controller.rssMiB,
    };
  } finally {
    await sb.stop();
  }
}

async function pull(jobsPerMinute: number): Promise<Record<string, unknown>> {
  const repos = 10;
  const sb = sandbox({
    autoscale: 'pull',
    runners: 30,
    repositories: repos,
    jobRate: jobsPerMinute,
    jobDurationMs: 30_000,
    scaleDownDelaySeconds: 60,
    paddockArgs: ['--log-level', LOG_LEVEL, '--sync-period', '1m'],
  });
  try {
    await sb.start();
    // The first evaluation lists every repository once (a one-off at start-up): measure after it.
    await sleep(75_000);
    const t0 = Date.now();
    const liveRunSamples: number[] = [];
    while (Date.now() - t0 < seconds * 1000) {
      await sleep(10_000);
      let live = 0;
      for (const r of sb.double.model.runs.values()) {
        const s = sb.double.model.runStatus(r.id).status;
        if (s === 'queued' || s === 'in_progress') live++;
      }
      liveRunSamples.push(live);
    }
    const hours = (Date.now() - t0) / 3_600_000;
    const metricRoutes = new Set([
      'GET /repos/{owner}/{repo}/actions/runs',
      'GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs',
    ]);
    const metric = sb.double.log.filter((e) => e.at >= t0 && metricRoutes.has(e.route));
    const counted = metric.filter((e) => e.countedAgainstRateLimit).length;
    const avgLive = liveRunSamples.reduce((a, b) => a + b, 0) / Math.max(1, liveRunSamples.length);
    // ARC, each 1 min sync: queued and in_progress lists of every repository, and every live run's jobs.
    const arcPerHour = 60 * (2 * repos + avgLive);
    const perHour = counted / hours;
    const s = await sb.summarize();
    return {
      bench: 'autoscale-pull-spend',
      repositories: repos,
      syncPeriod: '1m',
      jobsPerMinute,
      measuredSeconds: Math.round(hours * 3600),
      requests: metric.length,
      notModified: metric.filter((e) => e.notModified).length,
      rateLimitedPerHraHour: Math.round(perHour),
      arcRateLimitedPerHraHour: Math.round(arcPerHour),
      shareOfArc: Math.round((perHour / arcPerHour) * 1000) / 1000,
      avgLiveRuns: Math.round(avgLive * 10) / 10,
      jobsCompleted: s.jobs.completed,
      queuedJobMinutesPerJob: s.autoscale
        ? Math.round((s.autoscale.queuedJobMinutes / Math.max(1, s.jobs.created)) * 100) / 100
        : null,
    };
  } finally {
    await sb.stop();
  }
}

async function delivery(chaos: boolean, repair = true): Promise<Record<string, unknown>> {
  const sb = sandbox({
    autoscale: 'webhook',
    runners: 40,
    jobRate: 30,
    jobDurationMs: 20_000,
    scaleDownDelaySeconds: 30,
    webhookChaos: chaos ? { dropRate: 0.1, duplicateRate: 0.1 } : undefined,
    paddockArgs: ['--log-level', LOG_LEVEL, ...(repair ? [] : ['--reservation-repair-interval', '0'])],
  });
  try {
    await sb.start();
    await sleep(seconds * 1000);
    const s = await sb.summarize();
    const a = s.autoscale!;
    const jobs = Math.max(1, s.jobs.created);
    return {
      bench: 'autoscale-deliveries',
      deliveries: chaos ? '10% dropped, 10% duplicated' : 'all delivered once',
      repairPass: repair,
      measuredSeconds: s.durationSeconds,
      jobs: s.jobs.created,
      jobsStarted: s.jobs.started,
      jobsWaitingAtEnd: s.jobs.created - s.jobs.started,
      idleRunnerMinutes: a.idleRunnerMinutes,
      queuedJobMinutes: a.queuedJobMinutes,
      idleRunnerMinutesPerJob: Math.round((a.idleRunnerMinutes / jobs) * 100) / 100,
      queuedSecondsPerJob: Math.round(((a.queuedJobMinutes * 60) / jobs) * 10) / 10,
      reservationsAtEnd: a.reservations,
      deliveriesSent: a.deliveries?.sent ?? 0,
      deliveriesDropped: a.deliveries?.dropped ?? 0,
      deliveriesDuplicated: a.deliveries?.duplicated ?? 0,
      jobsCancelledByController: s.jobs.cancelledByController,
      leakedRunners: s.leakedRunners,
    };
  } finally {
    await sb.stop();
  }
}

const runs: [string, () => Promise<Record<string, unknown>>][] = [
  ['burst', burst],
  // A quiet hour's demand and a busy one's: each run of a repository changes its lists.
  ['pull', () => pull(0.5)],
  ['pull', () => pull(6)],
  ['delivery', () => delivery(false)],
  ['delivery', () => delivery(true)],
  // What the repair pass is worth: the same chaos without it (ARC has none).
  ['delivery', () => delivery(true, false)],
];
for (const [name, run] of runs) {
  if (!only.has(name)) continue;
  process.stdout.write(`${JSON.stringify(await run())}\n`);
}
