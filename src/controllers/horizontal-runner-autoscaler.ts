import {
  API_VERSION,
  HORIZONTAL_RUNNER_AUTOSCALERS,
  type HorizontalRunnerAutoscaler,
  RUNNER_DEPLOYMENTS,
  RUNNER_SETS,
  RUNNERS,
  type Runner,
  type RunnerDeployment,
  type RunnerSet,
} from '../api/index.ts';
import { GitHubApiError, type GitHubClient, scopeIfValid } from '../github/index.ts';
import { WorkflowDemand } from '../github/workflow-demand.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { EventRecorder } from '../runtime/events.ts';
import { type Informer, predicates, type ResourceRef, type Watchable } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import type { Manager } from '../runtime/manager.ts';
import { mergePatch } from '../runtime/objects.ts';
import { type LabelSelector, selectorMatches } from '../runtime/selector.ts';
import { type KubeObject, objectKey, splitKey } from '../runtime/store.ts';
import { AutoscalerMetrics, type MetricTarget } from './autoscaler-metrics.ts';
import {
  AutoscalingError,
  afterPrimary,
  busyRatioReplicas,
  DEFAULT_SCALE_DOWN_DELAY_MS,
  desiredReplicas,
  metricTypes,
  minReplicasAt,
  PERCENTAGE_RUNNERS_BUSY,
  type ScheduledOverride,
  scheduledOverridesSummary,
  statusUpdate,
  supportedMetric,
  targetPatch,
} from './autoscaling.ts';
import { runnerPodInformer } from './cache-shapes.ts';
import { reservationsFromSpec } from './capacity-reservations.ts';
import {
  ANNOTATION_UNREGISTRATION_FAILURE,
  LABEL_RUNNER_DEPLOYMENT_NAME,
  LABEL_RUNNERSET_NAME,
  rfc3339,
} from './constants.ts';
import type { GitHubClientSource, PodObject } from './runner-pod.ts';
import { type ScaleTargetRunnerSpec, scaleTargetOf, writeScaleTarget } from './scale-target.ts';

/**
 * The HorizontalRunnerAutoscaler controller (spec §3.8, §7.1–7.4): for a RunnerDeployment or
 * RunnerSet target, the minReplicas of the moment (scheduled overrides), the pull metrics, the
 * capacity reservations the webhook server writes, the bounds and the scale-down delay make the
 * desired replicas (the arithmetic is `autoscaling.ts`, pure); this class gathers the facts,
 * patches the target and the status. Unlike ARC it also comes back by itself when the answer will
 * change with time alone: a schedule period starting or ending, a reservation expiring, the
 * scale-down delay running out.
 */

const KIND = 'HorizontalRunnerAutoscaler';

export interface HorizontalRunnerAutoscalerOptions {
  manager: Manager;
  github: GitHubClientSource;
  namespace?: string;
  /** `--default-scale-down-delay` (ARC's default: 10 min). */
  defaultScaleDownDelayMs?: number;
  /**
   * TotalNumberOfQueuedAndInProgressWorkflowRuns is asked of GitHub about once per this interval
   * per HRA (the sync period, as ARC; at most twice in one); reconciles in between (a target
   * scaled, a reservation written) reuse the last answer unless the HRA's spec changed. Default:
   * every reconcile.
   */
  workflowMetricIntervalMs?: number;
}

interface Target {
  kind: 'RunnerDeployment' | 'RunnerSet';
  ref: ResourceRef;
  object: RunnerDeployment | RunnerSet;
  spec: ScaleTargetRunnerSpec;
  replicas: number | undefined;
  effectiveTime: string | null | undefined;
  /** Names of its runners in Kubernetes (Runners of a deployment, pods of a set). */
  runnerNames: () => Set<string>;
  /** The label that names the target on its pods. */
  podLabel: string;
}

const time = (v: string | null | undefined): number | undefined => {
  if (!v) return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
};

