import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock, Timer } from '../runtime/clock.ts';
import { realClock } from '../runtime/clock.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../runtime/errors.ts';
import { Informer, type ResourceRef, resourcePath } from '../runtime/informer.ts';
import { type KubeHttp, PATCH_CONTENT_TYPES } from '../runtime/kube-http.ts';
import { silentLogger } from '../runtime/log.ts';
import { NODES, PODS, SECRETS } from '../runtime/resources.ts';
import type { KubeObject } from '../runtime/store.ts';
import type { GitHubDouble, JobRecord, RunnerRecord } from '../testenv/github-double/index.ts';
import type { ModelEvent } from '../testenv/github-double/model.ts';

/**
 * The fleet simulator's supply side: plays the kubelet and the actions/runner process for the runner
 * pods of one namespace, against a real API server and a GitHubDouble.
 *
 * Kubelet: binds each new pod to a simulated node (`Node` objects it creates), reports it Running
 * through `pods/status`, reports container exits, and confirms a deletion (delete with grace 0) once
 * the pod's finalizers are gone. Runner: registers with the double from the container's env (as
 * config.sh does with `--replace`), takes queued jobs whose labels it has, finishes them after their
 * duration, and exits with 0 after a job when ephemeral (1 when registration fails). As the kubelet
 * does, it resolves the runner container's `valueFrom.secretKeyRef` env (the webhook's token Secret)
 * from the API server before the container starts; while such a Secret is missing the pod stays
 * Pending and the agent tries again.
 *
 * Simplifications: containers are never restarted; a pod being deleted keeps running (its job, or
 * waiting to register) until its grace period ends, when the kubelet kills what still runs (137):
 * the real one sends SIGTERM first, which this runner ignores. No node heartbeats (no node
 * lifecycle controller runs in the sandbox).
 */

const FIELD_MANAGER = 'paddock-sandbox-kubelet';
const RUNNER_CONTAINER = 'runner';
const RETRY_MS = 1000;

// ------------------------------------------------------------------------------------ pure helpers

/** Whether a runner with `runnerLabels` can take a job asking for `jobLabels` (case-insensitive). */
export function labelsMatch(runnerLabels: readonly string[], jobLabels: readonly string[]): boolean {
  const have = new Set(runnerLabels.map((l) => l.toLowerCase()));
  have.add('self-hosted');
  return jobLabels.every((l) => have.has(l.toLowerCase()));
}

/** Whether a runner registered at `scope` (a double scope key) serves jobs of `owner/repo`. */
export function scopeServes(scope: string, owner: string, repo: string): boolean {
  const [kind, a, b] = scope.split('/');
  const eq = (x: string | undefined, y: string) => x !== undefined && x.toLowerCase() === y.toLowerCase();
  if (kind === 'repos') return eq(a, owner) && eq(b, repo);
  if (kind === 'orgs') return eq(a, owner);
  // The double does not know which organizations belong to an enterprise: serve them all.
  return kind === 'enterprises';
}

/** `RUNNER_LABELS` as the runner's config step reads it: comma-separated, blanks dropped. */
export function parseRunnerLabels(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((l) => l.trim())
    .filter(Boolean);
}

/**
 * The runner group `config.sh --runnergroup` registers into: RUNNER_GROUP, except for repository
 * runners (ARC's start-up script passes it only without RUNNER_REPO); unset means the default
 * group. An unknown group fails the configuration, as on GitHub (the double keeps one list of groups).
 */
export function runnerGroupFor(
  env: Record<string, string>,
  groups: Iterable<{ id: number; name: string }>,
): { id?: number; error?: string } {
  const wanted = env.RUNNER_REPO ? '' : (env.RUNNER_GROUP ?? '').trim();
  if (!wanted) return {};
  for (const g of groups) if (g.name.toLowerCase() === wanted.toLowerCase()) return { id: g.id };
  return { error: `Could not find any self-hosted runner group named "${wanted}".` };
}

/** The pod phase the kubelet reports for these container states. */
export function podPhase(
  states: readonly ('waiting' | 'running' | { exitCode: number })[],
  restartPolicy: string | undefined,
): 'Pending' | 'Running' | 'Succeeded' | 'Failed' {
  if (states.length === 0 || states.some((s) => s === 'waiting')) return 'Pending';
  if (states.some((s) => s === 'running')) return 'Running';
  const ok = states.every((s) => typeof s === 'object' && s.exitCode === 0);
  const policy = restartPolicy ?? 'Always';
  if (policy === 'Never') return ok ? 'Succeeded' : 'Failed';
  if (policy === 'OnFailure' && ok) return 'Succeeded';
  // The kubelet would restart the containers; this simulator does not, so the pod stays Running.
  return 'Running';
}

function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** The Secrets a container's env reads (`valueFrom.secretKeyRef`). */
export function referencedSecrets(env: readonly EnvVar[]): string[] {
  const names = env.map((e) => e.valueFrom?.secretKeyRef?.name).filter((n): n is string => !!n);
  return [...new Set(names)];
}

/**
 * A container's environment as the kubelet resolves it: literal values, and `secretKeyRef` values
 * from `secrets` (decoded data by Secret name; absent when the Secret does not exist). A required
 * Secret or key that is missing means the container cannot start yet. Other `valueFrom` sources
 * (fieldRef, configMapKeyRef, …) are not simulated and leave the variable unset.
 */
export function resolveEnv(
  env: readonly EnvVar[],
  secrets: ReadonlyMap<string, Record<string, string>>,
): { ok: true; env: Record<string, string> } | { ok: false; reason: string } {
  const out: Record<string, string> = {};
  for (const e of env) {
    const ref = e.valueFrom?.secretKeyRef;
    if (!ref) {
      if (e.value !== undefined && e.value !== null) out[e.name] = e.value;
      continue;
    }
    const data = secrets.get(ref.name ?? '');
    const value = data?.[ref.key ?? ''];
    if (value !== undefined) out[e.name] = value;
    else if (ref.optional) continue;
    else if (!data) return { ok: false, reason: `secret "${ref.name}" not found` };
    else return { ok: false, reason: `couldn't find key ${ref.key} in Secret ${ref.name}` };
  }
  return { ok: true, env: out };
}

// ------------------------------------------------------------------------------------------ types

export interface EnvVar {
  name: string;
  value?: string | null;
  valueFrom?: {
    secretKeyRef?: { name?: string; key?: string; optional?: boolean | null } | null;
    [source: string]: unknown;
  } | null;
}

