import { type GitHubScope, resolveScope } from '../github/scope.ts';
import { formatDuration } from '../runtime/duration.ts';
import type { EventType } from '../runtime/events.ts';
import {
  ANNOTATION_COMPLETION_WAIT_START,
  ANNOTATION_CREDS_SECRET,
  ANNOTATION_LAST_REGISTRATION_CHECK,
  ANNOTATION_RUNNER_ID,
  ANNOTATION_UNREGISTRATION_COMPLETE,
  ANNOTATION_UNREGISTRATION_REQUEST,
  ANNOTATION_UNREGISTRATION_START,
  ANNOTATION_WAIT_REASON,
  ANNOTATION_WAIT_START,
  ENV_CONTAINER_HOOKS,
  ENV_ENTERPRISE,
  ENV_ORG,
  ENV_REPO,
  FINALIZER_LINKED_RESOURCES,
  FINALIZER_RUNNER_POD,
  RUNNER_CONTAINER,
  rfc3339,
} from './constants.ts';
import {
  forceDeleteDecision,
  gracefulStopDecision,
  type PodLike,
  type RemovalAnswer,
  type RunnerPodFacts,
  registrationCheckResult,
  registrationCheckStart,
  registrationDeadline,
  removalStep,
  runnerFinished,
  runnerPodFacts,
} from './graceful-stop.ts';

/**
 * Everything the runner pod controller decides, as one pure step function: given the pod, the time,
 * the settings and what this reconcile has learned from GitHub so far, `planRunnerPod` names the
 * next thing to do. The reconciler performs it (a write, a lookup, a removal), adds what it learned,
 * and asks again, until the step is terminal (`settle`, `ignore`, `fail`). GitHub is asked only
 * when a decision needs it, and decisions that delete a pod or declare a runner absent only rest on
 * a runner list fetched late enough to have seen the runner, never on a cached one from before.
 */

export interface RunnerPodSettings {
  /** `--registration-recheck-interval` (1 min). */
  registrationRecheckIntervalMs: number;
  /** `--registration-recheck-jitter` (10 s). */
  registrationRecheckJitterMs: number;
  /** `--registration-timeout` (10 min), counted from the runner container's start. */
  registrationTimeoutMs: number;
  /** `--unregistration-retry-delay` (1 min). */
  unregistrationRetryDelayMs: number;
  /** `--force-delete-timeout` (1 min) after the deletion timestamp. */
  forceDeleteTimeoutMs: number;
  /**
   * `--github-unavailable-timeout` (5 min): how long a deleted pod waits for usable GitHub
   * credentials (its Secret may be gone, e.g. when its namespace is deleted) before its finalizer is
   * removed anyway, with a Warning naming the runner that may be left registered.
   */
  githubUnavailableTimeoutMs: number;
}

/** The seed's defaults, plus ours. */
export const DEFAULT_RUNNER_POD_SETTINGS: RunnerPodSettings = {
  registrationRecheckIntervalMs: 60_000,
  registrationRecheckJitterMs: 10_000,
  registrationTimeoutMs: 600_000,
  unregistrationRetryDelayMs: 60_000,
  forceDeleteTimeoutMs: 60_000,
  githubUnavailableTimeoutMs: 300_000,
};

/** How soon to look again when a runner list disagreed with itself (it proves no absence). */
export const INCOMPLETE_LISTING_RETRY_MS = 5_000;

/** The parts of a runner the decisions read. */
export interface RunnerLite {
  readonly id: number;
  readonly name: string;
  readonly status: string;
  readonly busy: boolean;
}

/** A scope's runner list (the registry's snapshot fits). */
export interface RunnerListing {
  /** When the listing started (epoch ms). */
  readonly fetchedAt: number;
  /** The pages agreed: "not found" is proof of absence. */
  readonly complete: boolean;
  byName(name: string): RunnerLite | undefined;
  byId(id: number): RunnerLite | undefined;
}

/** What the reconcile has learned so far (starts empty; the reconciler adds to it). */
export interface Learned {
  /** Whether GitHub can be asked at all (credentials resolved), and if not, why. */
  client?: { usable: true } | { usable: false; message: string };
  listing?: RunnerListing;
  /** The list could not be fetched for rate limits. */
  rateLimited?: { resetAt: number; message: string };
  /** GitHub's answer to removing a runner, and when it came. */
  removal?: { runnerId: number; answer: RemovalAnswer; at: number };
  /** The same-named Runner of a deleted pod was deleted (once per reconcile). */
  runnerObjectDeleted?: boolean;
  /** Container-mode job pods and secrets were deleted. */
  linkedCleaned?: boolean;
  /** GitHub's list filtered by the pod's name (`?name=`), asked when a listing could not tell. */
  nameLookup?: NameLookup;
}

/**
 * The answer to a runner list filtered by one name, and when it was asked: the runner of that name,
 * none, or `unsupported` when the server ignored the filter (its answer says nothing of the name).
 */