export class HorizontalRunnerAutoscalerReconciler {
  readonly controller: Controller;
  private readonly hras: Informer<HorizontalRunnerAutoscaler>;
  private readonly deployments: Informer<RunnerDeployment>;
  private readonly runnerSets: Informer<RunnerSet>;
  private readonly runners: Informer<Runner>;
  private readonly pods: Watchable<PodObject>;
  private readonly http: KubeHttp;
  private readonly clock: Clock;
  private readonly events: EventRecorder;
  private readonly opts: HorizontalRunnerAutoscalerOptions;
  /** Per HRA: what its workflow runs looked like last time (jobs listed again only for changed runs). */
  private readonly demand = new Map<string, WorkflowDemand>();
  /** Per HRA and metric: the last workflow-run count, when, and for which spec generation. */
  private readonly lastCount = new Map<string, { at: number; generation: number; value: number }>();
  private readonly metrics: AutoscalerMetrics;

  constructor(opts: HorizontalRunnerAutoscalerOptions) {
    const m = opts.manager;
    this.opts = opts;
    this.http = m.http;
    this.clock = m.clock;
    this.events = m.events;
    this.metrics = new AutoscalerMetrics(m.metrics.registry);
    const ns = opts.namespace ? { namespace: opts.namespace } : {};
    this.hras = m.informer<HorizontalRunnerAutoscaler>(HORIZONTAL_RUNNER_AUTOSCALERS, ns);
    this.deployments = m.informer<RunnerDeployment>(RUNNER_DEPLOYMENTS, ns);
    this.runnerSets = m.informer<RunnerSet>(RUNNER_SETS, ns);
    this.runners = m.informer<Runner>(RUNNERS, ns);
    this.pods = runnerPodInformer(m, opts.namespace);
    const hrasOf = (kind: string) => (target: { metadata: { namespace?: string; name?: string } }) =>
      this.hras.store
        .list()
        .filter(
          (h) =>
            h.metadata.namespace === target.metadata.namespace &&
            h.spec.scaleTargetRef?.name === target.metadata.name &&
            (h.spec.scaleTargetRef?.kind || 'RunnerDeployment') === kind,
        )
        .map(objectKey);
    this.controller = m
      .controller({
        name: 'horizontalrunnerautoscaler-controller',
        concurrency: 2,
        reconcile: (req, ctx) => this.reconcile(req.key, ctx),
      })
      .watchFor(this.hras)
      // A target created after its HRA, or whose spec changes. Not its status: a deployment's figures
      // change every second at scale, and each pass may send a pull metric's requests to GitHub.
      .watchMapped(this.deployments, hrasOf('RunnerDeployment'), [predicates.specOrMetadataChanged])
      .watchMapped(this.runnerSets, hrasOf('RunnerSet'), [predicates.specOrMetadataChanged]);
  }

  async reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const hra = this.hras.store.get(key);
    if (!hra || hra.metadata.deletionTimestamp) {
      this.demand.delete(key);
      for (const k of this.lastCount.keys()) if (k.startsWith(`${key}#`)) this.lastCount.delete(k);
      const { namespace, name } = splitKey(key);
      this.metrics.forget({ namespace: namespace ?? '', name });
      return undefined;
    }
    const id = { namespace: hra.metadata.namespace ?? '', name: hra.metadata.name ?? '' };
    this.metrics.specReplicas(id, hra.spec.minReplicas ?? undefined, hra.spec.maxReplicas ?? undefined);
    const target = this.targetOf(hra);
    if (!target) {
      ctx.log.debug('scale target not found (or being deleted)');
      return undefined;
    }
    const now = this.clock.now();
    const spec = hra.spec;
    const status = hra.status ?? {};
    let desired: number;
    let minimum: ReturnType<typeof minReplicasAt>;
    try {
      const types = metricTypes({
        name: hra.metadata.name ?? '',
        namespace: hra.metadata.namespace ?? '',
        minReplicas: spec.minReplicas ?? undefined,
        maxReplicas: spec.maxReplicas ?? undefined,
        metrics: spec.metrics ?? undefined,
      });
      minimum = minReplicasAt(spec.minReplicas ?? undefined, overridesOf(hra), now);
      const suggested = await this.suggest(key, hra, target, types, ctx);
      desired = desiredReplicas({
        suggested,
        minReplicas: minimum.minReplicas,
        maxReplicas: spec.maxReplicas ?? undefined,
        reservations: reservationsOf(hra),
        status: {
          desiredReplicas: status.desiredReplicas ?? undefined,
          lastSuccessfulScaleOutTime: time(status.lastSuccessfulScaleOutTime),
        },
        scaleDownDelayMs: this.scaleDownDelayMs(hra),
        now,
      });
    } catch (err) {
      if (!(err instanceof AutoscalingError) && !(err instanceof GitHubApiError)) throw err;
      this.event(hra, 'Warning', 'RunnerAutoscalingFailure', err.message);
      ctx.log.warn({ err: err.message }, 'cannot compute the desired replicas');
      const resetAt = err instanceof GitHubApiError ? err.rateLimitResetAt : undefined;
      return resetAt !== undefined ? { requeueAfterMs: Math.max(1000, resetAt - now) } : undefined;
    }

