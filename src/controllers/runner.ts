import {
  API_VERSION,
  RUNNER_REPLICA_SETS,
  RUNNERS,
  type Runner,
  type RunnerReplicaSet,
} from '../api/index.ts';
import { GitHubApiError, resolveScope, scopeIfValid, scopeKey } from '../github/index.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { isAlreadyExists, isForbidden, isNotFound, toKubeError } from '../runtime/errors.ts';
import type { EventRecorder } from '../runtime/events.ts';
import {
  type Informer,
  predicates,
  type ResourceRef,
  resourcePath,
  type Watchable,
} from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import type { Manager } from '../runtime/manager.ts';
import { addFinalizer, mergePatch, removeFinalizer, serverSideApply } from '../runtime/objects.ts';
import { PODS, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS } from '../runtime/resources.ts';
import { type KubeObject, objectKey, splitKey } from '../runtime/store.ts';
import { WrittenObjects } from '../runtime/written.ts';
import {
  invalidTokenSecretName,
  runnerTokenSecret,
  TOKEN_SECRET_KEY,
  tokenSecretName,
} from '../webhooks/token-secret.ts';
import { runnerPodInformer } from './cache-shapes.ts';
import { ANNOTATION_TOKEN_EXPIRES_AT, FINALIZER_RUNNER, RUNNER_CONTAINER, rfc3339 } from './constants.ts';
import {
  planRunner,
  RUNNER_RETRY_DELAY_MS,
  type RunnerPlanInput,
  type RunnerStatusPatch,
  type RunnerStep,
  TOKEN_REFRESH_BEFORE_EXPIRY_MS,
} from './runner-plan.ts';
import type { GitHubClientSource, PodObject } from './runner-pod.ts';
import { type RunnerPodLike, runnerPodFinalizers } from './runner-pod-plan.ts';
import {
  newRunnerPod,
  type RunnerPodDefaults,
  RunnerPodError,
  runnerRbacObjects,
} from './runner-pod-spec.ts';

/**
 * The Runner controller (spec §3.1): one pod per Runner, its registration token in a Secret the
 * Runner owns, the ServiceAccount/Role/RoleBinding its pod needs, and the status mirrored from the
 * pod. What to do next is `planRunner`'s (pure); this class performs one step at a time.
 */

const MAX_STEPS = 12;
const RELEASED_MEMORY_MS = 60_000;
/** How long a created pod may take to reach the cache before the Runner is looked at afresh. */
const CREATED_POD_WAIT_MS = 10_000;
const KIND = 'Runner';

export interface RunnerControllerOptions {
  manager: Manager;
  github: GitHubClientSource;
  podDefaults: RunnerPodDefaults;
  /** URL runners register against (GITHUB_URL in their pods). */
  githubBaseUrl: string;
  namespace?: string;
  concurrency?: number;
}

interface Pass {
  runner: Runner;
  pod: PodObject | undefined;
  done: RunnerPlanInput['done'];
}

export class RunnerReconciler {
  readonly controller: Controller;
  readonly runners: Informer<Runner>;
  private readonly pods: Watchable<PodObject>;
  private readonly sets: Informer<RunnerReplicaSet>;
  private readonly http: KubeHttp;
  private readonly clock: Clock;
  private readonly events: EventRecorder;
  private readonly opts: RunnerControllerOptions;
  /** Runners as this controller last wrote them, until the cache has caught up. */
  private readonly written = new WrittenObjects<Runner>();
  /** Pods this controller created that the cache may not show yet, by Runner key. */
  private readonly createdPods = new Map<string, { uid: string; at: number }>();
  /** Runners whose finalizer this controller removed lately, by UID, with when. */
  private readonly released = new Map<string, number>();
  /** Token Secrets (shared or a Runner's own) as last written or read: `<namespace>/<secret>`. */
  private readonly tokens = new Map<string, { ownerUid: string; expiresAt: number }>();
  /** Each Runner's pod as this controller last saw it, and since when it has looked so. */
  private readonly podStates = new Map<string, { state: string; since: number }>();
  /** Token writes under way, by Secret: concurrent reconciles of one replica set's Runners share one. */
  private readonly tokenWrites = new Map<
    string,
    Promise<{ expiresAt: number; writer: string | undefined } | ReconcileResult>
  >();