export type NameLookup =
  | { at: number; answer: 'found'; runner: RunnerLite }
  | { at: number; answer: 'absent' | 'unsupported' };

export interface EventSpec {
  type: EventType;
  reason: string;
  note: string;
}

/** A wait shown on the pod (`paddock.dev/wait-reason`) and announced once by an Event. */
export interface WaitMark {
  reason: string;
  event: EventSpec;
}

export type RunnerPodStep =
  /** Not a pod paddock manages (or one it cannot make sense of): nothing to do. */
  | { kind: 'ignore'; event?: EventSpec }
  | { kind: 'add-finalizers'; finalizers: string[] }
  /** Delete the Runner of the same name, so it does not recreate a pod deleted directly. */
  | { kind: 'delete-runner-object'; name: string }
  /** Container mode: delete the job pods and secrets labelled with this runner pod. */
  | { kind: 'cleanup-linked' }
  | {
      kind: 'remove-finalizer';
      finalizer: string;
      releaseClient: boolean;
      event?: EventSpec;
      log: string;
      /** The graceful stop's record, written with the removal (a pod being deleted). */
      annotations?: Record<string, string | null>;
    }
  /** Resolve the pod's GitHub client (its credentials Secret, or the default). */
  | { kind: 'need-client' }
  /** The scope's runner list: any cached one, or one whose listing started at or after `notBefore`. */
  | { kind: 'need-listing'; notBefore?: number }
  /** GitHub's list filtered by the pod's name: one request where a whole listing could not tell. */
  | { kind: 'need-name-lookup' }
  /** Merge these annotations into the pod (null removes), then plan again. */
  | {
      kind: 'annotate';
      annotations: Record<string, string | null>;
      event?: EventSpec;
      log?: string;
      /** Nothing waits on this write: the reconciler may spread a burst of them over time. */
      paced?: boolean;
    }
  | { kind: 'remove-runner'; runnerId: number }
  /** Delete the pod (UID precondition) so its owner replaces it. */
  | { kind: 'delete-pod'; event: EventSpec; log: string }
  | { kind: 'force-delete'; event: EventSpec }
  /**
   * Done for now. `requeueAfterMs` schedules the next look; `annotations` are written with the
   * wait marker; `mark` shows a wait on the pod, `'clear'` ends one.
   */
  | {
      kind: 'settle';
      requeueAfterMs?: number;
      annotations?: Record<string, string | null>;
      mark?: WaitMark | 'clear';
      log?: string;
    }
  /** An error to retry with backoff. */
  | { kind: 'fail'; message: string; event?: EventSpec };

export interface RunnerPodPlanInput {
  pod: RunnerPodLike;
  now: number;
  settings: RunnerPodSettings;
  /** [0, 1) for the recheck jitter. */
  random: number;
  learned: Learned;
}

/** The raw pod fields the plan reads. */
export interface RunnerPodLike extends PodLike {
  metadata: PodLike['metadata'] & {
    finalizers?: string[];
    ownerReferences?: { kind: string; name: string; controller?: boolean }[];
  };
}

// ------------------------------------------------------------------------------------ helpers

const warning = (reason: string, note: string): EventSpec => ({ type: 'Warning', reason, note });
const normal = (reason: string, note: string): EventSpec => ({ type: 'Normal', reason, note });

/** What the pod says about its runner, beyond the graceful-stop facts. */
export interface RunnerPodIdentity {
  scope: GitHubScope;
  containerMode: boolean;
  credentialsSecret: string | undefined;
}

/** Scope, container mode and credentials Secret of a runner pod, or why it is not one paddock can manage. */
export function runnerPodIdentity(
  pod: RunnerPodLike,
): { ok: true; value: RunnerPodIdentity } | { ok: false; message: string } {
  const runner = pod.spec?.containers?.find((c) => c.name === RUNNER_CONTAINER);
  const env = runner?.env ?? [];
  if (!runner || env.length === 0) {
    return {
      ok: false,
      message: `Pod has no '${RUNNER_CONTAINER}' container with environment variables; paddock cannot tell which runner it is`,
    };
  }
  // Literal values only: valueFrom cannot be resolved without reading other objects.
  const value = (name: string) => env.find((e) => e.name === name)?.value;
  try {
    const scope = resolveScope({
      enterprise: value(ENV_ENTERPRISE),
      organization: value(ENV_ORG),
      repository: value(ENV_REPO),
    });
    return {
      ok: true,
      value: {
        scope,
        containerMode: env.some((e) => e.name === ENV_CONTAINER_HOOKS),
        credentialsSecret: pod.metadata.annotations?.[ANNOTATION_CREDS_SECRET] || undefined,
      },
    };
  } catch (err) {
    return {
      ok: false,
      message: `Runner container names no GitHub scope (${ENV_ENTERPRISE}, ${ENV_ORG} or ${ENV_REPO}): ${(err as Error).message}`,
    };
  }
}

const OUR_FINALIZERS = [FINALIZER_RUNNER_POD, FINALIZER_LINKED_RESOURCES];

