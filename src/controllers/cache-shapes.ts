import type { Informer } from '../runtime/informer.ts';
import { InformerUnion } from '../runtime/informer-union.ts';
import type { Manager } from '../runtime/manager.ts';
import { PERSISTENT_VOLUME_CLAIMS, PODS, STATEFUL_SETS } from '../runtime/resources.ts';
import {
  CONTROLLER_UID_INDEX,
  defaultIndexers,
  type IndexFunc,
  type KubeObject,
  type ObjectMeta,
} from '../runtime/store.ts';
import {
  ENV_CONTAINER_HOOKS,
  ENV_ENTERPRISE,
  ENV_EPHEMERAL,
  ENV_ORG,
  ENV_REPO,
  ENV_RUNNER_TOKEN,
  LABEL_RUNNER_STATEFULSET_NAME,
  RUNNER_CONTAINER,
  RUNNER_POD_SELECTORS,
} from './constants.ts';
import type { PodObject } from './runner-pod.ts';

/**
 * The caches the controllers share, and what each keeps of an object: only what some controller
 * reads. Every controller gets these informers from here (the manager refuses a shared informer
 * asked for with another transform), so one resource has one cache of one shape.
 *
 * Reading a field a shape drops finds it missing: a controller that starts to read a new field of
 * a cached object adds it to the shape here (cache-shapes.test.ts lists what is kept).
 */

/** Runner pods by name (the runner pod controller: a GitHub runner named like its pod). */
export const POD_NAME_INDEX = 'podName';

const RUNNER_POD_INDEXERS: Record<string, IndexFunc<PodObject>> = {
  // The RunnerSet controller: the pods of a StatefulSet.
  [CONTROLLER_UID_INDEX]: defaultIndexers[CONTROLLER_UID_INDEX]!,
  [POD_NAME_INDEX]: (p) => [p.metadata.name ?? ''],
};

/**
 * The runner container's variables whose values are read: the scope, ephemeral, the token Secret.
 * Container mode is told by ACTIONS_RUNNER_CONTAINER_HOOKS being there: its name is kept. The other
 * variables are dropped.
 */
const READ_ENV = new Set([ENV_ENTERPRISE, ENV_ORG, ENV_REPO, ENV_EPHEMERAL, ENV_RUNNER_TOKEN]);

/** The keys of `obj` among `keys` that it has (null and undefined values kept as they are). */
function pick<T extends object>(obj: T, keys: readonly string[]): Partial<T> {
  const out: Record<string, unknown> = {};
  for (const k of keys) if (Object.hasOwn(obj, k)) out[k] = (obj as Record<string, unknown>)[k];
  return out as Partial<T>;
}

function metadataOf(meta: ObjectMeta): ObjectMeta {
  const { managedFields: _drop, ...rest } = meta;
  return rest;
}

type Container = NonNullable<NonNullable<PodObject['spec']>['containers']>[number];
type ContainerStatus = NonNullable<NonNullable<PodObject['status']>['containerStatuses']>[number];

function containerShape(c: Container): Container {
  if (c.name !== RUNNER_CONTAINER || !c.env) return { name: c.name };
  const env = c.env
    .filter((e) => READ_ENV.has(e.name) || e.name === ENV_CONTAINER_HOOKS)
    .map((e) => (READ_ENV.has(e.name) ? e : { name: e.name }));
  // An env of none of these keeps one name: it must not look empty (a runner container without
  // variables is a pod paddock cannot manage, one without a scope another).
  if (env.length === 0 && c.env.length > 0) env.push({ name: c.env[0]!.name });
  return { name: c.name, env };
}

function containerStatusShape(c: ContainerStatus): ContainerStatus {
  if (c.name !== RUNNER_CONTAINER) return { name: c.name };
  return pick(c, ['name', 'state', 'lastState']) as ContainerStatus;
}