interface ContainerSpec {
  name: string;
  image?: string;
  env?: EnvVar[];
}

export interface PodObject extends KubeObject {
  spec?: {
    nodeName?: string;
    restartPolicy?: string;
    containers?: ContainerSpec[];
    initContainers?: ContainerSpec[];
  };
  status?: {
    phase?: string;
    podIP?: string;
    startTime?: string;
    conditions?: { type: string; status: string; lastTransitionTime?: string }[];
    containerStatuses?: {
      name: string;
      restartCount?: number;
      state?: {
        running?: { startedAt?: string } | null;
        terminated?: { exitCode?: number; reason?: string } | null;
      } | null;
    }[];
  };
}

export type NodeAgentEventType =
  | 'pod-seen'
  | 'pod-started'
  | 'runner-registered'
  | 'job-started'
  | 'job-completed'
  | 'job-cancelled'
  | 'runner-exited'
  | 'pod-deleting'
  | 'pod-gone';

export interface NodeAgentEvent {
  type: NodeAgentEventType;
  /** Clock time of the event (epoch ms). */
  at: number;
  pod: string;
  uid: string;
  /** The pod's controller, `Kind/name` (e.g. `StatefulSet/ci-abc12`), when it has one. */
  owner?: string;
  node?: string;
  runnerId?: number;
  runnerName?: string;
  jobId?: number;
  /** `runner-exited`: the runner container's exit code. */
  exitCode?: number;
  /** `runner-exited`: why (`job-finished`, `registration-failed`, `crashed`, `runner-removed`, `grace-period-ended`). */
  reason?: string;
  message?: string;
}

export interface NodeAgentStats {
  podsSeen: number;
  podsStarted: number;
  podsGone: number;
  /** Deletions the simulated kubelet confirmed (delete with grace 0 once the finalizers were gone). */
  podsDeletedByKubelet: number;
  runnersRegistered: number;
  registrationFailures: number;
  runnerExits: number;
  runnerCrashes: number;
  /** Runners killed because their pod's deletion grace period ended while they still ran. */
  runnersKilledAtGraceEnd: number;
  jobsStarted: number;
  jobsCompleted: number;
  /** Jobs ended as `cancelled`: their pod went for good, or their runner was removed from GitHub, mid-job. */
  jobsCancelled: number;
  /** Snapshot: runners registered by pods that are gone, not busy, still in GitHub. */
  leakedRunners: number;
  /** Leaked runners that a later registration with the same name replaced (`--replace`). */
  leaksReplaced: number;
  /** Snapshot: live runners taking jobs, busy or idle. */
  busyRunners: number;
  idleRunners: number;
}

export interface LeakedRunner {
  runner: RunnerRecord;
  pod: string;
  podUid: string;
  podGoneAt: number;
}

export type RunnerProcessState = 'none' | 'waiting' | 'configuring' | 'listening' | 'exited';

/** What the agent knows of one pod (a copy). */
export interface SimPodView {
  name: string;
  uid: string;
  node: string | undefined;
  started: boolean;
  runner: RunnerProcessState;
  runnerId: number | undefined;
  runnerName: string | undefined;
  ephemeral: boolean;
  labels: string[];
  jobId: number | undefined;
  deleting: boolean;
  gone: boolean;
  lost: boolean;
}

export interface NodeAgentOptions {
  http: KubeHttp;
  namespace: string;
  double: GitHubDouble;
  /** For the simulated delays and job durations (the pod informer always uses real time). */
  clock?: Clock;
  log?: Logger;
  /** From seeing a pod to reporting it Running (image pull, container start). Default 2000. */
  startupDelayMs?: number;
  /** From Running to the runner being registered (config.sh). Default 500. */
  registrationDelayMs?: number;
  /** Uniform in [0, 1); picks nodes and pod IPs. Default Math.random. */
  random?: () => number;
  /** Pods handled; default `actions-runner` (the label every runner pod has). */
  labelSelector?: string;
  /** Simulated nodes `<nodePrefix><i>`, created at start. Default 3 × `sim-node-`. */
  nodeCount?: number;
  nodePrefix?: string;
  /** How often `assignJobs` runs. Default 250. */
  assignIntervalMs?: number;
  /** A job's run time: fixed, or per job (e.g. `(j) => workload.durationOf(j.id)`); default 10 s. */
  jobDurationMs?: number | ((job: JobRecord) => number | undefined);
  onEvent?: (e: NodeAgentEvent) => void;
}

type ContainerState =
  | { kind: 'waiting'; reason: string }
  | { kind: 'running'; startedAt: number }
  | {
      kind: 'terminated';
      startedAt: number;
      finishedAt: number;
      exitCode: number;
      reason: string;
      message?: string;
    };

interface SimContainer {
  name: string;
  image: string;
  containerId: string;
  restartCount: number;
  state: ContainerState;
}

interface SimPod {
  name: string;
  uid: string;
  owner: string | undefined;
  obj: PodObject;
  node: string | undefined;
  podIP: string | undefined;
  startedAt: number | undefined;
  started: boolean;
  readySince: number | undefined;
  notReadySince: number | undefined;
  containers: SimContainer[];
  initContainers: SimContainer[];
  runner: RunnerProcessState;
  runnerId: number | undefined;
  runnerName: string | undefined;
  ephemeral: boolean;
  labels: string[];
  /** The runner container's env as resolved when it started (Secret references read). */
  env: Record<string, string> | undefined;
  jobId: number | undefined;
  jobTimer: Timer | undefined;
  deleting: boolean;
  deleteSent: boolean;
  gone: boolean;
  goneAt: number | undefined;
  statusQueued: boolean;
  chain: Promise<void>;
}

// ------------------------------------------------------------------------------------------ agent

