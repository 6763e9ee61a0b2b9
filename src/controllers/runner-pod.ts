import { RUNNERS, type Runner } from '../api/index.ts';
import type { GitHubClient, GitHubScope, RemoveRunnerOutcome, RunnerChange } from '../github/index.ts';
import { GitHubApiError, GitHubConfigError, scopeKey } from '../github/index.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { isNotFound, toKubeError } from '../runtime/errors.ts';
import type { EventRecorder } from '../runtime/events.ts';
import { type Informer, type ResourceRef, resourcePath, type Watchable } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import type { Manager } from '../runtime/manager.ts';
import { addFinalizer, mergePatch, removeFinalizer } from '../runtime/objects.ts';
import { TurnPacer } from '../runtime/pacer.ts';
import { PODS, SECRETS } from '../runtime/resources.ts';
import { type KubeObject, objectKey } from '../runtime/store.ts';
import { WrittenObjects } from '../runtime/written.ts';
import { POD_NAME_INDEX, runnerPodInformer } from './cache-shapes.ts';
import {
  ANNOTATION_WAIT_REASON,
  ANNOTATION_WAIT_START,
  LABEL_RUNNER_POD,
  RUNNER_POD_LABELS,
  rfc3339,
} from './constants.ts';
import type { PodLike, RemovalAnswer } from './graceful-stop.ts';
import { RecentRemovals } from './recent-removals.ts';
import { RegistryInterest } from './registry-interest.ts';
import {
  DEFAULT_RUNNER_POD_SETTINGS,
  type EventSpec,
  type Learned,
  planRunnerPod,
  type RunnerPodSettings,
  type RunnerPodStep,
  runnerPodIdentity,
  type WaitMark,
} from './runner-pod-plan.ts';

/** Paced writes (first runner-ID records): a thousand spread over 40 s, none waits more than 30 s. */
const PACED_WRITES_PER_SECOND = 25;
const PACED_WRITE_MAX_WAIT_MS = 30_000;

export { DEFAULT_RUNNER_POD_SETTINGS, type RunnerPodSettings } from './runner-pod-plan.ts';
export { PODS };

/**
 * The runner pod controller (the seed): owns the life of every runner pod. It registers nothing
 * itself; it watches registration, replaces finished and never-registered pods, unregisters runners
 * from GitHub before their pods go, and frees pods stuck on lost nodes. What to do is decided by
 * `planRunnerPod` (pure); this class performs one step at a time and feeds back what it learned.
 */

/** A reconcile that takes more steps than this is a planning bug, not progress. */
const MAX_STEPS = 24;

/** Chooses the GitHub client for a pod (its credentials Secret, or the controller's default). */
export interface GitHubClientSource {
  clientFor(pod: {
    namespace: string;
    name: string;
    credentialsSecret: string | undefined;
    /** The client last built from a Secret that has since gone, for cleanup (see GitHubClientPool). */
    lastKnown?: boolean;
  }): Promise<GitHubClient>;
  release(pod: { namespace: string; name: string }): void;
}

export interface RunnerPodControllerOptions {
  manager: Manager;
  github: GitHubClientSource;
  /** Watch only this namespace (`--watch-namespace`). */
  namespace?: string;
  settings?: Partial<RunnerPodSettings>;
  concurrency?: number;
  /** [0, 1), for the recheck jitter. */
  random?: () => number;
}

export interface PodObject extends KubeObject, PodLike {
  metadata: KubeObject['metadata'] & PodLike['metadata'];
  spec?: PodLike['spec'] & Record<string, unknown>;
  status?: PodLike['status'] & Record<string, unknown>;
}

/** Carries any of RUNNER_POD_LABELS (the runner pod cache holds no other pods). */
export function isRunnerPod(pod: KubeObject): boolean {
  const labels = pod.metadata.labels ?? {};
  return RUNNER_POD_LABELS.some((l) => l in labels);
}

/** One reconcile's view: the pod as last written, and what GitHub told us. */
interface Pass {
  pod: PodObject;
  learned: Learned;
  client: GitHubClient | undefined;
  scope: GitHubScope;
  credentialsSecret: string | undefined;
}

