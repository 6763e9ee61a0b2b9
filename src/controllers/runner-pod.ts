import type {
  GitHubClient,
  GitHubRunner,
  GitHubScope,
  RemoveRunnerOutcome,
  RunnerChange,
} from '../github/index.ts';
import { GitHubApiError, resolveScope, scopeKey } from '../github/index.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { isNotFound, toKubeError } from '../runtime/errors.ts';
import type { EventRecorder, EventType } from '../runtime/events.ts';
import { type Informer, type ResourceRef, resourcePath } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import type { Manager } from '../runtime/manager.ts';
import { addFinalizer, hasFinalizer, mergePatch, removeFinalizer } from '../runtime/objects.ts';
import { defaultIndexers, type KubeObject, objectKey } from '../runtime/store.ts';
import {
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
  LABEL_RUNNER,
  LABEL_RUNNER_DEPLOYMENT_NAME,
  LABEL_RUNNER_POD,
  LABEL_RUNNERSET_NAME,
  RUNNER_CONTAINER,
  rfc3339,
} from './constants.ts';
import {
  forceDeleteDecision,
  gracefulStopDecision,
  type PodLike,
  type RemovalAnswer,
  registrationCheckResult,
  registrationCheckStart,
  removalStep,
  runnerPodFacts,
} from './graceful-stop.ts';
import { RecentRemovals } from './recent-removals.ts';

/**
 * The runner pod controller (the seed): owns the life of every runner pod. It registers nothing
 * itself; it watches registration, replaces finished and never-registered pods, unregisters runners
 * from GitHub before their pods go, and frees pods stuck on lost nodes.
 */

export const PODS: ResourceRef = { group: '', version: 'v1', plural: 'pods', namespaced: true, kind: 'Pod' };
const SECRETS: ResourceRef = {
  group: '',
  version: 'v1',
  plural: 'secrets',
  namespaced: true,
  kind: 'Secret',
};
const RUNNERS: ResourceRef = {
  group: 'actions.summerwind.dev',
  version: 'v1alpha1',
  plural: 'runners',
  namespaced: true,
  kind: 'Runner',
};

const POD_NAME_INDEX = 'podName';

export interface RunnerPodSettings {
  registrationRecheckIntervalMs: number;
  registrationRecheckJitterMs: number;
  registrationTimeoutMs: number;
  unregistrationRetryDelayMs: number;
  forceDeleteTimeoutMs: number;
}

/** The seed's defaults. */
export const DEFAULT_RUNNER_POD_SETTINGS: RunnerPodSettings = {
  registrationRecheckIntervalMs: 60_000,
  registrationRecheckJitterMs: 10_000,
  registrationTimeoutMs: 600_000,
  unregistrationRetryDelayMs: 60_000,
  forceDeleteTimeoutMs: 60_000,
};

