import { API_VERSION, RUNNERS, type Runner } from '../api/index.ts';
import { GitHubApiError, resolveScope } from '../github/index.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { isAlreadyExists, isNotFound, toKubeError } from '../runtime/errors.ts';
import type { EventRecorder } from '../runtime/events.ts';
import { type Informer, type ResourceRef, resourcePath } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import type { Manager } from '../runtime/manager.ts';
import { addFinalizer, mergePatch, removeFinalizer, serverSideApply } from '../runtime/objects.ts';
import { PODS, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS } from '../runtime/resources.ts';
import { defaultIndexers, type KubeObject, splitKey } from '../runtime/store.ts';
import { runnerTokenSecret, TOKEN_SECRET_KEY, tokenSecretName } from '../webhooks/token-secret.ts';
import { FINALIZER_RUNNER, rfc3339 } from './constants.ts';
import {
  planRunner,
  RUNNER_RETRY_DELAY_MS,
  type RunnerPlanInput,
  type RunnerStatusPatch,
  type RunnerStep,
} from './runner-plan.ts';
import type { GitHubClientSource, PodObject } from './runner-pod.ts';
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
  private readonly pods: Informer<PodObject>;
  private readonly http: KubeHttp;
  private readonly clock: Clock;
  private readonly events: EventRecorder;
  private readonly opts: RunnerControllerOptions;

  constructor(opts: RunnerControllerOptions) {
    const m = opts.manager;
    this.opts = opts;
    this.http = m.http;
    this.clock = m.clock;
    this.events = m.events;
    const ns = opts.namespace ? { namespace: opts.namespace } : {};
    this.runners = m.informer<Runner>(RUNNERS, ns);
    this.pods = m.informer<PodObject>(PODS, { ...ns, indexers: defaultIndexers });
    this.controller = m
      .controller({
        name: 'runner-controller',
        // Each reconcile waits on up to four API writes: at a thousand runners few workers are the bottleneck.
        concurrency: opts.concurrency ?? 16,
        reconcile: (req, ctx) => this.reconcile(req.key, ctx),
      })
      .watchFor(this.runners)
      .watchOwned(this.pods, KIND);
  }

  async reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const runner = this.runners.store.get(key);
    if (!runner) {
      const { namespace, name } = splitKey(key);
      this.opts.github.release(this.githubRef(namespace ?? 'default', name));
      return undefined;
    }
    const cached = this.pods.store.getByName(runner.metadata.namespace, runner.metadata.name ?? '');
    const ours = cached?.metadata.ownerReferences?.some((r) => r.controller && r.uid === runner.metadata.uid);
    const pass: Pass = { runner, pod: ours ? cached : undefined, done: {} };
    for (let i = 0; i < MAX_STEPS; i++) {
      const step = planRunner({
        runner: pass.runner,
        pod: pass.pod,
        foreignPod: Boolean(cached && !ours),
        now: this.clock.now(),
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
        ctx.log.info('runner deleted: deleting its pod (its finalizer unregisters the runner)');
        return 'continue';
      case 'remove-finalizer':
        await removeFinalizer(this.http, RUNNERS, runner, FINALIZER_RUNNER);
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
        } catch (err) {
          if (isNotFound(err)) return undefined;
          throw err;
        }
        ctx.log.info('removed the registration token ARC kept in the Runner status');
        return 'continue';
      case 'patch-status': {
        const status: RunnerStatusPatch & { registration?: unknown } = { ...step.status };
        const token = pass.done.token;
        if (token?.recordExpiry) {
          const s = runner.spec;
          status.registration = {
            ...(s.enterprise ? { enterprise: s.enterprise } : {}),
            ...(s.organization ? { organization: s.organization } : {}),
            ...(s.repository ? { repository: s.repository } : {}),
            ...(s.labels ? { labels: s.labels } : {}),
            // The token itself lives in the Secret only (and replaces any ARC left here).
            token: '',
            expiresAt: rfc3339(token.expiresAt),
          };
          token.recordExpiry = false;
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
    const name = runner.metadata.name ?? '';
    let token: { token: string; expiresAt: number };
    try {
      const scope = resolveScope({
        enterprise: runner.spec.enterprise,
        organization: runner.spec.organization,
        repository: runner.spec.repository,
      });
      const client = await this.opts.github.clientFor({
        ...this.githubRef(namespace, name),
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
      ctx.log.warn({ err: message, reason }, 'could not get a registration token');
      const resetAt = err instanceof GitHubApiError ? err.rateLimitResetAt : undefined;
      const untilReset = resetAt !== undefined ? resetAt - this.clock.now() : 0;
      return { requeueAfterMs: Math.max(RUNNER_RETRY_DELAY_MS, untilReset) };
    }
    const expiresAt = rfc3339(token.expiresAt);
    try {
      await serverSideApply(
        this.http,
        SECRETS,
        runnerTokenSecret({
          namespace,
          runner: { name, uid: runner.metadata.uid ?? '' },
          token: token.token,
          expiresAt,
        }),
      );
    } catch (err) {
      const e = toKubeError(err);
      this.event(
        runner,
        'Warning',
        'FailedUpdateRegistrationToken',
        `Writing the token Secret ${tokenSecretName(name)} failed: ${e.message}`,
      );
      return { requeueAfterMs: RUNNER_RETRY_DELAY_MS };
    }
    const recorded = runner.status?.registration;
    const recordExpiry = recorded?.expiresAt !== expiresAt || Boolean(recorded?.token);
    pass.done.token = { expiresAt: token.expiresAt, recordExpiry };
    if (recordExpiry)
      this.event(runner, 'Normal', 'RegistrationTokenUpdated', 'Successfully update registration token');
    if (reason === 'refresh')
      ctx.log.info({ expiresAt }, 'refreshed the registration token of a pod that has not started yet');
    return 'continue';
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
        name: tokenSecretName(name),
        key: TOKEN_SECRET_KEY,
      });
    } catch (err) {
      if (!(err instanceof RunnerPodError)) throw err;
      this.event(runner, 'Warning', 'InvalidRunnerSpec', `Cannot build the runner pod: ${err.message}`);
      return undefined; // a spec change requeues it
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
