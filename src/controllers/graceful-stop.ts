import { formatDuration } from '../runtime/duration.ts';
import {
  ANNOTATION_COMPLETION_WAIT_START,
  ANNOTATION_LAST_REGISTRATION_CHECK,
  ANNOTATION_RUNNER_ID,
  ANNOTATION_UNREGISTRATION_COMPLETE,
  ANNOTATION_UNREGISTRATION_FAILURE,
  ENV_EPHEMERAL,
  RUNNER_CONTAINER,
} from './constants.ts';

/**
 * The runner pod's decisions as pure functions of plain facts: the graceful-stop table of the spec
 * (§4.3), what each RemoveRunner answer means, the seed's registration check, and forced deletion.
 * The reconciler gathers the facts, calls these, and performs what they return.
 */

// ------------------------------------------------------------------------------------------ facts

interface ContainerStatusLike {
  name: string;
  state?: {
    running?: { startedAt?: string | null } | null;
    terminated?: { exitCode?: number; startedAt?: string | null } | null;
  } | null;
  lastState?: { terminated?: { exitCode?: number } | null } | null;
}

/** The parts of a Pod the decisions read (raw API JSON shape). */
export interface PodLike {
  metadata: {
    name?: string;
    annotations?: Record<string, string>;
    creationTimestamp?: string;
    deletionTimestamp?: string;
  };
  spec?: { containers?: { name: string; env?: { name: string; value?: string }[] }[] };
  status?: {
    phase?: string;
    conditions?: { type: string; status: string; lastTransitionTime?: string }[];
    containerStatuses?: ContainerStatusLike[];
  };
}

export interface RunnerPodFacts {
  name: string;
  annotations: Record<string, string>;
  phase: string;
  createdAt: number;
  deletionRequestedAt: number | undefined;
  /** When the pod's Ready condition last became True. */
  readySince: number | undefined;
  /** When the runner container's current run started (undefined while it waits for a node, a volume, an image). */
  runnerStartedAt: number | undefined;
  /** Runner ID recorded on the pod. NaN when the annotation is not a number. */
  recordedRunnerId: number | undefined;
  ephemeral: boolean;
  /** `state.terminated.exitCode` of the runner container. */
  runnerExitCode: number | undefined;
  /** The runner container's current state is `terminated` (whatever its exit code). */
  runnerTerminated: boolean;
  /** How many container statuses the kubelet reported (0: no container ever started). */
  containerStatusCount: number;
  /** The runner container has a status at all. */
  runnerHasStatus: boolean;
  /** The runner container terminated before (restarted, e.g. OOM; upstream issue 1369). */
  runnerTerminatedBefore: boolean;
}

function time(s: string | undefined): number | undefined {
  if (!s) return undefined;
  const t = Date.parse(s);
  return Number.isNaN(t) ? undefined : t;
}

export function runnerPodFacts(pod: PodLike): RunnerPodFacts {
  const annotations = pod.metadata.annotations ?? {};
  const runner = pod.spec?.containers?.find((c) => c.name === RUNNER_CONTAINER);
  const status = pod.status?.containerStatuses?.find((c) => c.name === RUNNER_CONTAINER);
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'True');
  const idText = annotations[ANNOTATION_RUNNER_ID];
  return {
    name: pod.metadata.name ?? '',
    annotations,
    phase: pod.status?.phase ?? 'Pending',
    createdAt: time(pod.metadata.creationTimestamp) ?? 0,
    deletionRequestedAt: time(pod.metadata.deletionTimestamp),
    readySince: time(ready?.lastTransitionTime),
    runnerStartedAt: time(
      status?.state?.running?.startedAt ?? status?.state?.terminated?.startedAt ?? undefined,
    ),
    recordedRunnerId:
      idText === undefined || idText === '' ? undefined : /^\d+$/.test(idText) ? Number(idText) : Number.NaN,
    ephemeral: runner?.env?.find((e) => e.name === ENV_EPHEMERAL)?.value === 'true',
    runnerExitCode: status?.state?.terminated?.exitCode ?? undefined,
    runnerTerminated: Boolean(status?.state?.terminated),
    containerStatusCount: pod.status?.containerStatuses?.length ?? 0,
    runnerHasStatus: status !== undefined,
    runnerTerminatedBefore: Boolean(status?.lastState?.terminated),
  };
}

