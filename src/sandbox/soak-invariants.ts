/**
 * The soak's invariants, checked as observations arrive and once at the end. Pure: the soak feeds
 * it what the node agent, the GitHub double and the API server show, with their times, and reads
 * the violations, each with its evidence. Nothing here knows how the faults are made.
 */

export interface InvariantLimits {
  /** paddock's force-delete timeout for pods on lost nodes; a pod Terminating longer than this + 1 min is a violation. */
  forceDeleteTimeoutMs: number;
  /** Longest stretch the fleet may stay below its desired count outside excused windows. */
  replacementBoundMs: number;
  /** Lease duration + renew deadline: the longest a leader's death may leave no one acting. */
  takeoverBoundMs: number;
  /** RSS growth above this (median pairwise slope over a process's settled lifetime) is a leak. */
  memoryGrowthMiBPerHour: number;
  /** A process's RSS trend is judged only over at least this long (shorter runs are noise). */
  memoryTrendMinSpanMs: number;
}

export type InvariantName =
  | 'job-cancelled-by-paddock'
  | 'busy-runner-pod-deleted'
  | 'busy-runner-removed'
  | 'pod-terminating-too-long'
  | 'fleet-below-desired'
  | 'slow-takeover'
  | 'runner-leaked'
  | 'drain-incomplete'
  | 'secret-exposed'
  | 'memory-growth';

export interface Violation {
  invariant: InvariantName;
  /** Epoch ms of the observation that proved it. */
  at: number;
  evidence: string;
}

export interface RssSample {
  at: number;
  mib: number;
}

/** The highest sample of each whole minute since the first sample. */
export function minuteMaxima(samples: readonly RssSample[]): number[] {
  const out: number[] = [];
  const start = samples[0]?.at ?? 0;
  for (const s of samples) {
    const i = Math.floor((s.at - start) / 60_000);
    out[i] = Math.max(out[i] ?? 0, s.mib);
  }
  return Array.from(out, (x) => x ?? 0);
}

/**
 * The RSS trend in MiB per hour: the median slope over all pairs of samples (Theil–Sen); null with
 * fewer than 3 samples or no span. A leak raises nearly every pair; a one-off step (a burst of work
 * after a fault, which glibc and V8 keep as capacity) raises only the pairs that straddle it, so
 * unlike a least-squares line it does not read a step followed by a plateau as a trend.
 */
export function rssSlopeMiBPerHour(samples: readonly RssSample[]): number | null {
  if (samples.length < 3) return null;
  // At most ~400 points (80,000 pairs): every k-th sample of a long series.
  const k = Math.ceil(samples.length / 400);
  const pts = samples.filter((_, i) => i % k === 0);
  const slopes: number[] = [];
  for (let i = 0; i < pts.length; i++) {
    for (let j = i + 1; j < pts.length; j++) {
      const dt = pts[j]!.at - pts[i]!.at;
      if (dt > 0) slopes.push((pts[j]!.mib - pts[i]!.mib) / dt);
    }
  }
  if (slopes.length === 0) return null;
  slopes.sort((a, b) => a - b);
  const mid = slopes.length >> 1;
  const median = slopes.length % 2 ? slopes[mid]! : (slopes[mid - 1]! + slopes[mid]!) / 2;
  return median * 3_600_000;
}

/** Total length of the parts of [from, to] that some window covers. */
export function coveredMs(
  from: number,
  to: number,
  windows: readonly { from: number; to: number }[],
): number {
  const parts = windows
    .map((w) => ({ from: Math.max(from, w.from), to: Math.min(to, w.to) }))
    .filter((w) => w.to > w.from)
    .sort((a, b) => a.from - b.from);
  let total = 0;
  let end = from;
  for (const p of parts) {
    const start = Math.max(p.from, end);
    if (p.to > start) {
      total += p.to - start;
      end = p.to;
    }
  }
  return total;
}

