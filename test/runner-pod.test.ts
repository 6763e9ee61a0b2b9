import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import {
  DEFAULT_RUNNER_POD_SETTINGS,
  type GitHubClientSource,
  RunnerPodReconciler,
  type RunnerPodSettings,
} from '../src/controllers/runner-pod.ts';
import { GitHubClient } from '../src/github/index.ts';
import { realClock } from '../src/runtime/clock.ts';
import { silentLogger } from '../src/runtime/log.ts';
import { Manager } from '../src/runtime/manager.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture, type TestCluster } from './support/cluster.ts';
import { markRunnerExited, markRunnerPodRunning } from './support/pods.ts';

const SETTINGS: RunnerPodSettings = {
  registrationRecheckIntervalMs: 1500,
  registrationRecheckJitterMs: 200,
  registrationTimeoutMs: 8000,
  unregistrationRetryDelayMs: 1000,
  forceDeleteTimeoutMs: 2000,
  githubUnavailableTimeoutMs: 4000,
};

interface RunnerPodOpts {
  ephemeral?: boolean;
  nodeName?: string;
  containerMode?: boolean;
  org?: string;
  noRunnerContainer?: boolean;
  noScope?: boolean;
}

function runnerPodBody(name: string, o: RunnerPodOpts = {}): V1Pod {
  const env = [
    ...(o.noScope ? [] : [{ name: 'RUNNER_ORG', value: o.org ?? 'acme' }]),
    { name: 'RUNNER_EPHEMERAL', value: String(o.ephemeral ?? true) },
    ...(o.containerMode ? [{ name: 'ACTIONS_RUNNER_CONTAINER_HOOKS', value: '/runner/k8s/index.js' }] : []),
  ];
  return {
    metadata: { name, labels: { 'actions-runner': '' } },
    spec: {
      ...(o.nodeName ? { nodeName: o.nodeName } : {}),
      restartPolicy: 'Never',
      containers: [
        { name: o.noRunnerContainer ? 'main' : 'runner', image: 'summerwind/actions-runner:latest', env },
        { name: 'docker', image: 'docker:dind' },
      ],
    },
  };
}