/**
 * The runner will not run (again) in this pod: the pod phase is Succeeded or Failed, or the runner
 * container terminated (any exit code), or the pod is being deleted before any container started.
 * ARC HEAD's `runnerPodOrContainerIsStopped`; the seed only knew exit code 0, so a crashed or
 * never-started pod waited forever.
 */
export function runnerStopped(f: RunnerPodFacts): boolean {
  if (f.phase === 'Succeeded' || f.phase === 'Failed') return true;
  if (f.phase === 'Running' && f.runnerTerminated) return true;
  return f.deletionRequestedAt !== undefined && f.containerStatusCount === 0;
}

/** Stopped the way a finished ephemeral runner stops: it exited 0 and GitHub already forgot it. */
export function runnerFinished(f: RunnerPodFacts): boolean {
  return f.phase === 'Succeeded' || (f.runnerTerminated && f.runnerExitCode === 0);
}

/**
 * When a runner that has not registered is given up: the registration timeout counted from the start
 * of its runner container (the seed counted from pod creation, which recycled pods still waiting for
 * a node, a volume or an image), or from Ready when the kubelet reported no start time.
 */
export function registrationDeadline(f: RunnerPodFacts, timeoutMs: number): number | undefined {
  const since = f.runnerStartedAt ?? f.readySince;
  return since === undefined ? undefined : since + timeoutMs;
}

// ------------------------------------------------------------------------------- graceful stop

export type DoneReason =
  | 'already-unregistered'
  | 'pending-before-registration'
  | 'stopped-before-registration'
  | 'never-registered'
  | 'runner-stopped'
  | 'crashed-while-waiting'
  | 'unregistered'
  | 'runner-gone'
  | 'crashed-while-busy'
  | 'permission-denied';

export type StopStep =
  /** Graceful stop complete: the runner is not (or no longer) registered; the pod may go. */
  | { kind: 'done'; row: string; reason: DoneReason }
  /** Not yet: reconcile again after `requeueAfterMs`. */
  | {
      kind: 'wait';
      row: string;
      reason: 'waiting-for-registration' | 'waiting-for-job';
      requeueAfterMs: number;
    }
  /** Ask GitHub to remove runner `runnerId`, then call `removalStep`. */
  | { kind: 'remove'; row: string; runnerId: number };

export interface StopInput {
  facts: RunnerPodFacts;
  /** The runner's ID: recorded on the pod, else found by name in the runner registry. */
  runnerId: number | undefined;
  now: number;
  /** `--unregistration-retry-delay` (1 min). */
  retryDelayMs: number;
  /** `--registration-timeout` (10 min), counted from the runner container's start (else Ready). */
  registrationTimeoutMs: number;
}

/** The decision table of spec §4.3; rows are tried top-down. */
export function gracefulStopDecision(input: StopInput): StopStep {
  const { facts: f, runnerId, now } = input;
  if (f.annotations[ANNOTATION_UNREGISTRATION_COMPLETE]) {
    return { kind: 'done', row: '1', reason: 'already-unregistered' };
  }
  const stopped = runnerStopped(f);
  const pending = f.phase === 'Pending';
  const deadline = registrationDeadline(f, input.registrationTimeoutMs);
  const readyTimedOut = deadline !== undefined && deadline < now;
  if (runnerId === undefined) {
    if (!stopped && !readyTimedOut && !pending) {
      return {
        kind: 'wait',
        row: '2',
        reason: 'waiting-for-registration',
        requeueAfterMs: input.retryDelayMs,
      };
    }
    if (pending) return { kind: 'done', row: '3', reason: 'pending-before-registration' };
    if (stopped) return { kind: 'done', row: '4', reason: 'stopped-before-registration' };
    return { kind: 'done', row: '5', reason: 'never-registered' };
  }
  // An ephemeral runner that exited 0 was removed by GitHub with its job. Any other stopped runner
  // (crash, OOM, a static runner that exited) may still be registered: ask GitHub (row 8), which
  // answers 204, 404 or, while it still thinks the runner busy, 422 (then done, see removalStep).
  if (stopped && f.ephemeral && runnerFinished(f))
    return { kind: 'done', row: '6', reason: 'runner-stopped' };
  if (stopped) return { kind: 'remove', row: '6/8', runnerId };
  if (f.annotations[ANNOTATION_COMPLETION_WAIT_START]) {
    if (!f.ephemeral || !f.runnerHasStatus) {
      return { kind: 'wait', row: '7a', reason: 'waiting-for-job', requeueAfterMs: input.retryDelayMs };
    }
    if (!f.runnerTerminatedBefore) {
      return { kind: 'wait', row: '7b', reason: 'waiting-for-job', requeueAfterMs: input.retryDelayMs };
    }
    return { kind: 'done', row: '7c', reason: 'crashed-while-waiting' };
  }
  return { kind: 'remove', row: '8', runnerId };
}

