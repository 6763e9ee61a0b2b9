import {
  formatOwnerFigures,
  parseAutoscaleMode,
  parseSandboxKind,
  SANDBOX_KINDS,
} from '../sandbox/sample.ts';
import { SANDBOX_NAMESPACE, Sandbox, type SandboxSummary } from '../sandbox/sandbox.ts';
import { Soak } from '../sandbox/soak.ts';
import { FAULT_KINDS, type FaultKind } from '../sandbox/soak-schedule.ts';
import { type FlagSpec, parseFlags, renderHelp, UsageError } from './flags.ts';

export const SANDBOX_FLAGS: FlagSpec[] = [
  {
    group: 'Fleet',
    name: 'kind',
    type: 'string',
    default: 'runnerdeployment',
    help: 'what owns the sample runners: runnerdeployment (Runners, one pod each) or runnerset (a StatefulSet)',
  },
  {
    group: 'Fleet',
    name: 'runners',
    type: 'integer',
    default: '5',
    help: 'runners in the sample RunnerDeployment or RunnerSet',
  },
  {
    group: 'Fleet',
    name: 'static',
    type: 'boolean',
    default: 'false',
    help: 'static runners instead of ephemeral ones',
  },
  {
    group: 'Fleet',
    name: 'startup-delay',
    type: 'duration',
    default: '2s',
    help: 'simulated runner pod start-up time',
  },
  {
    group: 'Fleet',
    name: 'autoscale',
    type: 'string',
    default: '',
    help: 'drive the fleet with a HorizontalRunnerAutoscaler from 0 to --runners: webhook (the GitHub double delivers signed workflow_job events to paddock) or pull (TotalNumberOfQueuedAndInProgressWorkflowRuns)',
  },
  {
    group: 'Workload',
    name: 'repositories',
    type: 'integer',
    default: '1',
    help: 'repositories the jobs are queued in',
  },
  {
    group: 'Workload',
    name: 'job-rate',
    type: 'number',
    default: '20',
    help: 'jobs per minute (Poisson arrivals)',
  },
  {
    group: 'Workload',
    name: 'job-duration',
    type: 'duration',
    default: '15s',
    help: 'mean job duration (uniform ±50 %)',
  },
  {
    group: 'Workload',
    name: 'no-simulator',
    type: 'boolean',
    default: 'false',
    help: 'no node agent and no jobs: just the control plane, the GitHub double and paddock (make run)',
  },
  {
    group: 'Chaos',
    name: 'chaos-pod-kills',
    type: 'number',
    default: '0',
    help: 'runner containers crashed per minute',
  },
  {
    group: 'Chaos',
    name: 'chaos-github-5xx',
    type: 'number',
    default: '0',
    help: 'share of GitHub requests answered 502 (0–1)',
  },
  {
    group: 'Chaos',
    name: 'chaos-rate-limit',
    type: 'integer',
    help: 'squeeze paddock’s GitHub rate limit to this many requests per hour',
  },
  { group: 'Chaos', name: 'chaos-node-loss', type: 'duration', help: 'lose a node after this long' },
  {
    group: 'Chaos',
    name: 'chaos-webhook-drop',
    type: 'number',
    default: '0',
    help: 'share of workflow_job deliveries never sent (0–1; --autoscale webhook)',
  },
  {
    group: 'Chaos',
    name: 'chaos-webhook-duplicate',
    type: 'number',
    default: '0',
    help: 'share of workflow_job deliveries sent twice (0–1; --autoscale webhook)',
  },
  {
    group: 'Soak',
    name: 'soak',
    type: 'boolean',
    default: 'false',
    help: 'the chaos soak: two paddock replicas, a webhook-scaled RunnerDeployment of --runners (up to 1.25×), faults of every kind injected on a seeded schedule while invariants are checked; one JSON summary, exit 1 on any violation (--duration, default 30m)',
  },
  {
    group: 'Soak',
    name: 'seed',
    type: 'integer',
    help: 'with --soak: the seed of the fault schedule and of the jobs (default: random, printed)',
  },
  {
    group: 'Soak',
    name: 'faults',
    type: 'list',
    help: `with --soak: only these fault kinds (repeatable or comma-separated): ${FAULT_KINDS.join(', ')}`,
  },
  {
    group: 'Install',
    name: 'helm',
    type: 'boolean',
    default: 'false',
    help: 'install charts/paddock with Helm and run paddock with the chart’s arguments, ServiceAccounts and RBAC (every request audited; a 403 shows in the summary); at the end, the documented drain and `helm uninstall`',
  },
  {
    group: 'Install',
    name: 'helm-set',
    type: 'list',
    help: 'with --helm: a chart value, key=value (repeatable), e.g. scope.watchNamespace=sandbox',
  },
  {
    group: 'Run',
    name: 'duration',
    type: 'duration',
    default: '0',
    help: 'stop after this long (0: until Ctrl-C)',
  },
  {
    group: 'Run',
    name: 'json',
    type: 'boolean',
    default: 'false',
    help: 'no live view: print one JSON summary at the end',
  },
];

