import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AppsV1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { RUNNER_SETS } from '../src/api/index.ts';
import { installCrds, type Paddock } from '../src/cli/run.ts';
import { mergePatch } from '../src/runtime/objects.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { deleteTestWebhookConfiguration, startTestPaddock } from './support/paddock.ts';
import { markRunnerExited, markRunnerPodRunning, runnerEnvValue } from './support/pods.ts';

describe('RunnerSet end to end (kube-controller-manager, pod webhook, runner pod controller)', () => {
  const ns = namespaceFixture('t-runnerset');
  const double = new GitHubDouble();
  let paddock: Paddock;
  /** paddock's own log, shown when a wait times out. */
  const logLines: string[] = [];
  let core: CoreV1Api;
  let apps: AppsV1Api;

  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg('acme');
    const { token } = double.addToken();
    ({ paddock } = await startTestPaddock({
      kubeConfig: ns.cluster.kubeConfig,
      namespace: ns.name,
      env: { GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl },
      logLines,
    }));
    core = ns.cluster.kubeConfig.makeApiClient(CoreV1Api);
    apps = ns.cluster.kubeConfig.makeApiClient(AppsV1Api);
  });

  after(async () => {
    await paddock?.stop();
    await deleteTestWebhookConfiguration(ns.cluster.kubeConfig, ns.name);
    await double.stop();
  });

  const diagnose = async (what: string) => {
    const sets = await statefulSets().catch(() => []);
    const pods = await runnerPods().catch(() => []);
    const podText = pods
      .map(
        (p) =>
          `${p.metadata?.name}(${p.status?.phase ?? '?'}${p.metadata?.deletionTimestamp ? ',deleting' : ''}${p.metadata?.annotations?.['actions-runner/id'] ? `,id=${p.metadata.annotations['actions-runner/id']}` : ''})`,
      )
      .join(', ');
    const runners = double
      .runners('orgs/acme')
      .map((r) => `${r.name}(${r.status}${r.busy ? ',busy' : ''})`)
      .join(', ');
    const tail = logLines.filter((l) => /runnerset|"level":"(warn|error)"/.test(l)).slice(-30);
    return `${what}; StatefulSets: ${sets.map((x) => x.metadata?.name).join(', ')}; pods: ${podText}; GitHub runners: ${runners}; paddock log tail:\n${tail.join('')}`;
  };
  const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 30_000) =>
    eventually(what, fn, timeoutMs).catch(async (e) => {
      throw new Error(await diagnose((e as Error).message));
    });

  const runnerPods = async () =>
    (await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'runnerset-name=example' })).items;
  const statefulSets = async () =>
    (await apps.listNamespacedStatefulSet({ namespace: ns.name, labelSelector: 'runner-template-hash' }))
      .items;
  const envOf = (pod: V1Pod, name: string) =>
    pod.spec?.containers.find((c) => c.name === 'runner')?.env?.find((e) => e.name === name)?.value;

  /** What kubelet and the runner's config step would do. */
  const started = new Set<string>();
  async function playNode() {
    for (const pod of await runnerPods()) {
      const uid = pod.metadata!.uid!;
      if (started.has(uid) || pod.metadata?.deletionTimestamp) continue;
      started.add(uid);
      await markRunnerPodRunning(core, ns.name, pod.metadata!.name!);
      double.registerRunner({
        // From the StatefulSet's token Secret, as the kubelet resolves the env's secretKeyRef.
        registrationToken: (await runnerEnvValue(core, ns.name, pod, 'RUNNER_TOKEN'))!,
        name: envOf(pod, 'RUNNER_NAME')!,
        ephemeral: envOf(pod, 'RUNNER_EPHEMERAL') !== 'false',
      });
    }
  }

  test('3 replicas → 3 StatefulSets → pods with injected tokens → IDs recorded; scale to 1 keeps the busy runner; a finished ephemeral runner is replaced', async () => {
    await paddock.manager.http.request(
      'POST',
      `/apis/actions.summerwind.dev/v1alpha1/namespaces/${ns.name}/runnersets`,
      {
        body: {
          apiVersion: 'actions.summerwind.dev/v1alpha1',
          kind: 'RunnerSet',
          metadata: { name: 'example' },
          spec: {
            replicas: 3,
            organization: 'acme',
            labels: ['linux'],
            selector: { matchLabels: { app: 'example' } },
            serviceName: 'example',
            template: {
              metadata: { labels: { app: 'example' } },
              spec: { containers: [{ name: 'runner' }] },
            },
          },
        },
      },
    );
    await waitFor('3 StatefulSets', async () => (await statefulSets()).length === 3, 60_000);
    const pods = await waitFor(
      '3 pods',
      async () => {
        const p = await runnerPods();
        return p.length === 3 ? p : undefined;
      },
      30_000,
    );
    for (const pod of pods) {
      const token = await runnerEnvValue(core, ns.name, pod, 'RUNNER_TOKEN');
      assert.ok(
        token && double.model.tokens.has(token),
        `${pod.metadata?.name}: token injected by the webhook`,
      );
      assert.ok(!JSON.stringify(pod.spec).includes(token), `${pod.metadata?.name}: no token in the pod spec`);
      assert.equal(envOf(pod, 'RUNNER_TOKEN'), undefined, 'RUNNER_TOKEN has no literal value');
      assert.equal(envOf(pod, 'RUNNER_NAME'), pod.metadata?.name);
      assert.equal(envOf(pod, 'RUNNER_ORG'), 'acme');
      assert.equal(pod.spec?.restartPolicy, 'Never');
    }
    await playNode();
    await waitFor(
      'IDs recorded',
      async () => (await runnerPods()).every((p) => p.metadata?.annotations?.['actions-runner/id']),
      30_000,
    );
    await waitFor('status', async () => {
      const rs = await paddock.manager.http.request<{
        status?: { replicas?: number; desiredReplicas?: number };
      }>('GET', `/apis/actions.summerwind.dev/v1alpha1/namespaces/${ns.name}/runnersets/example`);
      return rs.status?.replicas === 3 && rs.status.desiredReplicas === 3;
    });

    // One runner takes a job; then scale down to one runner.
    const busyPod = (await runnerPods())[1]!;
    const busyName = busyPod.metadata!.name!;
    const busyRunner = double.runnerByName('orgs/acme', busyName)!;
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['linux'] });
    double.startJob(job.id, busyRunner.id);
    await new Promise((r) => setTimeout(r, 1500)); // the registry sees it busy
    await mergePatch(
      paddock.manager.http,
      RUNNER_SETS,
      { metadata: { name: 'example', namespace: ns.name } },
      { spec: { replicas: 1 } },
    );

    await waitFor(
      'two idle runners gone, their StatefulSets removed',
      async () => {
        const sets = await statefulSets();
        return sets.length === 1 && double.runners('orgs/acme').length === 1;
      },
      45_000,
    );
    assert.deepEqual(
      double.runners('orgs/acme').map((r) => r.name),
      [busyName],
      'the busy runner is the one kept',
    );
    assert.equal(
      double.log.filter((e) => e.method === 'DELETE' && e.path.endsWith(`/${busyRunner.id}`)).length,
      0,
      'nobody tried to remove the busy runner',
    );

    // The job ends; the ephemeral runner leaves GitHub and its container exits: replaced.
    double.completeJob(job.id);
    const finishedUid = (await runnerPods()).find((p) => p.metadata?.name === busyName)?.metadata?.uid;
    await markRunnerExited(core, ns.name, busyName);
    const replacement = await waitFor(
      'replacement runner pod',
      async () => {
        const live = (await runnerPods()).filter(
          (p) => !p.metadata?.deletionTimestamp && p.metadata?.uid !== finishedUid,
        );
        return live.length === 1 ? live[0] : undefined;
      },
      45_000,
    );
    assert.ok(
      await runnerEnvValue(core, ns.name, replacement, 'RUNNER_TOKEN'),
      'the replacement got a token',
    );
    await playNode();
    await waitFor(
      'replacement registered',
      async () => double.runners('orgs/acme').length === 1 && (await runnerPods()).length === 1,
      30_000,
    );
    await paddock.manager.http.request(
      'DELETE',
      `/apis/actions.summerwind.dev/v1alpha1/namespaces/${ns.name}/runnersets/example`,
    );
  });
});

describe('installCrds', () => {
  test('is idempotent', async () => {
    const { useCluster } = await import('./support/cluster.ts');
    const cluster = await useCluster();
    const { KubeHttp } = await import('../src/runtime/kube-http.ts');
    const http = new KubeHttp(cluster.kubeConfig);
    await installCrds(http);
    await installCrds(http);
    http.close();
  });
});
