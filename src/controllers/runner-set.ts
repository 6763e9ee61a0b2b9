import { RUNNER_SETS, type RunnerSet } from '../api/index.ts';
import { type GitHubClient, resolveScope } from '../github/index.ts';
import type { Clock } from '../runtime/clock.ts';
import { forEachConcurrently } from '../runtime/concurrency.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { isNotFound, toKubeError } from '../runtime/errors.ts';
import type { EventRecorder } from '../runtime/events.ts';
import { type Informer, resourcePath, type Watchable } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import type { Manager } from '../runtime/manager.ts';
import { controllerReference, mergePatch } from '../runtime/objects.ts';
import { PERSISTENT_VOLUME_CLAIMS, STATEFUL_SETS } from '../runtime/resources.ts';
import { CONTROLLER_UID_INDEX, type KubeObject, splitKey } from '../runtime/store.ts';
import {
  type PvcObject,
  runnerPodInformer,
  runnerVolumeClaimInformer,
  type StatefulSetObject,
  statefulSetInformer,
} from './cache-shapes.ts';
import {
  ANNOTATION_CREDS_SECRET,
  LABEL_RUNNER_STATEFULSET_NAME,
  LABEL_RUNNERSET_NAME,
  OWNER_ROUND_INTERVAL_MS,
  rfc3339,
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
import {
  LABEL_POD_MUTATION,
  LABEL_VALUE_POD_MUTATION,
  newRunnerSetPodTemplate,
  type RunnerPodDefaults,
} from './runner-pod-spec.ts';

/**
 * RunnerSet controller (spec §3.7): one StatefulSet with one pod per runner. Scale-up creates
 * StatefulSets; scale-down and template rollouts ask the chosen runners' pods to unregister (the
 * runner pod controller does it gracefully, waiting for a busy runner's job) and delete a
 * StatefulSet only once its runner is gone from GitHub; finished ephemeral runners are replaced.
 * The decisions are `planOwnerSync`'s; this file gathers its facts and performs its actions.
 */

/** ARC stops reconciling a RunnerSet with more StatefulSets than this. */
/** Deletions and unregistration requests of one round in flight at once. */
const ACTION_CONCURRENCY = 16;
const MAX_STATEFULSETS = 1000;

type StatefulSet = StatefulSetObject;

export interface RunnerSetControllerOptions {
  manager: Manager;
  github: GitHubClientSource;
  podDefaults: RunnerPodDefaults;
  /** URL runners register against (GITHUB_URL in their pods). */
  githubBaseUrl: string;
  namespace?: string;
  registrationTimeoutMs?: number;
  concurrency?: number;
}

export class RunnerSetReconciler {
  readonly controller: Controller;
  private readonly runnerSets: Informer<RunnerSet>;
  private readonly statefulSets: Informer<StatefulSet>;
  private readonly pods: Watchable<PodObject>;
  /** Claims already labelled with their StatefulSet (those need no read). */
  private readonly volumeClaims: Informer<PvcObject>;
  private readonly http: KubeHttp;
  private readonly clock: Clock;
  private readonly events: EventRecorder;
  private readonly opts: RunnerSetControllerOptions;
  /** Created StatefulSets and written requests the caches may not show yet, per RunnerSet. */
  private readonly memory: OwnerSyncMemory;

  constructor(opts: RunnerSetControllerOptions) {
    const m = opts.manager;
    this.opts = opts;
    this.http = m.http;
    this.clock = m.clock;
    this.events = m.events;
    this.memory = new OwnerSyncMemory(m.clock);
    const ns = opts.namespace ? { namespace: opts.namespace } : {};
    this.runnerSets = m.informer<RunnerSet>(RUNNER_SETS, ns);
    this.statefulSets = statefulSetInformer(m, opts.namespace);
    this.pods = runnerPodInformer(m, opts.namespace);
    this.volumeClaims = runnerVolumeClaimInformer(m, opts.namespace);
    this.controller = m
      .controller({
        name: 'runnerset-controller',
        // A round looks at every runner of the owner; events come by the hundred a second at scale.
        minIntervalMs: OWNER_ROUND_INTERVAL_MS,
        concurrency: opts.concurrency ?? 2,
        reconcile: (req, ctx) => this.reconcile(req.key, ctx),
      })
      .watchFor(this.runnerSets)
      .watchOwned(this.statefulSets, 'RunnerSet')
      .watchMapped(this.pods, (pod) => {
        // pod → its StatefulSet → that StatefulSet's RunnerSet
        const sts = pod.metadata.ownerReferences?.find((r) => r.controller && r.kind === 'StatefulSet');
        if (!sts) return [];
        const owner = this.statefulSets.store.getByName(pod.metadata.namespace, sts.name);
        const rs = owner?.metadata.ownerReferences?.find((r) => r.controller && r.kind === 'RunnerSet');
        return rs ? [`${pod.metadata.namespace}/${rs.name}`] : [];
      });
  }

  async reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const rs = this.runnerSets.store.get(key);
    if (!rs || rs.metadata.deletionTimestamp) {
      this.memory.forget(key);
      const { namespace, name } = splitKey(key);
      this.opts.github.release(this.githubRef(namespace ?? 'default', name));
      return undefined;
    }
    const namespace = rs.metadata.namespace ?? 'default';
    const awaited = this.memory.awaitedCreations(
      key,
      (name) => this.statefulSets.store.getByName(namespace, name) !== undefined,
    );
    if (awaited.length > 0) {
      ctx.log.debug({ waitingFor: awaited }, 'waiting for created StatefulSets to reach the cache');
      return { requeueAfterMs: 1000 };
    }
    const owned = this.statefulSets.store
      .byIndex(CONTROLLER_UID_INDEX, rs.metadata.uid ?? '')
      .sort((a, b) => (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? ''));
    if (owned.length > MAX_STATEFULSETS) {
      this.event(
        rs,
        'Warning',
        'TooManyRunners',
        `RunnerSet has ${owned.length} StatefulSets, more than ${MAX_STATEFULSETS}; not reconciling`,
      );
      return undefined;
    }

    let desired: ReturnType<typeof newRunnerSetPodTemplate>;
    try {
      desired = newRunnerSetPodTemplate(rs, this.opts.githubBaseUrl, this.opts.podDefaults);
    } catch (err) {
      this.event(rs, 'Warning', 'RunnerAutoscalingFailure', (err as Error).message);
      throw err;
    }
    const replicas = rs.spec.replicas ?? 1;
    const ephemeral = rs.spec.ephemeral ?? true;
    await this.syncVolumes(rs, owned);

    const client = await this.githubFor(rs).catch(() => undefined);
    const now = this.clock.now();
    this.memory.forgetSettled(
      key,
      owned,
      owned.flatMap((s) => this.pods.store.byIndex(CONTROLLER_UID_INDEX, s.metadata.uid ?? '')),
    );
    const owners: OwnerState[] = owned.map((sts) => this.ownerState(sts, client, rs, now, key));
    const plan = planOwnerSync({
      owners,
      desiredReplicas: replicas,
      desiredHash: desired.hash,
      ephemeral,
      effectiveTime: rs.spec.effectiveTime ? Date.parse(rs.spec.effectiveTime) : undefined,
      now,
      desiredAtLastCreation: this.memory.desiredAtLastCreation(key, replicas),
    });
    if (plan.note) ctx.log.debug({ note: plan.note }, 'owner sync');
    // Independent writes: one at a time, a round with fifty finished runners would take seconds.
    await forEachConcurrently(plan.actions, ACTION_CONCURRENCY, (action) =>
      this.perform(action, rs, desired, namespace, key, ctx),
    );

    if (plan.statusUnknown) return undefined;
    // Status from the StatefulSets of the current template.
    const currentNames = new Set(plan.current);
    const current = owned.filter((s) => currentNames.has(s.metadata.name ?? ''));
    const total = (f: (s: StatefulSet) => number | undefined) => current.reduce((n, s) => n + (f(s) ?? 0), 0);
    const status = {
      replicas: total((s) => s.status?.replicas),
      readyReplicas: total((s) => s.status?.readyReplicas),
      availableReplicas: total((s) => s.status?.currentReplicas),
      updatedReplicas: total((s) => s.status?.updatedReplicas),
      desiredReplicas: replicas,
    };
    const old = rs.status ?? {};
    if (Object.entries(status).some(([k, v]) => (old as Record<string, unknown>)[k] !== v)) {
      await mergePatch(this.http, RUNNER_SETS, rs, { status }, { subresource: 'status' }).catch((err) => {
        if (!isNotFound(err)) throw err;
      });
    }
    return undefined;
  }

  private ownerState(
    sts: StatefulSet,
    client: GitHubClient | undefined,
    rs: RunnerSet,
    now: number,
    key: string,
  ): OwnerState {
    let scope: ReturnType<typeof resolveScope> | undefined;
    try {
      scope = resolveScope({
        enterprise: rs.spec.enterprise,
        organization: rs.spec.organization,
        repository: rs.spec.repository,
      });
    } catch {
      scope = undefined;
    }
    const snapshot = client && scope ? client.registry.peek(scope) : undefined;
    const pods = this.pods.store.byIndex(CONTROLLER_UID_INDEX, sts.metadata.uid ?? '').map((p) =>
      podStateOf(p, {
        now,
        registrationTimeoutMs: this.opts.registrationTimeoutMs ?? 600_000,
        snapshot,
        askedRecently: this.memory.podAskedRecently(key, p),
      }),
    );
    const wanted = sts.spec?.replicas ?? 1;
    const annotations = sts.metadata.annotations ?? {};
    return {
      name: sts.metadata.name ?? '',
      askedRecently: this.memory.ownerAskedRecently(key, sts),
      createdAt: Date.parse(sts.metadata.creationTimestamp ?? '') || 0,
      templateHash: sts.metadata.labels?.[LABEL_TEMPLATE_HASH],
      deleting: Boolean(sts.metadata.deletionTimestamp),
      annotations,
      synced: (sts.status?.replicas ?? 0) === wanted,
      replicas: sts.status?.replicas ?? 0,
      pods,
    };
  }

  private async perform(
    action: OwnerAction,
    rs: RunnerSet,
    desired: ReturnType<typeof newRunnerSetPodTemplate>,
    namespace: string,
    key: string,
    ctx: ReconcileContext,
  ): Promise<void> {
    const stsPath = (name: string) => resourcePath(STATEFUL_SETS, namespace, name);
    switch (action.kind) {
      case 'create-owners': {
        const expected = this.memory.expectCreations(key, rs.spec.replicas ?? 1);
        for (let i = 0; i < action.count; i++) {
          const created = await this.http.request<KubeObject>(
            'POST',
            resourcePath(STATEFUL_SETS, namespace),
            {
              body: this.newStatefulSet(rs, desired),
            },
          );
          if (created.metadata.name) expected.add(created.metadata.name);
        }
        ctx.log.info({ count: action.count }, 'created runner StatefulSets');
        return;
      }
      case 'delete-owner':
        try {
          // Background: GC deletes the pod, whose finalizer still unregisters gracefully.
          await this.http.request('DELETE', stsPath(action.owner), {
            body: { propagationPolicy: 'Background' },
          });
          ctx.log.info({ statefulSet: action.owner, reason: action.reason }, 'deleted runner StatefulSet');
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
        return;
      case 'request-unregistration':
        await requestUnregistration(
          { http: this.http, clock: this.clock, memory: this.memory, pods: this.pods.store },
          { parent: key, namespace, owners: STATEFUL_SETS },
          action,
        );
        ctx.log.info(
          { statefulSet: action.owner, pods: action.pods, reason: action.reason },
          'asked runner to unregister',
        );
        return;
    }
  }

  private newStatefulSet(rs: RunnerSet, desired: ReturnType<typeof newRunnerSetPodTemplate>): KubeObject {
    const name = rs.metadata.name ?? '';
    const s = rs.spec;
    const matchLabels = {
      ...(s.selector?.matchLabels ?? { [LABEL_RUNNERSET_NAME]: name }),
      [LABEL_TEMPLATE_HASH]: desired.hash,
      [LABEL_RUNNERSET_NAME]: name,
      [LABEL_POD_MUTATION]: LABEL_VALUE_POD_MUTATION,
    };
    const template = structuredClone(desired.template);
    template.metadata = { ...template.metadata, labels: { ...template.metadata?.labels, ...matchLabels } };
    const credsSecret = s.githubAPICredentialsFrom?.secretRef?.name;
    if (credsSecret) {
      template.metadata.annotations = {
        ...template.metadata.annotations,
        [ANNOTATION_CREDS_SECRET]: credsSecret,
      };
    }
    const spec: Record<string, unknown> = {
      replicas: 1,
      selector: { ...(s.selector ?? {}), matchLabels },
      template,
      serviceName: s.serviceName ?? name,
    };
    for (const k of [
      'volumeClaimTemplates',
      'podManagementPolicy',
      'updateStrategy',
      'revisionHistoryLimit',
      'minReadySeconds',
      'persistentVolumeClaimRetentionPolicy',
      'ordinals',
    ] as const) {
      if (s[k] !== undefined) spec[k] = s[k];
    }
    return {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: {
        generateName: `${name}-`,
        namespace: rs.metadata.namespace,
        labels: { ...rs.metadata.labels, [LABEL_TEMPLATE_HASH]: desired.hash },
        annotations: { [ANNOTATION_SYNC_TIME]: rfc3339(this.clock.now()) },
        ownerReferences: [
          controllerReference({ ...rs, apiVersion: 'actions.summerwind.dev/v1alpha1', kind: 'RunnerSet' }),
        ],
      },
      spec,
    };
  }

  /** PVCs of `volumeClaimTemplates` learn which StatefulSet they belong to (for reuse after it goes). */
  private async syncVolumes(rs: RunnerSet, owned: StatefulSet[]): Promise<void> {
    for (const t of rs.spec.volumeClaimTemplates ?? []) {
      for (const sts of owned) {
        const pvcName = `${t.metadata?.name}-${sts.metadata.name}-0`;
        // The cache holds only labelled claims: one there needs nothing. Any other is read, as it
        // may not exist yet (its pod not created) or lack the label.
        const cached = this.volumeClaims.store.getByName(rs.metadata.namespace, pvcName);
        if (cached?.metadata.labels?.[LABEL_RUNNER_STATEFULSET_NAME]) continue;
        let pvc: KubeObject;
        try {
          pvc = await this.http.request<KubeObject>(
            'GET',
            resourcePath(PERSISTENT_VOLUME_CLAIMS, rs.metadata.namespace, pvcName),
          );
        } catch (err) {
          if (isNotFound(err)) continue;
          throw err;
        }
        if (pvc.metadata.labels?.[LABEL_RUNNER_STATEFULSET_NAME]) continue;
        await mergePatch(this.http, PERSISTENT_VOLUME_CLAIMS, pvc, {
          metadata: { labels: { [LABEL_RUNNER_STATEFULSET_NAME]: sts.metadata.name } },
        }).catch((err) => {
          if (!isNotFound(err)) throw toKubeError(err);
        });
      }
    }
  }

  private async githubFor(rs: RunnerSet): Promise<GitHubClient> {
    return await this.opts.github.clientFor({
      ...this.githubRef(rs.metadata.namespace ?? 'default', rs.metadata.name ?? ''),
      credentialsSecret: rs.spec.githubAPICredentialsFrom?.secretRef?.name,
    });
  }

  /** The name the RunnerSet holds its GitHub client under (released when the RunnerSet goes). */
  private githubRef(namespace: string, name: string): { namespace: string; name: string } {
    return { namespace, name: `runnerset/${name}` };
  }

  private event(rs: RunnerSet, type: 'Normal' | 'Warning', reason: string, note: string): void {
    this.events.record({
      regarding: { ...rs, apiVersion: 'actions.summerwind.dev/v1alpha1', kind: 'RunnerSet' },
      type,
      reason,
      note,
      action: 'Reconcile',
    });
  }
}
