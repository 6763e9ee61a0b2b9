import type { Clock, Timer } from '../runtime/clock.ts';
import { realClock } from '../runtime/clock.ts';
import type { GitHubDouble, JobRecord } from '../testenv/github-double/index.ts';

/**
 * The fleet simulator's demand side: queues workflow jobs in the GitHub double as a Poisson process
 * (exponential inter-arrival times), each with a label set drawn by weight and a duration drawn from
 * a distribution. The node agent asks `durationOf(jobId)` how long a job it starts should run.
 *
 * Random draws per job, in this order: inter-arrival time, label set, repository (when there are
 * several), duration; so a seeded `random` gives the same workload every time.
 */

export type DurationDistribution =
  | { kind: 'fixed'; ms: number }
  | { kind: 'uniform'; minMs: number; maxMs: number }
  | { kind: 'exponential'; meanMs: number };

export interface LabelChoice {
  /** The job's `runs-on` labels (matched case-insensitively; `self-hosted` is on every runner). */
  labels: string[];
  /** Relative weight (default 1). */
  weight?: number;
}

export interface WorkloadTarget {
  /** Organization or user owning the repositories. */
  owner: string;
  /** One repository, or several to pick from uniformly. */
  repo: string | string[];
}

export interface WorkloadOptions {
  /** Where jobs are queued: a GitHubDouble (only `createJob` is used). */
  double: Pick<GitHubDouble, 'createJob'>;
  /** Mean arrival rate in jobs per minute (> 0). */
  ratePerMinute: number;
  duration: DurationDistribution;
  target: WorkloadTarget;
  /** Label sets with weights; default one set, `['self-hosted']`. */
  labels?: LabelChoice[];
  /** Stop after creating this many jobs. */
  maxJobs?: number;
  /** Job name in the double (default `build`). */
  jobName?: string;
  clock?: Clock;
  /** Uniform in [0, 1); default Math.random. */
  random?: () => number;
  /** Called for every job created. */
  onJob?: (job: JobRecord, durationMs: number) => void;
}

export interface WorkloadStats {
  created: number;
  /** Jobs created per label set, keyed by the labels joined with `,`. */
  byLabels: Record<string, number>;
  /** Sum of the drawn durations. */
  totalDurationMs: number;
  running: boolean;
  /** `maxJobs` reached. */
  exhausted: boolean;
}

/** Exponentially distributed sample with the given mean, from a uniform draw in [0, 1). */
export function exponentialSample(mean: number, u: number): number {
  return Math.max(0, -Math.log(1 - Math.min(u, 1 - Number.EPSILON)) * mean);
}

/** A duration in whole milliseconds (never negative) from one uniform draw. */
export function sampleDuration(d: DurationDistribution, u: number): number {
  switch (d.kind) {
    case 'fixed':
      return Math.max(0, Math.round(d.ms));
    case 'uniform':
      return Math.max(0, Math.round(d.minMs + u * (d.maxMs - d.minMs)));
    case 'exponential':
      return Math.max(0, Math.round(exponentialSample(d.meanMs, u)));
  }
}

/** Index of the choice a uniform draw falls on, by weight (default weight 1). */
export function pickWeighted(choices: { weight?: number }[], u: number): number {
  const weights = choices.map((c) => Math.max(0, c.weight ?? 1));
  const total = weights.reduce((a, b) => a + b, 0);
  if (choices.length === 0) throw new Error('nothing to choose from');
  if (total <= 0) return 0;
  let at = u * total;
  for (let i = 0; i < weights.length; i++) {
    at -= weights[i]!;
    if (at < 0) return i;
  }
  return weights.length - 1;
}

export class WorkloadGenerator {
  private readonly opts: WorkloadOptions;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly labelChoices: LabelChoice[];
  private readonly durations = new Map<number, number>();
  private readonly byLabels: Record<string, number> = {};
  private timer: Timer | undefined;
  private running = false;
  private created = 0;
  private totalDurationMs = 0;

  constructor(opts: WorkloadOptions) {
    if (!(opts.ratePerMinute > 0) || !Number.isFinite(opts.ratePerMinute)) {
      throw new Error(`ratePerMinute must be a positive number, not ${opts.ratePerMinute}`);
    }
    const d = opts.duration;
    if (d.kind === 'uniform' && d.maxMs < d.minMs) throw new Error('uniform duration: maxMs < minMs');
    if (Array.isArray(opts.target.repo) && opts.target.repo.length === 0) throw new Error('no repositories');
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
    this.random = opts.random ?? Math.random;
    this.labelChoices = opts.labels?.length ? opts.labels : [{ labels: ['self-hosted'] }];
  }

  /** Starts queuing jobs; the first one arrives after one inter-arrival time. Idempotent. */
  start(): void {
    if (this.running || this.exhausted) return;
    this.running = true;
    this.scheduleNext();
  }

  /** Stops queuing jobs (already created ones stay). Idempotent. */
  stop(): void {
    this.running = false;
    this.timer?.cancel();
    this.timer = undefined;
  }

  /** The drawn duration of a job this generator created. */
  durationOf(jobId: number): number | undefined {
    return this.durations.get(jobId);
  }

  /** IDs of the jobs created so far, oldest first. */
  jobIds(): number[] {
    return [...this.durations.keys()];
  }

  get exhausted(): boolean {
    return this.opts.maxJobs !== undefined && this.created >= this.opts.maxJobs;
  }

  stats(): WorkloadStats {
    return {
      created: this.created,
      byLabels: { ...this.byLabels },
      totalDurationMs: this.totalDurationMs,
      running: this.running,
      exhausted: this.exhausted,
    };
  }

  /** Creates one job now (label set, repository and duration drawn as for arrivals). */
  createJob(): JobRecord {
    const choice = this.labelChoices[pickWeighted(this.labelChoices, this.random())]!;
    const repos = this.opts.target.repo;
    const repo = Array.isArray(repos)
      ? repos[Math.min(repos.length - 1, Math.floor(this.random() * repos.length))]!
      : repos;
    const durationMs = sampleDuration(this.opts.duration, this.random());
    const job = this.opts.double.createJob({
      owner: this.opts.target.owner,
      repo,
      labels: [...choice.labels],
      ...(this.opts.jobName ? { name: this.opts.jobName } : {}),
    });
    this.durations.set(job.id, durationMs);
    this.created++;
    this.totalDurationMs += durationMs;
    const key = choice.labels.join(',');
    this.byLabels[key] = (this.byLabels[key] ?? 0) + 1;
    this.opts.onJob?.(job, durationMs);
    return job;
  }

  private scheduleNext(): void {
    const gapMs = exponentialSample(60_000 / this.opts.ratePerMinute, this.random());
    this.timer = this.clock.setTimer(gapMs, () => {
      this.timer = undefined;
      if (!this.running) return;
      this.createJob();
      if (this.exhausted) {
        this.running = false;
        return;
      }
      this.scheduleNext();
    });
  }
}
