import {
  HORIZONTAL_RUNNER_AUTOSCALERS,
  type HorizontalRunnerAutoscaler,
  type RunnerDeployment,
  type RunnerSet,
} from '../api/index.ts';
import { isInvalid, isNotFound } from '../runtime/errors.ts';
import type { ResourceRef } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import { type JsonPatchOp, jsonPatch, objectPath } from '../runtime/objects.ts';
import type { Store } from '../runtime/store.ts';

/** The runner fields of a scale target: a deployment's template spec, or a RunnerSet's spec. */
export interface ScaleTargetRunnerSpec {
  enterprise?: string | undefined;
  organization?: string | undefined;
  repository?: string | undefined;
  group?: string | undefined;
  labels?: string[] | undefined;
  ephemeral?: boolean | undefined;
  githubAPICredentialsFrom?: { secretRef?: { name?: string } } | undefined;
}

export type ScaleTarget =
  | { kind: 'RunnerDeployment'; object: RunnerDeployment; runnerSpec: ScaleTargetRunnerSpec }
  | { kind: 'RunnerSet'; object: RunnerSet; runnerSpec: ScaleTargetRunnerSpec };

/**
 * The object an HRA's `scaleTargetRef` names, from the caches (kind "" is a RunnerDeployment, as
 * in ARC); undefined when it names none or it is not there. The one home of that lookup for the
 * HRA controller and the workflow_job webhook.
 */
export function scaleTargetOf(
  hra: HorizontalRunnerAutoscaler,
  stores: { deployments: Store<RunnerDeployment>; runnerSets: Store<RunnerSet> },
): ScaleTarget | undefined {
  const ref = hra.spec.scaleTargetRef ?? {};
  const namespace = hra.metadata.namespace;
  if (!ref.name) return undefined;
  if (!ref.kind || ref.kind === 'RunnerDeployment') {
    const rd = stores.deployments.getByName(namespace, ref.name);
    return rd && { kind: 'RunnerDeployment', object: rd, runnerSpec: rd.spec.template?.spec ?? {} };
  }
  if (ref.kind === 'RunnerSet') {
    const rs = stores.runnerSets.getByName(namespace, ref.name);
    return rs && { kind: 'RunnerSet', object: rs, runnerSpec: rs.spec };
  }
  return undefined;
}

/** What became of an autoscaler's write to its target; only `written` changed anything. */
export type ScaleTargetWrite =
  | 'written'
  | 'autoscaler-gone'
  | 'autoscaler-changed'
  | 'target-changed'
  | 'target-gone';

/**
 * Writes an autoscaler's decision (`replicas`, `effectiveTime`) to its target only while both are
 * what the decision was made from: the autoscaler still exists with the same spec, read live
 * because the cache may not show its deletion yet, and the target's spec is unchanged (a `test`
 * of its generation, which status writes do not move). Otherwise the documented way to drain —
 * delete the autoscaler, then scale the target to zero — could be undone by a decision taken a
 * moment before from a cache that had seen neither.
 */
export async function writeScaleTarget(
  http: KubeHttp,
  hra: HorizontalRunnerAutoscaler,
  target: { ref: ResourceRef; object: RunnerDeployment | RunnerSet },
  patch: { replicas?: number; effectiveTime?: string },
): Promise<ScaleTargetWrite> {
  try {
    const live = await http.request<HorizontalRunnerAutoscaler>(
      'GET',
      objectPath(HORIZONTAL_RUNNER_AUTOSCALERS, hra),
    );
    if (live.metadata.deletionTimestamp || live.metadata.uid !== hra.metadata.uid) return 'autoscaler-gone';
    if (live.metadata.generation !== hra.metadata.generation) return 'autoscaler-changed';
  } catch (err) {
    if (isNotFound(err)) return 'autoscaler-gone';
    throw err;
  }
  const ops: JsonPatchOp[] = [
    { op: 'test', path: '/metadata/generation', value: target.object.metadata.generation ?? 0 },
  ];
  if (patch.replicas !== undefined) ops.push({ op: 'add', path: '/spec/replicas', value: patch.replicas });
  if (patch.effectiveTime !== undefined)
    ops.push({ op: 'add', path: '/spec/effectiveTime', value: patch.effectiveTime });
  try {
    await jsonPatch(http, target.ref, target.object, ops);
    return 'written';
  } catch (err) {
    if (isNotFound(err)) return 'target-gone';
    // A failed `test` is the API server's 422.
    if (isInvalid(err)) return 'target-changed';
    throw err;
  }
}
