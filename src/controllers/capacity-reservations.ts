import { rfc3339 } from './constants.ts';

/**
 * What workflow_job deliveries do to an HRA (spec §7.5.3–7.5.4, issue 12), as pure functions: the
 * keys an HRA's scale target answers to, whether a job's labels fit it, and the new
 * `spec.capacityReservations` after a batch of queued/completed jobs. Beyond ARC, a reservation is
 * named after its job (`job-<id>@<owner>/<repo>`): a redelivered `queued` never adds twice, and a `completed`
 * releases exactly its own job's reservation (ARC drops the oldest, whoever it was for). Unnamed
 * reservations (ARC's, on an adopted HRA) are released oldest first by completions of jobs that have
 * none, as ARC would; reservations a person named otherwise are left to expire.
 */

export interface Reservation {
  name?: string | undefined;
  /** Epoch ms. */
  effectiveTime?: number | undefined;
  expirationTime?: number | undefined;
  replicas?: number | undefined;
}

/** The reservations of an HRA's `spec.capacityReservations` (times unreadable as RFC 3339 count as absent). */
export function reservationsFromSpec(
  list:
    | readonly {
        name?: string | null | undefined;
        effectiveTime?: string | null | undefined;
        expirationTime?: string | null | undefined;
        replicas?: number | null | undefined;
      }[]
    | null
    | undefined,
): Reservation[] {
  const time = (v: string | null | undefined) => {
    const t = v ? Date.parse(v) : Number.NaN;
    return Number.isNaN(t) ? undefined : t;
  };
  return (list ?? []).map((r) => ({
    name: r.name ?? undefined,
    effectiveTime: time(r.effectiveTime),
    expirationTime: time(r.expirationTime),
    replicas: r.replicas ?? undefined,
  }));
}

/** A reservation as `spec.capacityReservations` holds it. */
export function reservationToSpec(r: Reservation) {
  return {
    ...(r.name ? { name: r.name } : {}),
    ...(r.effectiveTime !== undefined ? { effectiveTime: rfc3339(r.effectiveTime) } : {}),
    ...(r.expirationTime !== undefined ? { expirationTime: rfc3339(r.expirationTime) } : {}),
    ...(r.replicas !== undefined ? { replicas: r.replicas } : {}),
  };
}

export interface JobOp {
  jobId: number;
  /** `owner/repo` of the job: kept in the reservation's name so a repair pass knows where to look. */
  repo?: string | undefined;
  action: 'queued' | 'completed';
  /** How long a reservation lasts at most (the trigger's duration; 10 min by default). */
  durationMs: number;
  /** Made by a repair pass from GitHub's listings, not by a delivery. */
  repaired?: boolean;
}

export const DEFAULT_TRIGGER_DURATION_MS = 10 * 60_000;

export function reservationName(jobId: number, repo?: string): string {
  return repo ? `job-${jobId}@${repo}` : `job-${jobId}`;
}

/** The job (and its `owner/repo`, when known) a reservation was made for; undefined for ARC's unnamed ones. */
export function reservedJob(name: string | undefined): { jobId: number; repo?: string } | undefined {
  const m = /^job-(\d+)(?:@([^/@\s]+\/[^/@\s]+))?$/.exec(name ?? '');
  if (!m) return undefined;
  return m[2] ? { jobId: Number(m[1]), repo: m[2] } : { jobId: Number(m[1]) };
}

/**
 * The reservations after `ops`, in order. Expired ones go first. With more reservations than
 * `maxReplicas`, those beyond it are restarted at `now` (they cannot have had a runner yet, so
 * their clock should not run out before they had a chance: ARC's starvation rule).
 */