function recordedRunnerId(f: RunnerPodFacts): number | undefined {
  const id = f.recordedRunnerId;
  return id !== undefined && Number.isSafeInteger(id) && id > 0 ? id : undefined;
}

/**
 * The pod's runner by name. A list that started before the pod existed may only hold a predecessor
 * of the same name (StatefulSets reuse pod names), so it cannot tell.
 */
export function runnerByName(listing: RunnerListing, f: RunnerPodFacts): RunnerLite | undefined {
  if (listing.fetchedAt < f.createdAt + 1000) return undefined;
  return listing.byName(f.name);
}

/** The list is old enough to be trusted for this pod's name, i.e. its "not found" means something. */
function listedAfterCreation(listing: RunnerListing, f: RunnerPodFacts): boolean {
  return listing.fetchedAt >= f.createdAt + 1000;
}

type Unresolved = { kind: 'resolved' } | { kind: 'step'; step: RunnerPodStep };

/**
 * Makes sure a runner list is at hand: the client first, then the list. Returns the step that gets
 * what is missing, or what to do when GitHub cannot be asked (`whenUnusable`).
 */
function ensureListing(
  input: RunnerPodPlanInput,
  f: RunnerPodFacts,
  notBefore: number | undefined,
  whenUnusable: (message: string) => RunnerPodStep,
): Unresolved {
  const { learned } = input;
  if (!learned.client) return { kind: 'step', step: { kind: 'need-client' } };
  if (!learned.client.usable) return { kind: 'step', step: whenUnusable(learned.client.message) };
  if (learned.rateLimited) return { kind: 'step', step: rateLimitedWait(input, f, learned.rateLimited) };
  const listing = learned.listing;
  if (!listing || (notBefore !== undefined && listing.fetchedAt < notBefore)) {
    return {
      kind: 'step',
      step: { kind: 'need-listing', ...(notBefore !== undefined ? { notBefore } : {}) },
    };
  }
  return { kind: 'resolved' };
}

function rateLimitedWait(
  input: RunnerPodPlanInput,
  f: RunnerPodFacts,
  { resetAt, message }: NonNullable<Learned['rateLimited']>,
): RunnerPodStep {
  return {
    kind: 'settle',
    requeueAfterMs: Math.max(1000, resetAt - input.now),
    mark: {
      reason: 'rate-limited',
      event: warning(
        'RateLimited',
        `GitHub API rate limit reached (${message}); checking runner ${f.name} again after ${rfc3339(resetAt)}`,
      ),
    },
  };
}

/** Neither a listing nor a lookup by name proves the runner absent: look again soon. */
const UNPROVEN_ABSENCE: RunnerPodStep = {
  kind: 'settle',
  requeueAfterMs: INCOMPLETE_LISTING_RETRY_MS,
  log: 'runner list cannot prove absence yet',
};

type AbsenceProof =
  | { kind: 'absent' }
  | { kind: 'found'; runner: RunnerLite }
  | { kind: 'step'; step: RunnerPodStep };

/**
 * The runner is not in a listing whose pages disagreed (runners came and went while it was listed),
 * which proves nothing: under steady churn the pages of a large fleet may never agree again. The
 * list filtered by the pod's name is one request that cannot disagree with itself. `notBefore`: a
 * lookup asked earlier does not count (one from before a removal's 404, say).
 */
function proveAbsence(input: RunnerPodPlanInput, f: RunnerPodFacts, notBefore?: number): AbsenceProof {
  const { learned } = input;
  if (learned.rateLimited) return { kind: 'step', step: rateLimitedWait(input, f, learned.rateLimited) };
  if (learned.client?.usable === false) return { kind: 'step', step: UNPROVEN_ABSENCE };
  const lookup = learned.nameLookup;
  if (!lookup || (notBefore !== undefined && lookup.at < notBefore)) {
    return { kind: 'step', step: { kind: 'need-name-lookup' } };
  }
  // A lookup within a second of the pod's creation may still see a predecessor of the same name.
  if (lookup.answer === 'unsupported' || lookup.at < f.createdAt + 1000) {
    return { kind: 'step', step: UNPROVEN_ABSENCE };
  }
  return lookup.answer === 'found' ? { kind: 'found', runner: lookup.runner } : { kind: 'absent' };
}

/**
 * The runner is absent from a list late enough to tell: done, once that is proven. A lookup by name
 * that finds it after all removes it; `confirming404`: GitHub just answered 404 for `runnerId`, so
 * finding that very ID again is a contradiction to retry, not a removal to repeat.
 */