  constructor(opts: RunnerControllerOptions) {
    const m = opts.manager;
    this.opts = opts;
    this.http = m.http;
    this.clock = m.clock;
    this.events = m.events;
    const ns = opts.namespace ? { namespace: opts.namespace } : {};
    this.runners = m.informer<Runner>(RUNNERS, ns);
    // Shared with the RunnerReplicaSet controller (one cache): whose scope a shared token is for.
    this.sets = m.informer<RunnerReplicaSet>(RUNNER_REPLICA_SETS, ns);
    this.pods = runnerPodInformer(m, opts.namespace);
    this.controller = m
      .controller({
        name: 'runner-controller',
        // Each reconcile waits on up to four API writes: at a thousand runners few workers are the bottleneck.
        concurrency: opts.concurrency ?? 16,
        reconcile: (req, ctx) => this.reconcile(req.key, ctx),
      })
      // Its own status writes and pod changes it does not act on (annotations, finalizers) would
      // wake it a dozen times per runner: at a thousand runners, a queue seconds long.
      .watchFor(this.runners, [predicates.specOrMetadataChanged])
      .watchOwned(this.pods, KIND, [runnerPodChanged]);
    // Its status writes wake no reconcile: the Runners it wrote are dropped as the cache catches up.
    this.runners.addHandler({
      onUpdate: (_old, runner) => this.written.observe(runner),
      onDelete: (runner) => this.written.forget(objectKey(runner)),
    });
  }

