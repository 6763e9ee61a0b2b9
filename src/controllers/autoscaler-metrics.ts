import { Gauge, type Registry } from 'prom-client';

/**
 * ARC's HorizontalRunnerAutoscaler gauges (spec §8.3), same names and labels. Unlike ARC, an HRA's
 * series are removed when the HRA goes, so a deleted autoscaler does not report forever.
 */

const HRA_LABELS = ['horizontalrunnerautoscaler', 'namespace'] as const;
const METRIC_LABELS = [
  'horizontalrunnerautoscaler',
  'namespace',
  'enterprise',
  'organization',
  'repository',
  'kind',
  'name',
] as const;

type HraLabel = (typeof HRA_LABELS)[number];
type MetricLabel = (typeof METRIC_LABELS)[number];

function gauge<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
): Gauge<L> {
  return (
    (registry.getSingleMetric(name) as Gauge<L> | undefined) ??
    new Gauge<L>({ name, help, labelNames: [...labelNames], registers: [registry] })
  );
}

export interface MetricTarget {
  enterprise?: string | undefined;
  organization?: string | undefined;
  repository?: string | undefined;
  kind: 'RunnerDeployment' | 'RunnerSet';
  name: string;
}

export class AutoscalerMetrics {
  private readonly spec: { min: Gauge<HraLabel>; max: Gauge<HraLabel>; desired: Gauge<HraLabel> };
  private readonly busy: Record<
    'desired' | 'runners' | 'registered' | 'busy' | 'terminatingBusy',
    Gauge<MetricLabel>
  >;
  private readonly runs: Record<
    'necessary' | 'completed' | 'inProgress' | 'queued' | 'unknown',
    Gauge<MetricLabel>
  >;

  constructor(registry: Registry) {
    const h = (name: string, help: string) =>
      gauge(registry, `horizontalrunnerautoscaler_${name}`, help, HRA_LABELS);
    const m = (name: string, help: string) =>
      gauge(registry, `horizontalrunnerautoscaler_${name}`, help, METRIC_LABELS);
    this.spec = {
      min: h('spec_min_replicas', 'spec.minReplicas of each HorizontalRunnerAutoscaler'),
      max: h('spec_max_replicas', 'spec.maxReplicas of each HorizontalRunnerAutoscaler'),
      desired: h('status_desired_replicas', 'status.desiredReplicas of each HorizontalRunnerAutoscaler'),
    };
    this.busy = {
      desired: m('replicas_desired', 'Replicas PercentageRunnersBusy asked for'),
      runners: m('runners', 'Runners of the scale target in Kubernetes'),
      registered: m('runners_registered', 'Runners of the scale target registered with GitHub'),
      busy: m('runners_busy', 'Runners of the scale target running a job'),
      terminatingBusy: m('terminating_busy', 'Runners of the scale target leaving while busy'),
    };
    this.runs = {
      necessary: m('necessary_replicas', 'Queued and in-progress jobs that fit the scale target'),
      completed: m('workflow_runs_completed', 'Completed workflow runs seen'),
      inProgress: m('workflow_runs_in_progress', 'In-progress jobs that fit the scale target'),
      queued: m('workflow_runs_queued', 'Queued jobs that fit the scale target'),
      unknown: m('workflow_runs_unknown', 'Runs and jobs in an unknown state'),
    };
  }

  /** The label sets each HRA reported under (its target may change), to remove them with it. */
  private readonly seen = new Map<string, Map<string, Record<MetricLabel, string>>>();

  private labels(hra: { namespace: string; name: string }, t: MetricTarget): Record<MetricLabel, string> {
    const l: Record<MetricLabel, string> = {
      horizontalrunnerautoscaler: hra.name,
      namespace: hra.namespace,
      enterprise: t.enterprise ?? '',
      organization: t.organization ?? '',
      repository: t.repository ?? '',
      kind: t.kind.toLowerCase(),
      name: t.name,
    };
    const key = `${hra.namespace}/${hra.name}`;
    let sets = this.seen.get(key);
    if (!sets) {
      sets = new Map();
      this.seen.set(key, sets);
    }
    sets.set(JSON.stringify(l), l);
    return l;
  }

  specReplicas(
    hra: { namespace: string; name: string },
    min: number | undefined,
    max: number | undefined,
  ): void {
    const l = { horizontalrunnerautoscaler: hra.name, namespace: hra.namespace };
    if (min !== undefined) this.spec.min.set(l, min);
    if (max !== undefined) this.spec.max.set(l, max);
  }

  desiredReplicas(hra: { namespace: string; name: string }, desired: number): void {
    this.spec.desired.set({ horizontalrunnerautoscaler: hra.name, namespace: hra.namespace }, desired);
  }

  busyRatio(
    hra: { namespace: string; name: string },
    t: MetricTarget,
    v: { desired: number; runners: number; registered: number; busy: number; terminatingBusy: number },
  ): void {
    const l = this.labels(hra, t);
    for (const k of Object.keys(this.busy) as (keyof typeof this.busy)[]) this.busy[k].set(l, v[k]);
  }

  workflowRuns(
    hra: { namespace: string; name: string },
    t: MetricTarget,
    v: { necessary: number; completed: number; inProgress: number; queued: number; unknown: number },
  ): void {
    const l = this.labels(hra, t);
    for (const k of Object.keys(this.runs) as (keyof typeof this.runs)[]) this.runs[k].set(l, v[k]);
  }

  /** The HRA is gone: its series go too. */
  forget(hra: { namespace: string; name: string }): void {
    const match = { horizontalrunnerautoscaler: hra.name, namespace: hra.namespace };
    for (const g of [this.spec.min, this.spec.max, this.spec.desired]) g.remove(match);
    const key = `${hra.namespace}/${hra.name}`;
    for (const l of this.seen.get(key)?.values() ?? []) {
      for (const g of [...Object.values(this.busy), ...Object.values(this.runs)]) g.remove(l);
    }
    this.seen.delete(key);
  }
}