/** What RemoveRunner answered (the GitHub client's typed outcome, reduced to what matters here). */
export type RemovalAnswer =
  | { kind: 'removed' }
  | { kind: 'notFound' }
  | { kind: 'busy'; message: string }
  | { kind: 'forbidden'; message: string }
  | { kind: 'rateLimited'; resetAt: number; message: string }
  | { kind: 'invalidCredentials'; message: string }
  | { kind: 'failed'; status: number | null; message: string };

export type RemovalStep =
  | { kind: 'done'; row: string; reason: DoneReason; warning?: string }
  /** Annotate once, then reconcile again after `requeueAfterMs`. */
  | {
      kind: 'wait';
      row: string;
      reason: 'runner-busy' | 'rate-limited';
      requeueAfterMs: number;
      annotateOnce: Record<string, string>;
      note: string;
    }
  /** GitHub says the ID is unknown: confirm with a fresh list before calling it gone. */
  | { kind: 'confirm-gone'; row: string }
  /** Retry with backoff (and say why). */
  | { kind: 'retry'; row: string; message: string; warning?: string };

export function removalStep(input: {
  answer: RemovalAnswer;
  facts: RunnerPodFacts;
  now: number;
  retryDelayMs: number;
  rfc3339: (ms: number) => string;
}): RemovalStep {
  const { answer: a, facts: f, now } = input;
  switch (a.kind) {
    case 'removed':
      return { kind: 'done', row: '8/204', reason: 'unregistered' };
    case 'forbidden':
      return {
        kind: 'done',
        row: '8/403',
        reason: 'permission-denied',
        warning: `GitHub refused to remove runner ${f.name} (${a.message}); treating it as unregistered. Remove it in GitHub's settings if it is still listed.`,
      };
    case 'busy': {
      if (runnerStopped(f)) {
        const how =
          f.runnerExitCode !== undefined
            ? `its container exited with code ${f.runnerExitCode}`
            : `the pod is ${f.phase}`;
        return {
          kind: 'done',
          row: '8/422-exited',
          reason: 'crashed-while-busy',
          warning: `Runner ${f.name} is still marked busy on GitHub but ${how}; deleting the pod. GitHub may list the runner until it times out.`,
        };
      }
      if (f.ephemeral) {
        return {
          kind: 'wait',
          row: '8/422-ephemeral',
          reason: 'runner-busy',
          // Pod and registry events wake us first; the delay only bounds the wait.
          requeueAfterMs: input.retryDelayMs,
          annotateOnce: {
            [ANNOTATION_UNREGISTRATION_FAILURE]: a.message,
            [ANNOTATION_COMPLETION_WAIT_START]: input.rfc3339(now),
          },
          note: `Runner ${f.name} is running a job; waiting for the ephemeral runner to finish it`,
        };
      }
      return {
        kind: 'wait',
        row: '8/422-static',
        reason: 'runner-busy',
        requeueAfterMs: input.retryDelayMs,
        annotateOnce: { [ANNOTATION_UNREGISTRATION_FAILURE]: a.message },
        note: `Runner ${f.name} is running a job; retrying unregistration every ${formatDuration(input.retryDelayMs)}`,
      };
    }
    case 'rateLimited':
      return {
        kind: 'wait',
        row: '8/rate-limited',
        reason: 'rate-limited',
        requeueAfterMs: Math.max(1000, a.resetAt - now),
        annotateOnce: {},
        note: `GitHub API rate limit reached; unregistering runner ${f.name} after ${input.rfc3339(a.resetAt)}`,
      };
    case 'notFound':
      return { kind: 'confirm-gone', row: '8/404' };
    case 'invalidCredentials':
      return {
        kind: 'retry',
        row: '8/401',
        message: `GitHub rejected the credentials: ${a.message}`,
        warning: `Cannot unregister runner ${f.name}: GitHub rejected the credentials (${a.message})`,
      };
    case 'failed':
      return {
        kind: 'retry',
        row: '8/other',
        message: `removing runner failed (${a.status ?? 'no answer'}): ${a.message}`,
      };
  }
}