  async reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const runner = this.written.newest(key, this.runners.store.get(key));
    if (!runner) {
      const { namespace, name } = splitKey(key);
      this.opts.github.release(this.githubRef(namespace ?? 'default', name));
      this.createdPods.delete(key);
      this.podStates.delete(key);
      this.tokens.delete(`${namespace}/${tokenSecretName(name)}`);
      return undefined;
    }
    const cached = this.pods.store.getByName(runner.metadata.namespace, runner.metadata.name ?? '');
    const created = this.createdPods.get(key);
    if (created) {
      const waited = this.clock.now() - created.at;
      if (cached?.metadata.uid === created.uid || waited >= CREATED_POD_WAIT_MS) this.createdPods.delete(key);
      else if (!cached) {
        // Created a moment ago and not in the cache yet: its watch event brings the Runner back.
        return { requeueAfterMs: CREATED_POD_WAIT_MS - waited };
      }
    }
    const ours = cached?.metadata.ownerReferences?.some((r) => r.controller && r.uid === runner.metadata.uid);
    const pass: Pass = { runner, pod: ours ? cached : undefined, done: {} };
    for (let i = 0; i < MAX_STEPS; i++) {
      const now = this.clock.now();
      const step = planRunner({
        runner: pass.runner,
        pod: pass.pod,
        foreignPod: Boolean(cached && !ours),
        now,
        podStateSince: this.podStateSince(key, pass.pod, now),
        knownTokenExpiry: this.knownTokenExpiry(pass.runner, pass.pod),
        useRunnerStatusUpdateHook: this.opts.podDefaults.useRunnerStatusUpdateHook,
        done: pass.done,
      });
      if (step.kind === 'done') {
        if (step.note) ctx.log.debug({ note: step.note }, 'runner settled');
        return step.requeueAfterMs !== undefined ? { requeueAfterMs: step.requeueAfterMs } : undefined;
      }
      const outcome = await this.perform(step, pass, ctx);
      if (outcome !== 'continue') return outcome;
    }
    ctx.log.error({ steps: MAX_STEPS }, 'runner reconcile did not settle; retrying later');
    return { requeueAfterMs: RUNNER_RETRY_DELAY_MS };
  }

  private async perform(
    step: Exclude<RunnerStep, { kind: 'done' }>,
    pass: Pass,
    ctx: ReconcileContext,
  ): Promise<'continue' | ReconcileResult | undefined> {
    const runner = pass.runner;
    const namespace = runner.metadata.namespace ?? 'default';
    const name = runner.metadata.name ?? '';
    switch (step.kind) {
      case 'add-finalizer': {
        const updated = await addFinalizer(this.http, RUNNERS, runner, FINALIZER_RUNNER);
        if (!updated) return undefined; // gone
        pass.runner = updated;
        pass.done.finalizerAdded = true;
        return 'continue';
      }
      case 'delete-pod':
        await this.deleteIgnoringNotFound(PODS, namespace, name, pass.pod?.metadata.uid);
        pass.done.podDeleted = true;
        ctx.log.info(
          step.why === 'runner-deleted'
            ? 'runner deleted: deleting its pod (its finalizer unregisters the runner)'
            : 'runner pod stopped: deleting it for a fresh one (its finalizer unregisters the runner)',
        );
        return 'continue';
      case 'remove-finalizer':
        // A cache that has not seen the removal yet would ask again and meet a 404 (the Runner is gone).
        if (runner.metadata.uid && this.released.has(runner.metadata.uid)) return undefined;
        await removeFinalizer(this.http, RUNNERS, runner, FINALIZER_RUNNER);
        this.remember(runner.metadata.uid);
        this.opts.github.release(this.githubRef(namespace, name));
        ctx.log.info('removed finalizer');
        return undefined;
      case 'ensure-token':
        return await this.ensureToken(pass, step.reason, ctx);
      case 'ensure-rbac':
        await this.ensureRbac(runner, ctx);
        pass.done.rbac = true;
        return 'continue';
      case 'create-pod':
        return await this.createPod(pass, ctx);
      case 'scrub-status-token':
        try {
          pass.runner = await mergePatch<Runner>(
            this.http,
            RUNNERS,
            runner,
            { status: { registration: { token: '' } } },
            { subresource: 'status' },
          );
          this.written.remember(pass.runner);
        } catch (err) {
          if (isNotFound(err)) return undefined;
          throw err;
        }
        ctx.log.info('removed the registration token ARC kept in the Runner status');
        return 'continue';
      case 'patch-status': {
        const status: RunnerStatusPatch & { registration?: unknown } = { ...step.status };
        if (step.tokenExpiresAt !== undefined) {
          const s = runner.spec;
          status.registration = {
            ...(s.enterprise ? { enterprise: s.enterprise } : {}),
            ...(s.organization ? { organization: s.organization } : {}),
            ...(s.repository ? { repository: s.repository } : {}),
            ...(s.labels ? { labels: s.labels } : {}),
            // The token itself lives in the Secret only (and replaces any ARC left here).
            token: '',
            expiresAt: rfc3339(step.tokenExpiresAt),
          };
        }
        try {
          pass.runner = await mergePatch<Runner>(
            this.http,
            RUNNERS,
            runner,
            { status },
            {
              subresource: 'status',
            },
          );
          this.written.remember(pass.runner);
        } catch (err) {
          if (isNotFound(err)) return undefined;
          throw err;
        }
        return 'continue';
      }
    }
  }

  private async ensureToken(
    pass: Pass,
    reason: 'new-pod' | 'refresh',
    ctx: ReconcileContext,
  ): Promise<'continue' | ReconcileResult> {
    const runner = pass.runner;
    const namespace = runner.metadata.namespace ?? 'default';
    let holder = tokenHolder(runner, pass.pod, this.setOf(runner));
    let known = await this.knownToken(namespace, holder);
    if (known === 'foreign' && holder.kind === 'RunnerReplicaSet') {
      // A Secret of that name that is not this replica set's: never overwrite it.
      holder = tokenHolder(runner, undefined, undefined);
      known = await this.knownToken(namespace, holder);
    }
    if (known === 'foreign') {
      // Only a Runner's own Secret can be claimed by another object: say so instead of overwriting.
      const message = `Secret ${tokenSecretName(holder.name)} belongs to another object; not writing the registration token into it`;
      this.event(runner, 'Warning', 'FailedUpdateRegistrationToken', message);
      ctx.log.warn(message);
      return { requeueAfterMs: RUNNER_RETRY_DELAY_MS };
    }
    // ARC's reuse window: a token with more than that left serves a new pod as well.
    if (known && known.expiresAt - this.clock.now() > TOKEN_REFRESH_BEFORE_EXPIRY_MS) {
      this.recordToken(pass, holder, known.expiresAt);
      return 'continue';
    }
    const key = `${namespace}/${tokenSecretName(holder.name)}`;
    let flight = this.tokenWrites.get(key);
    if (!flight) {
      flight = this.writeToken(runner, namespace, holder, ctx).finally(() => this.tokenWrites.delete(key));
      this.tokenWrites.set(key, flight);
    }
    const written = await flight;
    if (!('expiresAt' in written)) return written;
    this.recordToken(pass, holder, written.expiresAt);
    if (written.writer === runner.metadata.uid) {
      this.event(runner, 'Normal', 'RegistrationTokenUpdated', 'Successfully update registration token');
      if (reason === 'refresh') {
        ctx.log.info(
          { expiresAt: rfc3339(written.expiresAt) },
          'refreshed the registration token of a pod that has not started yet',
        );
      }
    }
    return 'continue';
  }

  private recordToken(pass: Pass, holder: TokenHolder, expiresAt: number): void {
    pass.done.token = { expiresAt, secretName: tokenSecretName(holder.name) };
  }

  /** When the token the Runner's pod reads expires, if this controller knows without asking. */
  private knownTokenExpiry(runner: Runner, pod: PodObject | undefined): number | undefined {
    const namespace = runner.metadata.namespace ?? 'default';
    const holder = tokenHolder(runner, pod, this.setOf(runner));
    const known = this.tokens.get(`${namespace}/${tokenSecretName(holder.name)}`);
    return known?.ownerUid === holder.uid ? known.expiresAt : undefined;
  }

  private setOf(runner: Runner): RunnerReplicaSet | undefined {
    const setName = runner.metadata.ownerReferences?.find(
      (o) => o.controller && o.kind === 'RunnerReplicaSet',
    )?.name;
    return setName ? this.sets.store.getByName(runner.metadata.namespace, setName) : undefined;
  }

  /** Since when the Runner's pod has looked as it does now (a state the Runner has not seen: now). */
  private podStateSince(key: string, pod: PodObject | undefined, now: number): number | undefined {
    if (!pod) {
      this.podStates.delete(key);
      return undefined;
    }
    const state = podAsRunnerSeesIt(pod);
    const seen = this.podStates.get(key);
    if (seen?.state === state) return seen.since;
    this.podStates.set(key, { state, since: now });
    return now;
  }

  /**
   * What the controller knows of a token Secret: from memory, else read once (after a restart).
   * `'foreign'`: the Secret of that name is owned by something else.
   */
  private async knownToken(
    namespace: string,
    holder: TokenHolder,
  ): Promise<{ expiresAt: number } | 'foreign' | undefined> {
    const key = `${namespace}/${tokenSecretName(holder.name)}`;
    const known = this.tokens.get(key);
    if (known?.ownerUid === holder.uid) return known;
    let secret: KubeObject | undefined;
    try {
      secret = await this.http.request<KubeObject>(
        'GET',
        resourcePath(SECRETS, namespace, tokenSecretName(holder.name)),
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return undefined;
    }
    const ownerUid = secret.metadata.ownerReferences?.find((o) => o.controller)?.uid;
    if (ownerUid !== holder.uid) return 'foreign';
    const expiresAt = Date.parse(secret.metadata.annotations?.[ANNOTATION_TOKEN_EXPIRES_AT] ?? '');
    if (Number.isNaN(expiresAt)) return undefined;
    this.tokens.set(key, { ownerUid, expiresAt });
    return { expiresAt };
  }

  /** Gets a registration token and writes it into the holder's Secret. */
  private async writeToken(
    runner: Runner,
    namespace: string,
    holder: TokenHolder,
    ctx: ReconcileContext,
  ): Promise<{ expiresAt: number; writer: string | undefined } | ReconcileResult> {
    const secretName = tokenSecretName(holder.name);
    let token: { token: string; expiresAt: number };
    try {
      const scope = resolveScope(runner.spec);
      const client = await this.opts.github.clientFor({
        ...this.githubRef(namespace, runner.metadata.name ?? ''),
        credentialsSecret: runner.spec.githubAPICredentialsFrom?.secretRef?.name,
      });
      token = await client.registrationToken(scope, { signal: ctx.signal });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.event(
        runner,
        'Warning',
        'FailedUpdateRegistrationToken',
        `Updating registration token failed: ${message}`,
      );
      ctx.log.warn({ err: message }, 'could not get a registration token');
      const resetAt = err instanceof GitHubApiError ? err.rateLimitResetAt : undefined;
      const untilReset = resetAt !== undefined ? resetAt - this.clock.now() : 0;
      return { requeueAfterMs: Math.max(RUNNER_RETRY_DELAY_MS, untilReset) };
    }
    try {
      await serverSideApply(
        this.http,
        SECRETS,
        runnerTokenSecret({
          namespace,
          owner: { kind: holder.kind, name: holder.name, uid: holder.uid },
          token: token.token,
          expiresAt: rfc3339(token.expiresAt),
        }),
      );
    } catch (err) {
      const e = toKubeError(err);
      this.event(
        runner,
        'Warning',
        'FailedUpdateRegistrationToken',
        `Writing the token Secret ${secretName} failed: ${e.message}`,
      );
      return { requeueAfterMs: RUNNER_RETRY_DELAY_MS };
    }
    const now = this.clock.now();
    // Expired entries are of no use to anyone (and their owners are likely gone).
    for (const [k, v] of this.tokens) if (v.expiresAt <= now) this.tokens.delete(k);
    this.tokens.set(`${namespace}/${secretName}`, { ownerUid: holder.uid, expiresAt: token.expiresAt });
    return { expiresAt: token.expiresAt, writer: runner.metadata.uid };
  }

  private async ensureRbac(runner: Runner, ctx: ReconcileContext): Promise<void> {
    const objects = runnerRbacObjects(runner, this.opts.podDefaults);
    if (!objects) return;
    const namespace = runner.metadata.namespace ?? 'default';
    const items: [string, ResourceRef, KubeObject][] = [
      ['ServiceAccount', SERVICE_ACCOUNTS, objects.serviceAccount as unknown as KubeObject],
      ['Role', ROLES, objects.role as unknown as KubeObject],
      ['RoleBinding', ROLE_BINDINGS, objects.roleBinding as unknown as KubeObject],
    ];
    for (const [kind, ref, body] of items) {
      const objName = body.metadata.name ?? '';
      try {
        await this.http.request('POST', resourcePath(ref, namespace), { body });
        this.event(runner, 'Normal', `${kind}Created`, `Created ${kind} '${objName}'`);
      } catch (err) {
        if (isForbidden(err))
          // Typically a Role granting more than paddock holds (containerMode kubernetes without the
          // chart's rbac.allowGrantingKubernetesContainerModePermissions): say so on the Runner.
          this.event(
            runner,
            'Warning',
            `Failed${kind}Create`,
            `Cannot create ${kind} '${objName}': ${toKubeError(err).message}`,
          );
        if (!isAlreadyExists(err)) throw err;
        this.event(runner, 'Normal', `${kind}Reused`, `Reused ${kind} '${objName}'`);
      }
    }
    ctx.log.debug('runner RBAC objects ensured');
  }

  private async createPod(
    pass: Pass,
    ctx: ReconcileContext,
  ): Promise<'continue' | ReconcileResult | undefined> {
    const runner = pass.runner;
    const name = runner.metadata.name ?? '';
    let pod: ReturnType<typeof newRunnerPod>;
    try {
      pod = newRunnerPod(runner, this.opts.githubBaseUrl, this.opts.podDefaults, {
        name: pass.done.token?.secretName ?? tokenSecretName(name),
        key: TOKEN_SECRET_KEY,
      });
    } catch (err) {
      if (!(err instanceof RunnerPodError)) throw err;
      this.event(runner, 'Warning', 'InvalidRunnerSpec', `Cannot build the runner pod: ${err.message}`);
      return undefined; // a spec change requeues it
    }
    // The runner-pod controller's finalizers from the start: nothing can delete the pod behind
    // GitHub's back, and that controller need not patch every new pod.
    const finalizers = runnerPodFinalizers(pod as RunnerPodLike);
    if (finalizers.length > 0) {
      pod.metadata ??= {};
      pod.metadata.finalizers = [...new Set([...(pod.metadata.finalizers ?? []), ...finalizers])];
    }
    try {
      pass.pod = await this.http.request<PodObject>('POST', resourcePath(PODS, runner.metadata.namespace), {
        body: pod,
      });
    } catch (err) {
      if (isAlreadyExists(err)) {
        ctx.log.debug('pod exists already');
        return undefined;
      }
      throw err;
    }
    pass.done.podCreated = true;
    if (pass.pod?.metadata.uid) {
      this.createdPods.set(objectKey(runner), { uid: pass.pod.metadata.uid, at: this.clock.now() });
    }
    this.event(runner, 'Normal', 'PodCreated', `Created pod '${name}'`);
    ctx.log.info('created runner pod');
    return 'continue';
  }

  private async deleteIgnoringNotFound(
    ref: ResourceRef,
    namespace: string,
    name: string,
    uid: string | undefined,
  ): Promise<void> {
    try {
      await this.http.request('DELETE', resourcePath(ref, namespace, name), {
        body: uid ? { preconditions: { uid } } : {},
      });
    } catch (err) {
      const e = toKubeError(err);
      // 409: a newer object of that name (not ours).
      if (!isNotFound(e) && e.code !== 409) throw e;
    }
  }

  private remember(uid: string | undefined): void {
    if (!uid) return;
    const now = this.clock.now();
    // Long enough for any watch to catch up; pruned as it goes so the map stays small.
    for (const [k, at] of this.released) {
      if (now - at <= RELEASED_MEMORY_MS) break; // insertion order is time order
      this.released.delete(k);
    }
    this.released.set(uid, now);
  }

  /** The name the Runner holds its GitHub client under (released when the Runner goes). */
  private githubRef(namespace: string, name: string): { namespace: string; name: string } {
    return { namespace, name: `runner/${name}` };
  }

  private event(runner: Runner, type: 'Normal' | 'Warning', reason: string, note: string): void {
    this.events.record({
      regarding: { ...runner, apiVersion: API_VERSION, kind: KIND },
      type,
      reason,
      note,
      action: 'Reconcile',
    });
  }
}

