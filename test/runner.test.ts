import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { API_VERSION, RUNNERS, type Runner } from '../src/api/index.ts';
import type { Paddock } from '../src/cli/run.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { EVENTS, PODS, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS } from '../src/runtime/resources.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import { NodeAgent, type NodeAgentEvent, type PodObject } from '../src/sandbox/node-agent.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { startTestPaddock, stopTestFleet } from './support/paddock.ts';

/**
 * A Runner of its own (no replica set) on the real control plane: its pod, the ServiceAccount, Role
 * and RoleBinding of the status-update hook and of container mode kubernetes, a replacement pod when
 * the pod goes (the Runner stays), and a clean exit when the Runner is deleted.
 */

interface Role extends KubeObject {
  rules?: { apiGroups?: string[]; resources?: string[]; verbs?: string[]; resourceNames?: string[] }[];
}

describe('Runner', () => {
  const ns = namespaceFixture('t-runner');
  const double = new GitHubDouble();
  const logLines: string[] = [];
  const agentEvents: NodeAgentEvent[] = [];
  let http: KubeHttp;
  let agent: NodeAgent;
  let paddock: Paddock | undefined;

  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addRepo('acme', 'app');
    const { token } = double.addToken();
    http = new KubeHttp(ns.cluster.kubeConfig);
    ({ paddock } = await startTestPaddock({
      kubeConfig: ns.cluster.kubeConfig,
      namespace: ns.name,
      env: { GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl },
      flags: ['--runner-status-update-hook'],
      logLines,
    }));
    agent = new NodeAgent({
      http,
      namespace: ns.name,
      double,
      startupDelayMs: 300,
      registrationDelayMs: 100,
      assignIntervalMs: 100,
      nodeCount: 1,
      nodePrefix: `${ns.name}-node-`,
      jobDurationMs: 300,
      onEvent: (e) => agentEvents.push(e),
    });
    await agent.start();
  });

  after(() =>
    stopTestFleet({ kubeConfig: ns.cluster.kubeConfig, namespace: ns.name, agent, paddock, http, double }),
  );

  const get = <T>(ref: Parameters<typeof resourcePath>[0], name: string) =>
    http.request<T>('GET', resourcePath(ref, ns.name, name)).catch(() => undefined);
  const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 45_000) =>
    eventually(what, fn, timeoutMs, 200).catch((e) => {
      const tail = logLines.filter((l) => /"level":"(info|warn|error)"/.test(l)).slice(-30);
      throw new Error(
        `${(e as Error).message}\nGitHub: ${double.runners().map((r) => `${r.name}(${r.status})`)}\n${tail.join('')}`,
      );
    });
  const registeredPod = (name: string, notUid?: string) =>
    waitFor(`pod ${name} running with its runner registered`, async () => {
      const pod = await get<PodObject>(PODS, name);
      const online = double.runners('repos/acme/app').find((r) => r.name === name && r.status === 'online');
      return (
        pod && !pod.metadata.deletionTimestamp && pod.metadata.uid !== notUid && online && { pod, online }
      );
    });

  test('a Runner gets its pod and, for the status-update hook, a ServiceAccount, Role and RoleBinding of its own', async () => {
    await http.request('POST', resourcePath(RUNNERS, ns.name), {
      body: {
        apiVersion: API_VERSION,
        kind: 'Runner',
        metadata: { name: 'solo' },
        spec: { repository: 'acme/app' },
      },
    });
    const { pod } = await registeredPod('solo');
    const runner = (await get<Runner>(RUNNERS, 'solo'))!;
    assert.equal((pod.spec as { serviceAccountName?: string }).serviceAccountName, 'solo');
    assert.ok(runner.metadata.finalizers?.includes('runner.actions.summerwind.dev'), 'the Runner finalizer');
    const role = (await get<Role>(ROLES, 'solo'))!;
    assert.deepEqual(role.rules, [
      {
        apiGroups: ['actions.summerwind.dev'],
        resources: ['runners/status'],
        verbs: ['get', 'update', 'patch'],
        resourceNames: ['solo'],
      },
    ]);
    // A standalone Runner's token is in a Secret of its own, which its pod reads.
    const tokenRef = (pod.spec?.containers ?? [])
      .find((c) => c.name === 'runner')
      ?.env?.find((e) => e.name === 'RUNNER_TOKEN')?.valueFrom?.secretKeyRef;
    assert.equal(tokenRef?.name, 'solo-runner-token');
    const tokenSecret = (await get<KubeObject>(SECRETS, 'solo-runner-token'))!;
    assert.ok(
      tokenSecret.metadata.ownerReferences?.some(
        (o) => o.controller && o.kind === 'Runner' && o.uid === runner.metadata.uid,
      ),
      "the token Secret is the Runner's",
    );
    for (const ref of [SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS]) {
      const obj = (await get<KubeObject>(ref, 'solo'))!;
      assert.ok(
        obj.metadata.ownerReferences?.some((o) => o.kind === 'Runner' && o.uid === runner.metadata.uid),
        `${ref.kind} owned by the Runner`,
      );
    }
    const reasons = (
      await http.request<{ items: { reason?: string; regarding?: { name?: string } }[] }>(
        'GET',
        resourcePath(EVENTS, ns.name),
      )
    ).items
      .filter((e) => e.regarding?.name === 'solo')
      .map((e) => e.reason);
    for (const r of [
      'ServiceAccountCreated',
      'RoleCreated',
      'RoleBindingCreated',
      'PodCreated',
      'RegistrationTokenUpdated',
    ]) {
      assert.ok(reasons.includes(r), `event ${r} (have ${reasons.join(', ')})`);
    }
    // With the hook, paddock writes the phase once (when the pod state has settled); the runner's
    // hook owns it from then on.
    await eventually('a phase', async () => (await get<Runner>(RUNNERS, 'solo'))?.status?.phase, 20_000);
  });

  test('its pod deleted directly: the runner is unregistered first, the Runner stays and gets a new pod', async () => {
    const before = (await get<PodObject>(PODS, 'solo'))!;
    const runnerUid = (await get<Runner>(RUNNERS, 'solo'))!.metadata.uid;
    const oldId = double.runners('repos/acme/app').find((r) => r.name === 'solo')!.id;
    await http.request('DELETE', resourcePath(PODS, ns.name, 'solo'));
    const { online } = await registeredPod('solo', before.metadata.uid);
    assert.notEqual(online.id, oldId, 'a new registration');
    assert.ok(
      double.log.some((e) => e.method === 'DELETE' && e.status === 204 && e.path.endsWith(`/${oldId}`)),
      'the old runner was removed from GitHub',
    );
    assert.equal((await get<Runner>(RUNNERS, 'solo'))?.metadata.uid, runnerUid, 'the same Runner');
    const reused = (
      await http.request<{ items: { reason?: string; regarding?: { name?: string } }[] }>(
        'GET',
        resourcePath(EVENTS, ns.name),
      )
    ).items.filter((e) => e.regarding?.name === 'solo' && e.reason === 'ServiceAccountReused');
    assert.ok(reused.length >= 1, 'the ServiceAccount was reused');
  });

  test('an ephemeral runner that finished its job is replaced with a fresh pod of the same Runner', async () => {
    const before = (await get<PodObject>(PODS, 'solo'))!;
    const runner = double.runners('repos/acme/app').find((r) => r.name === 'solo')!;
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['no-such-label'] });
    double.startJob(job.id, runner.id);
    double.completeJob(job.id);
    await registeredPod('solo', before.metadata.uid);
    assert.equal(agent.stats().jobsCancelled, 0);
  });

  test('container mode kubernetes: the Role lets the runner run job pods; the work volume is an ephemeral claim', async () => {
    await http.request('POST', resourcePath(RUNNERS, ns.name), {
      body: {
        apiVersion: API_VERSION,
        kind: 'Runner',
        metadata: { name: 'k8s' },
        spec: {
          repository: 'acme/app',
          containerMode: 'kubernetes',
          workVolumeClaimTemplate: {
            storageClassName: 'standard',
            accessModes: ['ReadWriteOnce'],
            resources: { requests: { storage: '1Gi' } },
          },
        },
      },
    });
    const pod = await waitFor('the kubernetes-mode pod', () => get<PodObject>(PODS, 'k8s'));
    const role = (await get<Role>(ROLES, 'k8s'))!;
    assert.ok(role.rules?.some((r) => r.resources?.includes('pods/exec')));
    assert.ok(
      role.rules?.some((r) => r.resources?.includes('runners/status')),
      'and the hook',
    );
    const volumes = (pod.spec as { volumes?: { name: string; ephemeral?: unknown }[] }).volumes ?? [];
    assert.ok(volumes.some((v) => v.name === 'work' && v.ephemeral));
    assert.ok(!pod.spec?.containers?.some((c) => c.name === 'docker'), 'no docker sidecar');
  });

  test('a Secret of the token Secret’s name that is not the Runner’s is never overwritten: a Warning, no pod', async () => {
    await http.request('POST', resourcePath(SECRETS, ns.name), {
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'taken-runner-token' },
        stringData: { token: 'someone-elses' },
      },
    });
    await http.request('POST', resourcePath(RUNNERS, ns.name), {
      body: {
        apiVersion: API_VERSION,
        kind: 'Runner',
        metadata: { name: 'taken' },
        spec: { repository: 'acme/app' },
      },
    });
    await waitFor('a FailedUpdateRegistrationToken Warning', async () => {
      const events = await http.request<{
        items: { reason?: string; type?: string; note?: string; regarding?: { name?: string } }[];
      }>('GET', resourcePath(EVENTS, ns.name));
      return events.items.find(
        (e) =>
          e.regarding?.name === 'taken' &&
          e.reason === 'FailedUpdateRegistrationToken' &&
          e.type === 'Warning',
      );
    });
    const secret = (await get<KubeObject & { data?: Record<string, string> }>(
      SECRETS,
      'taken-runner-token',
    ))!;
    assert.equal(Buffer.from(secret.data?.token ?? '', 'base64').toString(), 'someone-elses');
    assert.equal(secret.metadata.ownerReferences, undefined);
    assert.equal(await get<PodObject>(PODS, 'taken'), undefined, 'no pod with a token that is not ours');
    await http.request('DELETE', resourcePath(RUNNERS, ns.name, 'taken'));
    await waitFor('the Runner gone', async () => !(await get<Runner>(RUNNERS, 'taken')));
  });

  test('deleting a Runner unregisters its runner, deletes its pod and lets the Runner go', async () => {
    const id = double.runners('repos/acme/app').find((r) => r.name === 'solo')!.id;
    await http.request('DELETE', resourcePath(RUNNERS, ns.name, 'solo'));
    await waitFor('the Runner, its pod and its runner gone', async () => {
      const runner = await get<Runner>(RUNNERS, 'solo');
      const pod = await get<PodObject>(PODS, 'solo');
      return !runner && !pod && !double.runners('repos/acme/app').some((r) => r.name === 'solo');
    });
    assert.ok(double.log.some((e) => e.method === 'DELETE' && e.status === 204 && e.path.endsWith(`/${id}`)));
  });
});