export class RunnerPodReconciler {
  readonly controller: Controller;
  readonly informer: Watchable<PodObject>;
  private readonly runners: Informer<Runner>;
  private readonly http: KubeHttp;
  private readonly clock: Clock;
  private readonly events: EventRecorder;
  private readonly github: GitHubClientSource;
  private readonly settings: RunnerPodSettings;
  private readonly random: () => number;
  private readonly interest: RegistryInterest;
  private readonly recentRemovals: RecentRemovals;

  constructor(opts: RunnerPodControllerOptions) {
    const m = opts.manager;
    this.http = m.http;
    this.clock = m.clock;
    this.events = m.events;
    this.github = opts.github;
    this.settings = { ...DEFAULT_RUNNER_POD_SETTINGS, ...opts.settings };
    this.pacedWrites = new TurnPacer(m.clock, PACED_WRITES_PER_SECOND, PACED_WRITE_MAX_WAIT_MS);
    this.random = opts.random ?? Math.random;
    // Shorter than the busy retry delay, so a static runner is still asked again on schedule.
    this.recentRemovals = new RecentRemovals(Math.min(10_000, this.settings.unregistrationRetryDelayMs / 2));
    this.informer = runnerPodInformer(m, opts.namespace);
    this.runners = m.informer<Runner>(RUNNERS, opts.namespace ? { namespace: opts.namespace } : {});
    // A runner appearing, changing state or vanishing requeues its pod at once.
    this.interest = new RegistryInterest((change: RunnerChange) => {
      for (const pod of this.informer.store.byIndex(POD_NAME_INDEX, change.runner.name)) {
        this.controller.enqueue(objectKey(pod));
      }
    });
    // Whatever a pod held on to goes with it.
    this.informer.addHandler({ onDelete: (pod) => this.forget(pod) });
    this.controller = m
      .controller({
        name: 'runnerpod-controller',
        concurrency: opts.concurrency ?? 16,
        reconcile: (req, ctx) => this.reconcile(req.key, ctx),
      })
      .watchFor(this.informer);
  }

  /** What the controller holds on to (leak checks). */
  get usage(): { registries: number; scopes: number; pods: number; recentRemovals: number } {
    return { ...this.interest.usage, recentRemovals: this.recentRemovals.size };
  }

  stop(): void {
    this.interest.stop();
  }

  /**
   * Runner IDs found in one listing come by the hundred (a thousand runners registered since the
   * last one): their records are written at this pace rather than all at once.
   */
  private readonly pacedWrites: TurnPacer;
  /** Pods as this controller last wrote them, until the cache has caught up. */
  private readonly written = new WrittenObjects<PodObject>();