describe('runner pod controller', { concurrency: true }, () => {
  const ns = namespaceFixture('t-runnerpod');
  const double = new GitHubDouble();
  const limitedDouble = new GitHubDouble();
  let cluster: TestCluster;
  let core: CoreV1Api;
  let manager: Manager;
  let reconciler: RunnerPodReconciler;
  let token: string;
  let limitedToken: string;
  let clients: GitHubClient[] = [];

  function startManager(): { manager: Manager; reconciler: RunnerPodReconciler } {
    const log = silentLogger();
    const makeClient = (d: GitHubDouble, t: string) =>
      new GitHubClient({
        credentials: { kind: 'token', token: t },
        endpoints: { apiUrl: d.apiUrl },
        clock: realClock,
        logger: log,
        maxRetries: 1,
      });
    const main = makeClient(double, token);
    const limited = makeClient(limitedDouble, limitedToken);
    clients = [main, limited];
    const source: GitHubClientSource = {
      clientFor: async (pod) => (pod.name.startsWith('limited-') ? limited : main),
      release: () => undefined,
    };
    const m = new Manager({ kubeConfig: cluster.kubeConfig, log });
    const r = new RunnerPodReconciler({ manager: m, github: source, namespace: ns.name, settings: SETTINGS });
    return { manager: m, reconciler: r };
  }

  before(async () => {
    cluster = ns.cluster;
    core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    for (const d of [double, limitedDouble]) {
      d.cacheMaxAgeSeconds = 1;
      await d.start();
      d.addOrg('acme');
      d.addOrg('recheck');
    }
    token = double.addToken({ login: 'main' }).token;
    limitedToken = limitedDouble.addToken({ login: 'limited' }).token;
    ({ manager, reconciler } = startManager());
    await manager.start();
  });

  after(async () => {
    reconciler?.stop();
    await manager?.stop();
    for (const c of clients) c.close();
    await double.stop();
    await limitedDouble.stop();
  });

  const getPod = async (name: string) => {
    try {
      return await core.readNamespacedPod({ name, namespace: ns.name });
    } catch (e) {
      if ((e as { code?: number }).code === 404) return undefined;
      throw e;
    }
  };

  async function createPod(name: string, o: RunnerPodOpts = {}) {
    const pod = await core.createNamespacedPod({ namespace: ns.name, body: runnerPodBody(name, o) });
    if (!o.noRunnerContainer && !o.noScope) {
      await eventually(`finalizer on ${name}`, async () =>
        (await getPod(name))?.metadata?.finalizers?.includes('actions.summerwind.dev/runner-pod'),
      );
    }
    return pod;
  }

  async function setStatus(
    name: string,
    status: 'running' | 'exited0' | 'crashed',
    restarted = false,
    exitCode = 137,
  ) {
    const now = new Date().toISOString();
    const runnerState =
      status === 'running'
        ? { running: { startedAt: now } }
        : {
            terminated: {
              exitCode: status === 'exited0' ? 0 : exitCode,
              reason: 'Completed',
              startedAt: now,
              finishedAt: now,
            },
          };
    await core.patchNamespacedPodStatus(
      {
        name,
        namespace: ns.name,
        body: {
          status: {
            phase: 'Running',
            conditions: [
              { type: 'Ready', status: status === 'running' ? 'True' : 'False', lastTransitionTime: now },
            ],
            containerStatuses: [
              {
                name: 'runner',
                image: 'summerwind/actions-runner:latest',
                imageID: '',
                ready: status === 'running',
                restartCount: restarted ? 1 : 0,
                state: runnerState,
                ...(restarted
                  ? {
                      lastState: {
                        terminated: { exitCode: 137, reason: 'OOMKilled', startedAt: now, finishedAt: now },
                      },
                    }
                  : {}),
              },
            ],
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  function register(d: GitHubDouble, name: string, ephemeral = true) {
    const t = d.model.issueToken('orgs/acme', 'registration');
    return d.registerRunner({ registrationToken: t.token, name, ephemeral });
  }

  async function registeredPod(name: string, o: RunnerPodOpts = {}, d = double) {
    await createPod(name, o);
    await setStatus(name, 'running');
    const runner = register(d, name, o.ephemeral ?? true);
    await eventually(
      `runner ID on ${name}`,
      async () => (await getPod(name))?.metadata?.annotations?.['actions-runner/id'] === String(runner.id),
    );
    return runner;
  }

  async function events(name: string): Promise<{ reason: string; note: string; type: string }[]> {
    const list = await manager.http.request<{
      items: { reason: string; note: string; type: string; regarding: { name: string } }[];
    }>('GET', `/apis/events.k8s.io/v1/namespaces/${ns.name}/events`);
    return list.items.filter((e) => e.regarding.name === name);
  }

  const deleteCallsFor = (d: GitHubDouble, id: number) =>
    d.log.filter((e) => e.method === 'DELETE' && e.path.endsWith(`/actions/runners/${id}`)).length;

  test('records the runner ID once the runner has registered', async () => {
    const runner = await registeredPod('id-recorded');
    const pod = await getPod('id-recorded');
    assert.equal(pod?.metadata?.annotations?.['actions-runner/id'], String(runner.id));
    assert.equal(pod?.metadata?.annotations?.['paddock.dev/wait-reason'], undefined, 'no wait left behind');
  });

  test('registration is rechecked at most once per interval, and lookups share list calls', async () => {
    const names = Array.from({ length: 8 }, (_, i) => `recheck-${i}`);
    // A scope of their own: the other tests of this file run concurrently and list 'acme'.
    await Promise.all(names.map((n) => createPod(n, { org: 'recheck' })));
    await Promise.all(names.map((n) => setStatus(n, 'running')));
    const checkOf = async (n: string) =>
      (await getPod(n))?.metadata?.annotations?.['actions-runner-controller/last-registration-check-time'];
    // The first check comes an interval after the runner container started (none before it).
    await eventually(
      'every pod checked once',
      async () => (await Promise.all(names.map(checkOf))).every(Boolean),
      30_000,
    );
    // The first check that finds no runner says so (before the 8 s registration timeout replaces it).
    assert.equal(
      (await getPod('recheck-0'))?.metadata?.annotations?.['paddock.dev/wait-reason'],
      'registration-pending',
    );
    await eventually('RegistrationPending event', async () =>
      (await events('recheck-0')).some((e) => e.reason === 'RegistrationPending'),
    );
    const checks = new Map<string, Set<string>>();
    const listsOfScope = () =>
      double.log.filter((e) => e.path.startsWith('/orgs/recheck/actions/runners')).length;
    const listsBefore = listsOfScope();
    const t0 = Date.now();
    while (Date.now() - t0 < 4000) {
      for (const n of names) {
        const v = await checkOf(n);
        if (v) (checks.get(n) ?? checks.set(n, new Set()).get(n)!).add(v);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    const lists = listsOfScope() - listsBefore;
    // At least 4 s: on a loaded machine the last round of reads can run past it.
    const seconds = (Date.now() - t0) / 1000;
    for (const n of names) {
      const distinct = checks.get(n)?.size ?? 0;
      // A 1.5 s interval (+ jitter): 4 checks at most in 4 s, second-resolution timestamps.
      assert.ok(distinct <= Math.floor(seconds / 1.5) + 2, `${n}: ${distinct} checks in ${seconds} s`);
    }
    // One list per registry refresh (1 s max-age), however many pods look their runner up (7 in 4
    // s); a lookup per pod and check would be about 8 × seconds / 1.5.
    assert.ok(lists <= Math.floor(seconds) + 3, `${lists} list calls for 8 pods in ${seconds} s`);
  });

  test('a pod whose runner never registers is replaced after the registration timeout', async () => {
    // Taken before the create: the timeout counts from creationTimestamp, which is truncated to the
    // second, so the deletion comes at least timeout − 1 s after this.
    const beforeCreate = Date.now();
    await createPod('never-registers');
    await setStatus('never-registers', 'running');
    await eventually('pod deleted', async () => (await getPod('never-registers')) === undefined, 30_000);
    const took = Date.now() - beforeCreate;
    assert.ok(took >= SETTINGS.registrationTimeoutMs - 1000, `deleted after ${took} ms, before the timeout`);
    const ev = await eventually('events', async () => {
      const list = await events('never-registers');
      return list.some((e) => e.reason === 'PodDeleted') ? list : undefined;
    });
    const warning = ev.find((e) => e.reason === 'RegistrationTimeout');
    assert.equal(warning?.type, 'Warning');
    assert.match(warning?.note ?? '', /did not register with GitHub within/);
    assert.ok(ev.some((e) => e.reason === 'PodDeleted'));
  });

  test('a finished pod is gracefully stopped and replaced by its StatefulSet', async () => {
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    const body = runnerPodBody('ignored');
    delete body.spec!.restartPolicy; // StatefulSets only allow Always
    await apps.createNamespacedStatefulSet({
      namespace: ns.name,
      body: {
        metadata: { name: 'finisher' },
        spec: {
          replicas: 1,
          serviceName: 'finisher',
          podManagementPolicy: 'Parallel',
          selector: { matchLabels: { 'runnerset-name': 'finisher' } },
          template: {
            metadata: { labels: { 'runnerset-name': 'finisher', 'actions-runner': '' } },
            spec: body.spec!,
          },
        },
      },
    });
    const first = await eventually('finisher-0', async () => getPod('finisher-0'));
    await eventually(
      'finalizer',
      async () => (await getPod('finisher-0'))?.metadata?.finalizers?.length === 1,
    );
    await setStatus('finisher-0', 'running');
    const runner = register(double, 'finisher-0');
    await eventually(
      'id',
      async () =>
        (await getPod('finisher-0'))?.metadata?.annotations?.['actions-runner/id'] === String(runner.id),
    );
    double.startJob(double.createJob({ owner: 'acme', repo: 'app', labels: [] }).id, runner.id);
    // The job ends, GitHub removes the ephemeral runner, the runner container exits 0.
    double.completeJob([...double.model.jobs.values()].find((j) => j.runner_id === runner.id)!.id);
    await setStatus('finisher-0', 'exited0');
    const replacement = await eventually(
      'replacement pod',
      async () => {
        const p = await getPod('finisher-0');
        return p && p.metadata?.uid !== first.metadata?.uid ? p : undefined;
      },
      30_000,
    );
    assert.equal(replacement.metadata?.annotations?.['actions-runner/id'], undefined);
    assert.equal(deleteCallsFor(double, runner.id), 0, 'a stopped runner is not removed again (row 6)');
    await apps.deleteNamespacedStatefulSet({ name: 'finisher', namespace: ns.name });
  });

  test('scale-down of an idle runner: 204, then the pod goes', async () => {
    const runner = await registeredPod('idle-down');
    await core.deleteNamespacedPod({ name: 'idle-down', namespace: ns.name });
    await eventually('pod gone', async () => (await getPod('idle-down')) === undefined);
    assert.equal(
      double.runners().some((r) => r.id === runner.id),
      false,
      'runner unregistered from GitHub',
    );
    assert.equal(deleteCallsFor(double, runner.id), 1);
    await eventually('Unregistered event', async () =>
      (await events('idle-down')).some((e) => e.reason === 'Unregistered'),
    );
  });

  test('an owner’s unregistration request records start and complete, and keeps the pod for the owner', async () => {
    const runner = await registeredPod('owner-request');
    await core.patchNamespacedPod(
      {
        name: 'owner-request',
        namespace: ns.name,
        body: {
          metadata: {
            annotations: { 'actions-runner/unregistration-request-timestamp': new Date().toISOString() },
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const pod = await eventually('complete', async () => {
      const p = await getPod('owner-request');
      return p?.metadata?.annotations?.['actions-runner/unregistration-complete-timestamp'] ? p : undefined;
    });
    assert.ok(pod.metadata?.annotations?.['actions-runner/unregistration-start-timestamp']);
    assert.equal(pod.metadata?.deletionTimestamp, undefined, 'the owner deletes it, not us');
    assert.equal(
      double.runners().some((r) => r.id === runner.id),
      false,
    );
  });

  test('a busy static runner is retried and never deleted while busy', async () => {
    const runner = await registeredPod('busy-static', { ephemeral: false });
    double.setRunnerBusy(runner.id, true);
    await core.deleteNamespacedPod({ name: 'busy-static', namespace: ns.name });
    await eventually('two refused removals', async () => deleteCallsFor(double, runner.id) >= 3, 20_000);
    const pod = await getPod('busy-static');
    assert.ok(pod, 'pod kept while the runner is busy');
    assert.ok(pod.metadata?.deletionTimestamp);
    assert.equal(
      pod.metadata?.annotations?.['actions-runner/unregistration-failure-message'],
      'Bad request - Runner "busy-static" is still running a job',
    );
    assert.equal(pod.metadata?.annotations?.['paddock.dev/wait-reason'], 'runner-busy');
    assert.ok(
      double.runners().some((r) => r.id === runner.id),
      'runner still registered',
    );
    await eventually('RunnerBusy event', async () =>
      (await events('busy-static')).some((e) => e.reason === 'RunnerBusy'),
    );
    double.setRunnerBusy(runner.id, false);
    await eventually('pod gone once idle', async () => (await getPod('busy-static')) === undefined, 20_000);
    assert.equal(
      double.runners().some((r) => r.id === runner.id),
      false,
    );
  });

  test('a busy ephemeral runner waits for its job instead of being removed', async () => {
    const runner = await registeredPod('busy-ephemeral');
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: [] });
    double.startJob(job.id, runner.id);
    await core.deleteNamespacedPod({ name: 'busy-ephemeral', namespace: ns.name });
    await eventually('waiting for completion', async () =>
      Boolean(
        (await getPod('busy-ephemeral'))?.metadata?.annotations?.[
          'actions-runner/runner-completion-wait-start-timestamp'
        ],
      ),
    );
    const callsWhileWaiting = deleteCallsFor(double, runner.id);
    await new Promise((r) => setTimeout(r, 3000));
    assert.ok(await getPod('busy-ephemeral'), 'kept while the job runs');
    assert.equal(
      deleteCallsFor(double, runner.id),
      callsWhileWaiting,
      'no more removal calls while waiting (row 7)',
    );
    double.completeJob(job.id);
    await setStatus('busy-ephemeral', 'exited0');
    await eventually(
      'pod gone after the job',
      async () => (await getPod('busy-ephemeral')) === undefined,
      20_000,
    );
  });

  test('a busy ephemeral runner on a lost node: once GitHub fails its job, the pod goes', async () => {
    const runner = await registeredPod('busy-lost', { nodeName: 'node-that-went-away' });
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: [] });
    double.startJob(job.id, runner.id);
    double.model.setRunnerState(runner.id, { status: 'offline' });
    await core.deleteNamespacedPod({ name: 'busy-lost', namespace: ns.name, gracePeriodSeconds: 1 });
    await eventually('waiting for completion', async () =>
      Boolean(
        (await getPod('busy-lost'))?.metadata?.annotations?.[
          'actions-runner/runner-completion-wait-start-timestamp'
        ],
      ),
    );
    await new Promise((r) => setTimeout(r, 2 * SETTINGS.unregistrationRetryDelayMs + 500));
    assert.ok(await getPod('busy-lost'), 'kept while GitHub still shows the job running');
    // GitHub gives up on the runner ("lost communication"): the job fails and the ephemeral runner
    // is removed. The pod's status never changes: no kubelet reports the container's exit.
    double.completeJob(job.id, 'failure');
    await eventually(
      'pod gone after the job failed',
      async () => (await getPod('busy-lost')) === undefined,
      30_000,
    );
    assert.ok((await events('busy-lost')).some((e) => e.reason === 'RunnerGone'));
  });

  test('403 on removal: treated as unregistered, with a Warning', async () => {
    const runner = await registeredPod('forbidden');
    double.injectFault({
      route: 'DELETE /orgs/{org}/actions/runners/{runner_id}',
      pathSuffix: `/actions/runners/${runner.id}`,
      status: 403,
      times: 1,
    });
    await core.deleteNamespacedPod({ name: 'forbidden', namespace: ns.name });
    await eventually('pod gone', async () => (await getPod('forbidden')) === undefined);
    const warning = await eventually('warning', async () =>
      (await events('forbidden')).find((e) => e.reason === 'UnregistrationFailed'),
    );
    assert.equal(warning.type, 'Warning');
    assert.match(warning?.note ?? '', /treating it as unregistered/);
    assert.ok(
      double.runners().some((r) => r.id === runner.id),
      'the runner stays in GitHub (user told to clean up)',
    );
    double.vanishRunner(runner.id);
  });

  test('a runner that vanished from GitHub: 404, confirmed by a fresh list, the pod goes', async () => {
    const runner = await registeredPod('vanished');
    double.vanishRunner(runner.id);
    await core.deleteNamespacedPod({ name: 'vanished', namespace: ns.name });
    await eventually('pod gone', async () => (await getPod('vanished')) === undefined);
    await eventually('RunnerGone event', async () =>
      (await events('vanished')).some((e) => e.reason === 'RunnerGone'),
    );
  });

  test('under churn, pages that never agree: one lookup by name proves the runner absent, the pod goes', async () => {
    double.addOrg('churn');
    const registerIn = (name: string) => {
      const t = double.model.issueToken('orgs/churn', 'registration');
      return double.registerRunner({ registrationToken: t.token, name });
    };
    for (let i = 0; i < 120; i++) registerIn(`churn-fleet-${i}`);
    // A runner registers between page 1 and page 2 of every whole listing: they never agree.
    let joined = 0;
    const stop = double.duringRunnerListings((scope, page) => {
      if (scope === 'orgs/churn' && page === 2) registerIn(`churn-joined-${joined++}`);
    });
    try {
      await createPod('churn-crashed', { org: 'churn' });
      await setStatus('churn-crashed', 'crashed', false, 1);
      await core.deleteNamespacedPod({ name: 'churn-crashed', namespace: ns.name });
      await eventually('pod gone', async () => (await getPod('churn-crashed')) === undefined, 20_000);
      assert.ok(joined > 0, 'the whole listings disagreed');
      const lookups = double.log.filter(
        (e) => e.route === 'GET /orgs/{org}/actions/runners' && e.path.includes('name=churn-crashed'),
      );
      assert.ok(lookups.length >= 1, 'asked GitHub for the name');
    } finally {
      stop();
    }
  });

  test('rate limit exhausted: nothing is deleted until the reset', async () => {
    const runner = await registeredPod('limited-1', {}, limitedDouble);
    limitedDouble.setRateLimit(limitedToken, { remaining: 0, resetInMs: 5000 });
    const resetAt = Date.now() + 5000;
    await core.deleteNamespacedPod({ name: 'limited-1', namespace: ns.name });
    await eventually(
      'waiting for the reset',
      async () =>
        (await getPod('limited-1'))?.metadata?.annotations?.['paddock.dev/wait-reason'] === 'rate-limited',
    );
    assert.ok(
      limitedDouble.runners().some((r) => r.id === runner.id),
      'runner still registered',
    );
    const refused = limitedDouble.log.filter((e) => e.status === 403).length;
    await new Promise((r) => setTimeout(r, 2000));
    assert.ok(await getPod('limited-1'), 'pod kept while GitHub cannot be asked');
    assert.ok(
      limitedDouble.log.filter((e) => e.status === 403).length <= refused + 1,
      'no hammering while limited',
    );
    await eventually('RateLimited event', async () =>
      (await events('limited-1')).some((e) => e.reason === 'RateLimited' && e.type === 'Warning'),
    );
    await eventually(
      'pod gone after the reset',
      async () => (await getPod('limited-1')) === undefined,
      20_000,
    );
    assert.ok(Date.now() >= resetAt - 500);
    assert.equal(
      limitedDouble.runners().some((r) => r.id === runner.id),
      false,
    );
  });

  test('a pod on a lost node is force-deleted after the timeout', async () => {
    await createPod('lost-node', { nodeName: 'node-that-went-away' });
    // deletionTimestamp = request time + grace period; the force-delete timeout counts from there.
    // Before the request: deletionTimestamp is truncated to the second and a slow answer must not
    // move the reference later.
    const asked = Date.now();
    await core.deleteNamespacedPod({ name: 'lost-node', namespace: ns.name, gracePeriodSeconds: 3 });
    await eventually(
      'finalizer removed',
      async () => ((await getPod('lost-node'))?.metadata?.finalizers ?? []).length === 0,
    );
    assert.ok(await getPod('lost-node'), 'no kubelet confirms the deletion');
    await eventually('force-deleted', async () => (await getPod('lost-node')) === undefined, 20_000);
    assert.ok(Date.now() - asked >= 3000 + SETTINGS.forceDeleteTimeoutMs - 1000, 'not before the timeout');
    const ev = await eventually('PodDeleted event', async () =>
      (await events('lost-node')).find((e) => e.reason === 'PodDeleted'),
    );
    assert.equal(ev.note, "Forcefully deleted pod 'lost-node'");
  });

  test('container mode: job pods and secrets are cleaned up before the runner pod goes', async () => {
    await createPod('hooks', { containerMode: true });
    const pod = await eventually('both finalizers', async () => {
      const p = await getPod('hooks');
      return p?.metadata?.finalizers?.includes('actions.summerwind.dev/linked-resources') ? p : undefined;
    });
    assert.deepEqual([...(pod.metadata?.finalizers ?? [])].sort(), [
      'actions.summerwind.dev/linked-resources',
      'actions.summerwind.dev/runner-pod',
    ]);
    await core.createNamespacedPod({
      namespace: ns.name,
      body: {
        metadata: { name: 'hooks-workflow', labels: { 'runner-pod': 'hooks' } },
        spec: { containers: [{ name: 'job', image: 'alpine' }] },
      },
    });
    await core.createNamespacedSecret({
      namespace: ns.name,
      body: { metadata: { name: 'hooks-secret', labels: { 'runner-pod': 'hooks' } } },
    });
    await core.deleteNamespacedPod({ name: 'hooks', namespace: ns.name });
    await eventually('runner pod gone', async () => (await getPod('hooks')) === undefined);
    assert.equal(await getPod('hooks-workflow'), undefined);
    await assert.rejects(
      core.readNamespacedSecret({ name: 'hooks-secret', namespace: ns.name }),
      (e: { code?: number }) => e.code === 404,
    );
  });

  test('a runner that crashes with exit 1 before registering is replaced, with a Warning and no GitHub call', async () => {
    await createPod('crash-early');
    await setStatus('crash-early', 'running');
    await setStatus('crash-early', 'crashed', false, 1);
    await eventually('pod deleted', async () => (await getPod('crash-early')) === undefined, 20_000);
    const ev = await eventually('events', async () => {
      const list = await events('crash-early');
      return list.some((e) => e.reason === 'PodDeleted') ? list : undefined;
    });
    const crashed = ev.find((e) => e.reason === 'RunnerCrashed');
    assert.equal(crashed?.type, 'Warning');
    assert.match(crashed?.note ?? '', /exited with code 1/);
  });

  test('a pod deleted before its runner registers finishes deleting: never started, or stopped by the kubelet', async () => {
    // Scale-up followed by scale-down: the pod never got a node.
    await createPod('deleted-pending');
    await core.deleteNamespacedPod({ name: 'deleted-pending', namespace: ns.name });
    await eventually('pending pod gone', async () => (await getPod('deleted-pending')) === undefined);
    // kubectl delete / a drain of a running pod whose runner had not registered yet: the kubelet
    // stops the runner (SIGTERM, exit 143) and reports it not ready.
    await createPod('deleted-running');
    await setStatus('deleted-running', 'running');
    await core.deleteNamespacedPod({ name: 'deleted-running', namespace: ns.name });
    await eventually('waiting while the runner may still register', async () =>
      Boolean(
        (await getPod('deleted-running'))?.metadata?.annotations?.[
          'actions-runner/unregistration-start-timestamp'
        ],
      ),
    );
    await setStatus('deleted-running', 'crashed', false, 143);
    await eventually(
      'running pod gone once stopped',
      async () => (await getPod('deleted-running')) === undefined,
      20_000,
    );
  });

  test('a user-set runner ID that names another runner never removes that runner', async () => {
    const other = register(double, 'someone-elses-runner', false);
    await core.createNamespacedPod({
      namespace: ns.name,
      body: {
        ...runnerPodBody('wrong-id'),
        metadata: {
          name: 'wrong-id',
          labels: { 'actions-runner': '' },
          annotations: { 'actions-runner/id': String(other.id) },
        },
      },
    });
    await eventually('finalizer', async () => (await getPod('wrong-id'))?.metadata?.finalizers?.length === 1);
    await setStatus('wrong-id', 'running');
    const own = register(double, 'wrong-id');
    await eventually(
      'ID corrected to the pod’s own runner',
      async () => (await getPod('wrong-id'))?.metadata?.annotations?.['actions-runner/id'] === String(own.id),
    );
    await core.deleteNamespacedPod({ name: 'wrong-id', namespace: ns.name });
    await eventually('pod gone', async () => (await getPod('wrong-id')) === undefined);
    assert.equal(deleteCallsFor(double, other.id), 0, 'the other runner was never asked to leave');
    assert.ok(
      double.runners().some((r) => r.id === other.id),
      'and is still registered',
    );
    assert.equal(deleteCallsFor(double, own.id), 1);
    assert.ok(
      (await events('wrong-id')).some((e) => e.reason === 'RunnerIdCorrected' && e.type === 'Warning'),
    );
    double.vanishRunner(other.id);
  });

  test('a Pending pod waiting for a node is not recycled by the registration timeout', async () => {
    await createPod('waits-for-node');
    // No kubelet ever starts it: the timeout counts from the runner container's start, so it never runs.
    await new Promise((r) => setTimeout(r, SETTINGS.registrationTimeoutMs + 3000));
    const pod = await getPod('waits-for-node');
    assert.ok(pod && !pod.metadata?.deletionTimestamp, 'still there');
    assert.ok(!(await events('waits-for-node')).some((e) => e.reason === 'RegistrationTimeout'));
    await core.deleteNamespacedPod({ name: 'waits-for-node', namespace: ns.name });
  });

  test('a pod without a runner container or without a scope gets a Warning Event and no finalizer', async () => {
    await createPod('no-runner', { noRunnerContainer: true });
    await createPod('no-scope', { noScope: true });
    for (const name of ['no-runner', 'no-scope']) {
      const ev = await eventually(`${name} warning`, async () =>
        (await events(name)).find((e) => e.reason === 'InvalidRunnerPod'),
      );
      assert.equal(ev.type, 'Warning');
      assert.deepEqual((await getPod(name))?.metadata?.finalizers ?? [], []);
    }
    assert.match((await events('no-scope'))[0]?.note ?? '', /RUNNER_ORG/);
  });
});

describe('runner pod controller restarted mid-unregistration', () => {
  const ns = namespaceFixture('t-runnerpod-restart');
  const double = new GitHubDouble();
  let token: string;
  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg('acme');
    token = double.addToken().token;
  });
  after(() => double.stop());

  function start(cluster: TestCluster) {
    const log = silentLogger();
    const client = new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { apiUrl: double.apiUrl },
      clock: realClock,
      logger: log,
    });
    const manager = new Manager({ kubeConfig: cluster.kubeConfig, log });
    const reconciler = new RunnerPodReconciler({
      manager,
      namespace: ns.name,
      settings: { ...DEFAULT_RUNNER_POD_SETTINGS, ...SETTINGS },
      github: { clientFor: async () => client, release: () => undefined },
    });
    return {
      manager,
      async stop() {
        reconciler.stop();
        await manager.stop();
        client.close();
      },
    };
  }

  test('resumes from the annotations', async () => {
    const core = ns.cluster.kubeConfig.makeApiClient(CoreV1Api);
    const get = () => core.readNamespacedPod({ name: 'resume', namespace: ns.name });
    let ctl = start(ns.cluster);
    await ctl.manager.start();
    try {
      await core.createNamespacedPod({ namespace: ns.name, body: runnerPodBody('resume') });
      await eventually('finalizer', async () => (await get()).metadata?.finalizers?.length === 1);
      await markRunnerPodRunning(core, ns.name, 'resume');
      const t = double.model.issueToken('orgs/acme', 'registration');
      const runner = double.registerRunner({ registrationToken: t.token, name: 'resume', ephemeral: true });
      await eventually(
        'id',
        async () => (await get()).metadata?.annotations?.['actions-runner/id'] === String(runner.id),
      );
      const job = double.createJob({ owner: 'acme', repo: 'app', labels: [] });
      double.startJob(job.id, runner.id);
      await core.deleteNamespacedPod({ name: 'resume', namespace: ns.name });
      const waiting = await eventually('waiting', async () => {
        const p = await get();
        return p.metadata?.annotations?.['actions-runner/runner-completion-wait-start-timestamp']
          ? p
          : undefined;
      });
      const startedAt = waiting.metadata?.annotations?.['actions-runner/unregistration-start-timestamp'];

      // The controller goes away mid-unregistration; the job finishes meanwhile.
      await ctl.stop();
      const removals = () =>
        double.log.filter((e) => e.method === 'DELETE' && e.path.endsWith(`/${runner.id}`)).length;
      // Usually one; a reconcile that read the pod before its wait annotation reached the cache may
      // have been refused a second time.
      const refusedBeforeRestart = removals();
      assert.ok(refusedBeforeRestart >= 1, 'the busy runner was asked to leave and refused');
      double.completeJob(job.id);
      await markRunnerExited(core, ns.name, 'resume');
      await new Promise((r) => setTimeout(r, 1500));
      assert.ok(await get(), 'nothing removes the pod while no controller runs');

      ctl = start(ns.cluster);
      await ctl.manager.start();
      await eventually('pod gone after restart', async () => {
        try {
          const p = await get();
          assert.equal(
            p.metadata?.annotations?.['actions-runner/unregistration-start-timestamp'],
            startedAt,
            'start kept',
          );
          return false;
        } catch (e) {
          return (e as { code?: number }).code === 404;
        }
      });
      assert.equal(
        removals(),
        refusedBeforeRestart,
        'no removal after the restart: the resumed stop went straight to row 6',
      );
    } finally {
      await ctl.stop();
    }
  });
});

describe('runner pod controller with a runner list cached longer than the registration timeout', () => {
  const ns = namespaceFixture('t-runnerpod-stale');
  // GitHub's own max-age: a cached list may be up to a minute old.
  const double = new GitHubDouble();
  const settings: RunnerPodSettings = {
    ...SETTINGS,
    registrationRecheckIntervalMs: 1000,
    registrationRecheckJitterMs: 100,
    registrationTimeoutMs: 3000,
  };
  let manager: Manager;
  let reconciler: RunnerPodReconciler;
  let client: GitHubClient;

  before(async () => {
    double.cacheMaxAgeSeconds = 60;
    await double.start();
    double.addOrg('acme');
    const { token } = double.addToken();
    const log = silentLogger();
    client = new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { apiUrl: double.apiUrl },
      clock: realClock,
      logger: log,
    });
    manager = new Manager({ kubeConfig: ns.cluster.kubeConfig, log });
    reconciler = new RunnerPodReconciler({
      manager,
      namespace: ns.name,
      settings,
      github: { clientFor: async () => client, release: () => undefined },
    });
    await manager.start();
  });
  after(async () => {
    reconciler?.stop();
    await manager?.stop();
    client?.close();
    await double.stop();
  });

  test('a runner that registered a second after its pod started is not judged "never registered"', async () => {
    const core = ns.cluster.kubeConfig.makeApiClient(CoreV1Api);
    const get = () => core.readNamespacedPod({ name: 'late-registrant', namespace: ns.name });
    await core.createNamespacedPod({ namespace: ns.name, body: runnerPodBody('late-registrant') });
    await eventually('finalizer', async () => (await get()).metadata?.finalizers?.length === 1);
    await markRunnerPodRunning(core, ns.name, 'late-registrant');
    // The first check lists the runners (none yet) and caches that answer for a minute.
    await eventually('first registration check', async () =>
      Boolean(
        (await get()).metadata?.annotations?.['actions-runner-controller/last-registration-check-time'],
      ),
    );
    await new Promise((r) => setTimeout(r, 1000));
    const t = double.model.issueToken('orgs/acme', 'registration');
    const runner = double.registerRunner({
      registrationToken: t.token,
      name: 'late-registrant',
      ephemeral: true,
    });
    // Past the deadline and the checks after it.
    await new Promise((r) => setTimeout(r, settings.registrationTimeoutMs + 3000));
    const pod = await get();
    assert.equal(pod.metadata?.deletionTimestamp, undefined, 'not replaced');
    assert.equal(pod.metadata?.annotations?.['actions-runner/id'], String(runner.id), 'seen on a fresh list');
    assert.ok(
      double.runners().some((r) => r.id === runner.id),
      'and not leaked by a replacement',
    );
    await core.deleteNamespacedPod({ name: 'late-registrant', namespace: ns.name });
    await eventually('pod gone', async () => {
      try {
        await get();
        return false;
      } catch (e) {
        return (e as { code?: number }).code === 404;
      }
    });
    assert.ok(!double.runners().some((r) => r.id === runner.id), 'unregistered on deletion');
  });
});
