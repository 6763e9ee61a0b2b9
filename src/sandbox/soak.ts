/**
 * The chaos soak (issue 15): the sandbox with two paddock replicas, a webhook-scaled
 * RunnerDeployment of ephemeral runners whose GitHub credentials come from a Secret, a steady job
 * load, and faults injected on a seeded schedule (`soak-schedule.ts`) while `InvariantMonitor`
 * watches. It ends with a quiet stretch, the documented drain (scale to zero), and one summary: faults
 * by kind, violations with their evidence, jobs, replacement latency, API spend, takeover times, RSS.
 */
import { readFileSync } from 'node:fs';
import { HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS, RUNNERS } from '../api/index.ts';
import { resourcePath } from '../runtime/informer.ts';
import { DEFAULT_TIMINGS, RETRY_JITTER } from '../runtime/leader-election.ts';
import { mergePatch } from '../runtime/objects.ts';
import { PODS } from '../runtime/resources.ts';
import type { KubeObject } from '../runtime/store.ts';
import type { NodeAgentEvent } from './node-agent.ts';
import { drainAnnotations, SAMPLE_NAME, SANDBOX_NAMESPACE, SANDBOX_ORG, Sandbox } from './sandbox.ts';
import { InvariantMonitor, type Violation } from './soak-invariants.ts';
import { FAULT_KINDS, type FaultKind, faultSchedule, type ScheduledFault } from './soak-schedule.ts';

/**
 * The longest a successor may take to act after the leader dies: the Lease must go a lease
 * duration without a change the successor has seen, and the successor sees a change, and tries to
 * take the Lease, one jittered retry period late at most; the renew deadline is slack for a start
 * on a loaded machine.
 */
const TAKEOVER_BOUND_MS =
  DEFAULT_TIMINGS.leaseDurationMs +
  DEFAULT_TIMINGS.renewDeadlineMs +
  2 * (1 + RETRY_JITTER) * DEFAULT_TIMINGS.retryPeriodMs;
/** GitHub fails a job whose runner stopped answering after some minutes; shorter here. */
const LOST_RUNNER_JOB_TIMEOUT_MS = 90_000;

export interface SoakOptions {
  runners: number;
  durationMs: number;
  seed: number;
  kinds?: readonly FaultKind[] | undefined;
  /** Mean gap between random faults after each kind's scheduled one (default: a fifth of the run / kinds). */
  meanRandomGapMs?: number | undefined;
  /** paddock's --force-delete-timeout (default 60 s, paddock's own default). */
  forceDeleteTimeoutMs?: number | undefined;
  /**
   * paddock's --registration-timeout (default 10 min, paddock's own). A pod on a lost node whose
   * runner paddock never saw registered is waited for this long before it is replaced or let go:
   * the runner may still be alive behind a partition. The drain allows for it.
   */
  registrationTimeoutMs?: number | undefined;
  /** Bound on the fleet staying below its desired count outside faults (default 60 s). */
  replacementBoundMs?: number | undefined;
  log: (line: string) => void;
}