/** Chooses the GitHub client for a pod (its credentials Secret, or the controller's default). */
export interface GitHubClientSource {
  clientFor(pod: {
    namespace: string;
    name: string;
    credentialsSecret: string | undefined;
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

type Step<T> = { done: true; pod: PodObject; value?: T } | { done: false; result: ReconcileResult };

export function isRunnerPod(pod: KubeObject): boolean {
  const labels = pod.metadata.labels ?? {};
  return LABEL_RUNNER in labels || LABEL_RUNNERSET_NAME in labels || LABEL_RUNNER_DEPLOYMENT_NAME in labels;
}

export class RunnerPodReconciler {
  readonly controller: Controller;
  readonly informer: Informer<PodObject>;
  private readonly http: KubeHttp;
  private readonly clock: Clock;
  private readonly events: EventRecorder;
  private readonly github: GitHubClientSource;
  private readonly settings: RunnerPodSettings;
  private readonly random: () => number;
  private readonly subscribed = new WeakSet<object>();
  private readonly keptFresh = new Map<string, () => void>();
  private readonly recentRemovals: RecentRemovals;

  constructor(opts: RunnerPodControllerOptions) {
    const m = opts.manager;
    this.http = m.http;
    this.clock = m.clock;
    this.events = m.events;
    this.github = opts.github;
    this.settings = { ...DEFAULT_RUNNER_POD_SETTINGS, ...opts.settings };
    this.random = opts.random ?? Math.random;
    // Shorter than the busy retry delay, so a static runner is still asked again on schedule.
    this.recentRemovals = new RecentRemovals(Math.min(10_000, this.settings.unregistrationRetryDelayMs / 2));
    this.informer = m.informer<PodObject>(PODS, {
      ...(opts.namespace ? { namespace: opts.namespace } : {}),
      indexers: { ...defaultIndexers, [POD_NAME_INDEX]: (p) => [p.metadata.name ?? ''] },
    });
    this.controller = m
      .controller({
        name: 'runnerpod-controller',
        concurrency: opts.concurrency ?? 16,
        reconcile: (req, ctx) => this.reconcile(req.key, ctx),
      })
      .watchFor(this.informer);
  }

  // ------------------------------------------------------------------------------ reconcile

  async reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const cached = this.informer.store.get(key);
    if (!cached || !isRunnerPod(cached)) return undefined;
    let pod = cached;
    const runner = pod.spec?.containers?.find((c) => c.name === RUNNER_CONTAINER);
    const env = runner?.env ?? [];
    if (!runner || env.length === 0) {
      this.event(
        pod,
        'Warning',
        'InvalidRunnerPod',
        `Pod has no '${RUNNER_CONTAINER}' container with environment variables; paddock cannot tell which runner it is`,
      );
      return undefined;
    }
    const envValue = (name: string) => env.find((e) => e.name === name)?.value;
    let scope: GitHubScope;
    try {
      scope = resolveScope({
        enterprise: envValue(ENV_ENTERPRISE),
        organization: envValue(ENV_ORG),
        repository: envValue(ENV_REPO),
      });
    } catch (err) {
      this.event(
        pod,
        'Warning',
        'InvalidRunnerPod',
        `Runner container names no GitHub scope (${ENV_ENTERPRISE}, ${ENV_ORG} or ${ENV_REPO}): ${(err as Error).message}`,
      );
      return undefined;
    }
    const containerMode = env.some((e) => e.name === ENV_CONTAINER_HOOKS);
    const namespace = pod.metadata.namespace ?? 'default';
    const name = pod.metadata.name ?? '';

    let client: GitHubClient;
    try {
      client = await this.github.clientFor({
        namespace,
        name,
        credentialsSecret: pod.metadata.annotations?.[ANNOTATION_CREDS_SECRET],
      });
    } catch (err) {
      this.event(pod, 'Warning', 'GitHubCredentialsError', (err as Error).message);
      throw err;
    }
    this.watchRegistry(client, scope);

    if (!pod.metadata.deletionTimestamp) {
      // Finalizers first: nothing may delete this pod behind GitHub's back from now on.
      const wanted = containerMode
        ? [FINALIZER_RUNNER_POD, FINALIZER_LINKED_RESOURCES]
        : [FINALIZER_RUNNER_POD];
      let added = false;
      for (const f of wanted) {
        if (hasFinalizer(pod, f)) continue;
        const updated = await addFinalizer(this.http, PODS, pod, f);
        if (!updated) return undefined;
        pod = updated as PodObject;
        added = true;
      }
      if (added) return undefined;

      if (pod.metadata.annotations?.[ANNOTATION_UNREGISTRATION_REQUEST]) {
        // The owner is scaling down: stop gracefully; the owner deletes the pod when complete.
        const step = await this.gracefulStop(pod, client, scope, ctx);
        return step.done ? undefined : step.result;
      }
      return await this.checkRegistration(pod, client, scope, ctx);
    }

    return await this.finalize(pod, client, scope, ctx);
  }

  // -------------------------------------------------------------------------- registration

  private async checkRegistration(
    pod: PodObject,
    client: GitHubClient,
    scope: GitHubScope,
    ctx: ReconcileContext,
  ): Promise<ReconcileResult | undefined> {
    const now = this.clock.now();
    const s = this.registrationSettings();
    const start = registrationCheckStart(runnerPodFacts(pod), now, s);
    if (start.kind === 'requeue') return { requeueAfterMs: start.requeueAfterMs };
    if (start.kind === 'restart') return await this.restart(pod, client, scope, start.message, 'Normal', ctx);

    const found = await this.lookup(pod, client, scope);
    if (!found.done) return found.result;
    pod = found.pod;
    const runner = found.value;
    if (runner) pod = await this.annotateOnce(pod, { [ANNOTATION_RUNNER_ID]: String(runner.id) });
    const lookup = !runner ? 'notFound' : runner.status === 'online' ? 'online' : 'offline';
    const result = registrationCheckResult(runnerPodFacts(pod), lookup, now, s, this.random());
    switch (result.kind) {
      case 'registered':
        await this.endWait(pod);
        ctx.log.debug({ runnerId: runner?.id }, 'runner registered and online');
        return undefined;
      case 'recheck': {
        pod = await this.patchAnnotations(pod, { [ANNOTATION_LAST_REGISTRATION_CHECK]: rfc3339(now) });
        // A pod that is not running yet cannot have registered: no wait worth announcing.
        if (pod.status?.phase !== 'Running') return { requeueAfterMs: result.requeueAfterMs };
        const what =
          result.lookup === 'notFound' ? 'not registered with GitHub yet' : 'registered but offline';
        await this.beginWait(
          pod,
          'registration-pending',
          'Normal',
          'RegistrationPending',
          `Runner ${pod.metadata.name} is ${what}; checking again in ${Math.round(result.requeueAfterMs / 1000)}s`,
        );
        return { requeueAfterMs: result.requeueAfterMs };
      }
      case 'restart':
        return await this.restart(pod, client, scope, result.message, 'Warning', ctx);
      default:
        return { requeueAfterMs: s.intervalMs };
    }
  }

  private registrationSettings() {
    return {
      intervalMs: this.settings.registrationRecheckIntervalMs,
      jitterMs: this.settings.registrationRecheckJitterMs,
      timeoutMs: this.settings.registrationTimeoutMs,
    };
  }

  /** Stops the runner gracefully, then deletes the pod so its owner creates a fresh one. */
  private async restart(
    pod: PodObject,
    client: GitHubClient,
    scope: GitHubScope,
    why: string,
    type: EventType,
    ctx: ReconcileContext,
  ): Promise<ReconcileResult | undefined> {
    if (type === 'Warning') this.event(pod, 'Warning', 'RegistrationTimeout', why);
    const step = await this.gracefulStop(pod, client, scope, ctx);
    if (!step.done) return step.result;
    try {
      // The UID precondition keeps a stale cache from deleting a same-named replacement.
      await this.http.request(
        'DELETE',
        resourcePath(PODS, step.pod.metadata.namespace, step.pod.metadata.name),
        {
          body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: step.pod.metadata.uid } },
        },
      );
    } catch (err) {
      if (isNotFound(err) || toKubeError(err).code === 409) return undefined;
      throw err;
    }
    ctx.log.info({ reason: why }, 'deleted runner pod');
    this.event(step.pod, 'Normal', 'PodDeleted', `Deleted pod '${step.pod.metadata.name}'`);
    return undefined;
  }

