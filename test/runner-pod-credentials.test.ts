import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { podGitHubClients } from '../src/controllers/github-clients.ts';
import { RunnerPodReconciler, type RunnerPodSettings } from '../src/controllers/runner-pod.ts';
import { realClock } from '../src/runtime/clock.ts';
import { silentLogger } from '../src/runtime/log.ts';
import { Manager } from '../src/runtime/manager.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { markRunnerPodRunning } from './support/pods.ts';

/**
 * Per-pod credentials (`actions-runner/github-api-creds-secret`) through the real client pool:
 * rotated Secrets take effect without a restart, and churning pods and Secrets leaves nothing held.
 */

const SETTINGS: Partial<RunnerPodSettings> = {
  registrationRecheckIntervalMs: 1000,
  registrationRecheckJitterMs: 100,
  registrationTimeoutMs: 60_000,
  unregistrationRetryDelayMs: 1000,
  forceDeleteTimeoutMs: 2000,
  githubUnavailableTimeoutMs: 4000,
};

const b64 = (s: string) => Buffer.from(s).toString('base64');

function runnerPod(name: string, secret: string, org = 'acme'): V1Pod {
  return {
    metadata: {
      name,
      labels: { 'actions-runner': '' },
      annotations: { 'actions-runner/github-api-creds-secret': secret },
    },
    spec: {
      restartPolicy: 'Never',
      containers: [
        {
          name: 'runner',
          image: 'summerwind/actions-runner:latest',
          env: [
            { name: 'RUNNER_ORG', value: org },
            { name: 'RUNNER_EPHEMERAL', value: 'true' },
          ],
        },
      ],
    },
  };
}

