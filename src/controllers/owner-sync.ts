import {
  ANNOTATION_RUNNER_ID,
  ANNOTATION_UNREGISTRATION_COMPLETE,
  ANNOTATION_UNREGISTRATION_REQUEST,
} from './constants.ts';
import { type PodLike, type RunnerPodFacts, runnerPodFacts, runnerStopped } from './graceful-stop.ts';

/**
 * Scaling runner owners (StatefulSets of a RunnerSet, each with one pod) as a pure plan: which
 * owners to create, which to ask to unregister, which to delete. Spec §3.4, with these deliberate
 * changes, all so that no job is cut short, no runner is left behind and the fleet never has fewer
 * runners than desired:
 *
 * - Scale-down picks runners that are not running a job before busy ones (ARC picks the newest), so
 *   a scale-down does not wait on — or, after a timeout, cut short — someone's job.
 * - An owner asked to unregister is leaving for good: it is no longer a member of the fleet. That
 *   holds whether the cache shows the request on the owner, only on one of its pods (the owner's
 *   annotation can reach the cache later than the pod's), or not yet at all (the reconciler
 *   remembers what it asked: `askedRecently`). So a runner that took a job just before its removal
 *   is not counted again, and a second runner is not asked to leave in its place.
 * - A pod that is going away (unregistered, or being deleted) is not a running runner of the fleet
 *   either; its StatefulSet replaces it, so it counts as pending.
 * - Whatever pod a leaving owner has gets the request too (the StatefulSet controller replaces a pod
 *   that finished, and the replacement knows nothing of the request), and a leaving owner is deleted
 *   as soon as every pod it has is unregistered, being deleted or stopped.
 * - Owners of an older template are not deleted directly (that would stop a busy runner mid-job):
 *   they are asked to unregister like a scale-down, once the current template has the desired number
 *   of registered runners (a Deployment's maxUnavailable 0; those with no running runner go at once).
 */

export const ANNOTATION_SYNC_TIME = 'sync-time';
export { LABEL_RUNNER_TEMPLATE_HASH as LABEL_TEMPLATE_HASH } from './constants.ts';

export type PodBucket = 'completed' | 'regTimeout' | 'running' | 'terminating' | 'pending';

