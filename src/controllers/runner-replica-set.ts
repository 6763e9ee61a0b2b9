import {
  API_VERSION,
  RUNNER_REPLICA_SETS,
  RUNNERS,
  type Runner,
  type RunnerReplicaSet,
} from '../api/index.ts';
import { type GitHubClient, scopeIfValid } from '../github/index.ts';
import type { Clock } from '../runtime/clock.ts';
import { forEachConcurrently } from '../runtime/concurrency.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { isNotFound } from '../runtime/errors.ts';
import { type Informer, predicates, resourcePath, type Watchable } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import type { Manager } from '../runtime/manager.ts';
import { controllerReference, mergePatch } from '../runtime/objects.ts';
import { WritePacer } from '../runtime/pacer.ts';
import { CONTROLLER_UID_INDEX, defaultIndexers, type KubeObject, splitKey } from '../runtime/store.ts';
import { runnerPodInformer } from './cache-shapes.ts';
import {
  ANNOTATION_UNREGISTRATION_COMPLETE,
  ANNOTATION_UNREGISTRATION_REQUEST,
  FINALIZER_RUNNER,
  OWNER_ROUND_INTERVAL_MS,
  rfc3339,
  STATUS_WRITE_INTERVAL_MS,
} from './constants.ts';
import { OwnerSyncMemory, podStateOf, requestUnregistration } from './owner-memory.ts';
import {
  ANNOTATION_SYNC_TIME,
  LABEL_TEMPLATE_HASH,
  type OwnerAction,
  type OwnerState,
  planOwnerSync,
} from './owner-sync.ts';
import type { GitHubClientSource, PodObject } from './runner-pod.ts';
import { computeHash } from './runner-pod-spec.ts';

/**
 * RunnerReplicaSet controller (spec §3.5): `replicas` Runners from one template. Scale-up creates
 * Runners; scale-down asks the chosen runners to unregister (the runner pod controller does it
 * gracefully, waiting for a busy runner's job) and deletes a Runner only once its runner is gone
 * from GitHub; finished ephemeral runners are replaced. The decisions are `planOwnerSync`'s, shared
 * with the RunnerSet controller; this file gathers its facts and performs its actions.
 */

const KIND = 'RunnerReplicaSet';
/** Runners created at once; more would only queue up in the API server's priority levels. */
const CREATE_CONCURRENCY = 16;
/** Deletions and unregistration requests of one round in flight at once. */
const ACTION_CONCURRENCY = 16;

export interface RunnerReplicaSetControllerOptions {
  manager: Manager;
  github: GitHubClientSource;
  namespace?: string;
  registrationTimeoutMs?: number;
  concurrency?: number;
}

/** The template hash of a set: its label, else (a set someone wrote by hand) one of its spec. */
export function replicaSetTemplateHash(rrs: RunnerReplicaSet): string {
  const label = rrs.metadata.labels?.[LABEL_TEMPLATE_HASH];
  if (label) return label;
  const { replicas: _r, effectiveTime: _e, ...rest } = rrs.spec;
  return computeHash(rest);
}

export class RunnerReplicaSetReconciler {
  readonly controller: Controller;
  private readonly sets: Informer<RunnerReplicaSet>;
  private readonly runners: Informer<Runner>;
  private readonly pods: Watchable<PodObject>;
  private readonly http: KubeHttp;
  private readonly clock: Clock;
  private readonly opts: RunnerReplicaSetControllerOptions;
  /** Created Runners and written requests the caches may not show yet, per set. */
  private readonly memory: OwnerSyncMemory;
  /** Status figures change with every runner that comes and goes: written at most once a second. */
  private readonly statusPacer: WritePacer;

  constructor(opts: RunnerReplicaSetControllerOptions) {
    const m = opts.manager;
    this.opts = opts;
    this.http = m.http;
    this.clock = m.clock;
    this.memory = new OwnerSyncMemory(m.clock);
    this.statusPacer = new WritePacer(m.clock, STATUS_WRITE_INTERVAL_MS);
    const ns = opts.namespace ? { namespace: opts.namespace } : {};
    this.sets = m.informer<RunnerReplicaSet>(RUNNER_REPLICA_SETS, ns);
    this.runners = m.informer<Runner>(RUNNERS, { ...ns, indexers: defaultIndexers });
    this.pods = runnerPodInformer(m, opts.namespace);
    this.controller = m
      .controller({
        name: 'runnerreplicaset-controller',
        // A round looks at every runner of the owner; events come by the hundred a second at scale.
        minIntervalMs: OWNER_ROUND_INTERVAL_MS,
        concurrency: opts.concurrency ?? 2,
        reconcile: (req, ctx) => this.reconcile(req.key, ctx),
      })
      .watchFor(this.sets)
      // Runner status is the Runner controller's record; owner sync reads metadata and pods.
      .watchOwned(this.runners, KIND, [predicates.specOrMetadataChanged])
      .watchMapped(this.pods, (pod) => {
        // pod → its Runner → that Runner's replica set
        const ref = pod.metadata.ownerReferences?.find((r) => r.controller && r.kind === 'Runner');
        if (!ref) return [];
        const runner = this.runners.store.getByName(pod.metadata.namespace, ref.name);
        const rs = runner?.metadata.ownerReferences?.find((r) => r.controller && r.kind === KIND);
        return rs ? [`${pod.metadata.namespace}/${rs.name}`] : [];
      });
  }

