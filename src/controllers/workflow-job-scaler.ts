import type { Logger } from 'pino';
import { Counter } from 'prom-client';
import {
  HORIZONTAL_RUNNER_AUTOSCALERS,
  type HorizontalRunnerAutoscaler,
  RUNNER_DEPLOYMENTS,
  RUNNER_SETS,
  type RunnerDeployment,
  type RunnerSet,
} from '../api/index.ts';
import { GitHubApiError, type GitHubClient } from '../github/index.ts';
import { WorkflowDemand } from '../github/workflow-demand.ts';
import type { Clock, Timer } from '../runtime/clock.ts';
import type { Informer } from '../runtime/informer.ts';
import type { Manager } from '../runtime/manager.ts';
import { objectKey } from '../runtime/store.ts';
import { parseGoDuration } from './autoscaling.ts';
import {
  DEFAULT_TRIGGER_DURATION_MS,
  type ListedJob,
  planRepair,
  reservationsFromSpec,
  reservedJob,
} from './capacity-reservations.ts';
import { ReservationWriter } from './reservation-writer.ts';
import type { GitHubClientSource } from './runner-pod.ts';
import { scaleTargetOf } from './scale-target.ts';
import {
  findScaleTarget,
  type HraCandidate,
  planWorkflowJob,
  type RunnerGroup,
  type WorkflowJobDecision,
} from './workflow-job-plan.ts';

/**
 * Webhook-driven scaling, the effects around the pure `planWorkflowJob` and `planRepair`: the HRAs
 * and their targets come from informer caches (no API read per delivery), runner-group visibility
 * from GitHub when there are credentials (cached a minute per repository), reservations are
 * written by `ReservationWriter`. A repair pass lists, with conditional requests, the live jobs
 * of the repositories each webhook-driven HRA serves and corrects the reservations that lost
 * deliveries left wrong.
 */

export interface WorkflowJobScalerOptions {
  manager: Manager;
  namespace?: string | undefined;
  /** Credentials for runner-group visibility and the repair pass; without, neither happens. */
  github?: GitHubClientSource | undefined;
  /** Deliveries waiting to be written (`--queue-limit`). */
  queueLimit?: number | undefined;
  /** How often reservations are checked against GitHub; 0 disables the repair pass. */
  repairIntervalMs?: number | undefined;
  /**
   * How old a reservation must be before a repair may release it (GitHub's listings trail its
   * deliveries). Default: one repair interval, at most 2 min.
   */
  repairGraceMs?: number | undefined;
}

export const DEFAULT_REPAIR_INTERVAL_MS = 60_000;
const DEFAULT_REPAIR_GRACE_MS = 120_000;
const GROUPS_TTL_MS = 60_000;
/** Repositories a delivery came from are repaired for this long after it. */
const SEEN_REPO_MS = 60 * 60_000;

export type ScaleOutcome = WorkflowJobDecision & { queueFull?: boolean };

export class WorkflowJobScaler {
  readonly writer: ReservationWriter;
  private readonly opts: WorkflowJobScalerOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly hras: Informer<HorizontalRunnerAutoscaler>;
  private readonly deployments: Informer<RunnerDeployment>;
  private readonly runnerSets: Informer<RunnerSet>;
  private readonly groups = new Map<string, { at: number; groups: RunnerGroup[] }>();
  /** Per HRA: repositories its deliveries came from, and when last. */
  private readonly seenRepos = new Map<string, Map<string, number>>();
  private readonly demand = new Map<string, WorkflowDemand>();
  private readonly repairs: Counter<'action'>;
  private readonly stores: Parameters<typeof scaleTargetOf>[1];
  private timer: Timer | undefined;
  private repairing: Promise<void> | undefined;
  private stopped = false;

  constructor(opts: WorkflowJobScalerOptions) {
    const m = opts.manager;
    this.opts = opts;
    this.clock = m.clock;
    this.log = m.log.child({ component: 'workflow-job-scaler' });
    const ns = opts.namespace ? { namespace: opts.namespace } : {};
    this.hras = m.informer<HorizontalRunnerAutoscaler>(HORIZONTAL_RUNNER_AUTOSCALERS, ns);
    this.deployments = m.informer<RunnerDeployment>(RUNNER_DEPLOYMENTS, ns);
    this.runnerSets = m.informer<RunnerSet>(RUNNER_SETS, ns);
    this.stores = { deployments: this.deployments.store, runnerSets: this.runnerSets.store };
    this.writer = new ReservationWriter({
      http: m.http,
      clock: m.clock,
      log: this.log,
      cache: this.hras.store,
      queueLimit: opts.queueLimit,
      registry: m.metrics.registry,
    });
    const registry = m.metrics.registry;
    this.repairs =
      (registry.getSingleMetric('paddock_capacity_reservation_repairs_total') as
        | Counter<'action'>
        | undefined) ??
      new Counter({
        name: 'paddock_capacity_reservation_repairs_total',
        help: 'Capacity reservations corrected by the repair pass: added (a queued delivery was lost) or released (a completed one was)',
        labelNames: ['action'],
        registers: [registry],
      });
  }

