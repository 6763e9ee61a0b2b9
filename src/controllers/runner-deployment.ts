import { Gauge, type Registry } from 'prom-client';
import {
  API_VERSION,
  RUNNER_DEPLOYMENTS,
  RUNNER_REPLICA_SETS,
  type RunnerDeployment,
  type RunnerReplicaSet,
} from '../api/index.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { EventRecorder } from '../runtime/events.ts';
import { type Informer, resourcePath } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import type { Manager } from '../runtime/manager.ts';
import { controllerReference, mergePatch } from '../runtime/objects.ts';
import { WritePacer } from '../runtime/pacer.ts';
import { CONTROLLER_UID_INDEX, defaultIndexers, splitKey } from '../runtime/store.ts';
import { STATUS_WRITE_INTERVAL_MS } from './constants.ts';
import { OwnerSyncMemory } from './owner-memory.ts';
import {
  type DeploymentAction,
  type DesiredReplicaSet,
  planRunnerDeployment,
} from './runner-deployment-plan.ts';

/**
 * RunnerDeployment controller (spec §3.6): one RunnerReplicaSet per template generation. A new
 * template gets a new set; older sets are scaled to zero once the new one is ready (their runners
 * unregister, busy ones after their job) and deleted once empty. Decisions: `planRunnerDeployment`.
 */

const KIND = 'RunnerDeployment';

export interface RunnerDeploymentControllerOptions {
  manager: Manager;
  /** `--common-runner-labels`: added to every runner's labels. */
  commonRunnerLabels?: readonly string[];
  namespace?: string;
  concurrency?: number;
}

/** ARC's `runnerdeployment_spec_replicas` gauge (one registry may hold it once). */
function specReplicasGauge(registry: Registry): Gauge<'runnerdeployment' | 'namespace'> {
  const name = 'runnerdeployment_spec_replicas';
  return (
    (registry.getSingleMetric(name) as Gauge<'runnerdeployment' | 'namespace'> | undefined) ??
    new Gauge({
      name,
      help: 'spec.replicas of each RunnerDeployment',
      labelNames: ['runnerdeployment', 'namespace'],
      registers: [registry],
    })
  );
}

export class RunnerDeploymentReconciler {
  readonly controller: Controller;
  private readonly deployments: Informer<RunnerDeployment>;
  private readonly sets: Informer<RunnerReplicaSet>;
  private readonly http: KubeHttp;
  private readonly events: EventRecorder;
  private readonly opts: RunnerDeploymentControllerOptions;
  private readonly specReplicas: Gauge<'runnerdeployment' | 'namespace'>;
  private readonly memory: OwnerSyncMemory;
  /** Status figures change with every runner that comes and goes: written at most once a second. */
  private readonly statusPacer: WritePacer;

  constructor(opts: RunnerDeploymentControllerOptions) {
    const m = opts.manager;
    this.opts = opts;
    this.http = m.http;
    this.events = m.events;
    this.specReplicas = specReplicasGauge(m.metrics.registry);
    this.memory = new OwnerSyncMemory(m.clock);
    this.statusPacer = new WritePacer(m.clock, STATUS_WRITE_INTERVAL_MS);
    const ns = opts.namespace ? { namespace: opts.namespace } : {};
    this.deployments = m.informer<RunnerDeployment>(RUNNER_DEPLOYMENTS, ns);
    this.sets = m.informer<RunnerReplicaSet>(RUNNER_REPLICA_SETS, { ...ns, indexers: defaultIndexers });
    this.controller = m
      .controller({
        name: 'runnerdeployment-controller',
        concurrency: opts.concurrency ?? 2,
        reconcile: (req, ctx) => this.reconcile(req.key, ctx),
      })
      .watchFor(this.deployments)
      .watchOwned(this.sets, KIND);
  }

