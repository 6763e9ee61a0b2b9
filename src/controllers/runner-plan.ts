import type { Runner } from '../api/index.ts';
import {
  ANNOTATION_UNREGISTRATION_COMPLETE,
  ANNOTATION_UNREGISTRATION_REQUEST,
  FINALIZER_RUNNER,
} from './constants.ts';
import { type PodLike, runnerPodFacts, runnerStopped } from './graceful-stop.ts';

/**
 * The Runner controller's decisions (spec §3.1) as one pure step function: given the Runner, its
 * pod (same name) and what this reconcile has done so far, the next thing to do. The reconciler
 * performs the step and asks again, so each step is small and the whole life of a Runner is
 * readable here. Deliberate changes from ARC:
 *
 * - The registration token is written into a Secret the Runner owns and the pod reads RUNNER_TOKEN
 *   from it; the Runner status records only when it expires (ARC keeps the token itself there).
 * - While the pod has not started its runner yet (image pull, scheduling), the Secret is refreshed
 *   before the token expires: the kubelet reads it when the container starts, so a pod that waited
 *   an hour still registers (ARC's pod would carry a dead token).
 * - A Runner being deleted deletes its pod itself rather than leaving it to the garbage collector
 *   (one hop less); the pod's own finalizer still unregisters the runner first. The token Secret
 *   goes with the Runner by garbage collection.
 * - A token ARC left in the status of a Runner paddock adopts is removed from it.
 * - A Runner asked to unregister (by its replica set) gets no new pod.
 * - The status mirrors a pod state once it has held for `STATUS_SETTLE_MS`: a pod that starts within
 *   seconds never has its Runner written as Pending, and a replica set's finished runner, deleted
 *   moments later, is not written as stopped first. At a thousand runners that is a third of the
 *   controller's writes, and its queue is what a replacement waits in.
 */

/** ARC's reuse window: a token with less validity left than this is replaced. */
export const TOKEN_REFRESH_BEFORE_EXPIRY_MS = 30 * 60_000;
/** After a failed token or pod write; a GitHub outage is retried at this pace, not in a tight loop. */
export const RUNNER_RETRY_DELAY_MS = 30_000;
/** How long a pod state must hold before the Runner status mirrors it. */
export const STATUS_SETTLE_MS = 3_000;

export interface RunnerPlanInput {
  runner: Runner;
  /** The pod of the same name that the Runner controls, from the cache. */
  pod: (PodLike & { metadata: { deletionTimestamp?: string } }) | undefined;
  /** A pod of the Runner's name that someone else controls. */
  foreignPod?: boolean;
  now: number;
  /** Since when the pod has looked as it does now (to the reconciler); undefined: long enough. */
  podStateSince?: number;
  /** When the token in the pod's Secret expires, as the reconciler knows it without a request. */
  knownTokenExpiry?: number;
  useRunnerStatusUpdateHook: boolean;
  /** What this reconcile did already. */
  done: {
    /** The token is in the Secret (written or known to be valid); `secretName`: whose Secret. */
    token?: { expiresAt: number; secretName?: string };
    rbac?: boolean;
    podCreated?: boolean;
    podDeleted?: boolean;
    finalizerAdded?: boolean;
  };
}

export interface RunnerStatusPatch {
  phase: string;
  ready: boolean;
  reason?: string | null;
  message?: string | null;
}

export type RunnerStep =
  | { kind: 'add-finalizer' }
  /** The Runner is being deleted, or its pod stopped and the Runner is its own (no replica set replaces it). */
  | { kind: 'delete-pod'; why: 'runner-deleted' | 'pod-stopped' }
  | { kind: 'remove-finalizer' }
  /** Get a registration token, write it to the Secret, record its expiry in the status. */
  | { kind: 'ensure-token'; reason: 'new-pod' | 'refresh' }
  | { kind: 'ensure-rbac' }
  | { kind: 'create-pod' }
  /** `tokenExpiresAt`: also record when the token in the Secret expires (the status is behind). */
  | { kind: 'patch-status'; status: RunnerStatusPatch; tokenExpiresAt?: number }
  /** A token in the status (ARC put it there): the runner has it already; the status need not. */
  | { kind: 'scrub-status-token' }
  | { kind: 'done'; requeueAfterMs?: number; note?: string };

/** The token expiry the status records, when it is paddock's (ARC keeps the token in the status too). */
export function recordedTokenExpiry(runner: Runner): number | undefined {
  const r = runner.status?.registration;
  if (!r || r.token) return undefined; // ARC's record: its token is not in our Secret
  const at = Date.parse(r.expiresAt ?? '');
  return Number.isNaN(at) ? undefined : at;
}

function runnerStarted(pod: PodLike): boolean {
  const f = runnerPodFacts(pod);
  return f.runnerStartedAt !== undefined || f.runnerTerminated || f.runnerTerminatedBefore;
}