export class NodeAgent {
  readonly namespace: string;
  private readonly nodes: string[];
  private readonly nodePrefix: string;
  private readonly http: KubeHttp;
  private readonly double: GitHubDouble;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly random: () => number;
  private readonly startupDelayMs: number;
  private readonly registrationDelayMs: number;
  private readonly assignIntervalMs: number;
  private readonly jobDuration: (job: JobRecord) => number;
  private readonly informer: Informer<PodObject>;
  private readonly listeners = new Set<(e: NodeAgentEvent) => void>();
  /** Live pods by name. */
  private readonly pods = new Map<string, SimPod>();
  /** Runners this agent registered (still in GitHub, or leaked), by runner ID. */
  private readonly runners = new Map<number, SimPod>();
  /** Jobs running on this agent's runners. */
  private readonly jobs = new Map<number, SimPod>();
  private readonly queued = new Set<number>();
  private readonly lostNodes = new Set<string>();
  private readonly timers = new Set<Timer>();
  private readonly inflight = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private readonly counters = {
    podsSeen: 0,
    podsStarted: 0,
    podsGone: 0,
    podsDeletedByKubelet: 0,
    runnersRegistered: 0,
    registrationFailures: 0,
    runnerExits: 0,
    runnerCrashes: 0,
    runnersKilledAtGraceEnd: 0,
    jobsStarted: 0,
    jobsCompleted: 0,
    jobsCancelled: 0,
    leaksReplaced: 0,
  };
  private unsubscribeModel: (() => void) | undefined;
  private assignTimer: Timer | undefined;
  private state: 'new' | 'starting' | 'running' | 'stopped' = 'new';
  private starting: Promise<void> | undefined;