function gone(
  input: RunnerPodPlanInput,
  f: RunnerPodFacts,
  runnerId: number,
  log: string,
  confirming404?: { at: number },
): RunnerPodStep {
  if (!input.learned.listing?.complete) {
    const proof = proveAbsence(input, f, confirming404?.at);
    if (proof.kind === 'step') return proof.step;
    if (proof.kind === 'found') {
      if (confirming404 && proof.runner.id === runnerId) {
        return {
          kind: 'fail',
          message: `GitHub answered 404 for runner ${runnerId} although a lookup by name lists it; retrying`,
        };
      }
      return { kind: 'remove-runner', runnerId: proof.runner.id };
    }
    log = `${log} (absence proven by name)`;
  }
  return complete(
    input,
    normal('RunnerGone', `Runner ${f.name} (ID ${runnerId}) is no longer registered with GitHub`),
    log,
  );
}

/** Completes the graceful stop: the runner is not registered (any more, or never was). */
function complete(input: RunnerPodPlanInput, event: EventSpec | undefined, log: string): RunnerPodStep {
  return {
    kind: 'annotate',
    annotations: {
      [ANNOTATION_UNREGISTRATION_COMPLETE]: rfc3339(input.now),
      [ANNOTATION_WAIT_REASON]: null,
      [ANNOTATION_WAIT_START]: null,
    },
    ...(event ? { event } : {}),
    log,
  };
}

/**
 * GitHub cannot be asked (no usable credentials). A live pod waits and says why. A deleted pod
 * waits for `githubUnavailableTimeoutMs` after its deletion, then lets go: the pod must not stay
 * Terminating forever, and the Warning names the runner that may be left registered.
 */
function githubUnavailable(
  input: RunnerPodPlanInput,
  f: RunnerPodFacts,
  message: string,
  runnerId: number | undefined,
): RunnerPodStep {
  const s = input.settings;
  const runner = `${f.name}${runnerId !== undefined ? ` (ID ${runnerId})` : ''}`;
  if (f.deletionRequestedAt === undefined) {
    return {
      kind: 'settle',
      requeueAfterMs: s.unregistrationRetryDelayMs,
      mark: {
        reason: 'github-unavailable',
        event: warning('GitHubCredentialsError', `Cannot ask GitHub about runner ${runner}: ${message}`),
      },
    };
  }
  const giveUpAt = f.deletionRequestedAt + s.githubUnavailableTimeoutMs;
  if (input.now < giveUpAt) {
    return {
      kind: 'settle',
      requeueAfterMs: Math.min(giveUpAt - input.now + 1000, 30_000),
      mark: {
        reason: 'github-unavailable',
        event: warning(
          'GitHubCredentialsError',
          `Cannot unregister runner ${runner}: ${message}; the pod is released at ${rfc3339(giveUpAt)} (${formatDuration(s.githubUnavailableTimeoutMs)} after its deletion) if GitHub cannot be asked by then`,
        ),
      },
    };
  }
  return complete(
    input,
    warning(
      'UnregistrationAbandoned',
      `Gave up unregistering runner ${runner} ${formatDuration(s.githubUnavailableTimeoutMs)} after the pod's deletion: ${message}. The runner may still be registered with GitHub; remove it in GitHub's settings if it is listed.`,
    ),
    'GitHub unavailable past the deadline; finalizer released',
  );
}

// ----------------------------------------------------------------------------------- the plan

export function planRunnerPod(input: RunnerPodPlanInput): RunnerPodStep {
  const { pod } = input;
  const identity = runnerPodIdentity(pod);
  const f = runnerPodFacts(pod);
  const finalizers = pod.metadata.finalizers ?? [];
  if (!identity.ok) {
    // A pod we cannot read must not keep a finalizer of ours forever (someone else may have put it there).
    const ours = OUR_FINALIZERS.find((x) => finalizers.includes(x));
    if (f.deletionRequestedAt !== undefined && ours) {
      return {
        kind: 'remove-finalizer',
        finalizer: ours,
        releaseClient: true,
        event: warning(
          'InvalidRunnerPod',
          `${identity.message}; releasing the pod without unregistering anything`,
        ),
        log: 'invalid runner pod: finalizer released',
      };
    }
    return f.deletionRequestedAt === undefined
      ? { kind: 'ignore', event: warning('InvalidRunnerPod', identity.message) }
      : { kind: 'ignore' };
  }
  if (f.deletionRequestedAt === undefined) return planLive(input, f, identity.value, finalizers);
  return planDeleting(input, f, finalizers);
}

function finalizersOf(identity: RunnerPodIdentity): readonly string[] {
  return identity.containerMode ? OUR_FINALIZERS : [FINALIZER_RUNNER_POD];
}

/**
 * The finalizers this controller puts on a runner pod; a controller that creates the pod sets them
 * at creation and saves a write per pod.
 */
export function runnerPodFinalizers(pod: RunnerPodLike): string[] {
  const identity = runnerPodIdentity(pod);
  return identity.ok ? [...finalizersOf(identity.value)] : [];
}

