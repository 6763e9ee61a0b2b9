import { type CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

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