  async reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const rrs = this.sets.store.get(key);
    if (!rrs || rrs.metadata.deletionTimestamp) {
      // Being deleted: its Runners go with it (garbage collection); their pods' finalizers
      // unregister each runner before the pod goes.
      this.memory.forget(key);
      this.statusPacer.forget(key);
      const { namespace, name } = splitKey(key);
      this.opts.github.release(this.githubRef(namespace ?? 'default', name));
      return undefined;
    }
    const namespace = rrs.metadata.namespace ?? 'default';
    const awaited = this.memory.awaitedCreations(
      key,
      (name) => this.runners.store.getByName(namespace, name) !== undefined,
    );
    if (awaited.length > 0) {
      ctx.log.debug({ waitingFor: awaited }, 'waiting for created Runners to reach the cache');
      return { requeueAfterMs: 1000 };
    }
    const hash = replicaSetTemplateHash(rrs);
    const owned = this.runners.store.byIndex(CONTROLLER_UID_INDEX, rrs.metadata.uid ?? '');
    const podOf = (r: Runner) => {
      const pod = this.pods.store.getByName(namespace, r.metadata.name ?? '');
      return pod?.metadata.ownerReferences?.some((o) => o.controller && o.uid === r.metadata.uid)
        ? pod
        : undefined;
    };
    const replicas = rrs.spec.replicas ?? 1;
    const now = this.clock.now();
    const client = await this.githubFor(rrs).catch(() => undefined);
    const snapshot = this.snapshot(rrs, client);
    this.memory.forgetSettled(
      key,
      owned,
      owned.map(podOf).filter((p): p is PodObject => p !== undefined),
    );
    const owners: OwnerState[] = owned.map((runner) => {
      const pod = podOf(runner);
      const annotations = runner.metadata.annotations ?? {};
      const askedRecently = this.memory.ownerAskedRecently(key, runner);
      const leaving =
        askedRecently ||
        Boolean(
          annotations[ANNOTATION_UNREGISTRATION_REQUEST] || annotations[ANNOTATION_UNREGISTRATION_COMPLETE],
        );
      return {
        name: runner.metadata.name ?? '',
        createdAt: Date.parse(runner.metadata.creationTimestamp ?? '') || 0,
        templateHash: runner.metadata.labels?.[LABEL_TEMPLATE_HASH],
        deleting: Boolean(runner.metadata.deletionTimestamp) || this.memory.ownerDeletedRecently(key, runner),
        annotations,
        // A Runner always has one pod (the Runner controller creates it at once), unless it is
        // leaving: then it gets no new one, so the pods it has are all it will have.
        synced: true,
        replicas: leaving ? (pod ? 1 : 0) : 1,
        askedRecently,
        pods: pod
          ? [
              podStateOf(pod, {
                now,
                registrationTimeoutMs: this.opts.registrationTimeoutMs ?? 600_000,
                snapshot,
                askedRecently: this.memory.podAskedRecently(key, pod),
              }),
            ]
          : [],
      };
    });
    const plan = planOwnerSync({
      owners,
      desiredReplicas: replicas,
      desiredHash: hash,
      ephemeral: rrs.spec.template.spec?.ephemeral ?? true,
      effectiveTime: rrs.spec.effectiveTime ? Date.parse(rrs.spec.effectiveTime) : undefined,
      now,
      desiredAtLastCreation: this.memory.desiredAtLastCreation(key, replicas),
    });
    if (plan.note) ctx.log.debug({ note: plan.note }, 'owner sync');
    // Independent writes: one at a time, a round with fifty finished runners would take seconds.
    await forEachConcurrently(plan.actions, ACTION_CONCURRENCY, (action) =>
      this.perform(action, rrs, hash, key, ctx),
    );