    const patch = targetPatch({
      currentReplicas: target.replicas,
      desired,
      ephemeral: target.spec.ephemeral,
      currentEffectiveTime: time(target.effectiveTime),
      reservations: reservationsOf(hra),
    });
    if (patch) {
      const written = await writeScaleTarget(this.http, hra, target, patch);
      if (written === 'autoscaler-gone' || written === 'target-gone') return undefined;
      if (written !== 'written') {
        // The caches are behind a change that will reach them (and queue this HRA) shortly.
        ctx.log.debug({ outcome: written }, 'the decision was made from an old state; not written');
        return { requeueAfterMs: 1000 };
      }
      if (patch.replicas !== undefined) {
        ctx.log.info({ target: target.object.metadata.name, replicas: patch.replicas }, 'scaled the target');
      }
    }
    const summary = scheduledOverridesSummary(
      spec.minReplicas ?? undefined,
      minimum.active,
      minimum.upcoming,
    );
    const update = statusUpdate({
      status: {
        desiredReplicas: status.desiredReplicas ?? undefined,
        lastSuccessfulScaleOutTime: time(status.lastSuccessfulScaleOutTime),
        scheduledOverridesSummary: status.scheduledOverridesSummary ?? undefined,
      },
      desired,
      summary,
      now,
    });
    if (update) {
      if (update.desiredReplicas !== undefined) this.metrics.desiredReplicas(id, update.desiredReplicas);
      const body: Record<string, unknown> = { ...update };
      if (update.lastSuccessfulScaleOutTime !== undefined) {
        body.lastSuccessfulScaleOutTime = rfc3339(update.lastSuccessfulScaleOutTime);
      }
      try {
        await mergePatch(
          this.http,
          HORIZONTAL_RUNNER_AUTOSCALERS,
          hra,
          { status: body },
          { subresource: 'status' },
        );
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    const next = this.nextChange(hra, minimum, now, update?.lastSuccessfulScaleOutTime);
    return next !== undefined ? { requeueAfterMs: Math.max(1000, next - now + 1) } : undefined;
  }

  /** The pull metrics' suggestion (spec §7.1); undefined: none (minReplicas). */
  private async suggest(
    key: string,
    hra: HorizontalRunnerAutoscaler,
    target: Target,
    types: string[],
    ctx: ReconcileContext,
  ): Promise<number | undefined> {
    if (types.length === 0) return undefined;
    const primary = await this.metric(key, hra, target, 0, supportedMetric(types[0]!), ctx);
    const next = afterPrimary(types, primary);
    if (next === 'primary') return primary;
    if (next === 'minimum') return undefined;
    return await this.metric(key, hra, target, 1, supportedMetric(types[1]!), ctx);
  }

  private async metric(
    key: string,
    hra: HorizontalRunnerAutoscaler,
    target: Target,
    index: number,
    type: string,
    ctx: ReconcileContext,
  ): Promise<number> {
    const m = hra.spec.metrics?.[index] ?? {};
    const client = await this.clientFor(hra, target);
    const before = target.replicas ?? 1;
    if (type === PERCENTAGE_RUNNERS_BUSY) {
      const scope = scopeIfValid(target.spec);
      if (!scope)
        throw new AutoscalingError(`scale target ${target.object.metadata.name} names no GitHub scope`);
      // The shared runner registry: a fresh-enough list costs nothing more.
      const snapshot = await client.registry.get(scope, { signal: ctx.signal });
      const names = target.runnerNames();
      const terminatingBusy = new Set(
        this.pods.store
          .list()
          .filter(
            (p) =>
              p.metadata.namespace === hra.metadata.namespace &&
              p.metadata.labels?.[target.podLabel] === target.object.metadata.name &&
              p.metadata.annotations?.[ANNOTATION_UNREGISTRATION_FAILURE],
          )
          .map((p) => p.metadata.name ?? ''),
      );
      let registered = 0;
      let busy = 0;
      let leavingBusy = 0;
      for (const r of snapshot.runners) {
        if (!names.has(r.name)) continue;
        registered++;
        if (r.busy) busy++;
        else if (terminatingBusy.has(r.name)) leavingBusy++;
        terminatingBusy.delete(r.name);
      }
      leavingBusy += terminatingBusy.size;
      const desired = busyRatioReplicas(
        {
          scaleUpThreshold: m.scaleUpThreshold ?? undefined,
          scaleDownThreshold: m.scaleDownThreshold ?? undefined,
          scaleUpFactor: m.scaleUpFactor ?? undefined,
          scaleDownFactor: m.scaleDownFactor ?? undefined,
          scaleUpAdjustment: m.scaleUpAdjustment ?? undefined,
          scaleDownAdjustment: m.scaleDownAdjustment ?? undefined,
        },
        busy + leavingBusy,
        before,
      );
      this.metrics.busyRatio(this.id(hra), metricTarget(target), {
        desired,
        runners: names.size,
        registered,
        busy,
        terminatingBusy: leavingBusy,
      });
      return desired;
    }
    const repos = reposOf(target, m.repositoryNames ?? undefined);
    const generation = hra.metadata.generation ?? 0;
    const now = this.clock.now();
    const last = this.lastCount.get(`${key}#${index}`);
    const interval = this.opts.workflowMetricIntervalMs ?? 0;
    // Half the interval: a resync that comes a little early (resyncs are spread) still asks.
    if (last && last.generation === generation && now - last.at < interval / 2) return last.value;
    let demand = this.demand.get(key);
    if (!demand) {
      demand = new WorkflowDemand(client, this.clock);
      this.demand.set(key, demand);
    }
    const count = await demand.count(repos, target.spec.labels ?? [], { signal: ctx.signal });
    ctx.log.debug({ ...count }, 'workflow demand');
    this.metrics.workflowRuns(this.id(hra), metricTarget(target), count);
    this.lastCount.set(`${key}#${index}`, { at: now, generation, value: count.necessary });
    return count.necessary;
  }

  /** When the answer changes with time alone: a schedule boundary, a reservation expiry, the end of the delay. */
  private nextChange(
    hra: HorizontalRunnerAutoscaler,
    minimum: ReturnType<typeof minReplicasAt>,
    now: number,
    scaledOutNow: number | undefined,
  ): number | undefined {
    const due: number[] = [];
    if (minimum.active) due.push(minimum.active.end);
    if (minimum.upcoming) due.push(minimum.upcoming.start);
    for (const r of reservationsOf(hra))
      if (r.expirationTime !== undefined && r.expirationTime > now) due.push(r.expirationTime);
    const scaledOut = scaledOutNow ?? time(hra.status?.lastSuccessfulScaleOutTime);
    if (scaledOut !== undefined) {
      const end = scaledOut + this.scaleDownDelayMs(hra);
      if (end > now) due.push(end);
    }
    return due.length > 0 ? Math.min(...due) : undefined;
  }

  private id(hra: HorizontalRunnerAutoscaler): { namespace: string; name: string } {
    return { namespace: hra.metadata.namespace ?? '', name: hra.metadata.name ?? '' };
  }

  private scaleDownDelayMs(hra: HorizontalRunnerAutoscaler): number {
    const s = hra.spec.scaleDownDelaySecondsAfterScaleOut;
    return s !== undefined && s !== null
      ? s * 1000
      : (this.opts.defaultScaleDownDelayMs ?? DEFAULT_SCALE_DOWN_DELAY_MS);
  }

  private targetOf(hra: HorizontalRunnerAutoscaler): Target | undefined {
    const found = scaleTargetOf(hra, {
      deployments: this.deployments.store,
      runnerSets: this.runnerSets.store,
    });
    if (!found || found.object.metadata.deletionTimestamp) return undefined;
    const namespace = hra.metadata.namespace;
    const object = found.object;
    const deployment = found.kind === 'RunnerDeployment';
    const podLabel = deployment ? LABEL_RUNNER_DEPLOYMENT_NAME : LABEL_RUNNERSET_NAME;
    const selector: LabelSelector = object.spec.selector ?? {
      matchLabels: { [podLabel]: object.metadata.name ?? '' },
    };
    // A deployment's runners are its Runners; a set's are its pods.
    const members = (): KubeObject[] => (deployment ? this.runners.store.list() : this.pods.store.list());
    return {
      kind: found.kind,
      ref: deployment ? RUNNER_DEPLOYMENTS : RUNNER_SETS,
      object,
      spec: found.runnerSpec,
      replicas: object.spec.replicas ?? undefined,
      effectiveTime: object.spec.effectiveTime,
      runnerNames: () =>
        new Set(
          members()
            .filter((o) => o.metadata.namespace === namespace && selectorMatches(selector, o.metadata.labels))
            .map((o) => o.metadata.name ?? ''),
        ),
      podLabel,
    };
  }

  private async clientFor(hra: HorizontalRunnerAutoscaler, target: Target): Promise<GitHubClient> {
    const { namespace, name } = splitKey(objectKey(hra));
    return await this.opts.github.clientFor({
      namespace: namespace ?? 'default',
      name: `horizontalrunnerautoscaler/${name}`,
      credentialsSecret:
        hra.spec.githubAPICredentialsFrom?.secretRef?.name ??
        target.spec.githubAPICredentialsFrom?.secretRef?.name,
    });
  }

  private event(
    hra: HorizontalRunnerAutoscaler,
    type: 'Normal' | 'Warning',
    reason: string,
    note: string,
  ): void {
    this.events.record({
      regarding: { ...hra, apiVersion: API_VERSION, kind: KIND },
      type,
      reason,
      note,
      action: 'Reconcile',
    });
  }
}

function metricTarget(t: Target): MetricTarget {
  return {
    enterprise: t.spec.enterprise,
    organization: t.spec.organization,
    repository: t.spec.repository,
    kind: t.kind,
    name: t.object.metadata.name ?? '',
  };
}

function overridesOf(hra: HorizontalRunnerAutoscaler): ScheduledOverride[] {
  return (hra.spec.scheduledOverrides ?? []).map((o) => ({
    startTime: time(o.startTime) ?? 0,
    endTime: time(o.endTime) ?? 0,
    minReplicas: o.minReplicas,
    frequency: o.recurrenceRule?.frequency ?? undefined,
    untilTime: time(o.recurrenceRule?.untilTime),
  }));
}

function reservationsOf(hra: HorizontalRunnerAutoscaler) {
  return reservationsFromSpec(hra.spec.capacityReservations);
}

/** The repositories TotalNumberOfQueuedAndInProgressWorkflowRuns looks at (spec §7.2.1 step 1). */
export function reposOf(
  target: { spec: { organization?: string | undefined; repository?: string | undefined } },
  repositoryNames: readonly string[] | undefined,
): { owner: string; repo: string }[] {
  const repo = target.spec.repository;
  if (repo) {
    const [owner, name] = repo.split('/');
    return [{ owner: owner ?? '', repo: name ?? '' }];
  }
  const org = target.spec.organization;
  if (!org) {
    throw new AutoscalingError(
      'asserting runner deployment spec to detect bug: spec.template.organization should not be empty on this code path',
    );
  }
  if (!repositoryNames || repositoryNames.length === 0) {
    throw new AutoscalingError(
      'validating autoscaling metrics: spec.autoscaling.metrics[].repositoryNames is required and must have one more more entries for organizational runner deployment',
    );
  }
  return repositoryNames.map((r) => ({ owner: org, repo: r }));
}
