import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import type { Paddock } from '../src/cli/run.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { eventually, type TestCluster, useCluster } from './support/cluster.ts';
import { deleteTestWebhookConfiguration, startTestPaddock } from './support/paddock.ts';
import { markRunnerPodRunning, runnerEnvValue } from './support/pods.ts';

/**
 * Deleting a namespace can remove a RunnerSet's credentials Secret while the runner pods still wait
 * on paddock's finalizer to unregister their runners: Kubernetes before 1.33 deletes every kind of
 * object at once (1.33 and later delete pods first; a user or a GitOps tool may still delete the
 * Secret first). The deletion must finish: with the credentials paddock last read when it can, and
 * after --github-unavailable-timeout when it cannot (a paddock started after the Secret was gone).
 */

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('deleting a namespace that holds a RunnerSet and its credentials Secret', {
  concurrency: false,
}, () => {
  const double = new GitHubDouble();
  let cluster: TestCluster;
  let core: CoreV1Api;
  let token: string;
  const logLines: string[] = [];
  const running: Paddock[] = [];
  const namespaces = new Set<string>();

  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg('acme');
    token = double.addToken({ login: 'team' }).token;
    cluster = await useCluster();
    core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  });
  after(async () => {
    for (const p of running) await p.stop().catch(() => undefined);
    for (const namespace of namespaces) await deleteTestWebhookConfiguration(cluster.kubeConfig, namespace);
    await double.stop();
  });

  async function start(namespace: string): Promise<Paddock> {
    // No default credentials: the RunnerSet's Secret is the only way to GitHub.
    const { paddock } = await startTestPaddock({
      kubeConfig: cluster.kubeConfig,
      namespace,
      env: { GITHUB_URL: double.apiUrl },
      flags: ['--force-delete-timeout', '2s', '--github-unavailable-timeout', '3s'],
      logLevel: 'info',
      logLines,
    });
    running.push(paddock);
    namespaces.add(namespace);
    return paddock;
  }

  const newNamespace = async () =>
    (
      await core.createNamespace({
        body: { metadata: { generateName: 't-nsdel-', labels: { 'paddock.dev/test': 'true' } } },
      })
    ).metadata!.name!;

  /** A credentials Secret and a RunnerSet of two registered runners in `namespace`. */
  async function fleet(paddock: Paddock, namespace: string): Promise<number[]> {
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'creds' },
        data: { github_token: b64(token), github_url: b64(double.apiUrl) },
      },
    });
    await paddock.manager.http.request(
      'POST',
      `/apis/actions.summerwind.dev/v1alpha1/namespaces/${namespace}/runnersets`,
      {
        body: {
          apiVersion: 'actions.summerwind.dev/v1alpha1',
          kind: 'RunnerSet',
          metadata: { name: 'team' },
          spec: {
            replicas: 2,
            organization: 'acme',
            githubAPICredentialsFrom: { secretRef: { name: 'creds' } },
            selector: { matchLabels: { app: 'team' } },
            serviceName: 'team',
            template: { metadata: { labels: { app: 'team' } }, spec: { containers: [{ name: 'runner' }] } },
          },
        },
      },
    );
    const pods = await eventually(
      'two runner pods',
      async () => {
        const list = await core.listNamespacedPod({ namespace, labelSelector: 'runnerset-name=team' });
        return list.items.length === 2 ? list.items : undefined;
      },
      60_000,
    ).catch(diagnose(namespace));
    const runnerIds: number[] = [];
    for (const pod of pods) {
      await markRunnerPodRunning(core, namespace, pod.metadata!.name!);
      const registrationToken = await eventually('token', () =>
        runnerEnvValue(core, namespace, pod, 'RUNNER_TOKEN'),
      );
      runnerIds.push(
        double.registerRunner({ registrationToken, name: pod.metadata!.name!, ephemeral: true }).id,
      );
    }
    await eventually(
      'runner IDs recorded',
      async () =>
        (await core.listNamespacedPod({ namespace, labelSelector: 'runnerset-name=team' })).items.every(
          (p) => p.metadata?.annotations?.['actions-runner/id'],
        ),
      30_000,
    ).catch(diagnose(namespace));
    return runnerIds;
  }

  const namespaceGone = (namespace: string) => async () => {
    try {
      await core.readNamespace({ name: namespace });
      return false;
    } catch (e) {
      return (e as { code?: number }).code === 404;
    }
  };
  const diagnose = (namespace: string) => async (e: unknown) => {
    const pods = await core.listNamespacedPod({ namespace }).catch(() => ({ items: [] }));
    const text = pods.items
      .map((p) => `${p.metadata?.name}(${(p.metadata?.finalizers ?? []).join(',')})`)
      .join(' ');
    throw new Error(
      `${(e as Error).message}; pods: ${text}; paddock log tail:\n${logLines.slice(-15).join('')}`,
    );
  };

  test('completes, and paddock unregisters the runners with the credentials it last read', async (t) => {
    if (!cluster.controllerManager)
      return t.skip('needs kube-controller-manager (namespace deletion, StatefulSets)');
    const namespace = await newNamespace();
    const paddock = await start(namespace);
    const runnerIds = await fleet(paddock, namespace);
    await core.deleteNamespacedSecret({ name: 'creds', namespace });
    await core.deleteNamespace({ name: namespace });
    await eventually('namespace gone', namespaceGone(namespace), 90_000).catch(diagnose(namespace));
    const left = double.runners('orgs/acme').filter((r) => runnerIds.includes(r.id));
    assert.deepEqual(left, [], 'no runner left registered');
  });

  test('completes when paddock starts after the Secret is gone: released after --github-unavailable-timeout', async (t) => {
    if (!cluster.controllerManager)
      return t.skip('needs kube-controller-manager (namespace deletion, StatefulSets)');
    const namespace = await newNamespace();
    const first = await start(namespace);
    const runnerIds = await fleet(first, namespace);
    // paddock is down while the Secret and then the namespace go; the pods wait on our finalizer.
    await first.stop();
    await core.deleteNamespacedSecret({ name: 'creds', namespace });
    await core.deleteNamespace({ name: namespace });
    const since = logLines.length;
    await start(namespace);
    await eventually('namespace gone', namespaceGone(namespace), 90_000).catch(diagnose(namespace));
    const abandoned = logLines.slice(since).filter((l) => l.includes('UnregistrationAbandoned'));
    for (const id of runnerIds) {
      assert.ok(
        abandoned.some((l) => l.includes(`(ID ${id})`)),
        `a warning names runner ${id}: ${abandoned.join('')}`,
      );
    }
  });
});
