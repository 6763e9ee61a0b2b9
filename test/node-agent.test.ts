import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { isNotFound } from '../src/runtime/errors.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { NodeAgent, type NodeAgentEvent, type PodObject } from '../src/sandbox/node-agent.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';

interface PodOpts {
  token?: string;
  /** RUNNER_TOKEN from this Secret key (`secretKeyRef`), as the pod webhook sets it. */
  tokenFrom?: { secret: string; key: string };
  jit?: string;
  ephemeral?: boolean;
  labels?: string;
  finalizers?: string[];
}

type ContainerStatus = {
  name: string;
  state?: {
    running?: { startedAt?: string };
    terminated?: { exitCode?: number; reason?: string; message?: string };
  };
};

describe('node agent (simulated kubelet and runners)', () => {
  const ns = namespaceFixture('t-nodeagent');
  const double = new GitHubDouble();
  const durations = new Map<number, number>();
  const events: NodeAgentEvent[] = [];
  let http: KubeHttp;
  let agent: NodeAgent;

  const podsPath = () => `/api/v1/namespaces/${ns.name}/pods`;

  before(async () => {
    double.addOrg('acme');
    http = new KubeHttp(ns.cluster.kubeConfig);
    agent = new NodeAgent({
      http,
      namespace: ns.name,
      double,
      startupDelayMs: 200,
      registrationDelayMs: 100,
      assignIntervalMs: 100,
      nodeCount: 2,
      nodePrefix: `${ns.name}-node-`,
      jobDurationMs: (job) => durations.get(job.id) ?? 300,
      onEvent: (e) => events.push(e),
    });
    await agent.start();
  });

  after(async () => {
    await agent?.stop();
    await agent?.stop();
    if (!http) return;
    // Bound pods would wait for a kubelet forever: force them out so the namespace can go.
    await http.request('DELETE', podsPath(), { query: { gracePeriodSeconds: 0 } }).catch(() => undefined);
    for (const n of agent?.nodeNames ?? []) {
      await http.request('DELETE', `/api/v1/nodes/${n}`).catch(() => undefined);
    }
    http.close();
  });

  const token = () => double.model.issueToken('orgs/acme', 'registration').token;

  async function createPod(name: string, o: PodOpts = {}): Promise<void> {
    const env = [
      { name: 'RUNNER_ORG', value: 'acme' },
      { name: 'RUNNER_NAME', value: name },
      ...(o.ephemeral === undefined ? [] : [{ name: 'RUNNER_EPHEMERAL', value: String(o.ephemeral) }]),
      ...(o.labels ? [{ name: 'RUNNER_LABELS', value: o.labels }] : []),
      ...(o.token ? [{ name: 'RUNNER_TOKEN', value: o.token }] : []),
      ...(o.tokenFrom
        ? [
            {
              name: 'RUNNER_TOKEN',
              valueFrom: { secretKeyRef: { name: o.tokenFrom.secret, key: o.tokenFrom.key } },
            },
          ]
        : []),
      ...(o.jit ? [{ name: 'ACTIONS_RUNNER_INPUT_JITCONFIG', value: o.jit }] : []),
    ];
    await http.request('POST', podsPath(), {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name,
          labels: { 'actions-runner': '' },
          ...(o.finalizers ? { finalizers: o.finalizers } : {}),
        },
        spec: {
          restartPolicy: 'Never',
          containers: [
            { name: 'runner', image: 'summerwind/actions-runner:latest', env },
            { name: 'docker', image: 'docker:dind' },
          ],
        },
      },
    });
  }

  async function getPod(name: string): Promise<PodObject | undefined> {
    try {
      return await http.request<PodObject>('GET', `${podsPath()}/${name}`);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  const statuses = (p: PodObject | undefined) =>
    (p?.status?.containerStatuses ?? []) as unknown as ContainerStatus[];
  const runnerStatus = (p: PodObject | undefined) => statuses(p).find((c) => c.name === 'runner');

  async function runnerExit(name: string): Promise<number> {
    return await eventually(`runner container of ${name} terminated`, async () => {
      const code = runnerStatus(await getPod(name))?.state?.terminated?.exitCode;
      return code === undefined ? undefined : code;
    });
  }

  const registered = (name: string) =>
    eventually(`runner of ${name} registered`, async () => agent.pod(name)?.runner === 'listening', 15_000);

  test('binds runner pods to a simulated node, reports them Running, registers their runners', async () => {
    const { encoded } = double.model.generateJitConfig('orgs/acme', {
      name: 'jit-a',
      runnerGroupId: 1,
      labels: ['self-hosted', 'pool-j'],
    });
    await createPod('eph-a', { token: token(), labels: 'pool-a,GPU' });
    await createPod('static-a', { token: token(), ephemeral: false, labels: 'pool-s' });
    await createPod('jit-a', { jit: encoded });
    await Promise.all(['eph-a', 'static-a', 'jit-a'].map(registered));

    for (const name of ['eph-a', 'static-a', 'jit-a']) {
      const pod = await getPod(name);
      assert.ok(agent.nodeNames.includes(pod?.spec?.nodeName ?? ''), `${name} bound to a simulated node`);
      assert.equal(pod?.status?.phase, 'Running');
      assert.ok(pod?.status?.podIP);
      const conditions = pod?.status?.conditions ?? [];
      for (const type of ['Ready', 'ContainersReady']) {
        assert.equal(conditions.find((c) => c.type === type)?.status, 'True', `${name} ${type}`);
      }
      assert.deepEqual(
        statuses(pod).map((c) => [c.name, Boolean(c.state?.running)]),
        [
          ['runner', true],
          ['docker', true],
        ],
      );
    }
    const eph = double.runnerByName('orgs/acme', 'eph-a');
    assert.equal(eph?.ephemeral, true, 'RUNNER_EPHEMERAL absent means ephemeral');
    assert.equal(eph?.status, 'online');
    assert.deepEqual(
      eph?.labels.map((l) => l.name),
      ['self-hosted', 'Linux', 'X64', 'pool-a', 'GPU'],
    );
    assert.equal(double.runnerByName('orgs/acme', 'static-a')?.ephemeral, false);
    assert.equal(double.runnerByName('orgs/acme', 'jit-a')?.status, 'online');
    assert.equal(double.runnerByName('orgs/acme', 'jit-a')?.jit, false);

    const node = await http.request<{ status: { conditions: { type: string; status: string }[] } }>(
      'GET',
      `/api/v1/nodes/${agent.nodeNames[0]}`,
    );
    assert.equal(node.status.conditions.find((c) => c.type === 'Ready')?.status, 'True');
    assert.ok(agent.stats().runnersRegistered >= 3);
  });

  test('a matching job runs on the ephemeral runner, which then exits 0 and leaves GitHub', async () => {
    const unmatched = double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted', 'pool-none'] });
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted', 'POOL-A', 'gpu'] });
    durations.set(job.id, 500);
    await eventually('job started', async () => double.model.jobs.get(job.id)?.status === 'in_progress');
    assert.equal(double.model.jobs.get(job.id)?.runner_name, 'eph-a');
    assert.equal(double.runnerByName('orgs/acme', 'eph-a')?.busy, true);
    await eventually('job completed', async () => double.model.jobs.get(job.id)?.status === 'completed');
    assert.equal(double.model.jobs.get(job.id)?.conclusion, 'success');

    assert.equal(await runnerExit('eph-a'), 0);
    const pod = await getPod('eph-a');
    assert.equal(pod?.status?.phase, 'Running', 'the docker sidecar still runs');
    assert.ok(runnerStatus(pod) && statuses(pod).find((c) => c.name === 'docker')?.state?.running);
    assert.equal(double.runnerByName('orgs/acme', 'eph-a'), undefined, 'GitHub removed the ephemeral runner');
    assert.equal(double.model.jobs.get(unmatched.id)?.status, 'queued', 'no runner has pool-none');

    const timeline = events.filter((e) => e.pod === 'eph-a').map((e) => e.type);
    assert.deepEqual(timeline, [
      'pod-seen',
      'pod-started',
      'runner-registered',
      'job-started',
      'job-completed',
      'runner-exited',
    ]);
    const exited = events.find((e) => e.pod === 'eph-a' && e.type === 'runner-exited');
    assert.equal(exited?.exitCode, 0);
    assert.equal(exited?.reason, 'job-finished');
  });

  test('a static runner takes jobs one after another and stays registered', async () => {
    const jobs = [1, 2].map(() => double.createJob({ owner: 'acme', repo: 'app', labels: ['pool-s'] }));
    await eventually(
      'both jobs completed',
      async () => jobs.every((j) => double.model.jobs.get(j.id)?.status === 'completed'),
      15_000,
    );
    assert.ok(jobs.every((j) => double.model.jobs.get(j.id)?.runner_name === 'static-a'));
    const runner = double.runnerByName('orgs/acme', 'static-a');
    assert.equal(runner?.status, 'online');
    assert.equal(runner?.busy, false);
    assert.ok(runnerStatus(await getPod('static-a'))?.state?.running, 'the runner keeps running');
    assert.equal(agent.pod('static-a')?.runner, 'listening');
  });

  const putSecret = (name: string, data: Record<string, string>) =>
    http.request('POST', `/api/v1/namespaces/${ns.name}/secrets`, {
      body: {
        metadata: { name },
        data: Object.fromEntries(
          Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
        ),
      },
    });

  test('RUNNER_TOKEN from a Secret key: read from the API server as the kubelet would, and the runner registers', async () => {
    await putSecret('from-secret-token', { 'registration-token': token() });
    await createPod('from-secret', { tokenFrom: { secret: 'from-secret-token', key: 'registration-token' } });
    await registered('from-secret');
    assert.equal(double.runnerByName('orgs/acme', 'from-secret')?.status, 'online');
  });

  test('a pod whose token Secret does not exist yet stays Pending until the Secret appears', async () => {
    const failuresBefore = agent.stats().registrationFailures;
    await createPod('late-secret', { tokenFrom: { secret: 'late-secret-token', key: 'registration-token' } });
    await eventually('the agent to see the pod', async () => agent.pod('late-secret') !== undefined);
    await new Promise((r) => setTimeout(r, 1500)); // past the start-up delay and one retry
    assert.equal(agent.pod('late-secret')?.started, false);
    assert.notEqual((await getPod('late-secret'))?.status?.phase, 'Running');
    assert.equal(agent.stats().registrationFailures, failuresBefore);
    await putSecret('late-secret-token', { 'registration-token': token() });
    await registered('late-secret');
    assert.equal((await getPod('late-secret'))?.status?.phase, 'Running');
  });
  test('an invalid or missing registration token: the runner container exits 1', async () => {
    const before = agent.stats().registrationFailures;
    await createPod('bad-token', { token: 'NOT-A-TOKEN' });
    await createPod('no-token');
    assert.equal(await runnerExit('bad-token'), 1);
    assert.equal(await runnerExit('no-token'), 1);
    assert.match(runnerStatus(await getPod('bad-token'))?.state?.terminated?.message ?? '', /not valid/);
    assert.equal(agent.stats().registrationFailures, before + 2);
    assert.equal(double.runnerByName('orgs/acme', 'bad-token'), undefined);
  });

  test('chaos: crashRunner and takeRunnerOffline', async () => {
    await createPod('crash-a', { token: token(), labels: 'pool-c' });
    await createPod('offline-a', { token: token(), labels: 'pool-o' });
    await Promise.all(['crash-a', 'offline-a'].map(registered));

    agent.crashRunner('crash-a');
    assert.equal(await runnerExit('crash-a'), 137);
    assert.equal(double.runnerByName('orgs/acme', 'crash-a')?.status, 'offline');

    agent.takeRunnerOffline('offline-a');
    assert.equal(double.runnerByName('orgs/acme', 'offline-a')?.status, 'offline');
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['pool-o'] });
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(double.model.jobs.get(job.id)?.status, 'queued', 'an offline runner takes no job');
    assert.ok(runnerStatus(await getPod('offline-a'))?.state?.running, 'its container keeps running');
    assert.throws(() => agent.crashRunner('no-such-pod'), /not known/);
  });

  test('the simulated kubelet confirms a deletion once no finalizer is left; a leaked runner is reported', async () => {
    await createPod('del-a', { token: token(), ephemeral: false, finalizers: ['example.com/hold'] });
    await registered('del-a');
    const deletedBefore = agent.stats().podsDeletedByKubelet;
    await http.request('DELETE', `${podsPath()}/del-a`);
    await eventually('deletion seen', async () => agent.pod('del-a')?.deleting);
    await new Promise((r) => setTimeout(r, 500));
    assert.ok((await getPod('del-a'))?.metadata.deletionTimestamp, 'held by its finalizer');
    await http.request('PATCH', `${podsPath()}/del-a`, {
      body: { metadata: { finalizers: null } },
      contentType: 'application/merge-patch+json',
    });
    await eventually('pod gone', async () => (await getPod('del-a')) === undefined);
    // The agent counts when its DELETE answer arrives, which can be after our GET saw the pod gone.
    await eventually('deletion confirmed by the kubelet', async () =>
      agent.stats().podsDeletedByKubelet === deletedBefore + 1 ? true : undefined,
    );
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(agent.stats().podsDeletedByKubelet, deletedBefore + 1, 'confirmed once');
    await eventually('pod-gone event', async () =>
      events.some((e) => e.pod === 'del-a' && e.type === 'pod-gone'),
    );
    // Nobody (no paddock here) unregistered the static runner: it is left behind in GitHub, offline.
    const leaked = agent.leakedRunners().find((l) => l.pod === 'del-a');
    assert.equal(leaked?.runner.name, 'del-a');
    assert.equal(leaked?.runner.status, 'offline');
    assert.ok(agent.stats().leakedRunners >= 1);
  });

  test('a deletion held past its grace period: the kubelet kills what still runs, the finalizer keeps the object', async () => {
    await createPod('grace-a', { token: token(), ephemeral: false, finalizers: ['example.com/hold'] });
    await registered('grace-a');
    const killedBefore = agent.stats().runnersKilledAtGraceEnd;
    await http.request('DELETE', `${podsPath()}/grace-a`, { query: { gracePeriodSeconds: 3 } });
    assert.equal(await runnerExit('grace-a'), 137);
    const pod = await getPod('grace-a');
    assert.ok(pod?.metadata.deletionTimestamp, 'still held by its finalizer');
    // Not killed when the deletion was seen but when its grace period ended (the timestamp is cut to the
    // second, so it lies 2-3 s after the DELETE; a kill on sight would be that much before it).
    const killedAt = events.find((e) => e.pod === 'grace-a' && e.type === 'runner-exited')?.at ?? 0;
    const graceEnd = Date.parse(pod.metadata.deletionTimestamp);
    assert.ok(killedAt >= graceEnd - 50, `killed ${graceEnd - killedAt} ms before its grace period ended`);
    assert.ok(statuses(pod).find((c) => c.name === 'docker')?.state?.terminated, 'the sidecar is killed too');
    assert.equal(double.runnerByName('orgs/acme', 'grace-a')?.status, 'offline');
    assert.equal(agent.stats().runnersKilledAtGraceEnd, killedBefore + 1);
    const exited = events.find((e) => e.pod === 'grace-a' && e.type === 'runner-exited');
    assert.equal(exited?.reason, 'grace-period-ended');
    await http.request('PATCH', `${podsPath()}/grace-a`, {
      body: { metadata: { finalizers: null } },
      contentType: 'application/merge-patch+json',
    });
    await eventually('pod gone', async () => (await getPod('grace-a')) === undefined);
  });

  test('jobs are cancelled when their pod is force-deleted or their runner removed from GitHub mid-job', async () => {
    const cancelledBefore = agent.stats().jobsCancelled;
    await createPod('busy-a', { token: token(), labels: 'pool-busy' });
    await createPod('vanish-a', { token: token(), ephemeral: false, labels: 'pool-vanish' });
    await Promise.all(['busy-a', 'vanish-a'].map(registered));
    const j1 = double.createJob({ owner: 'acme', repo: 'app', labels: ['pool-busy'] });
    const j2 = double.createJob({ owner: 'acme', repo: 'app', labels: ['pool-vanish'] });
    durations.set(j1.id, 60_000);
    durations.set(j2.id, 60_000);
    await eventually('both running', async () =>
      [j1, j2].every((j) => double.model.jobs.get(j.id)?.status === 'in_progress'),
    );

    await http.request('DELETE', `${podsPath()}/busy-a`, { query: { gracePeriodSeconds: 0 } });
    await eventually('job 1 cancelled', async () => double.model.jobs.get(j1.id)?.conclusion === 'cancelled');
    assert.equal(
      double.runnerByName('orgs/acme', 'busy-a'),
      undefined,
      'the ephemeral runner went with its job',
    );

    double.vanishRunner(double.runnerByName('orgs/acme', 'vanish-a')!.id);
    assert.equal(double.model.jobs.get(j2.id)?.conclusion, 'cancelled');
    assert.equal(await runnerExit('vanish-a'), 0, 'run.sh ends when its registration is gone');
    assert.equal(agent.stats().jobsCancelled, cancelledBefore + 2);
    assert.ok(events.some((e) => e.type === 'job-cancelled' && e.jobId === j1.id));
  });

  test('a pod on a lost node is frozen: its deletion is never confirmed', async () => {
    await createPod('lost-a', { token: token(), labels: 'pool-lost' });
    await registered('lost-a');
    const node = agent.pod('lost-a')!.node!;
    await agent.loseNode(node);
    assert.equal(agent.pod('lost-a')?.lost, true);
    assert.equal(double.runnerByName('orgs/acme', 'lost-a')?.status, 'offline');
    const n = await http.request<{ status: { conditions: { type: string; status: string }[] } }>(
      'GET',
      `/api/v1/nodes/${node}`,
    );
    assert.equal(n.status.conditions.find((c) => c.type === 'Ready')?.status, 'Unknown');

    await http.request('DELETE', `${podsPath()}/lost-a`);
    await new Promise((r) => setTimeout(r, 1500));
    const pod = await getPod('lost-a');
    assert.ok(pod?.metadata.deletionTimestamp, 'still there, Terminating');
    assert.deepEqual(pod?.metadata.finalizers ?? [], []);
    assert.ok(runnerStatus(pod)?.state?.running, 'no status updates either');
  });
});