export interface SoakSummary {
  soak: true;
  seed: number;
  runners: number;
  durationSeconds: number;
  faults: Partial<Record<FaultKind, number>>;
  violations: number;
  violationList: Violation[];
  jobs: { completed: number; cancelled: number; cancelledByChaos: number; cancelledByController: number };
  replacementLatencyMs: { count: number; p50: number | null; p99: number | null };
  githubRateLimitedRequestsPerRunnerHour: number;
  /** Where the GitHub requests went, by route (all requests, rate-limited or not). */
  githubRequestsByRoute: Record<string, number>;
  takeoverMs: number[];
  /** paddock replicas restarted after exiting (killed, or stepping down after losing the Lease). */
  replicaRestarts: number;
  rss: {
    startMiB: number | null;
    endMiB: number | null;
    trends: ReturnType<InvariantMonitor['memoryTrends']>;
  };
  /** How long the final drain took, and what it left (must be nothing). */
  drain: { seconds: number; left: string[] };
  /** Faults that could not be made here, with why. */
  skipped: string[];
  /**
   * For each pod a violation names: its state when the violation was seen, what the node agent and
   * GitHub saw of it, and what paddock logged about it (empty without violations).
   */
  diagnostics: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Soak {
  readonly sandbox: Sandbox;
  readonly monitor: InvariantMonitor;
  private readonly opts: SoakOptions;
  private readonly faultsDone: Partial<Record<FaultKind, number>> = {};
  private readonly takeovers: number[] = [];
  private readonly skipped: string[] = [];
  private readonly cleanups = new Set<() => void>();
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly forceDeleteMs: number;
  private readonly registrationTimeoutMs: number;
  private rssFirst: number | null = null;
  private draining = false;
  /** Pods whose runner registered and has not left yet, as the node agent reported them. */
  private readonly liveRunnerPods = new Set<string>();
  private stopping = false;
  private stopped: Promise<void> | undefined;
  /** What was seen of each pod a violation names, when the violation was found. */
  private readonly podDiagnostics = new Map<string, string[]>();

  constructor(opts: SoakOptions) {
    this.opts = opts;
    this.forceDeleteMs = opts.forceDeleteTimeoutMs ?? 60_000;
    this.registrationTimeoutMs = opts.registrationTimeoutMs ?? 10 * 60_000;
    this.sandbox = new Sandbox({
      kind: 'RunnerDeployment',
      runners: Math.ceil(opts.runners * 1.25),
      minReplicas: opts.runners,
      autoscale: 'webhook',
      scaleDownDelaySeconds: 30,
      replicas: 2,
      restartReplicas: true,
      credentialsSecret: true,
      // About half the fleet busy: jobs of ~30 s arriving at runners per minute.
      jobRate: opts.runners,
      jobDurationMs: 30_000,
      // The same seed, the same jobs as well as the same fault schedule.
      workloadSeed: opts.seed,
      ephemeral: true,
      startupDelayMs: 2000,
      simulate: true,
      chaos: {
        podKillsPerMinute: 0,
        github5xxRate: 0,
        rateLimitPerHour: undefined,
        nodeLossAfterMs: undefined,
      },
      webhookChaos: { dropRate: 0, duplicateRate: 0 },
      log: opts.log,
      paddockArgs: [
        '--log-level',
        'info',
        '--force-delete-timeout',
        `${Math.round(this.forceDeleteMs / 1000)}s`,
        '--registration-timeout',
        `${Math.round(this.registrationTimeoutMs / 1000)}s`,
      ],
    });
    this.monitor = new InvariantMonitor({
      forceDeleteTimeoutMs: this.forceDeleteMs,
      replacementBoundMs: opts.replacementBoundMs ?? 60_000,
      takeoverBoundMs: TAKEOVER_BOUND_MS,
      memoryGrowthMiBPerHour: 20,
      memoryTrendMinSpanMs: 15 * 60_000,
    });
  }

  async run(): Promise<SoakSummary> {
    const { log } = this.opts;
    const sb = this.sandbox;
    await sb.start();
    // As GitHub does, a job whose runner lost communication (its node died) fails after a while.
    sb.double.failLostRunnersAfter(LOST_RUNNER_JOB_TIMEOUT_MS);
    sb.webhooks?.setChaos({ dropRate: 0, duplicateRate: 0, maxDelayMs: 0 });
    const t0 = Date.now();
    this.watch();
    const kinds = this.opts.kinds ?? FAULT_KINDS;
    const schedule = faultSchedule({
      seed: this.opts.seed,
      durationMs: this.opts.durationMs,
      kinds,
      warmupMs: Math.min(60_000, this.opts.durationMs / 6),
      quietTailMs: Math.max(45_000, Math.min(5 * 60_000, this.opts.durationMs / 6)),
      // Short soaks meet each kind once; long ones also get random faults, about one per kind-slot.
      meanRandomGapMs:
        this.opts.meanRandomGapMs ??
        (this.opts.durationMs >= 15 * 60_000 ? this.opts.durationMs / Math.max(1, kinds.length) : 0),
    });
    log(
      `[soak] seed ${this.opts.seed}: ${schedule.length} faults over ${Math.round(this.opts.durationMs / 1000)} s`,
    );
    for (const fault of schedule) {
      const wait = t0 + fault.atMs - Date.now();
      if (wait > 0) await sleep(wait);
      await this.inject(fault).catch((err) => {
        this.skipped.push(`${fault.kind} at ${Math.round(fault.atMs / 1000)} s: ${String(err)}`);
        log(`[soak] ${fault.kind} could not be injected: ${String(err)}`);
      });
    }
    const end = t0 + this.opts.durationMs - Date.now();
    if (end > 0) await sleep(end);
    for (const c of this.cleanups) c();
    this.cleanups.clear();
    const summary = await this.finish(t0);
    return summary;
  }

  /** Stops everything the soak started; safe to call again. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      this.stopping = true;
      for (const t of this.timers) clearInterval(t);
      for (const c of this.cleanups) c();
      await this.sandbox.stop();
    })();
    return this.stopped;
  }

  /** Observations for the monitor: agent events as they come, the API server and RSS every few seconds. */
  private watch(): void {
    const sb = this.sandbox;
    // A registered runner leaving (its runner exited, its pod went) empties a slot of the fleet.
    const track = (e: NodeAgentEvent, record: boolean) => {
      if (e.type === 'runner-registered') this.liveRunnerPods.add(e.pod);
      if (
        (e.type === 'runner-exited' || e.type === 'pod-deleting') &&
        this.liveRunnerPods.delete(e.pod) &&
        record
      )
        this.monitor.vacancy(e.at);
    };
    for (const e of sb.events) track(e, false);
    sb.agent?.on((e: NodeAgentEvent) => {
      track(e, true);
      if (e.type === 'job-cancelled' && e.jobId !== undefined) {
        this.monitor.jobCancelled({
          at: e.at,
          jobId: e.jobId,
          pod: e.pod,
          chaos: sb.isChaos(e.pod, e.node),
          message: e.message,
        });
      }
      if (e.type === 'pod-deleting' && e.jobId !== undefined && !sb.isChaos(e.pod, e.node)) {
        this.monitor.busyPodDeleted({ at: e.at, pod: e.pod, jobId: e.jobId });
      }
    });
    sb.double.model.on((e) => {
      if (e.type !== 'runner-removed' || e.reason !== 'deleted') return;
      const job = [...sb.double.model.jobs.values()].find(
        (j) => j.runner_id === e.runner.id && j.status === 'in_progress',
      );
      if (e.runner.busy || job)
        this.monitor.busyRunnerRemoved({ at: Date.now(), runner: e.runner.name, jobId: job?.id });
    });
    this.timers.push(
      setInterval(() => {
        if (this.stopping) return;
        void this.sample().catch(() => undefined);
      }, 5000),
    );
  }

  private async sample(): Promise<void> {
    const sb = this.sandbox;
    const now = Date.now();
    // The drain deletes the whole fleet at once: a burst of work, not the growth over time judged.
    for (const r of this.draining ? [] : sb.replicaProcesses()) {
      const mib = rssOf(r.pid);
      if (mib === null) continue;
      this.rssFirst ??= mib;
      this.monitor.rssSample(`${r.name}#${r.pid}`, { at: now, mib });
    }
    const http = sb.http;
    if (!http) return;
    // While the API server is down these fail: the sample is skipped, not counted.
    const pods = await http.request<{ items: KubeObject[] }>('GET', resourcePath(PODS, SANDBOX_NAMESPACE), {
      query: { labelSelector: 'actions-runner' },
    });
    const found = this.monitor.violations.length;
    this.monitor.terminating(
      now,
      pods.items
        .filter((p) => p.metadata.deletionTimestamp)
        .map((p) => ({
          name: p.metadata.name ?? '',
          deletingSince: Date.parse(p.metadata.deletionTimestamp ?? ''),
          node: (p as { spec?: { nodeName?: string } }).spec?.nodeName,
        })),
    );
    for (const v of this.monitor.violations.slice(found)) {
      const pod = pods.items.find((p) => v.evidence.includes(`pod ${p.metadata.name} `));
      if (pod) this.podDiagnostics.set(pod.metadata.name ?? '', this.describePod(pod));
    }
    const owner = await http.request<{ spec?: { replicas?: number } }>(
      'GET',
      resourcePath(RUNNER_DEPLOYMENTS, SANDBOX_NAMESPACE, SAMPLE_NAME),
    );
    const stats = sb.agent?.stats();
    const live = (stats?.busyRunners ?? 0) + (stats?.idleRunners ?? 0);
    this.monitor.fleet(now, owner.spec?.replicas ?? 0, live);
  }

  /** A pod as the API server, the node agent and GitHub show it now. */
  private describePod(pod: KubeObject): string[] {
    const sb = this.sandbox;
    const name = pod.metadata.name ?? '';
    const status = (pod as { status?: { phase?: string; containerStatuses?: unknown[] } }).status;
    const containers = (status?.containerStatuses ?? []).map((c) => {
      const cs = c as { name?: string; state?: Record<string, { exitCode?: number; reason?: string }> };
      const [state, detail] = Object.entries(cs.state ?? {})[0] ?? ['unknown', {}];
      return `${cs.name}:${state}${detail?.exitCode !== undefined ? `(${detail.exitCode})` : ''}`;
    });
    const agent = sb.events
      .filter((e) => e.pod === name)
      .map(
        (e) =>
          `${new Date(e.at).toISOString()} ${e.type}${e.runnerId !== undefined ? ` runner ${e.runnerId}` : ''}${e.jobId !== undefined ? ` job ${e.jobId}` : ''}${e.reason ? ` ${e.reason}` : ''}`,
      );
    const model = sb.double.model;
    const runners = [...model.runners.values()]
      .filter((r) => r.name === name)
      .map((r) => `runner ${r.id} ${r.status}${r.busy ? ' busy' : ''}`);
    const jobs = [...model.jobs.values()]
      .filter((j) => j.runner_name === name)
      .map((j) => `job ${j.id} ${j.status}${j.conclusion ? ` ${j.conclusion}` : ''}`);
    return [
      `pod ${name}: ${status?.phase ?? '?'} on ${(pod as { spec?: { nodeName?: string } }).spec?.nodeName ?? '?'}, deleting since ${pod.metadata.deletionTimestamp ?? '-'}, finalizers [${(pod.metadata.finalizers ?? []).join(',')}], containers [${containers.join(' ')}], ${drainAnnotations(pod)}`,
      `GitHub now: ${[...runners, ...jobs].join(', ') || 'no runner or job of that name'}`,
      ...agent.map((l) => `node agent: ${l}`),
    ];
  }

  private count(kind: FaultKind): void {
    this.faultsDone[kind] = (this.faultsDone[kind] ?? 0) + 1;
  }

  /** Holds a lasting fault for its duration; `undo` runs at its end (or when the soak stops). */
  private hold(f: ScheduledFault, undo: () => void): void {
    const cleanup = () => {
      this.cleanups.delete(cleanup);
      undo();
    };
    this.cleanups.add(cleanup);
    this.timers.push(setTimeout(cleanup, f.durationMs));
  }

  private async inject(f: ScheduledFault): Promise<void> {
    const sb = this.sandbox;
    const double = sb.double;
    const now = Date.now();
    const bound = this.monitor.limits.replacementBoundMs;
    const say = (what: string) => this.opts.log(`[soak] ${f.kind}: ${what}`);
    switch (f.kind) {
      case 'leader-kill': {
        const { holder, victim } = await this.liveLeader();
        const killedAt = Date.now();
        await sb.killReplica(victim.name);
        say(`kill -9 ${victim.name} (pid ${victim.pid}), the leader`);
        this.monitor.excuse(
          killedAt,
          killedAt + this.monitor.limits.takeoverBoundMs + 10_000,
          'leader killed',
          { controlPlane: true },
        );
        this.count(f.kind);
        // The sandbox starts it again (restartReplicas); meanwhile the other replica takes over.
        void this.awaitTakeover(holder, killedAt);
        return;
      }
      case 'apiserver-restart': {
        const at = Date.now();
        await sb.plane!.restartApiServer();
        this.monitor.outage(at, Date.now());
        say(`kube-apiserver restarted in ${Date.now() - at} ms`);
        // A leader cut off past its renew deadline steps down: allow for its successor's takeover.
        this.monitor.excuse(
          at,
          Date.now() + this.monitor.limits.takeoverBoundMs + 10_000,
          'kube-apiserver restarted',
          { controlPlane: true },
        );
        this.count(f.kind);
        return;
      }
      case 'etcd-restart': {
        const at = Date.now();
        await sb.plane!.restartEtcd();
        this.monitor.outage(at, Date.now());
        say(`etcd restarted in ${Date.now() - at} ms`);
        this.monitor.excuse(at, Date.now() + this.monitor.limits.takeoverBoundMs + 10_000, 'etcd restarted', {
          controlPlane: true,
        });
        this.count(f.kind);
        return;
      }
      case 'github-5xx': {
        // About a third of GitHub's answers are 502 for the fault's duration.
        const tick = setInterval(() => {
          remove();
          remove = double.injectFault({ status: 502, times: 1 + Math.floor(Math.random() * 3) });
        }, 1000);
        let remove = double.injectFault({ status: 502, times: 2 });
        this.hold(f, () => {
          clearInterval(tick);
          remove();
        });
        this.monitor.excuse(now, now + f.durationMs + bound, 'GitHub answering 502');
        say(`502s for ${Math.round(f.durationMs / 1000)} s`);
        this.count(f.kind);
        return;
      }
      case 'github-latency': {
        const remove = double.injectFault({ latencyMs: 1500 });
        this.hold(f, remove);
        say(`1.5 s latency on every request for ${Math.round(f.durationMs / 1000)} s`);
        this.count(f.kind);
        return;
      }
      case 'rate-limit-squeeze': {
        const tokens = [sb.token, sb.credentialsToken].filter((t): t is string => t !== undefined);
        for (const t of tokens) double.setRateLimit(t, { remaining: 0, resetInMs: f.durationMs });
        this.hold(f, () => {
          for (const t of [sb.token, sb.credentialsToken]) {
            if (t && double.auth.tokens.has(t)) double.setRateLimit(t, { limit: 5000, remaining: 5000 });
          }
        });
        this.monitor.excuse(now, now + f.durationMs + bound, 'rate limit exhausted');
        say(`primary rate limit at 0 until reset in ${Math.round(f.durationMs / 1000)} s`);
        this.count(f.kind);
        return;
      }
      case 'secondary-rate-limit': {
        const remove403 = double.injectSecondaryLimit({ status: 403, retryAfterSeconds: 5, times: 20 });
        const remove429 = double.injectSecondaryLimit({ status: 429, retryAfterSeconds: 3, times: 20 });
        this.hold(f, () => {
          remove403();
          remove429();
        });
        this.monitor.excuse(now, now + f.durationMs + bound, 'secondary rate limits');
        say('secondary limits: 403 and 429 with retry-after');
        this.count(f.kind);
        return;
      }
      case 'node-loss': {
        const node = await sb.loseBusiestNode();
        if (!node) throw new Error('no node to lose');
        const lost = [...this.liveRunnerPods].filter((p) => sb.agent?.pod(p)?.node === node);
        for (const p of lost) this.liveRunnerPods.delete(p);
        this.monitor.vacancy(now, lost.length);
        // Its pods stay until Kubernetes evicts them (5 min NoExecute toleration), then paddock frees them.
        this.monitor.excuse(now, now + 300_000 + this.forceDeleteMs + bound, `node ${node} lost`);
        say(`node ${node} stopped responding`);
        this.count(f.kind);
        return;
      }
      case 'pod-kill': {
        const n = sb.crashRunners(Math.max(1, Math.round(this.opts.runners / 20)));
        say(`${n} runner containers crashed`);
        this.count(f.kind);
        return;
      }
      case 'webhook-chaos': {
        const webhooks = sb.webhooks;
        if (!webhooks) throw new Error('no webhook deliveries in this sandbox');
        webhooks.setChaos({ dropRate: 0.1, duplicateRate: 0.1, maxDelayMs: 3000 });
        this.hold(f, () => webhooks.setChaos({ dropRate: 0, duplicateRate: 0, maxDelayMs: 0 }));
        say('10 % of deliveries dropped, 10 % duplicated, up to 3 s late (reordered)');
        this.count(f.kind);
        return;
      }
      case 'credentials-rotation': {
        await sb.rotateCredentials(30_000);
        say('runners’ credentials Secret rotated; the old token is revoked in 30 s');
        this.count(f.kind);
        return;
      }
    }
  }

  /**
   * The replica holding the Lease. A leader that has just exited (it lost the Lease in an etcd
   * restart) still names itself there until a standby takes over: wait for a live one.
   */
  private async liveLeader(): Promise<{ holder: string; victim: { name: string; pid: number } }> {
    const deadline = Date.now() + this.monitor.limits.takeoverBoundMs + 10_000;
    for (;;) {
      const holder = await this.leaseHolder().catch(() => undefined);
      const victim = this.sandbox.replicaProcesses().find((r) => holder?.endsWith(`_${r.pid}`));
      if (holder && victim) return { holder, victim };
      if (Date.now() > deadline) {
        throw new Error(`no live replica holds the Lease (holder ${holder ?? 'none'})`);
      }
      await sleep(500);
    }
  }

  private async leaseHolder(): Promise<string | undefined> {
    const lease = await this.sandbox.http!.request<{ spec?: { holderIdentity?: string } }>(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/${SANDBOX_NAMESPACE}/leases/paddock`,
    );
    return lease.spec?.holderIdentity || undefined;
  }

  /** From the leader's death until another live replica holds the Lease. */
  private async awaitTakeover(dead: string, killedAt: number): Promise<void> {
    const limit = killedAt + 5 * 60_000;
    while (!this.stopping && Date.now() < limit) {
      const holder = await this.leaseHolder().catch(() => undefined);
      if (
        holder &&
        holder !== dead &&
        this.sandbox.replicaProcesses().some((r) => holder.endsWith(`_${r.pid}`))
      ) {
        const ms = Date.now() - killedAt;
        this.takeovers.push(ms);
        this.monitor.takeover(Date.now(), ms);
        this.opts.log(`[soak] leader-kill: ${holder} took over after ${ms} ms`);
        return;
      }
      await sleep(200);
    }
    if (!this.stopping) this.monitor.takeover(Date.now(), Date.now() - killedAt);
  }

  /** The drain (no new jobs, HRA deleted, owner to zero, wait for every pod and Runner to go), then the summary. */
  private async finish(t0: number): Promise<SoakSummary> {
    const sb = this.sandbox;
    const http = sb.http!;
    const runningFor = Date.now() - t0;
    // Latency and spend are figures of the run, not of the scale-down that ends it.
    const summary = sb.summary();
    sb.workload?.stop();
    this.draining = true;
    const drainStart = Date.now();
    await http
      .request('DELETE', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, SANDBOX_NAMESPACE, SAMPLE_NAME))
      .catch(() => undefined);
    await mergePatch(
      http,
      RUNNER_DEPLOYMENTS,
      { metadata: { namespace: SANDBOX_NAMESPACE, name: SAMPLE_NAME } },
      { spec: { replicas: 0 } },
    );
    // Busy runners finish their jobs (≤ 45 s); a pod on a lost node whose runner was never seen
    // registered waits out the registration timeout, then its deletion the force-delete timeout.
    const deadline = Date.now() + 90_000 + this.registrationTimeoutMs + this.forceDeleteMs + 60_000;
    let left: string[] = [];
    while (Date.now() < deadline) {
      const pods = await http.request<{ items: KubeObject[] }>('GET', resourcePath(PODS, SANDBOX_NAMESPACE), {
        query: { labelSelector: 'actions-runner' },
      });
      const runners = await http.request<{ items: KubeObject[] }>(
        'GET',
        resourcePath(RUNNERS, SANDBOX_NAMESPACE),
      );
      left = [
        ...pods.items.map((p) => describeLeft('pod', p)),
        ...runners.items.map((r) => describeLeft('Runner', r)),
      ];
      if (left.length === 0) break;
      await sleep(1000);
    }
    await sleep(2000);
    // Jobs are counted after the drain: one cancelled while the fleet scales to zero is a violation
    // (the monitor sees it), so the figures must show it too.
    const jobs = sb.summary().jobs;
    for (const finding of await sb.secretExposures()) this.monitor.secretExposed(Date.now(), finding);
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    const registered = [...sb.double.model.runners.values()].filter((r) => r.scope === `orgs/${SANDBOX_ORG}`);
    const violations = this.monitor.finish(
      Date.now(),
      registered.map((r) => `${r.name} (id ${r.id}, ${r.status}${r.busy ? ', busy' : ''})`),
      left,
    );
    const endRss = sb
      .replicaProcesses()
      .map((r) => rssOf(r.pid))
      .filter((x): x is number => x !== null);
    return {
      soak: true,
      seed: this.opts.seed,
      runners: this.opts.runners,
      durationSeconds: Math.round(runningFor / 1000),
      faults: this.faultsDone,
      violations: violations.length,
      violationList: [...violations],
      jobs: {
        completed: jobs.completed,
        cancelled: jobs.cancelled,
        cancelledByChaos: jobs.cancelled - jobs.cancelledByController,
        cancelledByController: jobs.cancelledByController,
      },
      replacementLatencyMs: summary.replacementLatencyMs,
      githubRateLimitedRequestsPerRunnerHour:
        Math.round((sb.rateLimitedRequests() / (runningFor / 3_600_000) / this.opts.runners) * 100) / 100,
      githubRequestsByRoute: summary.github.byRoute,
      takeoverMs: this.takeovers,
      replicaRestarts: sb.replicaRestarts,
      rss: {
        startMiB: this.rssFirst,
        endMiB: endRss.length ? Math.max(...endRss) : null,
        trends: this.monitor.memoryTrends(),
      },
      drain: { seconds: Math.round((Date.now() - drainStart) / 1000), left },
      skipped: this.skipped,
      diagnostics: [...this.podDiagnostics].flatMap(([pod, seen]) => [
        ...seen,
        ...sb.paddockLinesNaming([pod], 40),
      ]),
    };
  }
}

/** `pod/x on sim-node-1, deleting since …, finalizers [...]`, for a violation's evidence. */
function describeLeft(kind: string, o: KubeObject): string {
  const node = (o as { spec?: { nodeName?: string } }).spec?.nodeName;
  return `${kind}/${o.metadata.name}${kind === 'pod' && node ? ` on ${node}` : ''}, ${
    o.metadata.deletionTimestamp ? `deleting since ${o.metadata.deletionTimestamp}` : 'not deleting'
  }, finalizers [${(o.metadata.finalizers ?? []).join(',')}]`;
}

function rssOf(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round((Number(m[1]) / 1024) * 10) / 10 : null;
  } catch {
    return null;
  }
}