/** The status the pod implies (ARC's rules), or undefined when the status already says it. */
export function runnerStatusFromPod(
  runner: Runner,
  pod: PodLike,
  useRunnerStatusUpdateHook: boolean,
): RunnerStatusPatch | undefined {
  const status = pod.status as (PodLike['status'] & { reason?: string; message?: string }) | undefined;
  const phase = status?.phase || 'Created';
  const ready = status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
  const current = runner.status ?? {};
  // With the status-update hook, the runner script owns the phase once it is set.
  if (useRunnerStatusUpdateHook && current.phase) return undefined;
  const reason = status?.reason ?? null;
  const message = status?.message ?? null;
  const same =
    current.phase === phase &&
    (current.ready ?? false) === ready &&
    (current.reason ?? null) === reason &&
    (current.message ?? null) === message;
  return same ? undefined : { phase, ready, reason, message };
}

export function planRunner(input: RunnerPlanInput): RunnerStep {
  const { runner, pod, done, now } = input;
  const finalizers = runner.metadata.finalizers ?? [];
  if (runner.metadata.deletionTimestamp) {
    if (!finalizers.includes(FINALIZER_RUNNER)) return { kind: 'done' };
    // The pod's finalizer unregisters the runner (waiting for a busy one's job); the Runner need not.
    if (pod && !pod.metadata.deletionTimestamp && !done.podDeleted)
      return { kind: 'delete-pod', why: 'runner-deleted' };
    return { kind: 'remove-finalizer' };
  }
  if (!finalizers.includes(FINALIZER_RUNNER) && !done.finalizerAdded) return { kind: 'add-finalizer' };

  if (!pod) {
    if (input.foreignPod) {
      return { kind: 'done', note: 'a pod of this name belongs to another owner; not creating one' };
    }
    const annotations = runner.metadata.annotations ?? {};
    if (annotations[ANNOTATION_UNREGISTRATION_REQUEST] || annotations[ANNOTATION_UNREGISTRATION_COMPLETE]) {
      return { kind: 'done', note: 'asked to unregister: no new pod' };
    }
    if (done.podCreated) return { kind: 'done' };
    if (!done.token) return { kind: 'ensure-token', reason: 'new-pod' };
    if (!done.rbac) return { kind: 'ensure-rbac' };
    return { kind: 'create-pod' };
  }

  if (runner.status?.registration?.token && !done.token) return { kind: 'scrub-status-token' };
  const expiresAt = done.token?.expiresAt ?? input.knownTokenExpiry;
  const unrecorded =
    expiresAt !== undefined && expiresAt !== recordedTokenExpiry(runner) ? expiresAt : undefined;
  const status = runnerStatusFromPod(runner, pod, input.useRunnerStatusUpdateHook);
  const settleLeft = input.podStateSince === undefined ? 0 : input.podStateSince + STATUS_SETTLE_MS - now;
  if (status && settleLeft <= 0) return withExpiry({ kind: 'patch-status', status }, unrecorded);
  // With no status write coming, an unrecorded expiry goes on its own (after a restart it is all
  // that tells whether the Secret's token is still good).
  if (!status && unrecorded !== undefined) {
    const current = runner.status ?? {};
    return withExpiry(
      { kind: 'patch-status', status: { phase: current.phase ?? 'Created', ready: current.ready ?? false } },
      unrecorded,
    );
  }
  const settle = status ? settleLeft : undefined;
  // A stopped runner (finished, or crashed) of a Runner of its own gets a fresh pod; a replica set's
  // Runner is deleted and replaced by its replica set instead. The pod's finalizer unregisters it.
  if (
    !pod.metadata.deletionTimestamp &&
    !done.podDeleted &&
    !controlledByReplicaSet(runner) &&
    runnerStopped(runnerPodFacts(pod))
  ) {
    return { kind: 'delete-pod', why: 'pod-stopped' };
  }
  // The kubelet reads the token when the runner container starts: keep it valid until then.
  if (
    !pod.metadata.deletionTimestamp &&
    !runnerStarted(pod) &&
    !pod.status?.phase?.match(/Succeeded|Failed/)
  ) {
    const validUntil = expiresAt ?? recordedTokenExpiry(runner);
    if (validUntil === undefined || validUntil - now <= TOKEN_REFRESH_BEFORE_EXPIRY_MS) {
      if (!done.token) return { kind: 'ensure-token', reason: 'refresh' };
      return settled(RUNNER_RETRY_DELAY_MS, settle);
    }
    return settled(validUntil - TOKEN_REFRESH_BEFORE_EXPIRY_MS - now + 1_000, settle);
  }
  return settled(undefined, settle);
}

function withExpiry(
  step: Extract<RunnerStep, { kind: 'patch-status' }>,
  tokenExpiresAt: number | undefined,
): RunnerStep {
  return tokenExpiresAt === undefined ? step : { ...step, tokenExpiresAt };
}

/** Done, back when the first of a requeue and a status that is settling is due. */
function settled(requeueAfterMs: number | undefined, settleLeft: number | undefined): RunnerStep {
  const due = [requeueAfterMs, settleLeft].filter((ms): ms is number => ms !== undefined);
  if (due.length === 0) return { kind: 'done' };
  const at = Math.min(...due);
  return at === settleLeft && at !== requeueAfterMs
    ? { kind: 'done', requeueAfterMs: Math.max(1, at), note: 'status waits for the pod state to settle' }
    : { kind: 'done', requeueAfterMs: Math.max(1, at) };
}

function controlledByReplicaSet(runner: Runner): boolean {
  return (runner.metadata.ownerReferences ?? []).some((o) => o.controller && o.kind === 'RunnerReplicaSet');
}
