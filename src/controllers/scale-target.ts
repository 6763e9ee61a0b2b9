import type { HorizontalRunnerAutoscaler, RunnerDeployment, RunnerSet } from '../api/index.ts';
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