  async reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const rd = this.deployments.store.get(key);
    if (!rd || rd.metadata.deletionTimestamp) {
      const { namespace, name } = splitKey(key);
      this.specReplicas.remove({ runnerdeployment: name, namespace: namespace ?? '' });
      this.memory.forget(key);
      this.statusPacer.forget(key);
      return undefined; // its sets, Runners and pods go by garbage collection, each pod unregistering first
    }
    const namespace = rd.metadata.namespace ?? 'default';
    if (rd.spec.replicas !== undefined && rd.spec.replicas !== null) {
      this.specReplicas.set({ runnerdeployment: rd.metadata.name ?? '', namespace }, rd.spec.replicas);
    }
    // A set created moments ago may not be in the cache yet: planning without it would create another.
    const awaited = this.memory.awaitedCreations(
      key,
      (name) => this.sets.store.getByName(namespace, name) !== undefined,
    );
    if (awaited.length > 0) return { requeueAfterMs: 1000 };
    const sets = this.sets.store
      .byIndex(CONTROLLER_UID_INDEX, rd.metadata.uid ?? '')
      .filter((s) => !s.metadata.deletionTimestamp);
    const plan = planRunnerDeployment({ rd, sets, commonRunnerLabels: this.opts.commonRunnerLabels ?? [] });
    if (plan.note) ctx.log.debug({ note: plan.note }, 'runner deployment');
    for (const action of plan.actions) await this.perform(action, rd, key, ctx);
    let requeueAfterMs = plan.requeueAfterMs;
    if (plan.status) {
      const old = (rd.status ?? {}) as Record<string, unknown>;
      const wait = this.statusPacer.waitMs(key);
      if (!Object.entries(plan.status).some(([k, v]) => old[k] !== v)) {
        // Up to date.
      } else if (wait > 0) {
        requeueAfterMs = Math.min(requeueAfterMs ?? wait, wait);
      } else {
        this.statusPacer.wrote(key);
        await mergePatch(
          this.http,
          RUNNER_DEPLOYMENTS,
          rd,
          { status: plan.status },
          { subresource: 'status' },
        ).catch((err) => {
          if (!isNotFound(err)) throw err;
        });
      }
    }
    return requeueAfterMs !== undefined ? { requeueAfterMs } : undefined;
  }

  private async perform(
    action: DeploymentAction,
    rd: RunnerDeployment,
    key: string,
    ctx: ReconcileContext,
  ): Promise<void> {
    const namespace = rd.metadata.namespace ?? 'default';
    switch (action.kind) {
      case 'create-set': {
        const created = await this.http.request<RunnerReplicaSet>(
          'POST',
          resourcePath(RUNNER_REPLICA_SETS, namespace),
          { body: this.newReplicaSet(rd, action.desired) },
        );
        if (created.metadata.name) this.memory.expectCreations(key).add(created.metadata.name);
        ctx.log.info(
          { runnerReplicaSet: created.metadata.name, hash: action.desired.hash },
          'created runner replica set',
        );
        return;
      }
      case 'replace-spec':
        await mergePatch(
          this.http,
          RUNNER_REPLICA_SETS,
          { metadata: { name: action.set, namespace } },
          { spec: this.setSpec(action.desired) },
        );
        ctx.log.info({ runnerReplicaSet: action.set }, 'replaced the spec of runner replica set (selector)');
        return;
      case 'scale-set':
        await mergePatch(
          this.http,
          RUNNER_REPLICA_SETS,
          { metadata: { name: action.set, namespace } },
          {
            spec: {
              replicas: action.replicas,
              ...(action.effectiveTime !== undefined ? { effectiveTime: action.effectiveTime } : {}),
            },
          },
        );
        ctx.log.info(
          { runnerReplicaSet: action.set, replicas: action.replicas },
          'scaled runner replica set',
        );
        return;
      case 'delete-set':
        try {
          await this.http.request('DELETE', resourcePath(RUNNER_REPLICA_SETS, namespace, action.set), {
            body: { propagationPolicy: 'Background' },
          });
        } catch (err) {
          if (!isNotFound(err)) throw err;
          return;
        }
        this.events.record({
          regarding: { ...rd, apiVersion: API_VERSION, kind: KIND },
          related: { apiVersion: API_VERSION, kind: 'RunnerReplicaSet', namespace, name: action.set },
          type: 'Normal',
          reason: 'RunnerReplicaSetDeleted',
          note: `Deleted runnerreplicaset '${action.set}'`,
          action: 'Reconcile',
        });
        return;
    }
  }

  private setSpec(d: DesiredReplicaSet): RunnerReplicaSet['spec'] {
    return {
      replicas: d.replicas,
      selector: d.selector,
      template: d.template,
      ...(d.effectiveTime ? { effectiveTime: d.effectiveTime } : {}),
    };
  }

  private newReplicaSet(rd: RunnerDeployment, d: DesiredReplicaSet): RunnerReplicaSet {
    return {
      apiVersion: API_VERSION,
      kind: 'RunnerReplicaSet',
      metadata: {
        generateName: `${rd.metadata.name}-`,
        namespace: rd.metadata.namespace,
        labels: { ...d.template.metadata?.labels },
        ownerReferences: [controllerReference({ ...rd, apiVersion: API_VERSION, kind: KIND })],
      },
      spec: this.setSpec(d),
    };
  }
}