describe('runner pods with credentials Secrets', { concurrency: false }, () => {
  const ns = namespaceFixture('t-runnerpod-creds');
  const double = new GitHubDouble();
  let manager: Manager;
  let reconciler: RunnerPodReconciler;
  let clients: ReturnType<typeof podGitHubClients>;
  let core: CoreV1Api;

  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    for (const org of ['acme', 'globex']) double.addOrg(org);
    const log = silentLogger();
    manager = new Manager({ kubeConfig: ns.cluster.kubeConfig, log });
    clients = podGitHubClients({ http: manager.http, clock: realClock, log });
    reconciler = new RunnerPodReconciler({
      manager,
      namespace: ns.name,
      settings: SETTINGS,
      github: clients,
    });
    await manager.start();
    core = ns.cluster.kubeConfig.makeApiClient(CoreV1Api);
  });
  after(async () => {
    reconciler?.stop();
    await manager?.stop();
    clients?.pool.close();
    await double.stop();
  });

  const getPod = async (name: string) => {
    try {
      return await core.readNamespacedPod({ name, namespace: ns.name });
    } catch (e) {
      if ((e as { code?: number }).code === 404) return undefined;
      throw e;
    }
  };
  const putSecret = async (name: string, data: Record<string, string>) => {
    const body = {
      metadata: { name },
      data: Object.fromEntries(
        Object.entries({ ...data, github_url: double.apiUrl }).map(([k, v]) => [k, b64(v)]),
      ),
    };
    try {
      await core.replaceNamespacedSecret({ name, namespace: ns.name, body });
    } catch (e) {
      if ((e as { code?: number }).code !== 404) throw e;
      await core.createNamespacedSecret({ namespace: ns.name, body });
    }
  };
  const register = (name: string, org = 'acme') =>
    double.registerRunner({
      registrationToken: double.model.issueToken(`orgs/${org}`, 'registration').token,
      name,
      ephemeral: true,
    });

  test('a rotated App private key is used from the next call on, without a restart', async () => {
    const { privateKeyPem: oldKey } = double.addApp({ appId: 4100 });
    double.addInstallation({ id: 4101, appId: 4100, account: 'acme' });
    await putSecret('app-creds', {
      github_app_id: '4100',
      github_app_installation_id: '4101',
      github_app_private_key: oldKey!,
    });
    await core.createNamespacedPod({ namespace: ns.name, body: runnerPod('app-runner', 'app-creds') });
    await eventually(
      'finalizer',
      async () => (await getPod('app-runner'))?.metadata?.finalizers?.length === 1,
    );
    await markRunnerPodRunning(core, ns.name, 'app-runner');
    const runner = register('app-runner');
    await eventually(
      'runner ID recorded with the first key',
      async () =>
        (await getPod('app-runner'))?.metadata?.annotations?.['actions-runner/id'] === String(runner.id),
    );

    // The App's key is rotated on GitHub and in the Secret: a JWT signed with the old key is refused.
    const { privateKeyPem: newKey } = double.addApp({ appId: 4100 });
    await putSecret('app-creds', {
      github_app_id: '4100',
      github_app_installation_id: '4101',
      github_app_private_key: newKey!,
    });
    const tokenRoute = 'POST /app/installations/{installation_id}/access_tokens';
    const since = double.log.length;
    await core.deleteNamespacedPod({ name: 'app-runner', namespace: ns.name });
    await eventually('pod gone', async () => (await getPod('app-runner')) === undefined, 20_000);
    const minted = double.log.slice(since).filter((e) => e.route === tokenRoute);
    assert.ok(
      minted.some((e) => e.status === 201),
      `a new installation token was minted with the new key (${JSON.stringify(minted.map((e) => e.status))})`,
    );
    assert.ok(!double.runners().some((r) => r.id === runner.id), 'the runner was unregistered');
  });

  test('a credentials Secret name that is a path is refused with a Warning Event, and nothing else is read', async () => {
    const name = 'path-trick';
    await core.createNamespacedPod({
      namespace: ns.name,
      body: runnerPod(name, '../../kube-system/secrets/paddock-webhook-tls'),
    });
    await eventually('finalizer', async () => (await getPod(name))?.metadata?.finalizers?.length === 1);
    await markRunnerPodRunning(core, ns.name, name);
    const warning = await eventually('Warning Event', async () => {
      const list = await manager.http.request<{
        items: { reason: string; note: string; type: string; regarding: { name: string } }[];
      }>('GET', `/apis/events.k8s.io/v1/namespaces/${ns.name}/events`);
      return list.items.find((e) => e.regarding.name === name && e.reason === 'GitHubCredentialsError');
    });
    assert.equal(warning.type, 'Warning');
    assert.match(
      warning.note,
      /credentials Secret "\.\.\/\.\.\/kube-system\/secrets\/paddock-webhook-tls" is not a valid name/,
    );
    assert.deepEqual(clients.pool.usage.secrets, 0, 'no Secret was loaded');
    // Deleting it must not hang on the unusable credentials (nothing registered: released at once).
    await core.deleteNamespacedPod({ name, namespace: ns.name });
    await eventually('pod gone', async () => (await getPod(name)) === undefined, 20_000);
  });

  test('churning 200 pods across Secrets, scopes and rotations leaves no client, Secret or registry held', async () => {
    const before = { pool: clients.pool.usage, reconciler: reconciler.usage };
    const tokens = Array.from({ length: 10 }, (_, i) => double.addToken({ login: `churn-${i}` }).token);
    for (let i = 0; i < 10; i++) await putSecret(`churn-${i}`, { github_token: tokens[i]! });
    const names = Array.from({ length: 200 }, (_, i) => `churn-pod-${i}`);
    const secretOf = (i: number) => `churn-${Math.floor(i / 2) % 10}`;
    const orgOf = (i: number) => (i % 3 === 0 ? 'globex' : 'acme');
    for (let batch = 0; batch < names.length; batch += 25) {
      await Promise.all(
        names.slice(batch, batch + 25).map((n, j) =>
          core.createNamespacedPod({
            namespace: ns.name,
            body: runnerPod(n, secretOf(batch + j), orgOf(batch + j)),
          }),
        ),
      );
    }
    await eventually(
      'finalizers on all pods',
      async () => {
        const list = await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'actions-runner' });
        return (
          list.items.filter((p) => names.includes(p.metadata!.name!) && p.metadata?.finalizers?.length)
            .length === 200
        );
      },
      60_000,
    );
    // Half of them start and register; their pods look their runners up through the pool.
    for (let i = 0; i < 200; i += 2) {
      await markRunnerPodRunning(core, ns.name, names[i]!);
      register(names[i]!, orgOf(i));
    }
    await eventually(
      'IDs recorded',
      async () => {
        const list = await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'actions-runner' });
        return (
          list.items.filter(
            (p) => names.includes(p.metadata!.name!) && p.metadata?.annotations?.['actions-runner/id'],
          ).length === 100
        );
      },
      60_000,
    );
    // Only pods that need GitHub hold a client: the 100 running ones, over all 10 Secrets.
    assert.deepEqual(clients.pool.usage, { clients: 10, secrets: 10, resources: 100 });
    assert.ok(reconciler.usage.scopes >= 2, `registries in use: ${JSON.stringify(reconciler.usage)}`);
    // Credentials rotate while the pods go away.
    const rotated = Array.from(
      { length: 10 },
      (_, i) => double.addToken({ login: `churn-rotated-${i}` }).token,
    );
    for (let i = 0; i < 10; i += 2) await putSecret(`churn-${i}`, { github_token: rotated[i]! });
    for (let batch = 0; batch < names.length; batch += 25) {
      await Promise.all(
        names.slice(batch, batch + 25).map((n) => core.deleteNamespacedPod({ name: n, namespace: ns.name })),
      );
    }
    await eventually(
      'all pods gone',
      async () => {
        const list = await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'actions-runner' });
        return list.items.filter((p) => names.includes(p.metadata!.name!)).length === 0;
      },
      120_000,
    );
    assert.equal(
      double.runners().filter((r) => r.name.startsWith('churn-pod-')).length,
      0,
      'every registered runner was unregistered',
    );
    // Deletion events reach the controller through its watch; give it a moment.
    await eventually(
      'usage back to where it started',
      async () =>
        JSON.stringify(clients.pool.usage) === JSON.stringify(before.pool) &&
        reconciler.usage.registries === before.reconciler.registries &&
        reconciler.usage.scopes === before.reconciler.scopes &&
        reconciler.usage.pods === before.reconciler.pods,
      20_000,
    ).catch((e) => {
      throw new Error(
        `${(e as Error).message}: pool ${JSON.stringify(clients.pool.usage)} (was ${JSON.stringify(before.pool)}), controller ${JSON.stringify(reconciler.usage)} (was ${JSON.stringify(before.reconciler)})`,
      );
    });
  });
});