function planLive(
  input: RunnerPodPlanInput,
  f: RunnerPodFacts,
  identity: RunnerPodIdentity,
  finalizers: string[],
): RunnerPodStep {
  // Finalizers first: nothing may delete this pod behind GitHub's back from now on.
  const wanted = finalizersOf(identity);
  const missing = wanted.filter((x) => !finalizers.includes(x));
  if (missing.length > 0) return { kind: 'add-finalizers', finalizers: missing };

  if (f.annotations[ANNOTATION_UNREGISTRATION_REQUEST]) {
    // The owner is scaling down or retiring this runner: stop gracefully; the owner deletes the pod.
    const step = planStop(input, f);
    return step === 'stopped'
      ? { kind: 'settle', mark: 'clear', log: 'graceful stop complete (owner request)' }
      : step;
  }
  return planRegistration(input, f);
}

function planDeleting(input: RunnerPodPlanInput, f: RunnerPodFacts, finalizers: string[]): RunnerPodStep {
  const { learned, pod } = input;
  if (
    !learned.runnerObjectDeleted &&
    pod.metadata.ownerReferences?.some((r) => r.kind === 'Runner' && r.name === f.name)
  ) {
    return { kind: 'delete-runner-object', name: f.name };
  }
  if (finalizers.includes(FINALIZER_LINKED_RESOURCES)) {
    if (!learned.linkedCleaned) return { kind: 'cleanup-linked' };
    return {
      kind: 'remove-finalizer',
      finalizer: FINALIZER_LINKED_RESOURCES,
      releaseClient: false,
      log: 'job pods and secrets deleted',
    };
  }
  if (finalizers.includes(FINALIZER_RUNNER_POD)) return planStopOfDeletedPod(input, f);
  // Our finalizers are gone; a pod still here long after its deletion sits on a lost node.
  const decision = forceDeleteDecision(
    f.deletionRequestedAt ?? input.now,
    input.now,
    input.settings.forceDeleteTimeoutMs,
  );
  if (decision.kind === 'wait') return { kind: 'settle', requeueAfterMs: decision.requeueAfterMs };
  return { kind: 'force-delete', event: normal('PodDeleted', `Forcefully deleted pod '${f.name}'`) };
}

// ------------------------------------------------------------------------ registration (seed)

function planRegistration(input: RunnerPodPlanInput, f: RunnerPodFacts): RunnerPodStep {
  const { now, settings: s, learned } = input;
  const rs = {
    intervalMs: s.registrationRecheckIntervalMs,
    jitterMs: s.registrationRecheckJitterMs,
    timeoutMs: s.registrationTimeoutMs,
  };
  const start = registrationCheckStart(f, now, rs);
  if (start.kind === 'restart' && controlledByRunner(input.pod)) {
    // A Runner's stopped pod is replaced by its owners (the replica set deletes the Runner, a
    // Runner of its own gets a new pod from the Runner controller); deleting it here as well would
    // race them and cost three writes per pod. The pod's finalizer still unregisters on deletion.
    if (start.reason === 'finished') return { kind: 'settle', log: 'runner finished; its owner replaces it' };
    return {
      kind: 'settle',
      mark: { reason: 'runner-crashed', event: warning('RunnerCrashed', start.message) },
    };
  }
  if (start.kind === 'restart') {
    const event = start.reason === 'finished' ? undefined : warning('RunnerCrashed', start.message);
    return planRestart(input, f, event, start.message);
  }
  if (start.kind === 'requeue') return { kind: 'settle', requeueAfterMs: start.requeueAfterMs };
  // Nothing to check while the runner container has not started (node, volume, image).
  if (f.runnerStartedAt === undefined) return { kind: 'settle', requeueAfterMs: rs.intervalMs };
  // A runner takes some seconds to register: within its first interval it is not looked up at all
  // (no list call, no write, no Event); the first check comes an interval after the container
  // started. At a thousand runners, looking up every new pod on each of its changes cost list calls
  // and a write per pod. (The reconciler spreads the ID records of runners checked together.)
  if (
    f.annotations[ANNOTATION_LAST_REGISTRATION_CHECK] === undefined &&
    !learned.listing &&
    now - f.runnerStartedAt < rs.intervalMs
  ) {
    return { kind: 'settle', requeueAfterMs: f.runnerStartedAt + rs.intervalMs - now };
  }

  const need = ensureListing(input, f, undefined, (message) =>
    githubUnavailable(input, f, message, undefined),
  );
  if (need.kind === 'step') return need.step;
  const listing = learned.listing!;
  const found = runnerByName(listing, f);
  const lookup = !found ? 'notFound' : found.status === 'online' ? 'online' : 'offline';
  if (found && lookup === 'online') return registeredOnline(f, found);
  const result = registrationCheckResult(f, lookup, now, rs, input.random);
  if (result.kind === 'recheck') {
    // A runner takes a few seconds to configure itself: within its first interval, not being listed
    // is the normal case and worth neither a write nor an Event (at a thousand runners, two requests
    // per pod that a saturated API server feels).
    const what = result.lookup === 'notFound' ? 'not registered with GitHub yet' : 'registered but offline';
    return {
      kind: 'settle',
      requeueAfterMs: result.requeueAfterMs,
      annotations: { [ANNOTATION_LAST_REGISTRATION_CHECK]: rfc3339(now) },
      ...(f.phase === 'Running'
        ? {
            mark: {
              reason: 'registration-pending',
              event: normal(
                'RegistrationPending',
                `Runner ${f.name} is ${what}; checking again in ${formatDuration(Math.round(result.requeueAfterMs / 1000) * 1000)}`,
              ),
            },
          }
        : {}),
    };
  }
  if (result.kind !== 'restart') return { kind: 'settle', requeueAfterMs: rs.intervalMs };
  // Replacing the pod rests on a list that started after the deadline: a runner that registered a
  // moment before it must be seen (a cached list may be up to a minute old).
  const deadline = registrationDeadline(f, rs.timeoutMs) ?? now;
  if (listing.fetchedAt < deadline) return { kind: 'need-listing', notBefore: deadline };
  if (!listing.complete && lookup === 'notFound') {
    const proof = proveAbsence(input, f);
    if (proof.kind === 'step') return proof.step;
    // Registered after all (the listing missed it): online, it stays; offline, it is replaced too.
    if (proof.kind === 'found' && proof.runner.status === 'online') return registeredOnline(f, proof.runner);
  }
  return planRestart(input, f, warning('RegistrationTimeout', result.message), result.message);
}