  // ----------------------------------------------------------------------------- deletion

  private async finalize(
    pod: PodObject,
    client: GitHubClient,
    scope: GitHubScope,
    ctx: ReconcileContext,
  ): Promise<ReconcileResult | undefined> {
    const namespace = pod.metadata.namespace ?? 'default';
    const name = pod.metadata.name ?? '';
    // A pod deleted directly must not be recreated by its Runner.
    if (pod.metadata.ownerReferences?.some((r) => r.kind === 'Runner' && r.name === name)) {
      await this.deleteIgnoringNotFound(resourcePath(RUNNERS, namespace, name));
    }

    if (hasFinalizer(pod, FINALIZER_LINKED_RESOURCES)) {
      try {
        await this.deleteLinked(PODS, namespace, name);
        await this.deleteLinked(SECRETS, namespace, name);
      } catch (err) {
        this.event(
          pod,
          'Warning',
          'LinkedResourcesCleanupFailed',
          `Could not delete the job pods and secrets of ${name}: ${toKubeError(err).message}`,
        );
        return { requeueAfterMs: 30_000 };
      }
      const updated = await removeFinalizer(this.http, PODS, pod, FINALIZER_LINKED_RESOURCES);
      if (!updated) return undefined;
      pod = updated as PodObject;
    }

    if (hasFinalizer(pod, FINALIZER_RUNNER_POD)) {
      const step = await this.gracefulStop(pod, client, scope, ctx);
      if (!step.done) return step.result;
      const updated = await removeFinalizer(this.http, PODS, step.pod, FINALIZER_RUNNER_POD);
      this.github.release({ namespace, name });
      ctx.log.info('runner unregistered; finalizer removed');
      if (!updated) return undefined;
      pod = updated as PodObject;
    }

    if (!pod.metadata.deletionTimestamp) return undefined;
    const decision = forceDeleteDecision(
      Date.parse(pod.metadata.deletionTimestamp),
      this.clock.now(),
      this.settings.forceDeleteTimeoutMs,
    );
    if (decision.kind === 'wait') return { requeueAfterMs: decision.requeueAfterMs };
    try {
      await this.http.request('DELETE', resourcePath(PODS, namespace, name), {
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
      { deletionTimestamp: pod.metadata.deletionTimestamp, timeoutMs: this.settings.forceDeleteTimeoutMs },
      'pod not gone after its deletion timeout (lost node?); deleted with grace period 0',
    );
    this.event(pod, 'Normal', 'PodDeleted', `Forcefully deleted pod '${name}'`);
    return { requeueAfterMs: 3000 };
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

  private async deleteIgnoringNotFound(path: string): Promise<void> {
    try {
      await this.http.request('DELETE', path);
    } catch (err) {
      const e = toKubeError(err);
      if (e.code !== 404 && e.code !== 410) throw err;
    }
  }

  // ------------------------------------------------------------------------- graceful stop

  /**
   * One step of the graceful stop. `done` means the runner is not registered with GitHub any more
   * (or never was) and the pod may go; otherwise the result says when to look again.
   */
  private async gracefulStop(
    pod: PodObject,
    client: GitHubClient,
    scope: GitHubScope,
    ctx: ReconcileContext,
  ): Promise<Step<undefined>> {
    const now = this.clock.now();
    pod = await this.annotateOnce(pod, { [ANNOTATION_UNREGISTRATION_START]: rfc3339(now) });
    let facts = runnerPodFacts(pod);
    let runnerId =
      facts.recordedRunnerId !== undefined && !Number.isNaN(facts.recordedRunnerId)
        ? facts.recordedRunnerId
        : undefined;
    if (runnerId === undefined && !facts.annotations[ANNOTATION_UNREGISTRATION_COMPLETE]) {
      const found = await this.lookup(pod, client, scope);
      if (!found.done) return found;
      pod = found.pod;
      runnerId = found.value?.id;
    }
    const settings = {
      retryDelayMs: this.settings.unregistrationRetryDelayMs,
      registrationTimeoutMs: this.settings.registrationTimeoutMs,
    };
    const step = gracefulStopDecision({ facts, runnerId, now, ...settings });
    ctx.log.debug({ row: step.row, step: step.kind }, 'graceful stop');
    if (step.kind === 'wait') {
      if (step.reason === 'waiting-for-job') {
        await this.beginWait(
          pod,
          'runner-busy',
          'Normal',
          'RunnerBusy',
          `Runner ${pod.metadata.name} is running a job; waiting for it to finish before removing the pod`,
        );
      }
      return { done: false, result: { requeueAfterMs: step.requeueAfterMs } };
    }
    if (step.kind === 'done') {
      ctx.log.info({ row: step.row, reason: step.reason }, 'graceful stop complete');
      return { done: true, pod: await this.complete(pod) };
    }

    const removalKey = `${client.credentialId} ${scopeKey(scope)} ${step.runnerId}`;
    let outcome = this.recentRemovals.get(removalKey, now);
    if (outcome) {
      ctx.log.debug(
        { runnerId: step.runnerId, answer: outcome.kind },
        'reusing a removal answer of seconds ago',
      );
    } else {
      outcome = await client.removeRunner(scope, step.runnerId);
      this.recentRemovals.record(removalKey, outcome, this.clock.now());
    }
    facts = runnerPodFacts(pod);
    const answer = toRemovalAnswer(outcome);
    const next = removalStep({ answer, facts, now, retryDelayMs: settings.retryDelayMs, rfc3339 });
    ctx.log.info(
      { runnerId: step.runnerId, answer: answer.kind, row: next.row },
      'asked GitHub to remove the runner',
    );
    switch (next.kind) {
      case 'done':
        if (next.warning) this.event(pod, 'Warning', 'UnregistrationFailed', next.warning);
        else
          this.event(
            pod,
            'Normal',
            'Unregistered',
            `Runner ${pod.metadata.name} (ID ${step.runnerId}) removed from GitHub`,
          );
        return { done: true, pod: await this.complete(pod) };
      case 'wait': {
        pod = await this.annotateOnce(pod, next.annotateOnce);
        const [type, reason]: [EventType, string] =
          next.reason === 'rate-limited' ? ['Warning', 'RateLimited'] : ['Normal', 'RunnerBusy'];
        await this.beginWait(pod, next.reason, type, reason, next.note);
        return { done: false, result: { requeueAfterMs: next.requeueAfterMs } };
      }
      case 'confirm-gone': {
        // 404 can mean "gone" or "not visible with these credentials": a fresh list decides.
        const snapshot = await client.registry.refreshNow(scope);
        if (snapshot.byId(step.runnerId)) {
          throw new Error(`GitHub answered 404 for runner ${step.runnerId} although it is listed; retrying`);
        }
        this.event(
          pod,
          'Normal',
          'RunnerGone',
          `Runner ${pod.metadata.name} (ID ${step.runnerId}) is no longer registered with GitHub`,
        );
        return { done: true, pod: await this.complete(pod) };
      }
      case 'retry':
        if (next.warning) this.event(pod, 'Warning', 'UnregistrationFailed', next.warning);
        throw new Error(next.message);
    }
  }

  private async complete(pod: PodObject): Promise<PodObject> {
    pod = await this.annotateOnce(pod, { [ANNOTATION_UNREGISTRATION_COMPLETE]: rfc3339(this.clock.now()) });
    return await this.endWait(pod);
  }

  /** The runner of this pod from the scope's registry (no list call per pod: one per refresh). */
  private async lookup(
    pod: PodObject,
    client: GitHubClient,
    scope: GitHubScope,
  ): Promise<Step<GitHubRunner | undefined>> {
    try {
      const snapshot = await client.registry.get(scope);
      // A list older than the pod cannot hold its runner, only a predecessor of the same name
      // (StatefulSet pods reuse names): treat the runner as not seen yet.
      const createdAt = Date.parse(pod.metadata.creationTimestamp ?? '') || 0;
      if (snapshot.fetchedAt < createdAt + 1000) return { done: true, pod, value: undefined };
      return { done: true, pod, value: snapshot.byName(pod.metadata.name ?? '') };
    } catch (err) {
      if (err instanceof GitHubApiError && err.kind === 'rateLimited') {
        const resetAt = err.rateLimitResetAt ?? this.clock.now() + 60_000;
        await this.beginWait(
          pod,
          'rate-limited',
          'Warning',
          'RateLimited',
          `GitHub API rate limit reached (${err.rateLimitCause ?? 'primary'}); checking runner ${pod.metadata.name} again after ${rfc3339(resetAt)}`,
        );
        return { done: false, result: { requeueAfterMs: Math.max(1000, resetAt - this.clock.now()) } };
      }
      if (err instanceof GitHubApiError && err.kind === 'invalidCredentials') {
        this.event(pod, 'Warning', 'GitHubCredentialsError', err.message);
      }
      throw err;
    }
  }

  // ----------------------------------------------------------------- annotations and events

  private async patchAnnotations(
    pod: PodObject,
    annotations: Record<string, string | null>,
  ): Promise<PodObject> {
    if (Object.keys(annotations).length === 0) return pod;
    return await mergePatch<PodObject>(this.http, PODS, pod, { metadata: { annotations } });
  }

  /** Sets only the keys the pod does not have yet (ARC's "annotate once"). */
  private async annotateOnce(pod: PodObject, annotations: Record<string, string>): Promise<PodObject> {
    const existing = pod.metadata.annotations ?? {};
    const missing = Object.fromEntries(Object.entries(annotations).filter(([k]) => !(k in existing)));
    return await this.patchAnnotations(pod, missing);
  }

  /** Marks the pod as waiting (annotation with reason and start) and says so once in an Event. */
  private async beginWait(
    pod: PodObject,
    reason: string,
    type: EventType,
    eventReason: string,
    note: string,
  ): Promise<PodObject> {
    if (pod.metadata.annotations?.[ANNOTATION_WAIT_REASON] === reason) return pod;
    const updated = await this.patchAnnotations(pod, {
      [ANNOTATION_WAIT_REASON]: reason,
      [ANNOTATION_WAIT_START]: rfc3339(this.clock.now()),
    });
    this.event(pod, type, eventReason, note);
    return updated;
  }

  private async endWait(pod: PodObject): Promise<PodObject> {
    if (!pod.metadata.annotations?.[ANNOTATION_WAIT_REASON]) return pod;
    return await this.patchAnnotations(pod, {
      [ANNOTATION_WAIT_REASON]: null,
      [ANNOTATION_WAIT_START]: null,
    });
  }

  private event(pod: PodObject, type: EventType, reason: string, note: string): void {
    this.events.record({
      regarding: { ...pod, apiVersion: 'v1', kind: 'Pod' },
      type,
      reason,
      note,
      action: 'Reconcile',
    });
  }

  // ------------------------------------------------------------------ registry notifications

  /** A runner appearing, changing state or vanishing requeues its pod at once. */
  private watchRegistry(client: GitHubClient, scope: GitHubScope): void {
    if (!this.subscribed.has(client.registry)) {
      this.subscribed.add(client.registry);
      client.registry.subscribe((change: RunnerChange) => {
        for (const pod of this.informer.store.byIndex(POD_NAME_INDEX, change.runner.name)) {
          this.controller.enqueue(objectKey(pod));
        }
      });
    }
    const key = `${client.credentialId} ${scopeKey(scope)}`;
    if (!this.keptFresh.has(key)) this.keptFresh.set(key, client.registry.keepFresh(scope));
  }

  stop(): void {
    for (const stopKeeping of this.keptFresh.values()) stopKeeping();
    this.keptFresh.clear();
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