  async reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    // The pod as this controller last wrote it when the cache is behind: a reconcile woken by some
    // other change must not repeat a finalizer removal the cache has not seen yet.
    const cached = this.written.newest(key, this.informer.store.get(key));
    if (!cached) this.pacedWrites.forget(key);
    if (!cached || !isRunnerPod(cached)) return undefined;
    const identity = runnerPodIdentity(cached);
    const pass: Pass = {
      pod: cached,
      learned: {},
      client: undefined,
      scope: identity.ok ? identity.value.scope : { kind: 'organization', org: '' },
      credentialsSecret: identity.ok ? identity.value.credentialsSecret : undefined,
    };
    const now = this.clock.now();
    const random = this.random();
    for (let i = 0; i < MAX_STEPS; i++) {
      const step = planRunnerPod({
        pod: pass.pod,
        now,
        settings: this.settings,
        random,
        learned: pass.learned,
      });
      const before = pass.pod;
      try {
        const outcome = await this.perform(step, pass, ctx);
        if (outcome !== 'continue') return outcome;
      } finally {
        if (pass.pod !== before) this.written.remember(pass.pod);
      }
    }
    throw new Error(`runner pod ${key}: no decision after ${MAX_STEPS} steps (a planning bug); retrying`);
  }

  /** Performs one step; `'continue'` means plan again with what was learned. */
  private async perform(
    step: RunnerPodStep,
    pass: Pass,
    ctx: ReconcileContext,
  ): Promise<ReconcileResult | undefined | 'continue'> {
    const { pod } = pass;
    switch (step.kind) {
      case 'ignore':
        if (step.event) this.event(pod, step.event, ctx);
        return undefined;

      case 'add-finalizers': {
        let current: PodObject | undefined = pod;
        for (const f of step.finalizers) {
          current = await addFinalizer(this.http, PODS, current, f);
          if (!current) return undefined;
        }
        // The rest waits for the watch event of our own write (as ARC does).
        return undefined;
      }

      case 'delete-runner-object': {
        // A replica set's Runner whose pod goes is replaced by a new Runner (a fresh name and
        // sync time), as ARC does. A Runner of its own gets a new pod from the Runner controller.
        const runner = this.runners.store.getByName(pod.metadata.namespace, step.name);
        const ownerUid = pod.metadata.ownerReferences?.find((r) => r.controller && r.kind === 'Runner')?.uid;
        const ofReplicaSet = runner?.metadata.ownerReferences?.some(
          (r) => r.controller && r.kind === 'RunnerReplicaSet',
        );
        if (
          runner &&
          !runner.metadata.deletionTimestamp &&
          runner.metadata.uid === ownerUid &&
          ofReplicaSet
        ) {
          await this.deleteIgnoringNotFound(
            resourcePath(RUNNERS, pod.metadata.namespace, step.name),
            ownerUid,
          );
        }
        pass.learned.runnerObjectDeleted = true;
        return 'continue';
      }

      case 'cleanup-linked': {
        const name = pod.metadata.name ?? '';
        try {
          await this.deleteLinked(PODS, pod.metadata.namespace ?? 'default', name);
          await this.deleteLinkedSecrets(pod.metadata.namespace ?? 'default', name);
        } catch (err) {
          this.event(
            pod,
            {
              type: 'Warning',
              reason: 'LinkedResourcesCleanupFailed',
              note: `Could not delete the job pods and secrets of ${name}: ${toKubeError(err).message}`,
            },
            ctx,
          );
          return { requeueAfterMs: 30_000 };
        }
        pass.learned.linkedCleaned = true;
        return 'continue';
      }

      case 'remove-finalizer': {
        if (step.event) this.event(pod, step.event, ctx);
        const updated = await removeFinalizer(this.http, PODS, pod, step.finalizer, step.annotations);
        if (step.releaseClient) this.forget(pod);
        ctx.log.info({ finalizer: step.finalizer }, step.log);
        if (!updated) return undefined;
        pass.pod = updated;
        return 'continue';
      }

      case 'need-client':
        await this.resolveClient(pass);
        return 'continue';

      case 'need-listing':
        if (step.notBefore !== undefined) {
          ctx.log.debug(
            { notBefore: new Date(step.notBefore).toISOString() },
            'runner list needed fresher than the cache',
          );
        }
        await this.list(pass, step.notBefore);
        return 'continue';

      case 'need-name-lookup':
        await this.lookUpName(pass);
        return 'continue';

      case 'annotate':
        if (step.paced) {
          const wait = this.pacedWrites.waitMs(objectKey(pod));
          if (wait > 0) return { requeueAfterMs: wait };
        }
        if (step.event) this.event(pod, step.event, ctx);
        if (step.log) ctx.log.info(step.log);
        pass.pod = await this.patchAnnotations(pod, step.annotations);
        return 'continue';

      case 'remove-runner':
        await this.removeRunner(pass, step.runnerId, ctx);
        return 'continue';

      case 'delete-pod':
        try {
          // The UID precondition keeps a stale cache from deleting a same-named replacement.
          await this.http.request('DELETE', resourcePath(PODS, pod.metadata.namespace, pod.metadata.name), {
            body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: pod.metadata.uid } },
          });
        } catch (err) {
          if (isNotFound(err) || toKubeError(err).code === 409) return undefined;
          throw err;
        }
        ctx.log.info({ reason: step.log }, 'deleted runner pod');
        this.event(pod, step.event, ctx);
        return undefined;

      case 'force-delete':
        try {
          await this.http.request('DELETE', resourcePath(PODS, pod.metadata.namespace, pod.metadata.name), {
            body: {
              apiVersion: 'v1',
              kind: 'DeleteOptions',
              gracePeriodSeconds: 0,
              preconditions: { uid: pod.metadata.uid },
            },
          });
        } catch (err) {
          if (isNotFound(err) || toKubeError(err).code === 409) return undefined;
          throw err;
        }
        ctx.log.warn(
          {
            deletionTimestamp: pod.metadata.deletionTimestamp,
            timeoutMs: this.settings.forceDeleteTimeoutMs,
          },
          'pod not gone after its deletion timeout (lost node?); deleted with grace period 0',
        );
        this.event(pod, step.event, ctx);
        return { requeueAfterMs: 3000 };

      case 'settle':
        await this.settle(pass, step.annotations, step.mark, ctx);
        if (step.log) ctx.log.debug(step.log);
        return step.requeueAfterMs !== undefined ? { requeueAfterMs: step.requeueAfterMs } : undefined;

      case 'fail':
        if (step.event) this.event(pod, step.event, ctx);
        throw new Error(step.message);
    }
  }

  // ------------------------------------------------------------------------------- GitHub

  private async resolveClient(pass: Pass): Promise<void> {
    const { pod } = pass;
    try {
      pass.client = await this.github.clientFor({
        namespace: pod.metadata.namespace ?? 'default',
        name: pod.metadata.name ?? '',
        credentialsSecret: pass.credentialsSecret,
        // Unregistering a deleted pod's runner may use the credentials of a Secret deleted since.
        lastKnown: Boolean(pod.metadata.deletionTimestamp),
      });
      pass.learned.client = { usable: true };
      this.interest.track(objectKey(pod), pass.client.registry, pass.scope);
    } catch (err) {
      if (!(err instanceof GitHubConfigError)) throw err;
      pass.learned.client = { usable: false, message: err.message };
    }
  }

  private async list(pass: Pass, notBefore: number | undefined): Promise<void> {
    const client = pass.client!;
    try {
      pass.learned.listing =
        notBefore === undefined
          ? await client.registry.get(pass.scope)
          : await client.registry.fresherThan(pass.scope, notBefore);
    } catch (err) {
      this.learnFromReadError(pass, err);
    }
  }

  private async lookUpName(pass: Pass): Promise<void> {
    const at = this.clock.now();
    try {
      const { filtered, runner } = await pass.client!.findRunnerByName(
        pass.scope,
        pass.pod.metadata.name ?? '',
      );
      pass.learned.nameLookup = !filtered
        ? { at, answer: 'unsupported' }
        : runner
          ? { at, answer: 'found', runner }
          : { at, answer: 'absent' };
    } catch (err) {
      this.learnFromReadError(pass, err);
    }
  }

  /** What a failed read tells the plan (rate limits, unusable credentials); anything else is retried. */
  private learnFromReadError(pass: Pass, err: unknown): void {
    if (err instanceof GitHubApiError && err.kind === 'rateLimited') {
      pass.learned.rateLimited = {
        resetAt: err.rateLimitResetAt ?? this.clock.now() + 60_000,
        message: err.rateLimitCause ?? 'primary',
      };
      return;
    }
    if (
      (err instanceof GitHubApiError && err.kind === 'invalidCredentials') ||
      err instanceof GitHubConfigError
    ) {
      pass.learned.client = { usable: false, message: err.message };
      return;
    }
    throw err;
  }

  private async removeRunner(pass: Pass, runnerId: number, ctx: ReconcileContext): Promise<void> {
    const client = pass.client!;
    const key = `${client.credentialId} ${scopeKey(pass.scope)} ${runnerId}`;
    let outcome = this.recentRemovals.get(key, this.clock.now());
    if (outcome) {
      ctx.log.debug({ runnerId, answer: outcome.kind }, 'reusing a removal answer of seconds ago');
    } else {
      try {
        outcome = await client.removeRunner(pass.scope, runnerId);
      } catch (err) {
        if (!(err instanceof GitHubConfigError)) throw err;
        pass.learned.client = { usable: false, message: err.message };
        return;
      }
      this.recentRemovals.record(key, outcome, this.clock.now());
    }
    ctx.log.info({ runnerId, answer: outcome.kind }, 'asked GitHub to remove the runner');
    pass.learned.removal = { runnerId, answer: toRemovalAnswer(outcome), at: this.clock.now() };
  }

  /** The pod is gone (or no longer needs GitHub): drop its client reference and registry interest. */
  private forget(pod: KubeObject): void {
    this.interest.untrack(objectKey(pod));
    this.github.release({ namespace: pod.metadata.namespace ?? 'default', name: pod.metadata.name ?? '' });
  }

  // ------------------------------------------------------------------------------- writes

  private async settle(
    pass: Pass,
    annotations: Record<string, string | null> | undefined,
    mark: WaitMark | 'clear' | undefined,
    ctx: ReconcileContext,
  ): Promise<void> {
    const { pod } = pass;
    const current = pod.metadata.annotations ?? {};
    const patch: Record<string, string | null> = { ...annotations };
    let event: EventSpec | undefined;
    if (mark === 'clear') {
      if (current[ANNOTATION_WAIT_REASON] !== undefined) patch[ANNOTATION_WAIT_REASON] = null;
      if (current[ANNOTATION_WAIT_START] !== undefined) patch[ANNOTATION_WAIT_START] = null;
    } else if (mark && current[ANNOTATION_WAIT_REASON] !== mark.reason) {
      // A wait is announced once, when it starts.
      patch[ANNOTATION_WAIT_REASON] = mark.reason;
      patch[ANNOTATION_WAIT_START] = rfc3339(this.clock.now());
      event = mark.event;
    }
    pass.pod = await this.patchAnnotations(pod, patch);
    if (event) this.event(pod, event, ctx);
  }

  private async patchAnnotations(
    pod: PodObject,
    annotations: Record<string, string | null>,
  ): Promise<PodObject> {
    if (Object.keys(annotations).length === 0) return pod;
    return await mergePatch<PodObject>(this.http, PODS, pod, { metadata: { annotations } });
  }

  private async deleteLinked(r: ResourceRef, namespace: string, podName: string): Promise<void> {
    const list = await this.http.request<{ items: KubeObject[] }>('GET', resourcePath(r, namespace), {
      query: { labelSelector: `${LABEL_RUNNER_POD}=${podName}` },
    });
    await Promise.all(
      list.items
        .filter((o) => !o.metadata.deletionTimestamp)
        .map((o) => this.deleteIgnoringNotFound(resourcePath(r, namespace, o.metadata.name))),
    );
  }

  /**
   * One delete of the collection: listing Secrets would need the right to read every Secret in the
   * namespace, which paddock's role does not grant.
   */
  private async deleteLinkedSecrets(namespace: string, podName: string): Promise<void> {
    await this.http.request('DELETE', resourcePath(SECRETS, namespace), {
      query: { labelSelector: `${LABEL_RUNNER_POD}=${podName}` },
    });
  }

  /** `uid`: only that very object (a newer one of the same name answers 409, which is fine too). */
  private async deleteIgnoringNotFound(path: string, uid?: string): Promise<void> {
    try {
      await this.http.request('DELETE', path, uid ? { body: { preconditions: { uid } } } : {});
    } catch (err) {
      const e = toKubeError(err);
      if (e.code !== 404 && e.code !== 410 && !(uid && e.code === 409)) throw err;
    }
  }

  /** An Event on the pod; a Warning goes to the log as well (Events cannot be written in a namespace being deleted). */
  private event(pod: PodObject, e: EventSpec, ctx: ReconcileContext): void {
    if (e.type === 'Warning') ctx.log.warn({ reason: e.reason }, e.note);
    this.events.record({
      regarding: { ...pod, apiVersion: 'v1', kind: 'Pod' },
      type: e.type,
      reason: e.reason,
      note: e.note,
      action: 'Reconcile',
    });
  }
}

function toRemovalAnswer(o: RemoveRunnerOutcome): RemovalAnswer {
  switch (o.kind) {
    case 'removed':
    case 'notFound':
      return { kind: o.kind };
    case 'busy':
    case 'forbidden':
    case 'invalidCredentials':
      return { kind: o.kind, message: o.message };
    case 'rateLimited':
      return { kind: 'rateLimited', resetAt: o.resetAt, message: o.message };
    case 'failed':
      return { kind: 'failed', status: o.status, message: o.message };
  }
}