/** Only an online runner of this very name earns a recorded ID. */
function registeredOnline(f: RunnerPodFacts, found: RunnerLite): RunnerPodStep {
  if (recordedRunnerId(f) === found.id) {
    return { kind: 'settle', mark: 'clear', log: 'runner registered and online' };
  }
  const previous = f.annotations[ANNOTATION_RUNNER_ID];
  return {
    kind: 'annotate',
    annotations: { [ANNOTATION_RUNNER_ID]: String(found.id) },
    // A first record waits on nothing (a stop looks the runner up by name meanwhile); a correction
    // goes at once.
    ...(previous ? {} : { paced: true }),
    ...(previous
      ? {
          event: warning(
            'RunnerIdCorrected',
            `The runner ID recorded on pod ${f.name} (${previous}) is not its runner's; recorded ${found.id}, the ID of the online runner named ${f.name}`,
          ),
        }
      : {}),
    log: 'runner registered: ID recorded',
  };
}

/** Stops the runner gracefully, then deletes the pod so its owner creates a fresh one. */
function planRestart(
  input: RunnerPodPlanInput,
  f: RunnerPodFacts,
  event: EventSpec | undefined,
  why: string,
): RunnerPodStep {
  const step = planStop(input, f);
  if (step === 'stopped') {
    return { kind: 'delete-pod', event: normal('PodDeleted', `Deleted pod '${f.name}'`), log: why };
  }
  // Say why once, with the first write of the stop.
  if (event && step.kind === 'annotate' && ANNOTATION_UNREGISTRATION_START in step.annotations) {
    return { ...step, event };
  }
  return step;
}

function controlledByRunner(pod: RunnerPodLike): boolean {
  return (pod.metadata.ownerReferences ?? []).some((o) => o.controller && o.kind === 'Runner');
}

// ------------------------------------------------------------------------------- graceful stop

/**
 * The graceful stop of a pod being deleted. Its start and completion records are only that when no
 * GitHub write comes between them (a finished ephemeral runner, a pod that never ran): they then
 * travel with the finalizer removal, one write instead of three per pod. The start is still written
 * on its own before any removal request, so a restart knows a removal may be under way.
 */
function planStopOfDeletedPod(input: RunnerPodPlanInput, f: RunnerPodFacts): RunnerPodStep {
  const release = (annotations: Record<string, string | null>, done?: RunnerPodStep): RunnerPodStep => {
    const completion = done?.kind === 'annotate' ? done : undefined;
    const all = { ...annotations, ...completion?.annotations };
    return {
      kind: 'remove-finalizer',
      finalizer: FINALIZER_RUNNER_POD,
      releaseClient: true,
      ...(completion?.event ? { event: completion.event } : {}),
      log: completion?.log ?? 'runner unregistered; finalizer removed',
      ...(Object.keys(all).length > 0 ? { annotations: all } : {}),
    };
  };
  const step = planStop(input, f);
  if (step === 'stopped') return release({});
  if (isCompletion(step)) return release({}, step);
  const startsOnly =
    step.kind === 'annotate' &&
    !step.event &&
    Object.keys(step.annotations).length === 1 &&
    ANNOTATION_UNREGISTRATION_START in step.annotations;
  if (!startsOnly) return step;
  const started: RunnerPodFacts = {
    ...f,
    annotations: { ...f.annotations, ...(step.annotations as Record<string, string>) },
  };
  const next = planStop(input, started);
  if (next === 'stopped') return release(step.annotations);
  if (isCompletion(next)) return release(step.annotations, next);
  // Reads first; whether the start needs a write of its own is decided with what they tell.
  if (next.kind === 'need-listing' || next.kind === 'need-client' || next.kind === 'need-name-lookup') {
    return next;
  }
  return step;
}