/**
 * A runner pod as the controllers read it: its metadata; the names of its containers, and the
 * runner container's variables in READ_ENV and ACTIONS_RUNNER_CONTAINER_HOOKS; the phase, reason,
 * message and Ready condition; the runner container's state and last state (the other containers'
 * statuses only by name, to be counted). Volumes, mounts, images, resources, security contexts,
 * tolerations, the other variables and conditions and the like are dropped.
 */
export function runnerPodShape(pod: PodObject): PodObject {
  const shaped: PodObject = { ...pick(pod, ['apiVersion', 'kind']), metadata: metadataOf(pod.metadata) };
  if (pod.spec) {
    shaped.spec = pod.spec.containers ? { containers: pod.spec.containers.map(containerShape) } : {};
  }
  if (pod.status) {
    const s = pod.status;
    const status: NonNullable<PodObject['status']> = pick(s, ['phase', 'reason', 'message']);
    if (s.conditions) {
      // Only readiness is read (whether and since when).
      status.conditions = s.conditions
        .filter((c) => c.type === 'Ready')
        .map((c) => pick(c, ['type', 'status', 'lastTransitionTime']) as (typeof s.conditions)[number]);
    }
    if (s.containerStatuses) status.containerStatuses = s.containerStatuses.map(containerStatusShape);
    shaped.status = status;
  }
  return shaped;
}

/**
 * The runner pods of a namespace (or of all): RUNNER_POD_SELECTORS, one informer each, read as one.
 * Pods of no runner are not cached at all.
 */
export function runnerPodInformer(manager: Manager, namespace?: string): InformerUnion<PodObject> {
  return new InformerUnion(
    RUNNER_POD_SELECTORS.map((labelSelector) =>
      manager.informer<PodObject>(PODS, {
        ...(namespace ? { namespace } : {}),
        labelSelector,
        indexers: RUNNER_POD_INDEXERS,
        transform: runnerPodShape,
      }),
    ),
  );
}

export interface StatefulSetObject extends KubeObject {
  spec?: { replicas?: number };
  status?: { replicas?: number; readyReplicas?: number; currentReplicas?: number; updatedReplicas?: number };
}

/**
 * A StatefulSet as the controllers and the pod webhook read it: metadata (owner, template-hash label,
 * annotations), the wanted replicas and the status counts. The pod template and the volume claim
 * templates are dropped: template changes are told by the `runner-template-hash` label.
 */
export function statefulSetShape(sts: StatefulSetObject): StatefulSetObject {
  const shaped: StatefulSetObject = {
    ...pick(sts, ['apiVersion', 'kind']),
    metadata: metadataOf(sts.metadata),
  };
  if (sts.spec) shaped.spec = pick(sts.spec, ['replicas']);
  if (sts.status) {
    shaped.status = pick(sts.status, ['replicas', 'readyReplicas', 'currentReplicas', 'updatedReplicas']);
  }
  return shaped;
}

/** The StatefulSets of a namespace (or of all), shaped by statefulSetShape, indexed by controller (RunnerSet). */
export function statefulSetInformer(manager: Manager, namespace?: string): Informer<StatefulSetObject> {
  return manager.informer<StatefulSetObject>(STATEFUL_SETS, {
    ...(namespace ? { namespace } : {}),
    indexers: { [CONTROLLER_UID_INDEX]: defaultIndexers[CONTROLLER_UID_INDEX]! },
    transform: statefulSetShape,
  });
}

export interface PvcObject extends KubeObject {
  spec?: { volumeName?: string };
}

/** Volume claims of RunnerSet StatefulSets (labelled `runner-statefulset-name`), as the API has them. */
export function runnerVolumeClaimInformer(manager: Manager, namespace?: string): Informer<PvcObject> {
  return manager.informer<PvcObject>(PERSISTENT_VOLUME_CLAIMS, {
    ...(namespace ? { namespace } : {}),
    labelSelector: LABEL_RUNNER_STATEFULSET_NAME,
  });
}
