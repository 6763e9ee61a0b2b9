import type { Clock } from '../runtime/clock.ts';
import type { CallOptions, WorkflowJobSummary, WorkflowRunSummary } from './client.ts';

/**
 * The TotalNumberOfQueuedAndInProgressWorkflowRuns metric (spec §7.2.1) at a fraction of ARC's API
 * spend. ARC lists a repository's queued and in-progress runs, then every such run's jobs, each
 * sync period. Here the run lists are conditional requests (free while nothing changed), and a
 * run's jobs are listed again only when the run's `updated_at` moved (GitHub bumps it with every
 * job change), so a quiet repository costs nothing and a busy one one job list per changed run.
 * `updated_at` has whole seconds: a listing is trusted only when taken well after the run's last
 * change (`SETTLED_MS`), so two changes within one second are never mistaken for one.
 */

/** How long after a run's `updated_at` its job listing is trusted to have seen that change. */
export const SETTLED_MS = 5_000;

export interface WorkflowLister {
  listWorkflowRunsPage(
    owner: string,
    repo: string,
    status: string,
    page: number,
    options?: CallOptions,
  ): Promise<{ runs: WorkflowRunSummary[]; hasNext: boolean }>;
  listRunJobsPage(
    owner: string,
    repo: string,
    runId: number,
    page: number,
    options?: CallOptions,
  ): Promise<{ jobs: WorkflowJobSummary[]; hasNext: boolean }>;
}

export interface DemandCount {
  /** Jobs that fit the target and are queued or in progress: the replicas the metric asks for. */
  necessary: number;
  queued: number;
  inProgress: number;
  completed: number;
  unknown: number;
}

const MAX_PAGES = 100;

export interface RepoJob extends WorkflowJobSummary {
  owner: string;
  repo: string;
}

/**
 * Whether a job counts for a target (ARC's pull-metric rule, case-sensitive unlike the webhook's):
 * it has labels, and every one but `self-hosted` is among the target's.
 */
export function jobCountsFor(jobLabels: readonly string[], targetLabels: readonly string[]): boolean {
  if (jobLabels.length === 0) return false;
  return jobLabels.every((l) => l === 'self-hosted' || targetLabels.includes(l));
}

export class WorkflowDemand {
  private readonly lister: WorkflowLister;
  /** Jobs of each run as last listed, with the run's `updated_at` then: `<owner>/<repo>#<run>`. */
  private readonly jobs = new Map<
    string,
    { updatedAt: string; listedAt: number; jobs: WorkflowJobSummary[] }
  >();
  private readonly clock: Clock;

  constructor(lister: WorkflowLister, clock: Clock) {
    this.lister = lister;
    this.clock = clock;
  }

  /** Counts the fitting jobs of the queued and in-progress runs of `repos`. Throws GitHubApiError. */
  async count(
    repos: readonly { owner: string; repo: string }[],
    targetLabels: readonly string[],
    options: CallOptions = {},
  ): Promise<DemandCount> {
    const live = await this.liveJobs(repos, options);
    const c: DemandCount = { ...live.runs, necessary: 0, queued: 0, inProgress: 0 };
    for (const job of live.jobs) {
      if (!jobCountsFor(job.labels, targetLabels)) continue;
      if (job.status === 'in_progress') c.inProgress++;
      else if (job.status === 'queued') c.queued++;
      else if (job.status !== 'completed') c.unknown++;
    }
    c.necessary = c.queued + c.inProgress;
    return c;
  }

  /**
   * The jobs of the queued and in-progress runs of `repos` (any status: a run in progress has
   * finished jobs too), and how many listed runs were completed or of an unknown status.
   */
  async liveJobs(
    repos: readonly { owner: string; repo: string }[],
    options: CallOptions = {},
  ): Promise<{ jobs: RepoJob[]; runs: { completed: number; unknown: number } }> {
    const jobs: RepoJob[] = [];
    const runs = { completed: 0, unknown: 0 };
    const seen = new Set<string>();
    for (const { owner, repo } of repos) {
      for (const status of ['queued', 'in_progress']) {
        for (let page = 1; page <= MAX_PAGES; page++) {
          const p = await this.lister.listWorkflowRunsPage(owner, repo, status, page, options);
          for (const run of p.runs) {
            const key = `${owner}/${repo}#${run.id}`;
            if (seen.has(key)) continue; // a run that moved from queued to in progress between lists
            seen.add(key);
            if (run.status === 'completed') {
              runs.completed++;
              continue;
            }
            if (run.status !== 'queued' && run.status !== 'in_progress') {
              runs.unknown++;
              continue;
            }
            for (const job of await this.jobsOf(owner, repo, run, options))
              jobs.push({ ...job, owner, repo });
          }
          if (!p.hasNext) break;
        }
      }
    }
    // Runs no longer queued or in progress need no memory.
    for (const k of this.jobs.keys()) if (!seen.has(k)) this.jobs.delete(k);
    return { jobs, runs };
  }

  private async jobsOf(
    owner: string,
    repo: string,
    run: WorkflowRunSummary,
    options: CallOptions,
  ): Promise<WorkflowJobSummary[]> {
    const key = `${owner}/${repo}#${run.id}`;
    const known = this.jobs.get(key);
    const changedAt = Date.parse(run.updatedAt);
    if (known && known.updatedAt === run.updatedAt && known.listedAt >= changedAt + SETTLED_MS)
      return known.jobs;
    const listedAt = this.clock.now();
    const jobs: WorkflowJobSummary[] = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const p = await this.lister.listRunJobsPage(owner, repo, run.id, page, options);
      jobs.push(...p.jobs);
      if (!p.hasNext) break;
    }
    this.jobs.set(key, { updatedAt: run.updatedAt, listedAt, jobs });
    return jobs;
  }
}