function isCompletion(step: RunnerPodStep): boolean {
  return step.kind === 'annotate' && typeof step.annotations[ANNOTATION_UNREGISTRATION_COMPLETE] === 'string';
}

/**
 * One step of the graceful stop (spec §4.3), or `'stopped'` once the runner is known not to be
 * registered and the pod may go.
 */
function planStop(input: RunnerPodPlanInput, f: RunnerPodFacts): RunnerPodStep | 'stopped' {
  const { now, settings: s, learned } = input;
  const completeAt = Date.parse(f.annotations[ANNOTATION_UNREGISTRATION_COMPLETE] ?? '');
  if (!Number.isNaN(completeAt)) {
    // Declared unregistered while it had not started (row 3 on an owner's request), then started
    // anyway before the owner deleted it: its runner may have registered since. Look again.
    if (f.runnerStartedAt !== undefined && f.runnerStartedAt >= completeAt) {
      return {
        kind: 'annotate',
        annotations: { [ANNOTATION_UNREGISTRATION_COMPLETE]: null },
        log: 'runner container started after the runner was declared unregistered; checking again',
      };
    }
    return 'stopped';
  }
  if (f.annotations[ANNOTATION_UNREGISTRATION_COMPLETE]) return 'stopped';
  if (!f.annotations[ANNOTATION_UNREGISTRATION_START]) {
    return { kind: 'annotate', annotations: { [ANNOTATION_UNREGISTRATION_START]: rfc3339(now) } };
  }
  if (learned.removal) return planRemovalAnswer(input, f);

  const table = (runnerId: number | undefined) =>
    gracefulStopDecision({
      facts: f,
      runnerId,
      now,
      retryDelayMs: s.unregistrationRetryDelayMs,
      registrationTimeoutMs: s.registrationTimeoutMs,
    });

  let runnerId = recordedRunnerId(f);
  if (runnerId === undefined) {
    const blind = table(undefined);
    // A pod that never ran (row 3) cannot have registered, and an ephemeral runner that exited 0
    // was removed by GitHub with its job (as in row 6): no need to ask anyone.
    if (blind.kind === 'done' && blind.row === '3') return complete(input, undefined, 'graceful stop: row 3');
    if (blind.kind === 'done' && blind.row === '4' && f.ephemeral && runnerFinished(f)) {
      return complete(input, undefined, 'graceful stop: row 4, ephemeral runner finished');
    }
    // Rows 4 and 5 declare the runner absent: only a list that started after this reconcile began
    // may say so. Row 2 only waits, so any list will do.
    const notBefore = blind.kind === 'done' ? now : undefined;
    const need = ensureListing(input, f, notBefore, (message) =>
      blind.kind === 'done'
        ? complete(
            input,
            warning(
              'UnregistrationUnchecked',
              `Runner ${f.name} stopped before paddock saw it register, and GitHub cannot be asked (${message}); if a runner named ${f.name} is listed in GitHub's settings, remove it there`,
            ),
            `graceful stop: row ${blind.row} without GitHub`,
          )
        : githubUnavailable(input, f, message, undefined),
    );
    if (need.kind === 'step') return need.step;
    const listing = learned.listing!;
    const found = runnerByName(listing, f);
    if (found) runnerId = found.id;
    else {
      if (blind.kind === 'wait') return { kind: 'settle', requeueAfterMs: blind.requeueAfterMs };
      const row = `graceful stop: row ${blind.row}`;
      if (listing.complete && listedAfterCreation(listing, f)) return complete(input, undefined, row);
      const proof = proveAbsence(input, f);
      if (proof.kind === 'step') return proof.step;
      if (proof.kind === 'absent') return complete(input, undefined, `${row} (absence proven by name)`);
      runnerId = proof.runner.id;
    }
  }

  const step = table(runnerId);
  switch (step.kind) {
    case 'done':
      return complete(input, undefined, `graceful stop: row ${step.row} (${step.reason})`);
    case 'wait': {
      const waitedSince = step.reason === 'waiting-for-job' ? longJobWaitStart(input, f) : undefined;
      if (waitedSince !== undefined) {
        const need = ensureListing(input, f, waitedSince, () =>
          waitStep(f, step.requeueAfterMs, step.reason),
        );
        if (need.kind === 'step') return need.step;
        if (!input.learned.listing!.byId(runnerId)?.busy) return planRemoval(input, f, runnerId);
      }
      return waitStep(f, step.requeueAfterMs, step.reason);
    }
    case 'remove':
      return planRemoval(input, f, step.runnerId);
  }
}

/**
 * Row 7 waits for an ephemeral runner's container to exit after the job it was found busy with. A
 * pod on a lost node never reports that exit: once the wait has lasted a retry delay, GitHub's list
 * decides instead. Listed idle or not at all, the job is over (done, or failed when the runner lost
 * contact), so GitHub is asked again; its 422 still protects a job taken meanwhile. Returns when
 * the wait began, once it has lasted that long.
 */