    if (plan.statusUnknown) return undefined;
    // Status from the Runners of the current template (ARC: pods, and running pods).
    const currentNames = new Set(plan.current);
    const current = owned.filter((r) => currentNames.has(r.metadata.name ?? ''));
    const states = owners.filter((o) => currentNames.has(o.name));
    const running = states.reduce((n, o) => n + o.pods.filter((p) => p.bucket === 'running').length, 0);
    const status = {
      replicas: current.reduce((n, r) => n + (podOf(r) ? 1 : 0), 0),
      readyReplicas: running,
      availableReplicas: running,
    };
    const old = rrs.status ?? {};
    if (Object.entries(status).some(([k, v]) => (old as Record<string, unknown>)[k] !== v)) {
      const wait = this.statusPacer.waitMs(key);
      if (wait > 0) return { requeueAfterMs: wait };
      this.statusPacer.wrote(key);
      await mergePatch(this.http, RUNNER_REPLICA_SETS, rrs, { status }, { subresource: 'status' }).catch(
        (err) => {
          if (!isNotFound(err)) throw err;
        },
      );
    }
    return undefined;
  }

  private async perform(
    action: OwnerAction,
    rrs: RunnerReplicaSet,
    hash: string,
    key: string,
    ctx: ReconcileContext,
  ): Promise<void> {
    const namespace = rrs.metadata.namespace ?? 'default';
    switch (action.kind) {
      case 'create-owners': {
        const expected = this.memory.expectCreations(key, rrs.spec.replicas ?? 1);
        const body = this.newRunner(rrs, hash);
        let left = action.count;
        const worker = async () => {
          while (left > 0) {
            left--;
            const created = await this.http.request<KubeObject>('POST', resourcePath(RUNNERS, namespace), {
              body,
            });
            if (created.metadata.name) expected.add(created.metadata.name);
          }
        };
        await Promise.all(Array.from({ length: Math.min(CREATE_CONCURRENCY, action.count) }, worker));
        ctx.log.info({ count: action.count }, 'created Runners');
        return;
      }
      case 'delete-owner':
        try {
          // The Runner controller deletes its pod, whose finalizer unregisters gracefully.
          const deleted = await this.http.request<KubeObject>(
            'DELETE',
            resourcePath(RUNNERS, namespace, action.owner),
            {
              body: { propagationPolicy: 'Background' },
            },
          );
          // The next round may start before the cache shows it: a second DELETE would be a wasted write.
          if (deleted?.metadata?.uid) this.memory.rememberDeletedOwner(key, deleted.metadata.uid);
          ctx.log.info({ runner: action.owner, reason: action.reason }, 'deleted Runner');
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
        return;
      case 'request-unregistration':
        await requestUnregistration(
          { http: this.http, clock: this.clock, memory: this.memory, pods: this.pods.store },
          { parent: key, namespace, owners: RUNNERS },
          action,
        );
        ctx.log.info(
          { runner: action.owner, pods: action.pods, reason: action.reason },
          'asked runner to unregister',
        );
        return;
    }
  }

  /** A Runner of the set's template (spec §3.5 step 7), with its finalizer already in place. */
  private newRunner(rrs: RunnerReplicaSet, hash: string): Runner {
    const meta = structuredClone(rrs.spec.template.metadata ?? {});
    return {
      apiVersion: API_VERSION,
      kind: 'Runner',
      metadata: {
        generateName: `${rrs.metadata.name}-`,
        namespace: rrs.metadata.namespace,
        labels: { ...(meta.labels ?? {}), [LABEL_TEMPLATE_HASH]: hash },
        annotations: { ...(meta.annotations ?? {}), [ANNOTATION_SYNC_TIME]: rfc3339(this.clock.now()) },
        // Set at creation, so the Runner controller need not write it (one request less per runner).
        finalizers: [FINALIZER_RUNNER],
        ownerReferences: [controllerReference({ ...rrs, apiVersion: API_VERSION, kind: KIND })],
      },
      spec: structuredClone(rrs.spec.template.spec ?? {}),
    } as Runner;
  }

  private snapshot(rrs: RunnerReplicaSet, client: GitHubClient | undefined) {
    const scope = scopeIfValid(rrs.spec.template.spec ?? {});
    return client && scope ? client.registry.peek(scope) : undefined;
  }

  private async githubFor(rrs: RunnerReplicaSet): Promise<GitHubClient> {
    return await this.opts.github.clientFor({
      ...this.githubRef(rrs.metadata.namespace ?? 'default', rrs.metadata.name ?? ''),
      credentialsSecret: rrs.spec.template.spec?.githubAPICredentialsFrom?.secretRef?.name,
    });
  }

  private githubRef(namespace: string, name: string): { namespace: string; name: string } {
    return { namespace, name: `runnerreplicaset/${name}` };
  }
}
