import { RUNNERS } from '../api/index.ts';
import {
  FINALIZER_LINKED_RESOURCES,
  FINALIZER_RUNNER,
  FINALIZER_RUNNER_POD,
} from '../controllers/constants.ts';
import { isNotFound, toKubeError } from '../runtime/errors.ts';
import { resourcePath } from '../runtime/informer.ts';
import { KubeHttp } from '../runtime/kube-http.ts';
import { PODS } from '../runtime/resources.ts';
import type { KubeObject } from '../runtime/store.ts';
import {
  DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME,
  DEFAULT_WEBHOOK_CONFIGURATION_NAME,
  deleteRunnerPodWebhookConfiguration,
  deleteRunnerResourceWebhookConfigurations,
} from '../webhooks/index.ts';
import { type FlagSpec, parseFlags, renderHelp } from './flags.ts';
import { loadKubeConfig } from './run.ts';
import { RUN_FLAGS } from './run-flags.ts';
import { StartupError } from './startup-error.ts';

/**
 * `paddock uninstall` (issue 13 item 5): removes the admission webhook configurations paddock
 * registered, so nothing points the API server at a paddock that is gone. The order matters: a
 * runner pod or Runner still carrying paddock's finalizer needs paddock to unregister its runner
 * first, so with any left the command names them and changes nothing (unless `--force`).
 */

export const UNINSTALL_FLAGS: FlagSpec[] = [
  ...RUN_FLAGS.filter((f) => ['kubeconfig', 'watch-namespace'].includes(f.name)),
  {
    group: 'Uninstall',
    name: 'force',
    type: 'boolean',
    default: 'false',
    help: 'remove the configurations even while objects still carry paddock’s finalizers (they then stay until someone removes the finalizers)',
  },
];

export const UNINSTALL_SUMMARY =
  'Removes the admission webhook configurations paddock registered (the pod token webhook and the\n' +
  'Runner, RunnerReplicaSet and RunnerDeployment webhooks; those of --watch-namespace with it). Run it\n' +
  'after deleting your runner resources and before removing paddock itself: while runner pods or\n' +
  'Runners still carry paddock’s finalizers it lists them and changes nothing.';

const OUR_FINALIZERS = [FINALIZER_RUNNER, FINALIZER_RUNNER_POD, FINALIZER_LINKED_RESOURCES];

/** `<kind> <namespace>/<name>` of each object still holding one of paddock's finalizers. */
export function finalizerHolders(kind: string, objects: readonly KubeObject[]): string[] {
  return objects
    .filter((o) => (o.metadata.finalizers ?? []).some((f) => OUR_FINALIZERS.includes(f)))
    .map((o) => `${kind} ${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`);
}

export interface UninstallResult {
  removed: string[];
  blockers: string[];
}

/** Checks for finalizer holders, then deletes the configurations (none when blocked and not forced). */
export async function uninstall(
  http: KubeHttp,
  opts: { namespace: string | undefined; force: boolean },
): Promise<UninstallResult> {
  const list = async (path: string) => {
    try {
      return (await http.request<{ items: KubeObject[] }>('GET', path)).items;
    } catch (err) {
      if (isNotFound(err)) return []; // the CRDs are gone already
      throw err;
    }
  };
  const blockers = [
    ...finalizerHolders('Runner', await list(resourcePath(RUNNERS, opts.namespace))),
    ...finalizerHolders('Pod', await list(resourcePath(PODS, opts.namespace))),
  ];
  if (blockers.length > 0 && !opts.force) return { removed: [], blockers };
  const suffix = opts.namespace ? `-${opts.namespace}` : '';
  const pod = `${DEFAULT_WEBHOOK_CONFIGURATION_NAME}${suffix}`;
  const resources = `${DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME}${suffix}`;
  await deleteRunnerPodWebhookConfiguration(http, pod);
  await deleteRunnerResourceWebhookConfigurations(http, resources);
  return {
    removed: [`MutatingWebhookConfiguration ${pod}`, `webhook configurations ${resources}`],
    blockers,
  };
}

export async function uninstallCommand(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const { values, help } = parseFlags(UNINSTALL_FLAGS, argv, env);
  if (help) {
    process.stdout.write(renderHelp('uninstall', UNINSTALL_SUMMARY, UNINSTALL_FLAGS));
    return 0;
  }
  const http = new KubeHttp(loadKubeConfig((values.kubeconfig as string | undefined) || undefined, env));
  try {
    const result = await uninstall(http, {
      namespace: (values['watch-namespace'] as string) || undefined,
      force: values.force === true,
    });
    if (result.blockers.length > 0) {
      const shown = result.blockers.slice(0, 20).join('\n  ');
      const more = result.blockers.length > 20 ? `\n  … and ${result.blockers.length - 20} more` : '';
      process.stderr.write(
        `${result.removed.length > 0 ? 'removed anyway (--force); ' : ''}${result.blockers.length} object(s) still carry paddock's finalizers:\n  ${shown}${more}\n`,
      );
      if (result.removed.length === 0) {
        process.stderr.write(
          'Delete your RunnerDeployments, RunnerSets and Runners and let paddock unregister their runners, then run this again (or pass --force).\n',
        );
        return 1;
      }
    }
    for (const r of result.removed) process.stdout.write(`removed ${r} (if it existed)\n`);
    return 0;
  } catch (err) {
    throw new StartupError(`cannot uninstall: ${toKubeError(err).message}`);
  } finally {
    http.close();
  }
}