function longJobWaitStart(input: RunnerPodPlanInput, f: RunnerPodFacts): number | undefined {
  const since = Date.parse(f.annotations[ANNOTATION_COMPLETION_WAIT_START] ?? '');
  const long =
    f.ephemeral && !Number.isNaN(since) && input.now >= since + input.settings.unregistrationRetryDelayMs;
  return long ? since : undefined;
}

function waitStep(
  f: RunnerPodFacts,
  requeueAfterMs: number,
  reason: 'waiting-for-registration' | 'waiting-for-job',
): RunnerPodStep {
  return {
    kind: 'settle',
    requeueAfterMs,
    ...(reason === 'waiting-for-job'
      ? {
          mark: {
            reason: 'runner-busy',
            event: normal(
              'RunnerBusy',
              `Runner ${f.name} is running a job; waiting for it to finish before removing the pod`,
            ),
          },
        }
      : {}),
  };
}

/**
 * Before asking GitHub to remove runner `runnerId`, make sure it is this pod's runner: a recorded
 * ID may be stale or written by a user, and must never remove somebody else's runner.
 */
function planRemoval(input: RunnerPodPlanInput, f: RunnerPodFacts, runnerId: number): RunnerPodStep {
  const { now, learned } = input;
  const need = ensureListing(input, f, undefined, (message) =>
    githubUnavailable(input, f, message, runnerId),
  );
  if (need.kind === 'step') return need.step;
  let listing = learned.listing!;
  const byId = listing.byId(runnerId);
  if (byId?.name === f.name) return { kind: 'remove-runner', runnerId };
  if (byId) {
    // The ID is somebody else's runner: forget it and look this pod's runner up by name.
    return {
      kind: 'annotate',
      annotations: { [ANNOTATION_RUNNER_ID]: null },
      event: warning(
        'RunnerIdMismatch',
        `The runner ID recorded on pod ${f.name} (${runnerId}) belongs to runner ${byId.name}, not to this pod; it is ignored and runner ${f.name} is looked up by name`,
      ),
      log: 'recorded runner ID names another runner; dropped',
    };
  }
  // Not in the list we have: a list from this reconcile decides.
  const fresh = ensureListing(input, f, now, (message) => githubUnavailable(input, f, message, runnerId));
  if (fresh.kind === 'step') return fresh.step;
  listing = learned.listing!;
  const byName = runnerByName(listing, f);
  if (byName) return { kind: 'remove-runner', runnerId: byName.id };
  return gone(input, f, runnerId, 'runner already gone from GitHub');
}

/** What to do with GitHub's answer to the removal (spec §4.3, row 8). */
function planRemovalAnswer(input: RunnerPodPlanInput, f: RunnerPodFacts): RunnerPodStep {
  const { now, settings: s, learned } = input;
  const removal = learned.removal!;
  const next = removalStep({
    answer: removal.answer,
    facts: f,
    now,
    retryDelayMs: s.unregistrationRetryDelayMs,
    rfc3339,
  });
  switch (next.kind) {
    case 'done':
      return complete(
        input,
        next.warning
          ? warning('UnregistrationFailed', next.warning)
          : normal('Unregistered', `Runner ${f.name} (ID ${removal.runnerId}) removed from GitHub`),
        `graceful stop: row ${next.row}`,
      );
    case 'wait':
      return {
        kind: 'settle',
        requeueAfterMs: next.requeueAfterMs,
        annotations: Object.fromEntries(
          Object.entries(next.annotateOnce).filter(([k]) => !(k in f.annotations)),
        ),
        mark: {
          reason: next.reason,
          event:
            next.reason === 'rate-limited'
              ? warning('RateLimited', next.note)
              : normal('RunnerBusy', next.note),
        },
      };
    case 'confirm-gone': {
      // 404 can mean "gone" or "not visible with these credentials": a list from after the answer decides.
      const need = ensureListing(input, f, removal.at, (message) =>
        githubUnavailable(input, f, message, removal.runnerId),
      );
      if (need.kind === 'step') return need.step;
      const listing = learned.listing!;
      if (listing.byId(removal.runnerId)) {
        return {
          kind: 'fail',
          message: `GitHub answered 404 for runner ${removal.runnerId} although it is listed; retrying`,
        };
      }
      // The runner may have registered again under a new ID (config --replace): that one goes too.
      const byName = runnerByName(listing, f);
      if (byName && byName.id !== removal.runnerId) return { kind: 'remove-runner', runnerId: byName.id };
      return gone(input, f, removal.runnerId, 'graceful stop: 404 confirmed', { at: removal.at });
    }
    case 'retry':
      if (removal.answer.kind === 'invalidCredentials') {
        return githubUnavailable(input, f, next.message, removal.runnerId);
      }
      return {
        kind: 'fail',
        message: next.message,
        ...(next.warning ? { event: warning('UnregistrationFailed', next.warning) } : {}),
      };
  }
}
