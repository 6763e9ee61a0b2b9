import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  RUNNER_DEPLOYMENTS,
  RUNNER_REPLICA_SETS,
  RUNNERS,
  type Runner,
  type RunnerReplicaSet,
} from '../src/api/index.ts';
import type { Paddock } from '../src/cli/run.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { mergePatch } from '../src/runtime/objects.ts';
import { PODS } from '../src/runtime/resources.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import { NodeAgent, type PodObject } from '../src/sandbox/node-agent.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { ARC_HASH, type ArcFleetMember, createArcFleet } from './support/arc-fleet.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { startTestPaddock, stopTestFleet } from './support/paddock.ts';

/**
 * Taking over from a running ARC (issue 11 item 4): the RunnerDeployment, RunnerReplicaSet, Runners
 * and pods are created as ARC leaves them (its hash, finalizers, annotations, labels, owner
 * references, its token in the Runner status and as a literal in the pod), with their runners
 * registered and online. paddock starts, and must not orphan, delete, recreate or re-register
 * anything; then the fleet scales down and up under paddock.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('adopting what ARC left', () => {
  const ns = namespaceFixture('t-adopt');
  const double = new GitHubDouble();
  const logLines: string[] = [];
  let http: KubeHttp;
  let agent: NodeAgent | undefined;
  let paddock: Paddock | undefined;
  const adopted: ArcFleetMember[] = [];
  let rrs: RunnerReplicaSet;

  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg('acme');
    http = new KubeHttp(ns.cluster.kubeConfig);
  });

  after(() =>
    stopTestFleet({ kubeConfig: ns.cluster.kubeConfig, namespace: ns.name, agent, paddock, http, double }),
  );

  const list = async <T extends KubeObject>(ref: Parameters<typeof resourcePath>[0]) =>
    (await http.request<{ items: T[] }>('GET', resourcePath(ref, ns.name))).items;
  const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 45_000) =>
    eventually(what, fn, timeoutMs, 200).catch(async (e) => {
      const runners = (await list<Runner>(RUNNERS)).map((r) => r.metadata.name).join(', ');
      const pods = (await list<PodObject>(PODS))
        .map((p) => `${p.metadata.name}(${p.status?.phase})`)
        .join(', ');
      const gh = double.runners('orgs/acme').map((r) => `${r.name}(${r.status})`);
      throw new Error(
        `${(e as Error).message}\nRunners: ${runners}\npods: ${pods}\nGitHub: ${gh}\n${logLines
          .filter((l) => /"level":"(info|warn|error)"/.test(l))
          .slice(-30)
          .join('')}`,
      );
    });

  test('ARC objects are created as ARC leaves them', async () => {
    const fleet = await createArcFleet({
      http,
      namespace: ns.name,
      double,
      organization: 'acme',
      nodeName: `${ns.name}-node-0`,
      replicas: 2,
    });
    rrs = fleet.replicaSet;
    adopted.push(...fleet.members);
  });

  test('paddock takes over without deleting, recreating or re-registering anything', async () => {
    const { token } = double.addToken();
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
    });
    await agent.start();
    const requestsBefore = double.log.length;
    ({ paddock } = await startTestPaddock({
      kubeConfig: ns.cluster.kubeConfig,
      namespace: ns.name,
      env: { GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl },
      logLines,
    }));
    // The ARC token leaves the Runner status: a sign that paddock reconciled the Runners.
    await waitFor('the Runners reconciled (ARC token scrubbed from their status)', async () =>
      (await list<Runner>(RUNNERS)).every((r) => r.status?.registration?.token === ''),
    );
    await sleep(3000); // a few more rounds of every controller
    const sets = await list<RunnerReplicaSet>(RUNNER_REPLICA_SETS);
    assert.deepEqual(
      sets.map((s) => s.metadata.uid),
      [rrs.metadata.uid],
      'the ARC set is the current one: no new set was rolled out',
    );
    const runners = await list<Runner>(RUNNERS);
    assert.deepEqual(
      runners.map((r) => r.metadata.uid).sort(),
      adopted.map((a) => a.runner.metadata.uid).sort(),
      'the same Runners',
    );
    const pods = await list<PodObject>(PODS);
    assert.deepEqual(
      pods.map((p) => p.metadata.uid).sort(),
      adopted.map((a) => a.pod.metadata.uid).sort(),
      'the same pods',
    );
    assert.ok(pods.every((p) => !p.metadata.deletionTimestamp));
    assert.deepEqual(
      double
        .runners('orgs/acme')
        .map((r) => r.id)
        .sort(),
      adopted.map((a) => a.runnerId).sort(),
      'the same GitHub runners',
    );
    const writes = double.log.slice(requestsBefore).filter((e) => e.method !== 'GET');
    assert.deepEqual(
      writes.map((e) => `${e.method} ${e.route}`),
      [],
      'no GitHub writes: nothing removed, no token asked for',
    );
    const rd = await http.request<{ status?: { replicas?: number; availableReplicas?: number } }>(
      'GET',
      resourcePath(RUNNER_DEPLOYMENTS, ns.name, 'ci'),
    );
    assert.equal(rd.status?.replicas, 2);
  });

  test('then the fleet scales down and up under paddock', async () => {
    const scale = (replicas: number) =>
      mergePatch(
        http,
        RUNNER_DEPLOYMENTS,
        { metadata: { name: 'ci', namespace: ns.name } },
        { spec: { replicas } },
      );
    await scale(1);
    await waitFor('one runner left, removed from GitHub first', async () => {
      const left = double.runners('orgs/acme');
      const pods = await list<PodObject>(PODS);
      const runners = await list<Runner>(RUNNERS);
      return left.length === 1 && pods.length === 1 && runners.length === 1;
    });
    const removed = adopted.find((a) => !double.runners('orgs/acme').some((r) => r.id === a.runnerId))!;
    assert.ok(
      double.log.some(
        (e) => e.method === 'DELETE' && e.status === 204 && e.path.endsWith(`/${removed.runnerId}`),
      ),
      'the removed runner was unregistered',
    );
    const kept = adopted.find((a) => a !== removed)!;
    assert.equal(
      (await list<PodObject>(PODS))[0]!.metadata.uid,
      kept.pod.metadata.uid,
      'the other pod is untouched',
    );

    await scale(3);
    await waitFor('three registered runners', async () => {
      const online = double.runners('orgs/acme').filter((r) => r.status === 'online');
      const pods = (await list<PodObject>(PODS)).filter((p) => !p.metadata.deletionTimestamp);
      return online.length === 3 && pods.length === 3;
    });
    const sets = await list<RunnerReplicaSet>(RUNNER_REPLICA_SETS);
    assert.deepEqual(
      sets.map((s) => s.metadata.uid),
      [rrs.metadata.uid],
      'still the one set ARC created',
    );
    const fresh = (await list<Runner>(RUNNERS)).filter(
      (r) => !adopted.some((a) => a.runner.metadata.uid === r.metadata.uid),
    );
    assert.equal(fresh.length, 2);
    assert.ok(fresh.every((r) => r.metadata.labels?.['runner-template-hash'] === ARC_HASH));
  });
});
