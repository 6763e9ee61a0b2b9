import { type CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';

/**
 * A runner container env variable as the runner process would see it: the literal value, or the
 * Secret key it refers to read from the API server (the pod webhook puts tokens there). Undefined
 * when the variable, its Secret or its key is missing.
 */
export async function runnerEnvValue(
  core: CoreV1Api,
  namespace: string,
  pod: V1Pod,
  name: string,
): Promise<string | undefined> {
  const entry = pod.spec?.containers
    .find((c) => c.name === 'runner')
    ?.env?.filter((e) => e.name === name)
    .at(-1);
  if (!entry) return undefined;
  const ref = entry.valueFrom?.secretKeyRef;
  if (!ref) return entry.value;
  const secret = await core.readNamespacedSecret({ name: ref.name!, namespace }).catch(() => undefined);
  const data = secret?.data?.[ref.key];
  return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
}

/** What the kubelet reports once a runner pod's containers started: Running and Ready. */
export async function markRunnerPodRunning(core: CoreV1Api, namespace: string, name: string): Promise<void> {
  const now = new Date().toISOString();
  await core.patchNamespacedPodStatus(
    {
      name,
      namespace,
      body: {
        status: {
          phase: 'Running',
          conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now }],
          containerStatuses: [
            {
              name: 'runner',
              image: 'x',
              imageID: '',
              ready: true,
              restartCount: 0,
              state: { running: { startedAt: now } },
            },
          ],
        },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** What the kubelet reports when the runner process ends with exit code 0 (a finished ephemeral runner). */
export async function markRunnerExited(core: CoreV1Api, namespace: string, name: string): Promise<void> {
  const now = new Date().toISOString();
  await core.patchNamespacedPodStatus(
    {
      name,
      namespace,
      body: {
        status: {
          containerStatuses: [
            {
              name: 'runner',
              image: 'x',
              imageID: '',
              ready: false,
              restartCount: 0,
              state: { terminated: { exitCode: 0, startedAt: now, finishedAt: now } },
            },
          ],
        },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** What the kubelet reports when the runner process of a runner-only pod exits 0. */
export async function markRunnerSucceeded(core: CoreV1Api, namespace: string, name: string): Promise<void> {
  const now = new Date().toISOString();
  await core.patchNamespacedPodStatus(
    {
      name,
      namespace,
      body: {
        status: {
          phase: 'Succeeded',
          conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: now }],
          containerStatuses: [
            {
              name: 'runner',
              image: 'x',
              imageID: '',
              ready: false,
              restartCount: 0,
              state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: now, finishedAt: now } },
            },
          ],
        },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}