  /** Starts the repair pass (after the caches have synced). */
  start(): void {
    const every = this.opts.repairIntervalMs ?? DEFAULT_REPAIR_INTERVAL_MS;
    if (!this.opts.github || every <= 0 || this.stopped) return;
    const tick = () => {
      this.timer = this.clock.setTimer(every, () => {
        this.repairing = this.repairAll().finally(() => {
          this.repairing = undefined;
          if (!this.stopped) tick();
        });
      });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    await this.repairing;
    this.writer.stop();
  }

  /** The answer to one checked delivery; a scale change is queued for writing. */
  async handle(event: string, payload: unknown, signal?: AbortSignal): Promise<ScaleOutcome> {
    const hras = this.candidates();
    let visibleGroups: RunnerGroup[] | undefined;
    const action = (payload as { action?: unknown }).action;
    const scales = event === 'workflow_job' && (action === 'queued' || action === 'completed');
    if (scales && this.opts.github && this.usesGroups(hras)) {
      visibleGroups = await this.visibleGroups(payload, signal);
    }
    const decision = planWorkflowJob({ event, payload, hras, visibleGroups });
    if (!decision.scale) return decision;
    const { namespace, name, op } = decision.scale;
    if (!this.writer.add({ namespace, name }, op)) {
      return { status: 200, body: decision.body, queueFull: true };
    }
    if (op.repo) {
      const key = `${namespace}/${name}`;
      const seen = this.seenRepos.get(key) ?? new Map<string, number>();
      seen.set(op.repo, this.clock.now());
      this.seenRepos.set(key, seen);
    }
    return decision;
  }

  /** The HRAs, in key order, with their targets' scope and labels (from the caches). */
  candidates(): HraCandidate[] {
    return this.hras.store
      .list()
      .sort((a, b) => objectKey(a).localeCompare(objectKey(b)))
      .map((h) => {
        const t = scaleTargetOf(h, this.stores);
        const target: HraCandidate['target'] = t && {
          kind: t.kind,
          ...scopeOf(t.runnerSpec),
          labels: t.runnerSpec.labels ?? [],
        };
        return {
          namespace: h.metadata.namespace ?? '',
          name: h.metadata.name ?? '',
          deleting: Boolean(h.metadata.deletionTimestamp),
          triggers: (h.spec.scaleUpTriggers ?? []).map((t) => ({
            workflowJob: Boolean(t.githubEvent?.workflowJob),
            durationMs: parseGoDuration(t.duration),
          })),
          target,
        };
      });
  }

  private usesGroups(hras: readonly HraCandidate[]): boolean {
    return hras.some((h) => h.target?.group || h.target?.enterprise);
  }

  /** The groups the job's repository may use; undefined (all count) when GitHub cannot say. */
  private async visibleGroups(payload: unknown, signal?: AbortSignal): Promise<RunnerGroup[] | undefined> {
    const repo = (payload as { repository?: { name?: unknown; owner?: { login?: unknown; type?: unknown } } })
      .repository;
    const owner = repo?.owner?.login;
    const name = repo?.name;
    if (typeof owner !== 'string' || typeof name !== 'string' || repo?.owner?.type === 'User')
      return undefined;
    const key = `${owner}/${name}`;
    const now = this.clock.now();
    const cached = this.groups.get(key);
    if (cached && cached.at > now - GROUPS_TTL_MS) return cached.groups;
    let client: GitHubClient;
    try {
      client = await this.opts.github!.clientFor({
        namespace: '',
        name: 'workflow-job-webhook',
        credentialsSecret: undefined,
      });
      const listed = await client.listRunnerGroupsVisibleTo(owner, name, { signal });
      const groups: RunnerGroup[] = listed.map((g) => ({
        scope: g.inherited ? 'Enterprise' : 'Organization',
        kind: g.default ? 'Default' : 'Custom',
        name: g.default ? '' : g.name,
      }));
      this.groups.set(key, { at: now, groups });
      if (this.groups.size > 10_000) this.groups.delete(this.groups.keys().next().value!);
      return groups;
    } catch (err) {
      // ARC answers 500 here; a delivery is worth more than a visibility check, so every managed group counts.
      this.log.warn(
        { err: (err as Error).message, repository: key },
        'cannot list the runner groups visible to the repository; every managed group counts',
      );
      return undefined;
    }
  }

  /** One repair pass over every webhook-driven HRA. */
  async repairAll(): Promise<void> {
    // One replica repairs: the others would spend the same budget for the same answer.
    if (!this.opts.manager.isLeader || !this.opts.manager.ready) return;
    const hras = this.candidates();
    const now = this.clock.now();
    for (const [key, seen] of this.seenRepos) {
      for (const [repo, at] of seen) if (at < now - SEEN_REPO_MS) seen.delete(repo);
      if (seen.size === 0 || !this.hras.store.get(key)) this.seenRepos.delete(key);
    }
    for (const key of this.demand.keys()) if (!this.hras.store.get(key)) this.demand.delete(key);
    for (const h of hras) {
      if (this.stopped) return;
      const trigger = h.triggers.length === 1 && h.triggers[0]!.workflowJob ? h.triggers[0]! : undefined;
      if (!trigger || !h.target || h.deleting) continue;
      try {
        await this.repair(h, trigger.durationMs, hras);
      } catch (err) {
        const e = err as Error;
        if (!(err instanceof GitHubApiError)) this.log.error({ err: e }, 'repair pass failed');
        else
          this.log.warn(
            { err: e.message, horizontalrunnerautoscaler: `${h.namespace}/${h.name}` },
            'cannot check capacity reservations against GitHub',
          );
      }
    }
  }

  private async repair(h: HraCandidate, durationMs: number | undefined, all: HraCandidate[]): Promise<void> {
    const key = `${h.namespace}/${h.name}`;
    const hra = this.hras.store.get(key);
    if (!hra) return;
    const reservations = reservationsFromSpec(hra.spec.capacityReservations);
    const repos = new Set<string>();
    if (h.target?.repository) repos.add(h.target.repository);
    for (const r of reservations) {
      const repo = reservedJob(r.name)?.repo;
      if (repo) repos.add(repo);
    }
    for (const repo of this.seenRepos.get(key)?.keys() ?? []) repos.add(repo);
    const org = h.target?.organization;
    for (const m of hra.spec.metrics ?? []) {
      for (const n of m.repositoryNames ?? []) if (org) repos.add(`${org}/${n}`);
    }
    const listed = [...repos]
      .map((r) => r.split('/'))
      .filter((p): p is [string, string] => p.length === 2 && Boolean(p[0]) && Boolean(p[1]))
      .map(([owner, repo]) => ({ owner, repo }));
    if (listed.length === 0) return;
    const client = await this.opts.github!.clientFor({
      namespace: h.namespace,
      name: `horizontalrunnerautoscaler/${h.name}`,
      credentialsSecret: hra.spec.githubAPICredentialsFrom?.secretRef?.name ?? this.targetSecret(hra),
    });
    const demand = this.demand.get(key) ?? new WorkflowDemand(client, this.clock);
    this.demand.set(key, demand);
    const live = await demand.liveJobs(listed, { waitForBudget: false });
    const jobs: ListedJob[] = live.jobs.map((j) => {
      const routed = findScaleTarget({
        owner: j.owner,
        ownerType: undefined,
        repo: j.repo,
        enterprise: h.target?.enterprise,
        labels: j.labels,
        hras: all,
      });
      return {
        id: j.id,
        repo: `${j.owner}/${j.repo}`,
        status: j.status,
        routesHere: routed?.hra.namespace === h.namespace && routed.hra.name === h.name,
      };
    });
    const ops = planRepair({
      reservations,
      listedRepos: new Set(listed.map((r) => `${r.owner}/${r.repo}`)),
      jobs,
      now: this.clock.now(),
      graceMs:
        this.opts.repairGraceMs ??
        Math.min(DEFAULT_REPAIR_GRACE_MS, this.opts.repairIntervalMs ?? DEFAULT_REPAIR_INTERVAL_MS),
      durationMs: durationMs && durationMs > 0 ? durationMs : DEFAULT_TRIGGER_DURATION_MS,
    });
    if (ops.length === 0) return;
    let added = 0;
    let released = 0;
    for (const op of ops) {
      if (!this.writer.add({ namespace: h.namespace, name: h.name }, op)) break;
      if (op.action === 'queued') added++;
      else released++;
    }
    this.repairs.inc({ action: 'added' }, added);
    this.repairs.inc({ action: 'released' }, released);
    this.log.info(
      { horizontalrunnerautoscaler: key, added, released },
      'repaired capacity reservations that lost deliveries left wrong',
    );
  }

  private targetSecret(hra: HorizontalRunnerAutoscaler): string | undefined {
    return scaleTargetOf(hra, this.stores)?.runnerSpec.githubAPICredentialsFrom?.secretRef?.name;
  }
}

function scopeOf(t: {
  enterprise?: string | null | undefined;
  organization?: string | null | undefined;
  repository?: string | null | undefined;
  group?: string | null | undefined;
}) {
  return {
    enterprise: t.enterprise ?? undefined,
    organization: t.organization ?? undefined,
    repository: t.repository ?? undefined,
    group: t.group ?? undefined,
  };
}
