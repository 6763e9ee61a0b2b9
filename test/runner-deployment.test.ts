import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  RUNNER_DEPLOYMENTS,
  RUNNER_REPLICA_SETS,
  RUNNERS,
  type Runner,
  type RunnerDeployment,
  type RunnerReplicaSet,
} from '../src/api/index.ts';
import type { Paddock } from '../src/cli/run.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { mergePatch } from '../src/runtime/objects.ts';
import { EVENTS, PODS, SECRETS } from '../src/runtime/resources.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import { NodeAgent, type NodeAgentEvent, type PodObject } from '../src/sandbox/node-agent.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { startTestPaddock, stopTestFleet } from './support/paddock.ts';

/**
 * RunnerDeployment → RunnerReplicaSet → Runner → pod end to end (issue 11): a real API server and
 * kube-controller-manager (garbage collector), paddock, the GitHub double, and the simulated kubelet
 * and runners of the sandbox (NodeAgent), which register runners and run jobs.
 */

const REQUEST = 'actions-runner/unregistration-request-timestamp';

describe('RunnerDeployment', () => {
  const ns = namespaceFixture('t-rdeploy');
  const double = new GitHubDouble();
  const agentEvents: NodeAgentEvent[] = [];
  const logLines: string[] = [];
  let http: KubeHttp;
  let agent: NodeAgent;
  let paddock: Paddock | undefined;

  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg('acme');
    const { token } = double.addToken();
    http = new KubeHttp(ns.cluster.kubeConfig);
    ({ paddock } = await startTestPaddock({
      kubeConfig: ns.cluster.kubeConfig,
      namespace: ns.name,
      env: { GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl },
      flags: ['--common-runner-labels', 'paddock-common'],
      logLines,
    }));
    agent = new NodeAgent({
      http,
      namespace: ns.name,
      double,
      startupDelayMs: 300,
      registrationDelayMs: 100,
      assignIntervalMs: 100,
      nodeCount: 2,
      nodePrefix: `${ns.name}-node-`,
      jobDurationMs: 300,
      onEvent: (e) => agentEvents.push(e),
    });
    await agent.start();
  });

  after(() =>
    stopTestFleet({ kubeConfig: ns.cluster.kubeConfig, namespace: ns.name, agent, paddock, http, double }),
  );

  const list = async <T extends KubeObject>(ref: Parameters<typeof resourcePath>[0]) =>
    (await http.request<{ items: T[] }>('GET', resourcePath(ref, ns.name))).items;
  const runnerPods = async () =>
    (await list<PodObject>(PODS)).filter((p) => p.metadata.labels?.['runner-deployment-name'] === 'ci');
  const registered = () => double.runners('orgs/acme');
  const diagnose = async (what: string) => {
    const sets = (await list<RunnerReplicaSet>(RUNNER_REPLICA_SETS).catch(() => []))
      .map((s) => `${s.metadata.name}(spec=${s.spec.replicas},status=${JSON.stringify(s.status ?? {})})`)
      .join(', ');
    const runners = (await list<Runner>(RUNNERS).catch(() => []))
      .map(
        (r) =>
          `${r.metadata.name}(${r.status?.phase ?? '-'}${r.metadata.deletionTimestamp ? ',deleting' : ''}${r.metadata.annotations?.[REQUEST] ? ',asked' : ''})`,
      )
      .join(', ');
    const pods = (await runnerPods().catch(() => []))
      .map(
        (p) =>
          `${p.metadata.name}(${p.status?.phase ?? '?'}${p.metadata.deletionTimestamp ? ',deleting' : ''}${p.metadata.annotations?.[REQUEST] ? ',asked' : ''})`,
      )
      .join(', ');
    const gh = registered()
      .map((r) => `${r.name}(${r.status}${r.busy ? ',busy' : ''})`)
      .join(', ');
    const tail = logLines.filter((l) => /"level":"(info|warn|error)"/.test(l)).slice(-40);
    return `${what}\nsets: ${sets}\nRunners: ${runners}\npods: ${pods}\nGitHub: ${gh}\nlog:\n${tail.join('')}`;
  };
  const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 45_000) =>
    eventually(what, fn, timeoutMs, 200).catch(async (e) => {
      throw new Error(await diagnose((e as Error).message));
    });
  /** The runners of the deployment registered online, by name, once there are `n` of them and nothing else. */
  const settledAt = (n: number, extra?: (pods: PodObject[]) => boolean) =>
    waitFor(`${n} registered runners and ${n} runner pods`, async () => {
      const pods = (await runnerPods()).filter((p) => !p.metadata.deletionTimestamp);
      const online = registered().filter((r) => r.status === 'online');
      const runners = await list<Runner>(RUNNERS);
      return (
        pods.length === n &&
        online.length === n &&
        runners.length === n &&
        online.every((r) => pods.some((p) => p.metadata.name === r.name)) &&
        (extra ? extra(pods) : true) &&
        pods
      );
    });

  const rdPath = (name?: string) => resourcePath(RUNNER_DEPLOYMENTS, ns.name, name);
  const scale = (replicas: number) =>
    mergePatch(
      http,
      RUNNER_DEPLOYMENTS,
      { metadata: { name: 'ci', namespace: ns.name } },
      { spec: { replicas } },
    );

  test('creates Runners and pods that register, with the token only in one Secret their RunnerReplicaSet owns', async () => {
    await http.request('POST', rdPath(), {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'RunnerDeployment',
        metadata: { name: 'ci' },
        spec: {
          replicas: 2,
          template: {
            spec: { organization: 'acme', labels: ['linux'], image: 'summerwind/actions-runner:v2' },
          },
        },
      },
    });
    const pods = await settledAt(2);
    const runners = await list<Runner>(RUNNERS);
    for (const pod of pods) {
      const runner = runners.find((r) => r.metadata.name === pod.metadata.name);
      assert.ok(runner, `a Runner named ${pod.metadata.name}`);
      assert.ok(
        pod.metadata.ownerReferences?.some((o) => o.kind === 'Runner' && o.uid === runner.metadata.uid),
      );
      assert.ok(runner.metadata.finalizers?.includes('runner.actions.summerwind.dev'));
      const env = pod.spec?.containers?.find((c) => c.name === 'runner')?.env ?? [];
      const token = env.find((e) => e.name === 'RUNNER_TOKEN');
      assert.equal(token?.value, undefined, 'no literal token in the pod spec');
      const ref = token?.valueFrom?.secretKeyRef;
      const rrs = runner.metadata.ownerReferences?.find((o) => o.controller && o.kind === 'RunnerReplicaSet');
      assert.ok(rrs, "the Runner is its replica set's");
      // A registration token is the scope's, not a runner's: the replica set's Runners share one Secret.
      assert.equal(ref?.name, `${rrs.name}-runner-token`);
      const secret = await http.request<KubeObject & { data: Record<string, string> }>(
        'GET',
        resourcePath(SECRETS, ns.name, ref!.name!),
      );
      assert.ok(
        secret.metadata.ownerReferences?.some(
          (o) => o.controller && o.kind === 'RunnerReplicaSet' && o.uid === rrs.uid,
        ),
      );
      const value = Buffer.from(secret.data[ref!.key!]!, 'base64').toString('utf8');
      assert.ok(double.model.tokens.has(value), 'the Secret holds a registration token GitHub issued');
      assert.equal(env.find((e) => e.name === 'RUNNER_LABELS')?.value, 'linux,paddock-common');
      // Status: the pod's phase, and when the token expires, but not the token.
      await waitFor('the Runner status to say Running', async () => {
        const r = (await list<Runner>(RUNNERS)).find((x) => x.metadata.name === runner.metadata.name);
        return r?.status?.phase === 'Running' && r.status.ready === true && r;
      }).then((r) => {
        assert.equal(r.status?.registration?.token, '');
        assert.ok(Date.parse(r.status?.registration?.expiresAt ?? '') > Date.now());
        assert.equal(r.status?.registration?.organization, 'acme');
      });
    }
    const tokenSecrets = (await list<KubeObject>(SECRETS)).filter((x) =>
      x.metadata.name?.endsWith('-runner-token'),
    );
    assert.equal(tokenSecrets.length, 1, 'one token Secret for the replica set, none per Runner');
    // The pod webhook is not in the way of a Runner's pod: its pods do not ask for a token.
    assert.ok(pods.every((p) => !p.metadata.labels?.['actions-runner-controller/inject-registration-token']));
    const events = await list<KubeObject & { reason?: string; regarding?: { name?: string } }>(EVENTS);
    assert.ok(
      events.some((e) => e.reason === 'PodCreated'),
      'a PodCreated event',
    );
    const rd = await waitFor('the deployment status', async () => {
      const d = await http.request<RunnerDeployment>('GET', rdPath('ci'));
      return d.status?.availableReplicas === 2 && d.status.desiredReplicas === 2 && d;
    });
    assert.equal(rd.status?.updatedReplicas, 2);
  });

  test('scale up adds runners; scale down removes idle ones from GitHub before their pods, keeps the busy one', async () => {
    await scale(3);
    const pods = await settledAt(3);
    // One runner takes a long job (it ends when the test says so).
    const busy = registered().find((r) => r.name === pods[1]!.metadata.name)!;
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['nonexistent-label'] });
    double.startJob(job.id, busy.id);
    const cancelledBefore = agent.stats().jobsCancelled;
    await new Promise((r) => setTimeout(r, 1500)); // the registry sees it busy
    await scale(1);
    await waitFor('only the busy runner to remain', async () => {
      const left = registered();
      const podsLeft = await runnerPods();
      return left.length === 1 && left[0]!.name === busy.name && podsLeft.length === 1;
    });
    assert.equal(double.model.jobs.get(job.id)?.status, 'in_progress', 'the job runs on');
    assert.equal(
      double.log.filter((e) => e.method === 'DELETE' && e.path.endsWith(`/${busy.id}`)).length,
      0,
      'nobody tried to remove the busy runner',
    );
    // Every removed runner was deleted from GitHub before its pod went (as the simulated kubelet saw it).
    for (const p of pods.filter((x) => x.metadata.name !== busy.name)) {
      const name = p.metadata.name!;
      const gone = await waitFor(`the kubelet to see pod ${name} go`, async () =>
        agentEvents.find((e) => e.type === 'pod-gone' && e.pod === name && e.uid === p.metadata.uid),
      );
      const runnerId = agentEvents.find((e) => e.type === 'runner-registered' && e.pod === name)?.runnerId;
      const removal = double.log.find(
        (e) => e.method === 'DELETE' && e.status === 204 && e.path.endsWith(`/actions/runners/${runnerId}`),
      );
      assert.ok(
        removal && removal.at <= gone.at,
        `runner ${name} was removed from GitHub before its pod went`,
      );
    }
    double.completeJob(job.id);
    // The ephemeral runner exits after its job and is replaced: one runner again.
    await settledAt(1, (ps) => ps[0]!.metadata.name !== busy.name);
    assert.equal(agent.stats().jobsCancelled, cancelledBefore, 'no job was cancelled');
  });

  test('a template rollout waits for the busy runner of the old template to finish its job', async () => {
    await scale(2);
    const before = await settledAt(2);
    const oldSets = await list<RunnerReplicaSet>(RUNNER_REPLICA_SETS);
    assert.equal(oldSets.length, 1);
    const busy = registered().find((r) => r.name === before[0]!.metadata.name)!;
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['nonexistent-label'] });
    double.startJob(job.id, busy.id);
    await mergePatch(
      http,
      RUNNER_DEPLOYMENTS,
      { metadata: { name: 'ci', namespace: ns.name } },
      { spec: { template: { spec: { labels: ['linux', 'v2'] } } } },
    );
    // New runners of the new template come up; the idle old one goes; the busy old one stays.
    await waitFor('two new-template runners and the busy old one', async () => {
      const online = registered().filter((r) => r.status === 'online');
      const fresh = online.filter((r) => r.labels.some((l) => l.name === 'v2'));
      return fresh.length === 2 && online.length === 3 && online.some((r) => r.name === busy.name);
    });
    assert.equal(double.model.jobs.get(job.id)?.status, 'in_progress');
    const sets = await list<RunnerReplicaSet>(RUNNER_REPLICA_SETS);
    assert.equal(sets.length, 2, 'the old set stays while its busy runner works');
    double.completeJob(job.id);
    await waitFor('the old set to be gone', async () => {
      const s = await list<RunnerReplicaSet>(RUNNER_REPLICA_SETS);
      return s.length === 1 && s[0]!.metadata.name !== oldSets[0]!.metadata.name;
    });
    await settledAt(2, (ps) =>
      ps.every((p) => p.spec?.containers?.[0]?.env?.some((e) => e.value === 'linux,v2,paddock-common')),
    );
    assert.equal(double.model.jobs.get(job.id)?.conclusion, 'success');
    const deleted = (await list<KubeObject & { reason?: string }>(EVENTS)).filter(
      (e) => e.reason === 'RunnerReplicaSetDeleted',
    );
    assert.ok(deleted.length >= 1, 'a RunnerReplicaSetDeleted event');
  });

  test('deleting the RunnerDeployment unregisters every runner and leaves nothing behind', async () => {
    assert.ok(ns.cluster.controllerManager, 'needs the garbage collector');
    await http.request('DELETE', rdPath('ci'), { body: { propagationPolicy: 'Background' } });
    await waitFor(
      'no runner registered, no Runner, set, pod or token Secret left',
      async () => {
        const secrets = (await list<KubeObject>(SECRETS)).filter((s) =>
          s.metadata.name?.endsWith('-runner-token'),
        );
        return (
          registered().length === 0 &&
          (await list(RUNNERS)).length === 0 &&
          (await list(RUNNER_REPLICA_SETS)).length === 0 &&
          (await runnerPods()).length === 0 &&
          secrets.length === 0
        );
      },
      // The garbage collector learns of new resource types every 30 s (a fresh control plane).
      90_000,
    );
    assert.equal(agent.leakedRunners().length, 0);
  });
});
