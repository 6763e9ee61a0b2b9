import { seededRandom } from '../testenv/seeded-random.ts';

/**
 * When a soak injects which fault: every kind once at evenly spaced times (in a shuffled order), so
 * a short soak still meets each, and more at random (exponential gaps) for a long one. Pure and
 * seeded: the same seed gives the same schedule, and a failing soak can be replayed.
 */

export const FAULT_KINDS = [
  /** `kill -9` of the replica holding the Lease; the other takes over, and the dead one comes back. */
  'leader-kill',
  'apiserver-restart',
  'etcd-restart',
  /** A share of GitHub requests answered 502 for a while. */
  'github-5xx',
  /** GitHub answers slowly for a while. */
  'github-latency',
  /** The primary rate limit at zero until its reset. */
  'rate-limit-squeeze',
  /** Secondary rate limits: 403/429 with retry-after. */
  'secondary-rate-limit',
  /** A node stops responding: its pods stay Terminating until paddock frees them. */
  'node-loss',
  /** Runner containers crash. */
  'pod-kill',
  /** workflow_job deliveries dropped, duplicated and reordered for a while. */
  'webhook-chaos',
  /** The GitHub token in the runners' credentials Secret replaced; the old one revoked. */
  'credentials-rotation',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface ScheduledFault {
  /** From the start of the soak. */
  atMs: number;
  kind: FaultKind;
  /** How long the fault lasts (0: instantaneous, such as a kill). */
  durationMs: number;
}

export interface ScheduleOptions {
  seed: number;
  durationMs: number;
  kinds: readonly FaultKind[];
  /** No fault before this (the fleet comes up). */
  warmupMs: number;
  /** No fault starts in the last stretch, so the end state is judged after recovery. */
  quietTailMs: number;
  /** Mean gap between the random faults after the scheduled ones; 0: none. */
  meanRandomGapMs: number;
}

/** How long each kind lasts (scaled down for short soaks, never below a few seconds). */
export function faultDurationMs(kind: FaultKind, durationMs: number): number {
  const scale = Math.min(1, durationMs / (30 * 60_000));
  const base: Record<FaultKind, number> = {
    'leader-kill': 0,
    'apiserver-restart': 0,
    'etcd-restart': 0,
    'github-5xx': 60_000,
    'github-latency': 60_000,
    'rate-limit-squeeze': 60_000,
    'secondary-rate-limit': 45_000,
    'node-loss': 0,
    'pod-kill': 0,
    'webhook-chaos': 90_000,
    'credentials-rotation': 0,
  };
  const b = base[kind];
  return b === 0 ? 0 : Math.max(8_000, Math.round(b * scale));
}

export function faultSchedule(o: ScheduleOptions): ScheduledFault[] {
  const random = seededRandom(o.seed);
  const window = o.durationMs - o.warmupMs - o.quietTailMs;
  if (o.kinds.length === 0 || window <= 0) return [];
  const order = [...o.kinds];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const slot = window / order.length;
  const faults: ScheduledFault[] = order.map((kind, i) => ({
    atMs: Math.round(o.warmupMs + i * slot + random() * slot * 0.5),
    kind,
    durationMs: faultDurationMs(kind, o.durationMs),
  }));
  if (o.meanRandomGapMs > 0) {
    for (let at = o.warmupMs - Math.log(1 - random()) * o.meanRandomGapMs; at < o.warmupMs + window; ) {
      const kind = o.kinds[Math.floor(random() * o.kinds.length)]!;
      faults.push({ atMs: Math.round(at), kind, durationMs: faultDurationMs(kind, o.durationMs) });
      at += -Math.log(1 - random()) * o.meanRandomGapMs;
    }
  }
  // A lasting fault is not stacked on one of its own kind still in progress.
  faults.sort((a, b) => a.atMs - b.atMs);
  const busyUntil = new Map<FaultKind, number>();
  return faults.filter((f) => {
    if ((busyUntil.get(f.kind) ?? -1) > f.atMs) return false;
    busyUntil.set(f.kind, f.atMs + f.durationMs);
    return true;
  });
}