export const SANDBOX_SUMMARY =
  'Runs the whole system locally: a real kube-apiserver, etcd and kube-controller-manager, the GitHub\n' +
  'API double, paddock, a sample RunnerDeployment (or RunnerSet, --kind runnerset) and a simulated node\n' +
  'agent that runs jobs. No cluster and no GitHub account needed. The binaries are built on first use\n' +
  '(several minutes, once).';

function fmtMs(ms: number | null): string {
  return ms === null ? '-' : `${(ms / 1000).toFixed(1)}s`;
}

async function liveView(sandbox: Sandbox, started: number): Promise<string> {
  const http = sandbox.http!;
  const lines: string[] = [];
  const elapsed = Math.round((Date.now() - started) / 1000);
  lines.push(`paddock sandbox — ${elapsed}s — Ctrl-C stops everything`);
  lines.push('');
  lines.push(formatOwnerFigures(await sandbox.ownerFigures()));
  const hra = await sandbox.autoscalerFigures();
  if (hra) {
    const d = sandbox.webhooks?.stats;
    lines.push(
      `HorizontalRunnerAutoscaler (${sandbox.opts.autoscale}): desired ${hra.desired ?? '?'}  reservations ${hra.reservations}` +
        (d
          ? `   deliveries: ${d.sent} sent, ${d.dropped} dropped, ${d.duplicated} duplicated, ${d.failed} failed`
          : ''),
    );
  }
  const pods = await http
    .request<{
      items: { metadata: { name: string; deletionTimestamp?: string }; status?: { phase?: string } }[];
    }>('GET', `/api/v1/namespaces/${SANDBOX_NAMESPACE}/pods`, { query: { labelSelector: 'actions-runner' } })
    .catch(() => ({ items: [] }));
  lines.push('');
  const shown = pods.items.slice(0, 15);
  // RunnerDeployment pods are named <deployment>-<set hash>-<suffix>: wider than a RunnerSet's.
  const width = Math.max(34, ...shown.map((p) => p.metadata.name.length + 2));
  lines.push(`${'POD'.padEnd(width)}${'PHASE'.padEnd(12)}${'RUNNER'.padEnd(13)}JOB`);
  for (const p of shown) {
    const sim = sandbox.agent?.pod(p.metadata.name);
    const phase = p.metadata.deletionTimestamp ? 'Terminating' : (p.status?.phase ?? 'Pending');
    const runner = sim ? (sim.lost ? 'node lost' : sim.runner) : '-';
    lines.push(`${p.metadata.name.padEnd(width)}${phase.padEnd(12)}${runner.padEnd(13)}${sim?.jobId ?? ''}`);
  }
  if (pods.items.length > 15) lines.push(`… and ${pods.items.length - 15} more`);
  const s = sandbox.summary();
  const lastMinute = sandbox.double.log.filter((e) => e.at > Date.now() - 60_000);
  lines.push('');
  lines.push(
    `GitHub API: ${lastMinute.length} requests in the last minute (${lastMinute.filter((e) => e.countedAgainstRateLimit).length} rate-limited, ${lastMinute.filter((e) => e.notModified).length} answered 304); total ${s.github.requests}, rate-limited ${s.github.rateLimitedRequests}`,
  );
  lines.push(
    `Jobs: ${s.jobs.created} queued, ${s.jobs.started} started, ${s.jobs.completed} completed, ${s.jobs.cancelled} cancelled (${s.jobs.cancelledByController} by the controller)   leaked runners: ${s.leakedRunners}`,
  );
  lines.push(
    `Replacement latency: p50 ${fmtMs(s.replacementLatencyMs.p50)}, p99 ${fmtMs(s.replacementLatencyMs.p99)} (${s.replacementLatencyMs.count})   paddock RSS ${sandbox.controllerRssMiB() ?? '?'} MiB`,
  );
  const events = await http
    .request<{
      items: {
        reason: string;
        note: string;
        type: string;
        eventTime?: string;
        regarding?: { name?: string };
      }[];
    }>('GET', `/apis/events.k8s.io/v1/namespaces/${SANDBOX_NAMESPACE}/events`)
    .catch(() => ({ items: [] }));
  lines.push('');
  lines.push('Recent events:');
  for (const e of events.items
    .sort((a, b) => (a.eventTime ?? '').localeCompare(b.eventTime ?? ''))
    .slice(-6)) {
    lines.push(
      `  ${e.type.padEnd(8)}${e.reason.padEnd(22)}${(e.regarding?.name ?? '').padEnd(30)}${e.note.slice(0, 70)}`,
    );
  }
  return lines.join('\n');
}