export function planReservations(
  current: readonly Reservation[],
  ops: readonly JobOp[],
  now: number,
  maxReplicas: number | undefined,
): Reservation[] {
  let list = current.map((r) => ({ ...r }));
  if (maxReplicas !== undefined && list.length > maxReplicas) {
    for (let i = Math.max(0, maxReplicas); i < list.length; i++) {
      const r = list[i]!;
      if (r.effectiveTime === undefined || r.expirationTime === undefined) continue;
      const d = r.expirationTime - r.effectiveTime;
      r.effectiveTime = now;
      r.expirationTime = now + d;
    }
  }
  list = list.filter((r) => r.expirationTime !== undefined && r.expirationTime > now);
  for (const op of ops) {
    const own = list.findIndex((r) => reservedJob(r.name)?.jobId === op.jobId);
    if (op.action === 'queued') {
      if (own >= 0) continue; // a redelivery, or a job queued again: one runner is enough
      list.push({
        name: reservationName(op.jobId, op.repo),
        effectiveTime: now,
        expirationTime: now + op.durationMs,
        replicas: 1,
      });
      continue;
    }
    if (own >= 0) {
      list.splice(own, 1);
      continue;
    }
    const unnamed = list.findIndex((r) => !r.name);
    if (unnamed >= 0) list.splice(unnamed, 1);
  }
  return list;
}

export interface ScaleTargetScope {
  kind: 'RunnerDeployment' | 'RunnerSet';
  enterprise?: string | undefined;
  organization?: string | undefined;
  repository?: string | undefined;
  group?: string | undefined;
}

/** The keys a scale target answers to (spec §7.5.3; a RunnerSet with a group also answers to the plain org or enterprise key). */
export function scaleTargetKeys(t: ScaleTargetScope): string[] {
  const keys: string[] = [];
  if (t.repository) keys.push(t.repository);
  const both = t.kind === 'RunnerSet';
  if (t.organization) {
    if (t.group) {
      if (both) keys.push(t.organization);
      keys.push(`${t.organization}/group/${t.group}`);
    } else keys.push(t.organization);
  }
  if (t.enterprise) {
    const base = `enterprises/${t.enterprise}`;
    if (t.group) {
      if (both) keys.push(base);
      keys.push(`${base}/group/${t.group}`);
    } else keys.push(base);
  }
  return keys;
}

/**
 * Whether a job fits a target: every job label but `self-hosted` is among the target's labels,
 * compared case-insensitively (a job without labels fits any target).
 */
export function jobFitsLabels(jobLabels: readonly string[], targetLabels: readonly string[]): boolean {
  const have = new Set(targetLabels.map((l) => l.toLowerCase()));
  return jobLabels.every((l) => l === 'self-hosted' || have.has(l.toLowerCase()));
}

/** A job of a queued or in-progress workflow run, as the repair pass sees it. */
export interface ListedJob {
  id: number;
  /** `owner/repo`. */
  repo: string;
  status: string;
  /** Whether a delivery for this job would scale this HRA (its labels and scope route here). */
  routesHere: boolean;
}

/**
 * What a repair pass changes (issue 12): a reservation whose job is listed as no longer queued or
 * in progress was left by a lost `completed`, and a queued or running job routed here without a
 * reservation was missed by a lost `queued`. Only repositories whose jobs were listed are judged,
 * and a reservation younger than `graceMs` is left alone (GitHub's listings trail its deliveries).
 */
export function planRepair(input: {
  reservations: readonly Reservation[];
  listedRepos: ReadonlySet<string>;
  jobs: readonly ListedJob[];
  now: number;
  graceMs: number;
  durationMs: number;
}): JobOp[] {
  const live = new Map<number, ListedJob>();
  for (const j of input.jobs) if (j.status === 'queued' || j.status === 'in_progress') live.set(j.id, j);
  const reserved = new Set<number>();
  const ops: JobOp[] = [];
  for (const r of input.reservations) {
    const job = reservedJob(r.name);
    if (!job) continue;
    reserved.add(job.jobId);
    if (!job.repo || !input.listedRepos.has(job.repo) || live.has(job.jobId)) continue;
    if (r.expirationTime !== undefined && r.expirationTime <= input.now) continue;
    if (r.effectiveTime === undefined || r.effectiveTime > input.now - input.graceMs) continue;
    ops.push({
      jobId: job.jobId,
      repo: job.repo,
      action: 'completed',
      durationMs: input.durationMs,
      repaired: true,
    });
  }
  for (const j of live.values()) {
    if (!j.routesHere || reserved.has(j.id)) continue;
    ops.push({ jobId: j.id, repo: j.repo, action: 'queued', durationMs: input.durationMs, repaired: true });
  }
  return ops;
}