/** One pod's bucket (spec §3.4.1), tried in this order. */
export function classifyPod(
  pod: PodLike & { metadata: { deletionTimestamp?: string } },
  now: number,
  registrationTimeoutMs: number,
  f: RunnerPodFacts = runnerPodFacts(pod),
): PodBucket {
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

export interface PodState {
  name: string;
  bucket: PodBucket;
  annotations: Record<string, string>;
  deleting: boolean;
  /** From the runner registry, when known. */
  busy: boolean | undefined;
  /** We asked this pod to unregister moments ago; the cache does not show it yet. */
  askedRecently?: boolean;
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
  /** We asked this owner to unregister moments ago; the cache does not show it yet. */
  askedRecently?: boolean;
  pods: PodState[];
}

export type OwnerAction =
  | { kind: 'delete-owner'; owner: string; reason: 'unregistered' | 'completed' }
  | { kind: 'create-owners'; count: number }
  | {
      kind: 'request-unregistration';
      owner: string;
      /** Pods to annotate: those that do not carry the request yet. */
      pods: string[];
      /** The owner itself does not carry the request yet. */
      annotateOwner: boolean;
      /** `follow-up`: the owner was asked before; a pod of it (e.g. a replacement) was not. */
      reason: 'scale-down' | 'outdated' | 'follow-up';
    };

export interface OwnerSyncPlan {
  actions: OwnerAction[];
  /** Why nothing (more) happens this round, for logs. */
  note?: string;
  /** The owners of the desired template, oldest first (for status). */
  current: string[];
  /** The round stopped at a gate before counting: `current` says nothing, keep the old status. */
  statusUnknown?: boolean;
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
  /**
   * The desired replicas the last creating round created for (remembered by the controller;
   * undefined after a restart). A raise above it is new demand, which ARC's ephemeral guard
   * would hold back when the scale-up reached the set in several steps across a second boundary.
   */
  desiredAtLastCreation?: number | undefined;
}

const podAsked = (p: PodState) =>
  Boolean(p.annotations[ANNOTATION_UNREGISTRATION_REQUEST]) || !!p.askedRecently;
/** The pod's runner is gone from GitHub (or never came), or the pod is on its way out anyway. */
const podGone = (p: PodState) => Boolean(p.annotations[ANNOTATION_UNREGISTRATION_COMPLETE]) || p.deleting;

/** Asked to unregister: on the owner, on any of its pods, or by us moments ago. */
export function isLeaving(o: OwnerState): boolean {
  return (
    Boolean(o.annotations[ANNOTATION_UNREGISTRATION_REQUEST]) || !!o.askedRecently || o.pods.some(podAsked)
  );
}

/** A running pod that is leaving is no runner of the fleet; its StatefulSet replaces it (pending). */
const memberBucket = (p: PodState): PodBucket =>
  p.bucket === 'running' && (podAsked(p) || podGone(p)) ? 'pending' : p.bucket;

const count = (o: OwnerState, b: PodBucket) =>
  o.pods.filter((p) => memberBucket(p) === b).length +
  (b === 'pending' ? Math.max(0, (o.replicas ?? 0) - o.pods.length) : 0);

/** Running and registered with GitHub: capacity that jobs can use now. */
const ready = (o: OwnerState) =>
  o.pods.filter((p) => memberBucket(p) === 'running' && p.annotations[ANNOTATION_RUNNER_ID]).length;

/** Ask what has not been asked yet (the pods without the request, the owner without it). */
function request(o: OwnerState, reason: 'scale-down' | 'outdated' | 'follow-up'): OwnerAction | undefined {
  const pods = o.pods.filter((p) => !podAsked(p) && !podGone(p)).map((p) => p.name);
  const annotateOwner = !o.annotations[ANNOTATION_UNREGISTRATION_REQUEST] && !o.askedRecently;
  if (pods.length === 0 && !annotateOwner) return undefined;
  return { kind: 'request-unregistration', owner: o.name, pods, annotateOwner, reason };
}

export function planOwnerSync(input: OwnerSyncInput): OwnerSyncPlan {
  const actions: OwnerAction[] = [];
  const members: OwnerState[] = [];
  const leaving: OwnerState[] = [];
  let lastSyncTime: number | undefined;
  for (const o of input.owners) {
    if (o.deleting) continue;
    if (o.annotations[ANNOTATION_UNREGISTRATION_COMPLETE]) {
      actions.push({ kind: 'delete-owner', owner: o.name, reason: 'unregistered' });
      continue;
    }
    if (isLeaving(o)) {
      // Every pod the owner has (by its own status too) is known and done: delete it now, before its
      // StatefulSet replaces a finished pod. ARC marks the owner complete and deletes it a round
      // later; the extra round only gives the replacement time to appear.
      const allKnown = o.pods.length >= (o.replicas ?? 0);
      if (allKnown && o.pods.every((p) => podGone(p) || p.bucket === 'completed')) {
        const unregistered = o.pods.every(podGone);
        actions.push({
          kind: 'delete-owner',
          owner: o.name,
          reason: unregistered ? 'unregistered' : 'completed',
        });
        continue;
      }
      const followUp = request(o, 'follow-up');
      if (followUp) actions.push(followUp);
      leaving.push(o);
    } else {
      members.push(o);
    }
    const sync = Date.parse(o.annotations[ANNOTATION_SYNC_TIME] ?? '');
    if (!Number.isNaN(sync)) lastSyncTime = Math.max(lastSyncTime ?? sync, sync);
  }
  // An owner whose runner finished is deleted and, in the same round, replaced: its pods count as
  // neither running nor pending. (ARC deletes one such owner per round and replaces it a round later.)
  for (let i = members.length - 1; i >= 0; i--) {
    const o = members[i]!;
    if (o.pods.length > 0 && count(o, 'completed') === o.pods.length) {
      actions.unshift({ kind: 'delete-owner', owner: o.name, reason: 'completed' });
      members.splice(i, 1);
    }
  }
  // ARC's gate, for the fleet's members (a leaving owner counts for nothing, so it blocks nothing).
  for (const o of members) {
    if (!o.synced)
      return { actions, note: `owner ${o.name} is not synced yet`, current: [], statusUnknown: true };
  }

  const ofTemplate = (o: OwnerState) => o.templateHash === input.desiredHash;
  const byAge = (a: OwnerState, b: OwnerState) => a.createdAt - b.createdAt;
  const fleet = members.filter(ofTemplate).sort(byAge);
  const current = [...members, ...leaving].filter(ofTemplate).sort(byAge);
  const sum = (b: PodBucket) => fleet.reduce((n, o) => n + count(o, b), 0);
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
  const removedNow = new Set<OwnerState>();

  const raised =
    input.desiredAtLastCreation !== undefined && desired > input.desiredAtLastCreation
      ? desired - input.desiredAtLastCreation
      : 0;
  if (wantMore && alreadySynced && recreationDelayActive && raised > 0) {
    // New demand since the last creations: create for it, not for runners that finished since.
    actions.push({ kind: 'create-owners', count: Math.min(raised, desired - maybeRunning) });
    return { actions, current: current.map((o) => o.name) };
  } else if (wantMore && alreadySynced && recreationDelayActive) {
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
    const byRemovalPreference = [...fleet].sort((a, b) => rank(a) - rank(b) || b.createdAt - a.createdAt);
    let keep = running;
    for (const o of byRemovalPreference) {
      const r = count(o, 'running');
      if (r === 0) {
        removedNow.add(o);
      } else if (keep - r >= desired) {
        removedNow.add(o);
        keep -= r;
      }
    }
    for (const o of byRemovalPreference) {
      const asked = removedNow.has(o) ? request(o, 'scale-down') : undefined;
      if (asked) actions.push(asked);
    }
  }

  // Rollout: owners of an older template leave once the current one has the desired number of
  // registered runners (those without a running runner hold no capacity and leave at once). Busy
  // ones finish their job first, like any runner asked to unregister.
  const outdated = members.filter((o) => !ofTemplate(o)).sort(byAge);
  if (outdated.length > 0) {
    const available = fleet.filter((o) => !removedNow.has(o)).reduce((n, o) => n + ready(o), 0);
    const replaced = available >= desired;
    for (const o of outdated) {
      const asked = replaced || count(o, 'running') === 0 ? request(o, 'outdated') : undefined;
      if (asked) actions.push(asked);
    }
    if (!replaced) {
      note ??= `rollout: ${available} of ${desired} runners of the current template are registered; older ones wait`;
    }
  }
  return { actions, ...(note ? { note } : {}), current: current.map((o) => o.name) };
}