export async function sandboxCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values, help } = parseFlags(SANDBOX_FLAGS, argv, env);
  if (help) {
    process.stdout.write(renderHelp('sandbox', SANDBOX_SUMMARY, SANDBOX_FLAGS));
    return 0;
  }
  if (values.soak === true) return soakCommand(values);
  const runners = values.runners as number;
  if (runners < 0 || runners > 5000) throw new UsageError('--runners: between 0 and 5000');
  const kind = parseSandboxKind(String(values.kind));
  if (!kind) {
    throw new UsageError(
      `--kind: one of ${SANDBOX_KINDS.map((k) => k.toLowerCase()).join(', ')}, not "${values.kind}"`,
    );
  }
  const autoscaleText = String(values.autoscale ?? '');
  const autoscale = autoscaleText ? parseAutoscaleMode(autoscaleText) : undefined;
  if (autoscaleText && !autoscale)
    throw new UsageError(`--autoscale: webhook or pull, not "${autoscaleText}"`);
  for (const f of ['chaos-webhook-drop', 'chaos-webhook-duplicate', 'chaos-github-5xx']) {
    const v = values[f] as number;
    if (!(v >= 0 && v <= 1)) throw new UsageError(`--${f}: a share between 0 and 1, not ${v}`);
  }
  const repositories = values.repositories as number;
  if (repositories < 1 || repositories > 100) throw new UsageError('--repositories: between 1 and 100');
  const json = values.json === true;
  const tty = process.stdout.isTTY && !json;
  const say = (line: string) => {
    if (!json) process.stderr.write(`${line}\n`);
  };
  const sandbox = new Sandbox({
    kind,
    runners,
    jobRate: values['job-rate'] as number,
    jobDurationMs: values['job-duration'] as number,
    ephemeral: values.static !== true,
    startupDelayMs: values['startup-delay'] as number,
    simulate: values['no-simulator'] !== true,
    chaos: {
      podKillsPerMinute: values['chaos-pod-kills'] as number,
      github5xxRate: values['chaos-github-5xx'] as number,
      rateLimitPerHour: values['chaos-rate-limit'] as number | undefined,
      nodeLossAfterMs: values['chaos-node-loss'] as number | undefined,
    },
    log: say,
    autoscale,
    repositories,
    webhookChaos: {
      dropRate: values['chaos-webhook-drop'] as number,
      duplicateRate: values['chaos-webhook-duplicate'] as number,
    },
    helm: values.helm === true ? { sets: (values['helm-set'] as string[] | undefined) ?? [] } : undefined,
  });
  let stopping = false;
  let wake: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => {
    wake = resolve;
  });
  const onSignal = () => {
    stopping = true;
    wake();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let summary: SandboxSummary | undefined;
  let exitCode = 0;
  try {
    await sandbox.start();
    if (!json && !tty) {
      say(
        `[sandbox] running${values.duration ? ` for ${Math.round((values.duration as number) / 1000)}s` : ''}; Ctrl-C stops`,
      );
    }
    const started = Date.now();
    const duration = values.duration as number;
    if (duration > 0) setTimeout(() => wake(), duration).unref();
    let lastPlain = 0;
    while (!stopping) {
      if (tty) process.stdout.write(`\x1b[H\x1b[2J${await liveView(sandbox, started)}\n`);
      else if (!json && Date.now() - lastPlain > 10_000) {
        lastPlain = Date.now();
        const s = await sandbox.summarize();
        const a = s.autoscale;
        say(
          `[sandbox] ${s.durationSeconds}s: ${s.owner ? formatOwnerFigures(s.owner) : kind}${a ? `; HRA desired ${a.desired ?? '?'}, reservations ${a.reservations}` : ''}; jobs ${s.jobs.completed}/${s.jobs.created} done, ${s.jobs.cancelled} cancelled; GitHub rate-limited requests ${s.github.rateLimitedRequests}`,
        );
      }
      const tick = await Promise.race([
        stopped.then(() => 'stop'),
        new Promise((r) => setTimeout(() => r('tick'), 1000)),
      ]);
      if (tick === 'stop' || (duration > 0 && Date.now() - started >= duration)) break;
    }
    summary = await sandbox.summarize();
    if (values.helm === true) summary.chart = await sandbox.uninstallChart();
  } catch (err) {
    process.stderr.write(`paddock sandbox: ${(err as Error).message}\n`);
    exitCode = 1;
  } finally {
    const { paddockExitCode } = await sandbox.stop();
    if (summary) summary.controller.exitCode = summary.chart?.uninstall.exitCodes.paddock ?? paddockExitCode;
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  if (summary) {
    if (json) process.stdout.write(`${JSON.stringify(summary)}\n`);
    else process.stdout.write(`\n${JSON.stringify(summary, null, 2)}\n`);
    const code = summary.controller.exitCode;
    if (code !== 0 && code !== null) {
      exitCode = 1;
      // The summary goes to stdout; the reason for the exit code goes where errors go.
      const tail = summary.chart?.uninstall.logTails.paddock;
      process.stderr.write(
        `paddock sandbox: paddock exited with ${code}${code === 137 ? ' (killed: not stopped 15 s after SIGTERM)' : ''}${tail ? `; its log ends:\n${tail}` : ''}\n`,
      );
    }
  }
  return exitCode;
}

/** `paddock sandbox --soak`: the summary as one JSON line on stdout; exit 1 on any violation. */
async function soakCommand(values: Record<string, unknown>): Promise<number> {
  const runners = values.runners as number;
  if (runners < 1 || runners > 2000) throw new UsageError('--runners: between 1 and 2000 with --soak');
  const durationMs = (values.duration as number) || 30 * 60_000;
  if (durationMs < 3 * 60_000) throw new UsageError('--duration: at least 3m with --soak');
  const requested = ((values.faults as string[] | undefined) ?? [])
    .flatMap((f) => f.split(','))
    .filter(Boolean);
  const unknown = requested.filter((f) => !(FAULT_KINDS as readonly string[]).includes(f));
  if (unknown.length > 0)
    throw new UsageError(`--faults: unknown ${unknown.join(', ')} (known: ${FAULT_KINDS.join(', ')})`);
  const seed = (values.seed as number | undefined) ?? Math.floor(Math.random() * 2 ** 31);
  const json = values.json === true;
  const soak = new Soak({
    runners,
    durationMs,
    seed,
    kinds: requested.length > 0 ? (requested as FaultKind[]) : undefined,
    log: (line) => process.stderr.write(`${line}\n`),
  });
  const onSignal = () => void soak.stop();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const summary = await soak.run();
    process.stdout.write(`${JSON.stringify(summary, null, json ? undefined : 2)}\n`);
    for (const v of summary.violationList)
      process.stderr.write(`[soak] VIOLATION ${v.invariant}: ${v.evidence}\n`);
    return summary.violations === 0 ? 0 : 1;
  } catch (err) {
    process.stderr.write(`paddock sandbox --soak (seed ${seed}): ${(err as Error).message}\n`);
    return 1;
  } finally {
    await soak.stop();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