  constructor(opts: NodeAgentOptions) {
    this.http = opts.http;
    this.namespace = opts.namespace;
    this.double = opts.double;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.log ?? silentLogger()).child({ component: 'node-agent', namespace: opts.namespace });
    this.random = opts.random ?? Math.random;
    this.startupDelayMs = opts.startupDelayMs ?? 2000;
    this.registrationDelayMs = opts.registrationDelayMs ?? 500;
    this.assignIntervalMs = opts.assignIntervalMs ?? 250;
    const d = opts.jobDurationMs ?? 10_000;
    this.jobDuration = typeof d === 'number' ? () => d : (job) => d(job) ?? 10_000;
    this.nodePrefix = opts.nodePrefix ?? 'sim-node-';
    this.nodes = Array.from({ length: Math.max(1, opts.nodeCount ?? 3) }, (_, i) => `${this.nodePrefix}${i}`);
    if (opts.onEvent) this.listeners.add(opts.onEvent);
    this.informer = new Informer<PodObject>({
      http: this.http,
      resource: PODS,
      clock: realClock,
      log: this.log,
      namespace: this.namespace,
      labelSelector: opts.labelSelector ?? 'actions-runner',
    });
    this.informer.addHandler({
      onAdd: (pod) => this.onPod(pod),
      onUpdate: (_old, pod) => this.onPod(pod),
      onDelete: (pod) => this.onPodDeleted(pod),
    });
  }

  // -------------------------------------------------------------------------------- lifecycle

  /** Creates the simulated nodes, starts watching pods and taking jobs. Idempotent. */
  start(): Promise<void> {
    this.starting ??= (async () => {
      this.state = 'starting';
      await Promise.all(this.nodeNames.map((n, i) => this.ensureNode(n, i)));
      if (this.state !== 'starting') return;
      for (const job of this.double.model.jobs.values()) if (job.status === 'queued') this.queued.add(job.id);
      this.unsubscribeModel = this.double.model.on((e) => this.onModel(e));
      this.informer.start();
      try {
        await this.informer.waitForSync(this.abort.signal);
      } catch (err) {
        if (this.isStopped()) return;
        throw err;
      }
      if (this.state !== 'starting') return;
      this.state = 'running';
      this.armAssign();
    })();
    return this.starting;
  }

  /** Stops every timer, the informer and the model subscription; waits for writes in flight. Idempotent. */
  async stop(): Promise<void> {
    if (this.isStopped()) return;
    this.state = 'stopped';
    this.assignTimer?.cancel();
    for (const t of this.timers) t.cancel();
    this.timers.clear();
    for (const sim of this.pods.values()) sim.jobTimer?.cancel();
    this.unsubscribeModel?.();
    this.abort.abort(new Error('node agent stopped'));
    await this.informer.stop();
    await Promise.allSettled([...this.inflight]);
  }

  /** The simulated nodes, lost ones included. */
  get nodeNames(): readonly string[] {
    return this.nodes;
  }

  /** A new healthy node (as a cluster autoscaler would bring after a node loss); returns its name. */
  async addNode(): Promise<string> {
    const index = this.nodes.length;
    const name = `${this.nodePrefix}${index}`;
    await this.ensureNode(name, index);
    this.nodes.push(name);
    return name;
  }

  /** Listens to timeline events; returns the unsubscribe function. */
  on(listener: (e: NodeAgentEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // -------------------------------------------------------------------------------- queries

  stats(): NodeAgentStats {
    let busy = 0;
    let idle = 0;
    for (const sim of this.pods.values()) {
      if (!this.takingJobs(sim)) continue;
      if (sim.jobId !== undefined) busy++;
      else idle++;
    }
    return {
      ...this.counters,
      leakedRunners: this.leakedRunners().length,
      busyRunners: busy,
      idleRunners: idle,
    };
  }

  /**
   * Runners registered by pods that no longer exist, not busy, still in GitHub: paddock failed to
   * unregister them (ephemeral runners that ran a job are removed by GitHub itself).
   */
  leakedRunners(): LeakedRunner[] {
    const out: LeakedRunner[] = [];
    for (const [id, sim] of this.runners) {
      const runner = this.double.model.runners.get(id);
      if (!runner || !sim.gone || runner.busy) continue;
      out.push({ runner, pod: sim.name, podUid: sim.uid, podGoneAt: sim.goneAt ?? 0 });
    }
    return out;
  }

  /** What the agent knows of a live pod. */
  pod(name: string): SimPodView | undefined {
    const sim = this.pods.get(name);
    if (!sim) return undefined;
    return {
      name: sim.name,
      uid: sim.uid,
      node: sim.node,
      started: sim.started,
      runner: sim.runner,
      runnerId: sim.runnerId,
      runnerName: sim.runnerName,
      ephemeral: sim.ephemeral,
      labels: [...sim.labels],
      jobId: sim.jobId,
      deleting: sim.deleting,
      gone: sim.gone,
      lost: this.isLost(sim),
    };
  }

  // -------------------------------------------------------------------------------- chaos

  /** The runner container dies (OOM kill by default): terminated 137, the runner goes offline in GitHub. */
  crashRunner(podName: string, opts: { exitCode?: number; reason?: string } = {}): void {
    const sim = this.requirePod(podName);
    this.counters.runnerCrashes++;
    this.killRunner(sim, opts.exitCode ?? 137, opts.reason ?? 'OOMKilled', 'crashed');
  }

  /** The runner process dies: offline in GitHub, its container terminated with `exitCode`. */
  private killRunner(sim: SimPod, exitCode: number, reason: string, why: string): void {
    const id = sim.runnerId;
    if (id !== undefined && this.double.model.runners.get(id)?.status === 'online') {
      this.double.model.setRunnerState(id, { status: 'offline' });
    }
    // A job it was running stays in progress (GitHub notices much later); it is cancelled once the pod goes.
    sim.jobTimer?.cancel();
    sim.jobTimer = undefined;
    this.exitRunner(sim, exitCode, reason, why);
  }

  /**
   * The pod's deletion grace period is over: the kubelet kills what still runs, finalizers or not
   * (they hold the object, not its containers). Not on a lost node: no kubelet is there to do it.
   */
  private endGracePeriod(sim: SimPod): void {
    if (sim.gone || !sim.started || this.isLost(sim) || this.isStopped()) return;
    if (sim.runner !== 'none' && sim.runner !== 'exited') {
      this.counters.runnersKilledAtGraceEnd++;
      this.killRunner(sim, 137, 'Error', 'grace-period-ended');
    }
    const now = this.clock.now();
    let killed = false;
    for (const c of sim.containers) {
      if (c.state.kind !== 'running') continue;
      c.state = {
        kind: 'terminated',
        startedAt: c.state.startedAt,
        finishedAt: now,
        exitCode: 137,
        reason: 'Error',
      };
      killed = true;
    }
    if (killed) this.syncStatus(sim);
  }

  /** The runner loses its connection: offline in GitHub, takes no jobs, the container keeps running. */
  takeRunnerOffline(podName: string): RunnerRecord {
    const sim = this.requirePod(podName);
    if (sim.runnerId === undefined) throw new Error(`pod ${podName} has no registered runner`);
    return this.double.model.setRunnerState(sim.runnerId, { status: 'offline' });
  }

  /**
   * The node stops responding: its pods freeze (no status updates, no job completion, deletions
   * never confirmed), their runners go offline in GitHub, and the Node reports Ready Unknown.
   */
  async loseNode(nodeName: string): Promise<void> {
    this.lostNodes.add(nodeName);
    for (const sim of this.pods.values()) {
      if (sim.node !== nodeName) continue;
      sim.jobTimer?.cancel();
      sim.jobTimer = undefined;
      const id = sim.runnerId;
      if (id !== undefined && this.double.model.runners.get(id)?.status === 'online') {
        this.double.model.setRunnerState(id, { status: 'offline' });
      }
    }
    if (!this.nodeNames.includes(nodeName)) return;
    const now = rfc3339(this.clock.now());
    await this.track(
      this.patchStatus(NODES, nodeName, {
        status: {
          conditions: [
            {
              type: 'Ready',
              status: 'Unknown',
              reason: 'NodeStatusUnknown',
              message: 'Kubelet stopped posting node status.',
              lastHeartbeatTime: now,
              lastTransitionTime: now,
            },
          ],
        },
      }).catch((err) => this.log.warn({ err: String(err), node: nodeName }, 'could not mark node lost')),
    );
  }

  // -------------------------------------------------------------------------------- jobs

  /**
   * Starts queued jobs on idle online runners of this agent whose labels (and scope) fit; returns
   * how many started. Runs on a timer; callable directly.
   */
  assignJobs(): number {
    if (this.state !== 'running' || this.queued.size === 0) return 0;
    const model = this.double.model;
    const idle: { sim: SimPod; runner: RunnerRecord; labels: string[] }[] = [];
    for (const sim of this.pods.values()) {
      if (!this.takingJobs(sim) || sim.jobId !== undefined) continue;
      const runner = model.runners.get(sim.runnerId!);
      if (runner?.status !== 'online' || runner.busy) continue;
      idle.push({ sim, runner, labels: runner.labels.map((l) => l.name) });
    }
    if (idle.length === 0) return 0;
    let started = 0;
    for (const jobId of [...this.queued].sort((a, b) => a - b)) {
      const job = model.jobs.get(jobId);
      if (job?.status !== 'queued') {
        this.queued.delete(jobId);
        continue;
      }
      const i = idle.findIndex(
        (c) => scopeServes(c.runner.scope, job.owner, job.repo) && labelsMatch(c.labels, job.labels),
      );
      if (i < 0) continue;
      const [c] = idle.splice(i, 1);
      if (this.startJob(c!.sim, c!.runner, job)) started++;
      if (idle.length === 0) break;
    }
    return started;
  }

  private startJob(sim: SimPod, runner: RunnerRecord, job: JobRecord): boolean {
    // Tracked before the model's job-changed event fires, so the event is not taken for a foreign start.
    sim.jobId = job.id;
    this.jobs.set(job.id, sim);
    try {
      this.double.model.startJob(job.id, runner.id);
    } catch (err) {
      sim.jobId = undefined;
      this.jobs.delete(job.id);
      this.log.warn({ err: String(err), job: job.id, pod: sim.name }, 'could not start job');
      return false;
    }
    this.queued.delete(job.id);
    this.jobStarted(sim, job, true);
    return true;
  }

  /** Bookkeeping for a job now running on `sim`; `timed` arms its completion after its duration. */
  private jobStarted(sim: SimPod, job: JobRecord, timed: boolean): void {
    sim.jobId = job.id;
    this.jobs.set(job.id, sim);
    this.counters.jobsStarted++;
    this.emit('job-started', sim, { jobId: job.id });
    if (!timed) return;
    const ms = Math.max(0, this.jobDuration(job));
    sim.jobTimer = this.clock.setTimer(ms, () => {
      sim.jobTimer = undefined;
      this.finishJob(sim, job.id);
    });
  }

  private finishJob(sim: SimPod, jobId: number): void {
    if (this.isStopped() || sim.gone || this.isLost(sim) || sim.jobId !== jobId) return;
    const job = this.double.model.jobs.get(jobId);
    if (job?.status !== 'in_progress' || job.runner_id !== sim.runnerId) return;
    // The model's job-changed event does the bookkeeping (and the ephemeral runner's exit).
    this.double.model.completeJob(jobId, 'success');
  }

  private onModel(e: ModelEvent): void {
    if (this.isStopped()) return;
    if (e.type === 'job-changed') {
      const job = e.job;
      if (job.status === 'queued') this.queued.add(job.id);
      else this.queued.delete(job.id);
      if (job.status === 'in_progress' && job.runner_id !== null && !this.jobs.has(job.id)) {
        // Someone else (a test, the sandbox) started a job on one of our runners: it ends when they say.
        const sim = this.runners.get(job.runner_id);
        if (sim && !sim.gone && sim.runnerId === job.runner_id && sim.jobId === undefined) {
          this.jobStarted(sim, job, false);
        }
      }
      if (job.status !== 'completed') return;
      const sim = this.jobs.get(job.id);
      if (!sim) return;
      this.jobs.delete(job.id);
      if (sim.jobId === job.id) {
        sim.jobId = undefined;
        sim.jobTimer?.cancel();
        sim.jobTimer = undefined;
      }
      if (job.conclusion === 'cancelled') {
        this.counters.jobsCancelled++;
        this.emit('job-cancelled', sim, { jobId: job.id });
      } else {
        this.counters.jobsCompleted++;
        this.emit('job-completed', sim, { jobId: job.id });
      }
      // An ephemeral runner (run.sh --once / --ephemeral) exits after its job.
      if (sim.ephemeral && !sim.gone && sim.runner === 'listening') {
        this.exitRunner(sim, 0, 'Completed', 'job-finished');
      }
      return;
    }
    if (e.type === 'runner-removed') {
      const sim = this.runners.get(e.runner.id);
      if (!sim) return;
      this.runners.delete(e.runner.id);
      if (sim.gone && e.reason === 'replaced') this.counters.leaksReplaced++;
      if (e.reason === 'ephemeral-finished' || sim.runnerId !== e.runner.id) return;
      // Removed from GitHub (unregistered, vanished, replaced) under a running job: the job is lost.
      if (sim.jobId !== undefined && this.double.model.jobs.get(sim.jobId)?.status === 'in_progress') {
        this.double.model.completeJob(sim.jobId, 'cancelled');
      }
      // The listener learns its registration is gone and run.sh ends with 0.
      if (!sim.gone && (sim.runner === 'listening' || sim.runner === 'configuring')) {
        this.exitRunner(sim, 0, 'Completed', 'runner-removed');
      }
    }
  }

  // -------------------------------------------------------------------------------- pod events

  private onPod(pod: PodObject): void {
    if (this.isStopped()) return;
    const name = pod.metadata.name ?? '';
    const uid = pod.metadata.uid ?? '';
    let sim = this.pods.get(name);
    if (sim && sim.uid !== uid) {
      this.podGone(sim);
      sim = undefined;
    }
    if (!sim) {
      sim = this.newSim(pod);
      this.pods.set(name, sim);
      this.counters.podsSeen++;
      this.emit('pod-seen', sim);
      if (!pod.metadata.deletionTimestamp) {
        if (pod.spec?.nodeName && pod.status?.phase && pod.status.phase !== 'Pending') this.adopt(sim);
        else this.after(this.startupDelayMs, () => this.enqueue(sim!, () => this.startPod(sim!)));
      }
    }
    sim.obj = pod;
    if (pod.spec?.nodeName) sim.node = pod.spec.nodeName;
    if (pod.metadata.deletionTimestamp && !sim.deleting) {
      sim.deleting = true;
      this.emit('pod-deleting', sim);
      const graceEnd = Date.parse(pod.metadata.deletionTimestamp);
      if (!Number.isNaN(graceEnd)) {
        const pending = sim;
        this.after(Math.max(0, graceEnd - this.clock.now()), () => this.endGracePeriod(pending));
      }
    }
    this.maybeConfirmDeletion(sim);
  }

  private onPodDeleted(pod: PodObject): void {
    const sim = this.pods.get(pod.metadata.name ?? '');
    if (sim && sim.uid === pod.metadata.uid) this.podGone(sim);
  }

  private podGone(sim: SimPod): void {
    if (sim.gone) return;
    sim.gone = true;
    sim.goneAt = this.clock.now();
    if (this.pods.get(sim.name) === sim) this.pods.delete(sim.name);
    sim.jobTimer?.cancel();
    sim.jobTimer = undefined;
    this.counters.podsGone++;
    this.emit('pod-gone', sim);
    if (this.isStopped()) return;
    const model = this.double.model;
    // The runner process died with its pod: a job it was running ends as cancelled.
    if (sim.jobId !== undefined && model.jobs.get(sim.jobId)?.status === 'in_progress') {
      model.completeJob(sim.jobId, 'cancelled');
    }
    const id = sim.runnerId;
    if (id !== undefined && model.runners.get(id)?.status === 'online') {
      model.setRunnerState(id, { status: 'offline' });
    }
  }

  private newSim(pod: PodObject): SimPod {
    const owner = pod.metadata.ownerReferences?.find((r) => r.controller);
    const uid = pod.metadata.uid ?? '';
    const mk = (c: ContainerSpec, i: number): SimContainer => ({
      name: c.name,
      image: c.image ?? '',
      containerId: `containerd://${createHash('sha256').update(`${uid}/${c.name}/${i}`).digest('hex')}`,
      restartCount: 0,
      state: { kind: 'waiting', reason: 'ContainerCreating' },
    });
    return {
      name: pod.metadata.name ?? '',
      uid,
      owner: owner ? `${owner.kind}/${owner.name}` : undefined,
      obj: pod,
      node: pod.spec?.nodeName,
      podIP: undefined,
      startedAt: undefined,
      started: false,
      readySince: undefined,
      notReadySince: undefined,
      containers: (pod.spec?.containers ?? []).map(mk),
      initContainers: (pod.spec?.initContainers ?? []).map(mk),
      runner: 'none',
      runnerId: undefined,
      runnerName: undefined,
      ephemeral: true,
      labels: [],
      env: undefined,
      jobId: undefined,
      jobTimer: undefined,
      deleting: false,
      deleteSent: false,
      gone: false,
      goneAt: undefined,
      statusQueued: false,
      chain: Promise.resolve(),
    };
  }

  /** A pod that was already running before this agent started: take over its reported state. */
  private adopt(sim: SimPod): void {
    const pod = sim.obj;
    const now = this.clock.now();
    sim.started = true;
    sim.podIP = pod.status?.podIP;
    sim.startedAt = pod.status?.startTime ? Date.parse(pod.status.startTime) : now;
    sim.readySince = now;
    for (const c of sim.containers) {
      const st = pod.status?.containerStatuses?.find((s) => s.name === c.name);
      c.restartCount = st?.restartCount ?? 0;
      const t = st?.state?.terminated;
      c.state = t
        ? {
            kind: 'terminated',
            startedAt: now,
            finishedAt: now,
            exitCode: t.exitCode ?? 0,
            reason: t.reason ?? 'Completed',
          }
        : { kind: 'running', startedAt: now };
    }
    for (const c of sim.initContainers) {
      c.state = { kind: 'terminated', startedAt: now, finishedAt: now, exitCode: 0, reason: 'Completed' };
    }
    const runnerC = sim.containers.find((c) => c.name === RUNNER_CONTAINER);
    if (runnerC?.state.kind !== 'running') {
      sim.runner = runnerC ? 'exited' : 'none';
      return;
    }
    const env = this.runnerEnv(sim);
    const scope = env.RUNNER_ENTERPRISE
      ? `enterprises/${env.RUNNER_ENTERPRISE}`
      : env.RUNNER_REPO
        ? `repos/${env.RUNNER_REPO}`
        : env.RUNNER_ORG
          ? `orgs/${env.RUNNER_ORG}`
          : undefined;
    const runner = scope ? this.double.model.findRunnerByName(scope, env.RUNNER_NAME || sim.name) : undefined;
    if (!runner) {
      sim.runner = 'waiting';
      this.after(this.registrationDelayMs, () => this.configure(sim));
      return;
    }
    this.recordRunner(sim, runner);
    const job = [...this.double.model.jobs.values()].find(
      (j) => j.status === 'in_progress' && j.runner_id === runner.id,
    );
    if (job) this.jobStarted(sim, job, true);
  }

  // -------------------------------------------------------------------------------- kubelet

  private async startPod(sim: SimPod): Promise<void> {
    if (sim.gone || sim.deleting || sim.started || this.isStopped()) return;
    // Bound on an earlier attempt that then waited for a Secret: the watch may not show it yet.
    let node = sim.obj.spec?.nodeName ?? sim.node;
    if (!node) {
      node = this.pickNode();
      if (!node) {
        this.after(RETRY_MS, () => this.enqueue(sim, () => this.startPod(sim)));
        return;
      }
      try {
        await this.http.request('POST', `${resourcePath(PODS, this.namespace, sim.name)}/binding`, {
          body: {
            apiVersion: 'v1',
            kind: 'Binding',
            metadata: { name: sim.name, uid: sim.uid },
            target: { apiVersion: 'v1', kind: 'Node', name: node },
          },
          signal: this.abort.signal,
        });
      } catch (err) {
        if (isNotFound(err) || this.isStopped()) return;
        if (!isConflict(err)) {
          this.log.warn({ err: String(err), pod: sim.name }, 'binding failed; retrying');
          this.after(RETRY_MS, () => this.enqueue(sim, () => this.startPod(sim)));
          return;
        }
        // Already bound (by someone else): read where.
        const current = await this.http
          .request<PodObject>('GET', resourcePath(PODS, this.namespace, sim.name), {
            signal: this.abort.signal,
          })
          .catch(() => undefined);
        node = current?.spec?.nodeName;
        if (!node) return;
      }
    }
    sim.node = node;
    if (this.isLost(sim)) return;
    if (!(await this.resolveRunnerEnv(sim))) {
      this.after(RETRY_MS, () => this.enqueue(sim, () => this.startPod(sim)));
      return;
    }
    if (sim.gone || sim.deleting || this.isLost(sim) || this.isStopped()) return;
    const now = this.clock.now();
    sim.podIP = this.podIP();
    sim.startedAt = now;
    for (const c of sim.initContainers) {
      c.state = { kind: 'terminated', startedAt: now, finishedAt: now, exitCode: 0, reason: 'Completed' };
    }
    for (const c of sim.containers) c.state = { kind: 'running', startedAt: now };
    try {
      await this.writeStatus(sim);
    } catch (err) {
      if (isNotFound(err) || this.isStopped()) return;
      this.log.warn({ err: String(err), pod: sim.name }, 'status update failed; retrying');
      for (const c of sim.containers) c.state = { kind: 'waiting', reason: 'ContainerCreating' };
      this.after(RETRY_MS, () => this.enqueue(sim, () => this.startPod(sim)));
      return;
    }
    sim.started = true;
    this.counters.podsStarted++;
    this.emit('pod-started', sim);
    if (sim.containers.some((c) => c.name === RUNNER_CONTAINER)) {
      sim.runner = 'waiting';
      this.after(this.registrationDelayMs, () => this.configure(sim));
    }
  }

  private maybeConfirmDeletion(sim: SimPod): void {
    const pod = sim.obj;
    if (!pod.metadata.deletionTimestamp || sim.deleteSent || sim.gone || this.isStopped()) return;
    if ((pod.metadata.finalizers ?? []).length > 0) return;
    if (!pod.spec?.nodeName || this.lostNodes.has(pod.spec.nodeName)) return;
    sim.deleteSent = true;
    this.enqueue(sim, async () => {
      try {
        await this.http.request('DELETE', resourcePath(PODS, this.namespace, sim.name), {
          query: { gracePeriodSeconds: 0 },
          body: {
            apiVersion: 'v1',
            kind: 'DeleteOptions',
            gracePeriodSeconds: 0,
            preconditions: { uid: sim.uid },
          },
          signal: this.abort.signal,
        });
        this.counters.podsDeletedByKubelet++;
      } catch (err) {
        if (isNotFound(err) || isConflict(err) || this.isStopped()) return;
        this.log.warn({ err: String(err), pod: sim.name }, 'confirming deletion failed; retrying');
        sim.deleteSent = false;
        this.after(RETRY_MS, () => this.maybeConfirmDeletion(sim));
      }
    });
  }

  private syncStatus(sim: SimPod): void {
    if (sim.statusQueued || sim.gone || this.isLost(sim) || this.isStopped()) return;
    sim.statusQueued = true;
    this.enqueue(sim, async () => {
      sim.statusQueued = false;
      if (sim.gone || this.isLost(sim)) return;
      try {
        await this.writeStatus(sim);
      } catch (err) {
        if (isNotFound(err) || this.isStopped()) return;
        this.log.warn({ err: String(err), pod: sim.name }, 'status update failed; retrying');
        this.after(RETRY_MS, () => this.syncStatus(sim));
      }
    });
  }

  private async writeStatus(sim: SimPod): Promise<void> {
    await this.patchStatus(PODS, sim.name, { status: this.buildStatus(sim) }, this.namespace);
  }

  private buildStatus(sim: SimPod): Record<string, unknown> {
    const now = this.clock.now();
    const ready = sim.containers.length > 0 && sim.containers.every((c) => c.state.kind === 'running');
    if (ready && sim.readySince === undefined) {
      sim.readySince = now;
      sim.notReadySince = undefined;
    } else if (!ready && sim.notReadySince === undefined) {
      sim.notReadySince = now;
      sim.readySince = undefined;
    }
    const readyAt = rfc3339((ready ? sim.readySince : sim.notReadySince) ?? now);
    const started = rfc3339(sim.startedAt ?? now);
    const unready = sim.containers.filter((c) => c.state.kind !== 'running').map((c) => c.name);
    const notReady = ready
      ? {}
      : { reason: 'ContainersNotReady', message: `containers with unready status: [${unready.join(' ')}]` };
    const status = (c: SimContainer) => {
      const s = c.state;
      return {
        name: c.name,
        image: c.image,
        imageID: c.image
          ? `${c.image.split(':')[0]}@sha256:${createHash('sha256').update(c.image).digest('hex')}`
          : '',
        containerID: c.containerId,
        ready: s.kind === 'running',
        started: s.kind === 'running',
        restartCount: c.restartCount,
        state:
          s.kind === 'running'
            ? { running: { startedAt: rfc3339(s.startedAt) } }
            : s.kind === 'waiting'
              ? { waiting: { reason: s.reason } }
              : {
                  terminated: {
                    exitCode: s.exitCode,
                    reason: s.reason,
                    ...(s.message ? { message: s.message } : {}),
                    startedAt: rfc3339(s.startedAt),
                    finishedAt: rfc3339(s.finishedAt),
                    containerID: c.containerId,
                  },
                },
        lastState: {},
      };
    };
    const phase = podPhase(
      sim.containers.map((c) =>
        c.state.kind === 'terminated' ? { exitCode: c.state.exitCode } : c.state.kind,
      ),
      sim.obj.spec?.restartPolicy,
    );
    const nodeIndex = Math.max(0, this.nodeNames.indexOf(sim.node ?? ''));
    const hostIP = `10.0.1.${nodeIndex + 1}`;
    return {
      phase,
      conditions: [
        {
          type: 'PodReadyToStartContainers',
          status: 'True',
          lastProbeTime: null,
          lastTransitionTime: started,
        },
        { type: 'Initialized', status: 'True', lastProbeTime: null, lastTransitionTime: started },
        {
          type: 'Ready',
          status: ready ? 'True' : 'False',
          lastProbeTime: null,
          lastTransitionTime: readyAt,
          ...notReady,
        },
        {
          type: 'ContainersReady',
          status: ready ? 'True' : 'False',
          lastProbeTime: null,
          lastTransitionTime: readyAt,
          ...notReady,
        },
        { type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: started },
      ],
      hostIP,
      hostIPs: [{ ip: hostIP }],
      podIP: sim.podIP,
      podIPs: sim.podIP ? [{ ip: sim.podIP }] : [],
      startTime: started,
      qosClass: 'BestEffort',
      ...(sim.initContainers.length ? { initContainerStatuses: sim.initContainers.map(status) } : {}),
      containerStatuses: sim.containers.map(status),
    };
  }

  // -------------------------------------------------------------------------------- runner process

  /** The runner container's env: as resolved at its start, else its literal values. */
  private runnerEnv(sim: SimPod): Record<string, string> {
    if (sim.env) return sim.env;
    const c = sim.obj.spec?.containers?.find((x) => x.name === RUNNER_CONTAINER);
    const env: Record<string, string> = {};
    for (const e of c?.env ?? []) if (typeof e.value === 'string' && !e.valueFrom) env[e.name] = e.value;
    return env;
  }

  /**
   * Reads the Secrets the runner container's env refers to and resolves it into `sim.env`; false
   * when the container cannot start yet (a Secret or key missing, or the read failed).
   */
  private async resolveRunnerEnv(sim: SimPod): Promise<boolean> {
    if (sim.env) return true;
    const c = sim.obj.spec?.containers?.find((x) => x.name === RUNNER_CONTAINER);
    if (!c) return true;
    const secrets = new Map<string, Record<string, string>>();
    try {
      for (const name of referencedSecrets(c.env ?? [])) {
        const secret = await this.http
          .request<{ data?: Record<string, string> }>('GET', resourcePath(SECRETS, this.namespace, name), {
            signal: this.abort.signal,
          })
          .catch((err) => {
            if (isNotFound(err)) return undefined;
            throw err;
          });
        if (!secret) continue;
        const data: Record<string, string> = {};
        for (const [k, v] of Object.entries(secret.data ?? {}))
          data[k] = Buffer.from(v, 'base64').toString('utf8');
        secrets.set(name, data);
      }
    } catch (err) {
      if (!this.isStopped())
        this.log.warn({ err: String(err), pod: sim.name }, 'reading the runner Secrets failed; retrying');
      return false;
    }
    const resolved = resolveEnv(c.env ?? [], secrets);
    if (!resolved.ok) {
      // The kubelet reports CreateContainerConfigError and tries again.
      this.log.info(
        { pod: sim.name, reason: resolved.reason },
        'runner container cannot start yet; retrying',
      );
      return false;
    }
    sim.env = resolved.env;
    return true;
  }

  /** The runner's config step (config.sh --unattended --replace, or run.sh --jitconfig). */
  private configure(sim: SimPod): void {
    if (sim.gone || sim.deleting || sim.runner !== 'waiting' || this.isLost(sim) || this.isStopped()) {
      return;
    }
    if (!sim.env) {
      // A pod adopted from before this agent started: read its Secrets first.
      this.enqueue(sim, async () => {
        const ready = await this.resolveRunnerEnv(sim);
        this.after(ready ? 0 : RETRY_MS, () => this.configure(sim));
      });
      return;
    }
    sim.runner = 'configuring';
    const env = this.runnerEnv(sim);
    const jit = env.ACTIONS_RUNNER_INPUT_JITCONFIG;
    const token = env.RUNNER_TOKEN;
    const ephemeral = (env.RUNNER_EPHEMERAL ?? 'true').trim().toLowerCase() !== 'false';
    let runner: RunnerRecord;
    try {
      if (jit) {
        runner = this.double.model.registerRunner({ jitConfig: jit });
      } else if (token) {
        const group = runnerGroupFor(env, this.double.model.runnerGroups.values());
        if (group.error) throw new Error(group.error);
        runner = this.double.model.registerRunner({
          registrationToken: token,
          name: env.RUNNER_NAME || sim.name,
          labels: parseRunnerLabels(env.RUNNER_LABELS),
          ephemeral,
          replace: true,
          ...(group.id !== undefined ? { runnerGroupId: group.id } : {}),
        });
      } else {
        throw new Error('neither RUNNER_TOKEN nor ACTIONS_RUNNER_INPUT_JITCONFIG is set');
      }
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.log.warn(
        { pod: sim.name, reason: message },
        'runner registration failed; the runner container exits 1',
      );
      this.counters.registrationFailures++;
      this.exitRunner(sim, 1, 'Error', 'registration-failed', message);
      return;
    }
    this.recordRunner(sim, runner);
    this.counters.runnersRegistered++;
    this.emit('runner-registered', sim);
  }

  private recordRunner(sim: SimPod, runner: RunnerRecord): void {
    sim.runnerId = runner.id;
    sim.runnerName = runner.name;
    sim.ephemeral = runner.ephemeral;
    sim.labels = runner.labels.map((l) => l.name);
    sim.runner = 'listening';
    this.runners.set(runner.id, sim);
  }

  private exitRunner(sim: SimPod, exitCode: number, reason: string, why: string, message?: string): void {
    if (sim.runner === 'exited') return;
    sim.runner = 'exited';
    sim.jobTimer?.cancel();
    sim.jobTimer = undefined;
    const c = sim.containers.find((x) => x.name === RUNNER_CONTAINER);
    if (c) {
      const now = this.clock.now();
      c.state = {
        kind: 'terminated',
        startedAt: c.state.kind === 'running' ? c.state.startedAt : now,
        finishedAt: now,
        exitCode,
        reason,
        ...(message ? { message } : {}),
      };
    }
    this.counters.runnerExits++;
    this.emit('runner-exited', sim, { exitCode, reason: why, ...(message ? { message } : {}) });
    this.syncStatus(sim);
  }

  // -------------------------------------------------------------------------------- plumbing

  private isStopped(): boolean {
    return this.state === 'stopped';
  }

  private takingJobs(sim: SimPod): boolean {
    return (
      sim.runner === 'listening' &&
      sim.runnerId !== undefined &&
      !sim.gone &&
      !sim.deleting &&
      !this.isLost(sim)
    );
  }

  private isLost(sim: SimPod): boolean {
    return sim.node !== undefined && this.lostNodes.has(sim.node);
  }

  private requirePod(name: string): SimPod {
    const sim = this.pods.get(name);
    if (!sim) throw new Error(`pod ${name} is not known to the node agent`);
    return sim;
  }

  private pickNode(): string | undefined {
    const healthy = this.nodeNames.filter((n) => !this.lostNodes.has(n));
    if (healthy.length === 0) return undefined;
    return healthy[Math.min(healthy.length - 1, Math.floor(this.random() * healthy.length))];
  }

  private podIP(): string {
    const n = Math.floor(this.random() * 65_000) + 2;
    return `10.244.${Math.floor(n / 256)}.${n % 256 || 1}`;
  }

  private emit(type: NodeAgentEventType, sim: SimPod, extra: Partial<NodeAgentEvent> = {}): void {
    const e: NodeAgentEvent = {
      type,
      at: this.clock.now(),
      pod: sim.name,
      uid: sim.uid,
      ...(sim.owner ? { owner: sim.owner } : {}),
      ...(sim.node ? { node: sim.node } : {}),
      ...(sim.runnerId !== undefined ? { runnerId: sim.runnerId } : {}),
      ...(sim.runnerName !== undefined ? { runnerName: sim.runnerName } : {}),
      ...(sim.jobId !== undefined ? { jobId: sim.jobId } : {}),
      ...extra,
    };
    for (const l of this.listeners) {
      try {
        l(e);
      } catch (err) {
        this.log.error({ err: String(err) }, 'node agent event listener threw');
      }
    }
  }

  /** Runs `fn` after `ms` of agent time unless the agent stopped. */
  private after(ms: number, fn: () => void): void {
    if (this.isStopped()) return;
    const t = this.clock.setTimer(ms, () => {
      this.timers.delete(t);
      if (!this.isStopped()) fn();
    });
    this.timers.add(t);
  }

  /** Serialises a pod's API writes (binding before status, status updates in order). */
  private enqueue(sim: SimPod, fn: () => Promise<void>): void {
    const p = sim.chain.then(async () => {
      if (!this.isStopped()) await fn();
    });
    sim.chain = p.catch((err) => this.log.warn({ err: String(err), pod: sim.name }, 'pod operation failed'));
    void this.track(sim.chain);
  }

  private track(p: Promise<void>): Promise<void> {
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
    return p;
  }

  private armAssign(): void {
    if (this.state !== 'running') return;
    this.assignTimer = this.clock.setTimer(this.assignIntervalMs, () => {
      try {
        this.assignJobs();
      } catch (err) {
        this.log.error({ err: String(err) }, 'assigning jobs failed');
      }
      this.armAssign();
    });
  }

  private async patchStatus(r: ResourceRef, name: string, body: unknown, namespace?: string): Promise<void> {
    await this.http.request('PATCH', `${resourcePath(r, namespace, name)}/status`, {
      body,
      contentType: PATCH_CONTENT_TYPES.merge,
      query: { fieldManager: FIELD_MANAGER },
      signal: this.abort.signal,
    });
  }

  private async ensureNode(name: string, index: number): Promise<void> {
    try {
      await this.http.request('POST', resourcePath(NODES), {
        body: {
          apiVersion: 'v1',
          kind: 'Node',
          metadata: {
            name,
            labels: {
              'kubernetes.io/hostname': name,
              'kubernetes.io/os': 'linux',
              'kubernetes.io/arch': 'amd64',
              'paddock.dev/sim-node': 'true',
            },
          },
          spec: {},
        },
        query: { fieldManager: FIELD_MANAGER },
        signal: this.abort.signal,
      });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
    const now = rfc3339(this.clock.now());
    const resources = { cpu: '16', memory: '64Gi', pods: '110', 'ephemeral-storage': '200Gi' };
    await this.patchStatus(NODES, name, {
      status: {
        capacity: resources,
        allocatable: resources,
        addresses: [
          { type: 'InternalIP', address: `10.0.1.${index + 1}` },
          { type: 'Hostname', address: name },
        ],
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'kubelet is posting ready status (simulated by the paddock sandbox)',
            lastHeartbeatTime: now,
            lastTransitionTime: now,
          },
        ],
        nodeInfo: {
          machineID: name,
          systemUUID: name,
          bootID: name,
          kernelVersion: '6.8.0-sim',
          osImage: 'paddock sandbox',
          containerRuntimeVersion: 'containerd://sim',
          kubeletVersion: 'v1.33.0-sim',
          kubeProxyVersion: '',
          operatingSystem: 'linux',
          architecture: 'amd64',
        },
      },
    });
  }
}