export class InvariantMonitor {
  private readonly found: Violation[] = [];
  private readonly reportedPods = new Set<string>();
  /**
   * Slots of the fleet left empty, with when: a runner exited, a live runner's pod went, the
   * desired count rose. Dropped once older than the bound outside excused windows.
   */
  private vacancies: { at: number; count: number }[] = [];
  private lastDesired: number | undefined;
  private belowReported = false;
  /** Windows in which a shortfall is excused: GitHub failing, the control plane or paddock down. */
  private readonly excused: { from: number; to: number; why: string }[] = [];
  private readonly controlPlaneDown: { from: number; to: number }[] = [];
  /** When the API server could not be reached at all (its restart or etcd's, until ready again). */
  private readonly outages: { from: number; to: number }[] = [];
  private readonly rss = new Map<string, RssSample[]>();

  readonly limits: InvariantLimits;

  constructor(limits: InvariantLimits) {
    this.limits = limits;
  }

  get violations(): readonly Violation[] {
    return this.found;
  }

  private violate(invariant: InvariantName, at: number, evidence: string): void {
    this.found.push({ invariant, at, evidence });
  }

  /**
   * A shortfall during [from, to] is not counted against the replacement bound. `controlPlane`:
   * nobody could act on the cluster then (the API server or etcd down, the leader dead), so the
   * time does not count against a Terminating pod either.
   */
  excuse(from: number, to: number, why: string, opts: { controlPlane?: boolean } = {}): void {
    this.excused.push({ from, to, why });
    if (opts.controlPlane) this.controlPlaneDown.push({ from, to });
  }

  /** A job ended cancelled; `chaos` when a fault (a crashed runner, a lost node) explains it. */
  jobCancelled(e: {
    at: number;
    jobId: number;
    pod: string;
    chaos: boolean;
    message?: string | undefined;
  }): void {
    if (e.chaos) return;
    this.violate(
      'job-cancelled-by-paddock',
      e.at,
      `job ${e.jobId} on pod ${e.pod} was cancelled: ${e.message ?? 'its pod or runner went mid-job'}`,
    );
  }

  /** A pod's deletion began while its runner ran a job (pods on lost nodes excepted by the caller). */
  busyPodDeleted(e: { at: number; pod: string; jobId: number }): void {
    this.violate('busy-runner-pod-deleted', e.at, `pod ${e.pod} was deleted while running job ${e.jobId}`);
  }

  /** GitHub removed a runner while it ran a job (a removal the 422 gate should have refused). */
  busyRunnerRemoved(e: { at: number; runner: string; jobId: number | undefined }): void {
    this.violate(
      'busy-runner-removed',
      e.at,
      `runner ${e.runner} was removed while busy (job ${e.jobId ?? '?'})`,
    );
  }

  /**
   * The pods now Terminating, with their deletionTimestamp (the end of their grace period, from
   * which paddock's force-delete timeout counts). Time the control plane was down is not counted.
   */
  terminating(
    now: number,
    pods: readonly { name: string; deletingSince: number; node?: string | undefined }[],
  ): void {
    const limit = this.limits.forceDeleteTimeoutMs + 60_000;
    for (const p of pods) {
      const overdue = now - p.deletingSince - coveredMs(p.deletingSince, now, this.controlPlaneDown);
      if (overdue <= limit || this.reportedPods.has(p.name)) continue;
      this.reportedPods.add(p.name);
      this.violate(
        'pod-terminating-too-long',
        now,
        `pod ${p.name}${p.node ? ` on ${p.node}` : ''} still Terminating ${Math.round((now - p.deletingSince) / 1000)} s after its grace period ended${overdue < now - p.deletingSince ? ` (${Math.round(overdue / 1000)} s with the control plane up)` : ''} (limit ${limit / 1000} s)`,
      );
    }
  }

  /** `count` slots of the fleet were left empty at `at` (a runner exited, a live runner's pod went). */
  vacancy(at: number, count = 1): void {
    if (count > 0) this.vacancies.push({ at, count });
  }