export interface TokenHolder {
  kind: 'Runner' | 'RunnerReplicaSet';
  name: string;
  uid: string;
}

/**
 * Whose token Secret a Runner's pod reads: its RunnerReplicaSet's, shared by all its Runners, or its
 * own. Owner references are user-writable, so a Runner shares its set's token only when `set` (from
 * the cache) is that very set and its template names the same scope; a Runner of its own, a claim
 * that does not hold, or a pod created earlier with the Runner's own Secret: the Runner's own.
 */
export function tokenHolder(
  runner: Runner,
  pod: PodObject | undefined,
  set: RunnerReplicaSet | undefined,
): TokenHolder {
  const own: TokenHolder = {
    kind: 'Runner',
    name: runner.metadata.name ?? '',
    uid: runner.metadata.uid ?? '',
  };
  const rs = runner.metadata.ownerReferences?.find(
    (o) => o.controller && o.kind === 'RunnerReplicaSet' && o.apiVersion === API_VERSION,
  );
  if (!rs || invalidTokenSecretName(rs.name)) return own;
  if (!set || set.metadata.uid !== rs.uid || set.metadata.name !== rs.name) return own;
  const scope = scopeOf(set.spec.template.spec ?? {});
  if (scope === undefined || scope !== scopeOf(runner.spec)) return own;
  const shared: TokenHolder = { kind: 'RunnerReplicaSet', name: rs.name, uid: rs.uid };
  if (!pod) return shared;
  const env = (pod.spec?.containers?.find((c) => c.name === RUNNER_CONTAINER)?.env ?? []) as {
    name: string;
    valueFrom?: { secretKeyRef?: { name?: string } };
  }[];
  const ref = env.find((e) => e.name === 'RUNNER_TOKEN')?.valueFrom?.secretKeyRef?.name;
  return ref === tokenSecretName(own.name) ? own : shared;
}

/** The GitHub scope a spec names, as a key; undefined when it names none or a malformed one. */
function scopeOf(spec: Runner['spec']): string | undefined {
  const scope = scopeIfValid(spec);
  return scope && scopeKey(scope);
}

/** What of a pod the Runner controller acts on: phase, readiness, reason, the runner container's state, deletion. */
function podAsRunnerSeesIt(pod: PodObject): string {
  const status = pod.status as (PodObject['status'] & { reason?: string; message?: string }) | undefined;
  return JSON.stringify([
    status?.phase,
    status?.conditions?.find((c) => c.type === 'Ready')?.status,
    status?.reason,
    status?.message,
    status?.containerStatuses?.find((c) => c.name === RUNNER_CONTAINER)?.state,
    pod.metadata.deletionTimestamp,
    pod.metadata.ownerReferences,
  ]);
}

export function runnerPodChanged(oldPod: PodObject, newPod: PodObject): boolean {
  return podAsRunnerSeesIt(oldPod) !== podAsRunnerSeesIt(newPod);
}
