import {
  ANNOTATION_RUNNER_ID,
  ANNOTATION_UNREGISTRATION_COMPLETE,
  ANNOTATION_UNREGISTRATION_REQUEST,
} from './constants.ts';
import { type PodLike, runnerPodFacts, runnerStopped } from './graceful-stop.ts';

/**
 * Scaling runner owners (StatefulSets of a RunnerSet, each with one pod) as a pure plan: which
 * owners to create, which to ask to unregister, which to delete. Spec §3.4, with one deliberate
 * improvement: scale-down picks runners that are not running a job before busy ones (ARC picks the
 * newest), so a scale-down does not wait on — or, after a timeout, cut short — someone's job.
 */

export const ANNOTATION_SYNC_TIME = 'sync-time';
export { LABEL_RUNNER_TEMPLATE_HASH as LABEL_TEMPLATE_HASH } from './constants.ts';

export type PodBucket = 'completed' | 'regTimeout' | 'running' | 'terminating' | 'pending';

/** One pod's bucket (spec §3.4.1), tried in this order. */
export function classifyPod(
  pod: PodLike & { metadata: { deletionTimestamp?: string } },
  now: number,
  registrationTimeoutMs: number,
): PodBucket {
  const f = runnerPodFacts(pod);
  if (runnerStopped(f)) return 'completed';
  if (f.phase === 'Running') {
    const registered = Boolean(f.annotations[ANNOTATION_RUNNER_ID]);
    if (!registered && f.readySince !== undefined && f.readySince + registrationTimeoutMs < now)
      return 'regTimeout';
    return 'running';
  }
  if (pod.metadata.deletionTimestamp) return 'terminating';
  return 'pending';
}

export interface OwnerState {
  name: string;
  createdAt: number;
  templateHash: string | undefined;
  deleting: boolean;
  annotations: Record<string, string>;
  /** Whether the owner's status caught up with its spec (StatefulSet: status.replicas == spec.replicas). */
  synced: boolean;
  /**
   * Pods the owner has by its own status (StatefulSet: status.replicas). Those not in `pods` yet
   * (our pod cache lags the owner's) count as pending, so they are not created a second time.
   */
  replicas?: number;
  pods: {
    name: string;
    bucket: PodBucket;
    annotations: Record<string, string>;
    deleting: boolean;
    /** From the runner registry, when known. */
    busy: boolean | undefined;
  }[];
}

export type OwnerAction =
  | { kind: 'delete-owner'; owner: string; reason: 'unregistered' | 'completed' | 'outdated' }
  | { kind: 'mark-owner-complete'; owner: string }
  | { kind: 'create-owners'; count: number }
  | { kind: 'request-unregistration'; owner: string; pods: string[] };

export interface OwnerSyncPlan {
  actions: OwnerAction[];
  /** Why nothing (more) happens this round, for logs. */
  note?: string;
  /** The owners of the desired template, oldest first (for status). */
  current: string[];
}

export interface OwnerSyncInput {
  owners: OwnerState[];
  desiredReplicas: number;
  desiredHash: string;
  ephemeral: boolean;
  effectiveTime: number | undefined;
  now: number;
  /** ARC's DefaultRunnerPodRecreationDelayAfterWebhookScale (10 min). */
  recreationDelayMs?: number;
}

const count = (o: OwnerState, b: PodBucket) =>
  o.pods.filter((p) => p.bucket === b).length +
  (b === 'pending' ? Math.max(0, (o.replicas ?? 0) - o.pods.length) : 0);

export function planOwnerSync(input: OwnerSyncInput): OwnerSyncPlan {
  const actions: OwnerAction[] = [];
  const live: OwnerState[] = [];
  let lastSyncTime: number | undefined;
  for (const o of input.owners) {
    if (o.deleting) continue;
    if (o.annotations[ANNOTATION_UNREGISTRATION_COMPLETE]) {
      actions.push({ kind: 'delete-owner', owner: o.name, reason: 'unregistered' });
      continue;
    }
    if (o.annotations[ANNOTATION_UNREGISTRATION_REQUEST]) {
      const gone = o.pods.filter(
        (p) => p.annotations[ANNOTATION_UNREGISTRATION_COMPLETE] || p.deleting,
      ).length;
      if (gone === o.pods.length) {
        actions.push({ kind: 'mark-owner-complete', owner: o.name });
        continue;
      }
    }
    const sync = Date.parse(o.annotations[ANNOTATION_SYNC_TIME] ?? '');
    if (!Number.isNaN(sync)) lastSyncTime = Math.max(lastSyncTime ?? sync, sync);
    if (o.pods.length > 0 && count(o, 'completed') === o.pods.length) {
      actions.push({ kind: 'delete-owner', owner: o.name, reason: 'completed' });
      return { actions, note: 'deleted a completed owner; waiting for the next round', current: [] };
    }
    if (!o.synced) return { actions, note: `owner ${o.name} is not synced yet`, current: [] };
    live.push(o);
  }

  const current = live
    .filter((o) => o.templateHash === input.desiredHash)
    .sort((a, b) => a.createdAt - b.createdAt);
  const sum = (b: PodBucket) => current.reduce((n, o) => n + count(o, b), 0);
  const running = sum('running');
  const maybeRunning = sum('pending') + running;
  const desired = input.desiredReplicas;
  const wantMore = desired > maybeRunning;
  const alreadySynced =
    input.ephemeral &&
    lastSyncTime !== undefined &&
    input.effectiveTime !== undefined &&
    lastSyncTime > input.effectiveTime;
  const recreationDelayActive =
    lastSyncTime !== undefined && input.now < lastSyncTime + (input.recreationDelayMs ?? 600_000);
  let note: string | undefined;

  if (wantMore && alreadySynced && recreationDelayActive) {
    note = 'ephemeral runners were just recreated after a webhook scale; waiting before creating more';
  } else if (wantMore) {
    actions.push({ kind: 'create-owners', count: desired - maybeRunning });
    return { actions, current: current.map((o) => o.name) };
  } else if (desired <= running) {
    // Keep the runners most worth keeping; ask the others to unregister.
    const rank = (o: OwnerState) => {
      if (count(o, 'running') === 0) return 0; // pending, timed out, terminating
      const busy = o.pods.some((p) => p.busy === true);
      const idle = o.pods.every((p) => p.busy === false);
      return idle ? 1 : busy ? 3 : 2; // unknown state sits between idle and busy
    };
    const byRemovalPreference = [...current].sort((a, b) => rank(a) - rank(b) || b.createdAt - a.createdAt);
    let keep = running;
    const remove: OwnerState[] = [];
    for (const o of byRemovalPreference) {
      const r = count(o, 'running');
      if (r === 0) {
        remove.push(o);
      } else if (keep - r >= desired) {
        remove.push(o);
        keep -= r;
      }
    }
    for (const o of remove) {
      if (o.annotations[ANNOTATION_UNREGISTRATION_REQUEST]) continue;
      actions.push({ kind: 'request-unregistration', owner: o.name, pods: o.pods.map((p) => p.name) });
    }
  }

  // Owners of an older template go one per round; their pods' finalizers still stop them gracefully.
  const outdated = live.find((o) => o.templateHash !== input.desiredHash);
  if (outdated) actions.push({ kind: 'delete-owner', owner: outdated.name, reason: 'outdated' });
  return { actions, ...(note ? { note } : {}), current: current.map((o) => o.name) };
}