  /**
   * The fleet now: the owner's desired count and the runners taking jobs. Ephemeral runners leave
   * all the time, so the fleet is rarely whole; what must hold is that no slot stays empty longer
   * than the bound (time in excused windows not counted). Every slot emptied within the bound
   * explains one runner short; a shortfall larger than that means some slot has been empty longer.
   */
  fleet(now: number, desired: number, live: number): void {
    if (desired > (this.lastDesired ?? 0)) this.vacancy(now, desired - (this.lastDesired ?? 0));
    this.lastDesired = desired;
    const age = (v: { at: number }) => now - v.at - coveredMs(v.at, now, this.excused);
    this.vacancies = this.vacancies.filter((v) => age(v) <= this.limits.replacementBoundMs);
    const recent = this.vacancies.reduce((n, v) => n + v.count, 0);
    const short = desired - live;
    if (short <= recent) {
      this.belowReported = false;
      return;
    }
    if (this.belowReported) return;
    this.belowReported = true;
    this.violate(
      'fleet-below-desired',
      now,
      `${live} of ${desired} runners live: ${short} short, but only ${recent} slots were emptied in the last ${this.limits.replacementBoundMs / 1000} s outside faults; a slot has stayed empty longer`,
    );
  }

  /**
   * The API server answered nothing during [from, to] (it or etcd restarted). No replica can take
   * a Lease over then, so that time does not count against a takeover.
   */
  outage(from: number, to: number): void {
    this.outages.push({ from, to });
  }

  /** From the leader's death (`ms` before `at`) to another replica acting. */
  takeover(at: number, ms: number): void {
    const down = coveredMs(at - ms, at, this.outages);
    if (ms - down > this.limits.takeoverBoundMs) {
      this.violate(
        'slow-takeover',
        at,
        `takeover took ${Math.round(ms)} ms${down > 0 ? ` (${Math.round(ms - down)} ms with the API server up)` : ''} (bound ${this.limits.takeoverBoundMs} ms)`,
      );
    }
  }

  /** A credential found where none may be (`what in where`). */
  secretExposed(at: number, finding: string): void {
    this.violate('secret-exposed', at, finding);
  }

  /** One RSS sample of a paddock process (`process` names it: a restarted one is a new series). */
  rssSample(process: string, sample: RssSample): void {
    const series = this.rss.get(process) ?? [];
    series.push(sample);
    this.rss.set(process, series);
  }

  /**
   * Each process's RSS trend over the second half of its life. The first half holds start-up and,
   * for a standby that takes over, the growth to a leader's working set (caches filled, queues
   * busy): a one-off step, not a leak. A leak keeps growing through the second half.
   */
  memoryTrends(): {
    process: string;
    spanMs: number;
    slopeMiBPerHour: number | null;
    first: number;
    last: number;
    /** The highest sample of each minute of the process's life: the evidence behind the slope. */
    minuteMaxMiB: number[];
  }[] {
    return [...this.rss].map(([process, samples]) => {
      const span = samples.length ? samples.at(-1)!.at - samples[0]!.at : 0;
      const settled = samples.filter((s) => s.at >= samples[0]!.at + span / 2);
      return {
        process,
        spanMs: span,
        slopeMiBPerHour: rssSlopeMiBPerHour(settled),
        first: settled[0]?.mib ?? 0,
        last: settled.at(-1)?.mib ?? 0,
        minuteMaxMiB: minuteMaxima(samples),
      };
    });
  }

  /**
   * The end of the soak: runners still registered with GitHub after the final drain, and runner
   * pods or Runners the drain could not remove.
   */
  finish(now: number, leaked: readonly string[], left: readonly string[] = []): readonly Violation[] {
    for (const r of leaked)
      this.violate('runner-leaked', now, `runner ${r} still registered with GitHub after the drain`);
    for (const o of left) this.violate('drain-incomplete', now, `${o} still there after the drain`);
    for (const t of this.memoryTrends()) {
      if (t.spanMs < this.limits.memoryTrendMinSpanMs || t.slopeMiBPerHour === null) continue;
      if (t.slopeMiBPerHour > this.limits.memoryGrowthMiBPerHour) {
        this.violate(
          'memory-growth',
          now,
          `${t.process}: RSS grew ${t.slopeMiBPerHour.toFixed(1)} MiB/h over ${Math.round(t.spanMs / 60_000)} min (${t.first} → ${t.last} MiB; limit ${this.limits.memoryGrowthMiBPerHour} MiB/h)`,
        );
      }
    }
    return this.found;
  }
}