// -------------------------------------------------------------------- registration check (seed)

export type RegistrationLookup = 'online' | 'offline' | 'notFound';

export type RegistrationStep =
  /** Finished or never healthy: gracefully stop and delete the pod so its owner replaces it. */
  | { kind: 'restart'; reason: 'finished' | 'crashed' | 'not-registered' | 'offline'; message: string }
  /** Checked recently: come back when the interval is over. */
  | { kind: 'requeue'; requeueAfterMs: number }
  /** Time to look the runner up in the registry. */
  | { kind: 'lookup' }
  /** Registered and online: nothing to do. */
  | { kind: 'registered' }
  /** Not registered (or offline) yet, still within the timeout: record the check, come back. */
  | { kind: 'recheck'; requeueAfterMs: number; lookup: Exclude<RegistrationLookup, 'online'> };

export interface RegistrationSettings {
  /** `--registration-recheck-interval` (1 min). */
  intervalMs: number;
  /** `--registration-recheck-jitter` (10 s). */
  jitterMs: number;
  /** `--registration-timeout` (10 min), from the runner container's start (the seed: pod creation). */
  timeoutMs: number;
}

/** Before the lookup: finished pods restart, recently checked pods wait. */
export function registrationCheckStart(
  f: RunnerPodFacts,
  now: number,
  s: RegistrationSettings,
): RegistrationStep {
  if (runnerStopped(f)) {
    if (runnerFinished(f)) {
      return {
        kind: 'restart',
        reason: 'finished',
        message: `Runner pod ${f.name} has finished; replacing it`,
      };
    }
    const how =
      f.runnerExitCode !== undefined
        ? `its runner container exited with code ${f.runnerExitCode}`
        : `the pod is ${f.phase}`;
    return {
      kind: 'restart',
      reason: 'crashed',
      message: `Runner pod ${f.name} stopped (${how}); replacing it`,
    };
  }
  const last = time(f.annotations[ANNOTATION_LAST_REGISTRATION_CHECK]);
  if (last !== undefined) {
    const wait = last + s.intervalMs - now - 1000;
    if (wait > 0) return { kind: 'requeue', requeueAfterMs: wait };
  }
  return { kind: 'lookup' };
}

/** After the lookup. `random` ∈ [0, 1) feeds the jitter (Go's wait.Jitter with factor 0.1). */
export function registrationCheckResult(
  f: RunnerPodFacts,
  lookup: RegistrationLookup,
  now: number,
  s: RegistrationSettings,
  random: number,
): RegistrationStep {
  if (lookup === 'online') return { kind: 'registered' };
  const deadline = registrationDeadline(f, s.timeoutMs);
  const timedOut = deadline !== undefined && now - deadline > 0;
  const within = `within ${formatDuration(s.timeoutMs)} of its runner container starting`;
  if (timedOut) {
    return lookup === 'notFound'
      ? {
          kind: 'restart',
          reason: 'not-registered',
          message: `Runner ${f.name} did not register with GitHub ${within}; replacing the pod`,
        }
      : {
          kind: 'restart',
          reason: 'offline',
          message: `Runner ${f.name} is still offline on GitHub, not online ${within}; replacing the pod`,
        };
  }
  return { kind: 'recheck', lookup, requeueAfterMs: s.intervalMs + s.jitterMs + random * 0.1 * s.jitterMs };
}

// ------------------------------------------------------------------------------ forced deletion

export type ForceDeleteStep = { kind: 'force-delete' } | { kind: 'wait'; requeueAfterMs: number };

/**
 * A pod whose finalizers are gone but which still exists `timeoutMs` after its deletion was asked
 * for (typically on a lost node whose kubelet never confirms) is deleted with grace period 0.
 */
export function forceDeleteDecision(
  deletionRequestedAt: number,
  now: number,
  timeoutMs: number,
): ForceDeleteStep {
  const overdue = now - (deletionRequestedAt + timeoutMs);
  if (overdue > 0) return { kind: 'force-delete' };
  return { kind: 'wait', requeueAfterMs: -overdue + 1000 };
}
