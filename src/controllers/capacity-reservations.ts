/**
 * What workflow_job deliveries do to an HRA (spec §7.5.3–7.5.4, issue 12), as pure functions: the
 * keys an HRA's scale target answers to, whether a job's labels fit it, and the new
 * `spec.capacityReservations` after a batch of queued/completed jobs. Beyond ARC, a reservation is
 * named after its job (`job-<id>`): a redelivered `queued` never adds twice, and a `completed`
 * releases exactly its own job's reservation (ARC drops the oldest, whoever it was for). Unnamed
 * reservations (ARC's, on an adopted HRA) are released oldest first by completions of jobs that have
 * none, as ARC would.
 */

export interface Reservation {
  name?: string | undefined;
  /** Epoch ms. */
  effectiveTime?: number | undefined;
  expirationTime?: number | undefined;
  replicas?: number | undefined;
}

export interface JobOp {
  jobId: number;
  action: 'queued' | 'completed';
  /** How long a reservation lasts at most (the trigger's duration; 10 min by default). */
  durationMs: number;
}

export const DEFAULT_TRIGGER_DURATION_MS = 10 * 60_000;

export function reservationName(jobId: number): string {
  return `job-${jobId}`;
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
    const name = reservationName(op.jobId);
    const own = list.findIndex((r) => r.name === name);
    if (op.action === 'queued') {
      if (own >= 0) continue; // a redelivery, or a job queued again: one runner is enough
      list.push({ name, effectiveTime: now, expirationTime: now + op.durationMs, replicas: 1 });
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
