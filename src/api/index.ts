/**
 * The `actions.summerwind.dev/v1alpha1` API: resource types (generated from ./schema.ts), resource
 * descriptors for the informers and clients, and the CRD manifests to install.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ResourceRef } from '../runtime/informer.ts';
import { GROUP, KINDS, VERSION } from './schema.ts';

export type * from './generated/types.ts';
export { GROUP, VERSION };

export const API_VERSION = `${GROUP}/${VERSION}`;

export type Kind =
  | 'Runner'
  | 'RunnerReplicaSet'
  | 'RunnerDeployment'
  | 'RunnerSet'
  | 'HorizontalRunnerAutoscaler';

function ref(kind: Kind, plural: string): ResourceRef & { kind: Kind } {
  return { group: GROUP, version: VERSION, plural, namespaced: true, kind };
}

export const RUNNERS = ref('Runner', 'runners');
export const RUNNER_REPLICA_SETS = ref('RunnerReplicaSet', 'runnerreplicasets');
export const RUNNER_DEPLOYMENTS = ref('RunnerDeployment', 'runnerdeployments');
export const RUNNER_SETS = ref('RunnerSet', 'runnersets');
export const HORIZONTAL_RUNNER_AUTOSCALERS = ref('HorizontalRunnerAutoscaler', 'horizontalrunnerautoscalers');

/** Every kind of the API group, in dependency order (Runner first). */
export const RESOURCES: readonly (ResourceRef & { kind: Kind })[] = [
  RUNNERS,
  RUNNER_REPLICA_SETS,
  RUNNER_DEPLOYMENTS,
  RUNNER_SETS,
  HORIZONTAL_RUNNER_AUTOSCALERS,
];

export const AutoscalingMetricTypeTotalNumberOfQueuedAndInProgressWorkflowRuns =
  'TotalNumberOfQueuedAndInProgressWorkflowRuns';
export const AutoscalingMetricTypePercentageRunnersBusy = 'PercentageRunnersBusy';
export const CacheEntryKeyDesiredReplicas = 'desiredReplicas';

/** Directory of the generated CRD manifests (`config/crd/`, from both `src/api/` and `dist/api/`). */
export const CRD_DIR = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'config',
  'crd',
);

/** Path of the generated CRD manifest of one plural, e.g. `runners`. */
export function crdPath(plural: string): string {
  return path.join(CRD_DIR, `${GROUP}_${plural}.yaml`);
}

/**
 * The CustomResourceDefinition objects of the API group, ready to create or apply. The YAML parser
 * is loaded here, not with the module: only --install-crds and the tests need it. It is required
 * from node_modules as the kubeconfig loader does: a bundled `import('yaml')` of this CommonJS
 * package gave only a default export, so `paddock run --install-crds` failed in the image.
 */
export async function crdManifests(): Promise<Record<string, unknown>[]> {
  const { parse } = createRequire(import.meta.url)('yaml') as typeof import('yaml');
  return KINDS.map((k) => parse(readFileSync(crdPath(k.plural), 'utf8')) as Record<string, unknown>);
}
