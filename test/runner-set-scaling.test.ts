import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AppsV1Api, CoreV1Api, type V1Pod, type V1StatefulSet, Watch } from '@kubernetes/client-node';
import { RUNNER_SETS } from '../src/api/index.ts';
import { installCrds, type Paddock } from '../src/cli/run.ts';
import { type GitHubClientSource, RunnerPodReconciler } from '../src/controllers/runner-pod.ts';
import { DEFAULT_RUNNER_POD_DEFAULTS } from '../src/controllers/runner-pod-spec.ts';
import { RunnerSetReconciler } from '../src/controllers/runner-set.ts';
import { GitHubClient } from '../src/github/index.ts';
import { realClock } from '../src/runtime/clock.ts';
import type { ReconcileContext, ReconcileResult } from '../src/runtime/controller.ts';
import type { KubeHttp } from '../src/runtime/kube-http.ts';
import { createLogger } from '../src/runtime/log.ts';
import { Manager } from '../src/runtime/manager.ts';
import { mergePatch } from '../src/runtime/objects.ts';
import { GitHubDouble, type JobRecord } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { deleteTestWebhookConfiguration, startTestPaddock } from './support/paddock.ts';
import { markRunnerPodRunning, markRunnerSucceeded } from './support/pods.ts';

/**
 * RunnerSet scale-down and template rollouts end to end (issue 10 items 7, 13, 14): a real API server
 * and kube-controller-manager (StatefulSet controller, garbage collector), paddock's runner pod and
 * RunnerSet controllers, the GitHub double, and a small simulated kubelet.
 */

const REQUEST = 'actions-runner/unregistration-request-timestamp';
const COMPLETE = 'actions-runner/unregistration-complete-timestamp';
const WAITING = 'actions-runner/runner-completion-wait-start-timestamp';
const ID = 'actions-runner/id';

const envEntry = (pod: V1Pod, name: string) =>
  pod.spec?.containers.find((c) => c.name === 'runner')?.env?.find((e) => e.name === name);
const imageOf = (spec: { containers?: { name: string; image?: string }[] } | undefined) =>
  spec?.containers?.find((c) => c.name === 'runner')?.image;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What both suites need: listing, waiting with diagnostics, a simulated kubelet, RunnerSet writes. */
function fleet(o: {
  namespace: string;
  core: CoreV1Api;
  apps: AppsV1Api;
  http: KubeHttp;
  double: GitHubDouble;
  logLines: string[];
  kubeConfig: ConstructorParameters<typeof Watch>[0];
}) {
  const { namespace, core, apps, double, logLines } = o;
  const runnerPods = async (set: string) =>
    (await core.listNamespacedPod({ namespace, labelSelector: `runnerset-name=${set}` })).items;
  const statefulSets = async (set: string) =>
    (await apps.listNamespacedStatefulSet({ namespace })).items.filter((s) =>
      s.metadata?.ownerReferences?.some((r) => r.kind === 'RunnerSet' && r.name === set),
    );
  const githubRunners = (set: string) =>
    double.runners('orgs/acme').filter((r) => r.name.startsWith(`${set}-`));

  const diagnose = async (set: string, what: string) => {
    const short = (a: Record<string, string> | undefined) =>
      [
        a?.[ID] ? `id=${a[ID]}` : '',
        a?.[REQUEST] ? 'asked' : '',
        a?.[WAITING] ? 'waiting-for-job' : '',
        a?.[COMPLETE] ? 'unregistered' : '',
      ]
        .filter(Boolean)
        .map((x) => `,${x}`)
        .join('');
    const sets = (await statefulSets(set).catch(() => [] as V1StatefulSet[]))
      .map(
        (s) =>
          `${s.metadata?.name}(${imageOf(s.spec?.template.spec)},status.replicas=${s.status?.replicas ?? 0}${s.metadata?.deletionTimestamp ? ',deleting' : ''}${short(s.metadata?.annotations)})`,
      )
      .join(', ');
    const pods = (await runnerPods(set).catch(() => [] as V1Pod[]))
      .map(
        (p) =>
          `${p.metadata?.name}(${p.status?.phase ?? '?'},${imageOf(p.spec)},uid=${p.metadata?.uid?.slice(0, 8)}${p.metadata?.deletionTimestamp ? ',deleting' : ''}${short(p.metadata?.annotations)})`,
      )
      .join(', ');
    const runners = githubRunners(set)
      .map((r) => `${r.name}(${r.status}${r.busy ? ',busy' : ''})`)
      .join(', ');
    const tail = logLines.filter(
      (l) =>
        l.includes('"controller":"runnerset-controller"') ||
        /"level":"(info|warn|error)"/.test(l) ||
        l.startsWith('kubelet:'),
    );
    return `${what}\nStatefulSets: ${sets}\npods: ${pods}\nGitHub runners: ${runners}\npaddock log tail:\n${tail.slice(-40).join('')}`;
  };
  const waitFor = <T>(
    set: string,
    what: string,
    fn: () => Promise<T | undefined | false>,
    timeoutMs = 45_000,
  ) =>
    eventually(what, fn, timeoutMs, 200).catch(async (e) => {
      throw new Error(await diagnose(set, (e as Error).message));
    });

  /**
   * Plays the kubelet and the runner's configuration step for every runner pod of the namespace: a
   * moment after a pod appears (image pull), unless it is being deleted by then, it reports it
   * Running and registers its runner with the token the webhook injected (a literal value, or a
   * reference to a Secret); without a webhook, with a token issued for the test.
   */
  function startKubelet(startDelayMs = 1500) {
    const firstSeen = new Map<string, number>();
    const started = new Set<string>();
    let stopped = false;
    const token = async (pod: V1Pod) => {
      const e = envEntry(pod, 'RUNNER_TOKEN');
      const ref = e?.valueFrom?.secretKeyRef;
      if (ref) {
        const secret = await core.readNamespacedSecret({ name: ref.name!, namespace });
        const data = secret.data?.[ref.key];
        return data === undefined
          ? secret.stringData?.[ref.key]
          : Buffer.from(data, 'base64').toString('utf8');
      }
      return e?.value ?? double.model.issueToken('orgs/acme', 'registration').token;
    };
    const tick = async () => {
      const pods = (
        await core.listNamespacedPod({
          namespace,
          labelSelector: 'actions-runner-controller/inject-registration-token=true',
        })
      ).items;
      for (const pod of pods) {
        const uid = pod.metadata!.uid!;
        if (
          started.has(uid) ||
          pod.metadata?.deletionTimestamp ||
          (pod.status?.phase ?? 'Pending') !== 'Pending'
        )
          continue;
        const seen = firstSeen.get(uid) ?? Date.now();
        firstSeen.set(uid, seen);
        if (Date.now() - seen < startDelayMs) continue;
        started.add(uid);
        await markRunnerPodRunning(core, namespace, pod.metadata!.name!);
        double.registerRunner({
          registrationToken: (await token(pod))!,
          name: envEntry(pod, 'RUNNER_NAME')?.value ?? pod.metadata!.name!,
          ephemeral: envEntry(pod, 'RUNNER_EPHEMERAL')?.value !== 'false',
          replace: true,
        });
      }
    };
    const loop = (async () => {
      while (!stopped) {
        await tick().catch((err) => logLines.push(`kubelet: ${String(err)}\n`));
        await sleep(200);
      }
    })();
    return {
      async stop() {
        stopped = true;
        await loop;
      },
    };
  }

  /** Watches one pod; remembers any sign of its deletion (DELETE) while `busy()` holds. */
  async function watchDeletion(uid: string, busy: () => boolean) {
    const seen: string[] = [];
    const ctl = await new Watch(o.kubeConfig).watch(
      `/api/v1/namespaces/${namespace}/pods`,
      {},
      (type, pod: V1Pod) => {
        if (pod.metadata?.uid !== uid) return;
        if ((pod.metadata.deletionTimestamp || type === 'DELETED') && busy()) {
          seen.push(`${type} ${pod.metadata.deletionTimestamp ?? ''}`);
        }
      },
      () => undefined,
    );
    return { deletedWhileBusy: seen, stop: () => ctl.abort() };
  }

  async function createRunnerSet(name: string, replicas: number, image: string) {
    await o.http.request('POST', `/apis/actions.summerwind.dev/v1alpha1/namespaces/${namespace}/runnersets`, {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'RunnerSet',
        metadata: { name },
        spec: {
          replicas,
          organization: 'acme',
          labels: ['linux'],
          // A runner-only pod: its phase is Succeeded once the runner exits.
          dockerEnabled: false,
          selector: { matchLabels: { app: name } },
          serviceName: name,
          template: {
            metadata: { labels: { app: name } },
            spec: { containers: [{ name: 'runner', image }] },
          },
        },
      },
    });
  }
  const patchRunnerSet = (name: string, spec: unknown) =>
    mergePatch(o.http, RUNNER_SETS, { metadata: { name, namespace } }, { spec });
  const deleteRunnerSet = (name: string) =>
    o.http.request(
      'DELETE',
      `/apis/actions.summerwind.dev/v1alpha1/namespaces/${namespace}/runnersets/${name}`,
    );

  /** Waits until `count` runner pods of `set` run and are registered (ID recorded by paddock). */
  const registered = (set: string, count: number, image?: string) =>
    waitFor(set, `${count} registered runners of ${set}`, async () => {
      const pods = (await runnerPods(set)).filter(
        (p) =>
          !p.metadata?.deletionTimestamp &&
          p.status?.phase === 'Running' &&
          p.metadata?.annotations?.[ID] &&
          (image === undefined || imageOf(p.spec) === image),
      );
      return pods.length === count ? pods : undefined;
    });

  /** A job on each runner pod's runner. */
  const busy = (pods: V1Pod[]): JobRecord[] =>
    pods.map((p) => {
      const runner = double.runnerByName('orgs/acme', p.metadata!.name!)!;
      const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['linux'] });
      double.startJob(job.id, runner.id);
      return job;
    });

  return {
    runnerPods,
    statefulSets,
    githubRunners,
    diagnose,
    waitFor,
    startKubelet,
    watchDeletion,
    createRunnerSet,
    patchRunnerSet,
    deleteRunnerSet,
    registered,
    busy,
  };
}

describe('RunnerSet template rollout end to end (paddock run: webhook, runner pod and RunnerSet controllers)', () => {
  const ns = namespaceFixture('t-rs-rollout');
  const double = new GitHubDouble();
  let paddock: Paddock;
  const logLines: string[] = [];
  let core: CoreV1Api;
  let f: ReturnType<typeof fleet>;

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
    f = fleet({
      namespace: ns.name,
      core,
      apps: ns.cluster.kubeConfig.makeApiClient(AppsV1Api),
      http: paddock.manager.http,
      double,
      logLines,
      kubeConfig: ns.cluster.kubeConfig,
    });
  });

  after(async () => {
    await paddock?.stop();
    await deleteTestWebhookConfiguration(ns.cluster.kubeConfig, ns.name);
    await double.stop();
  });

  test('a template rollout never deletes a busy runner: it finishes its job; the idle runners are replaced by the new template', async () => {
    const kubelet = f.startKubelet();
    try {
      await f.createRunnerSet('rollout', 3, 'runner:v1');
      const oldPods = await f.registered('rollout', 3, 'runner:v1');
      const busyPod = oldPods[1]!;
      const busyName = busyPod.metadata!.name!;
      const busyRunner = double.runnerByName('orgs/acme', busyName)!;
      const idleNames = oldPods.filter((p) => p !== busyPod).map((p) => p.metadata!.name!);
      const [job] = f.busy([busyPod]);
      const jobRunning = () => job!.status !== 'completed';
      const watch = await f.watchDeletion(busyPod.metadata!.uid!, jobRunning);
      const removedWhileBusy: string[] = [];
      const unsubscribe = double.model.on((e) => {
        if (e.type === 'runner-removed' && e.runner.id === busyRunner.id && jobRunning()) {
          removedWhileBusy.push(e.reason);
        }
      });
      try {
        await f.patchRunnerSet('rollout', {
          template: {
            metadata: { labels: { app: 'rollout' } },
            spec: { containers: [{ name: 'runner', image: 'runner:v2' }] },
          },
        });
        // The new template reaches the desired count; then the idle old runners unregister and go.
        await f.registered('rollout', 3, 'runner:v2');
        await f.waitFor('rollout', 'the idle runners of the old template unregistered and gone', async () => {
          const names = f.githubRunners('rollout').map((r) => r.name);
          const pods = await f.runnerPods('rollout');
          const oldIdle = pods.filter(
            (p) => idleNames.includes(p.metadata!.name!) && imageOf(p.spec) === 'runner:v1',
          );
          return idleNames.every((n) => !names.includes(n)) && oldIdle.length === 0;
        });
        // Several owner-sync rounds later (sync period 5 s) the busy runner is still there, untouched.
        await sleep(6000);
        const still = (await f.runnerPods('rollout')).find((p) => p.metadata?.uid === busyPod.metadata?.uid);
        assert.ok(still, await f.diagnose('rollout', 'the busy runner’s pod still exists'));
        assert.equal(
          still.metadata?.deletionTimestamp,
          undefined,
          'the busy runner’s pod is not being deleted',
        );
        assert.ok(still.metadata?.annotations?.[REQUEST], 'it was asked to unregister');
        assert.ok(
          double.runnerByName('orgs/acme', busyName)?.busy,
          'the busy runner is still registered and busy',
        );
        assert.deepEqual(watch.deletedWhileBusy, [], 'nobody deleted the busy runner’s pod');

        // The job ends: the ephemeral runner leaves GitHub and exits; only the new template is left.
        double.completeJob(job!.id);
        await markRunnerSucceeded(core, ns.name, busyName);
        await f.waitFor('rollout', 'only runners of the new template', async () => {
          const sets = await f.statefulSets('rollout');
          const pods = (await f.runnerPods('rollout')).filter((p) => !p.metadata?.deletionTimestamp);
          const runners = f.githubRunners('rollout').map((r) => r.name);
          return (
            sets.length === 3 &&
            sets.every((s) => imageOf(s.spec?.template.spec) === 'runner:v2') &&
            pods.length === 3 &&
            pods.every((p) => imageOf(p.spec) === 'runner:v2' && p.metadata?.annotations?.[ID]) &&
            runners.length === 3 &&
            pods.every((p) => runners.includes(p.metadata!.name!))
          );
        });
      } finally {
        watch.stop();
        unsubscribe();
      }
      assert.deepEqual(watch.deletedWhileBusy, [], 'the busy runner’s pod was not deleted while its job ran');
      assert.deepEqual(removedWhileBusy, [], 'the busy runner was not removed from GitHub while its job ran');
      assert.equal(job!.conclusion, 'success', 'the job completed');
      assert.equal(
        double.log.filter(
          (e) => e.method === 'DELETE' && e.path.endsWith(`/runners/${busyRunner.id}`) && e.status === 204,
        ).length,
        0,
        'GitHub never removed the busy runner on request',
      );
      await f.deleteRunnerSet('rollout');
    } finally {
      await kubelet.stop();
    }
  });
});

/**
 * The RunnerSet controller with a brake: while `hold` is set, its rounds wait (as when one round over
 * hundreds of runners takes seconds, so the StatefulSet controller acts first).
 */
class LaggingRunnerSetReconciler extends RunnerSetReconciler {
  private held: { promise: Promise<void>; release: () => void } | undefined;

  hold(): void {
    const { promise, resolve } = Promise.withResolvers<void>();
    this.held = { promise, release: resolve };
  }

  release(): void {
    const held = this.held;
    this.held = undefined;
    held?.release();
  }

  override async reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    while (this.held) await this.held.promise;
    return await super.reconcile(key, ctx);
  }
}

describe('RunnerSet scale-down end to end (runner pod and RunnerSet controllers, no webhook)', () => {
  const ns = namespaceFixture('t-rs-drain');
  const double = new GitHubDouble();
  const logLines: string[] = [];
  let manager: Manager;
  let client: GitHubClient;
  let runnerPods: RunnerPodReconciler;
  let runnerSets: LaggingRunnerSetReconciler;
  let core: CoreV1Api;
  let f: ReturnType<typeof fleet>;
  const taken: { namespace: string; name: string }[] = [];
  const released: { namespace: string; name: string }[] = [];

  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg('acme');
    const { token } = double.addToken();
    const log = createLogger({
      level: 'debug',
      destination: { write: (line: string) => logLines.push(line) } as never,
    });
    client = new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { apiUrl: double.apiUrl },
      clock: realClock,
      logger: log,
    });
    const github: GitHubClientSource = {
      clientFor: async ({ namespace, name }) => {
        taken.push({ namespace, name });
        return client;
      },
      release: ({ namespace, name }) => {
        released.push({ namespace, name });
      },
    };
    manager = new Manager({ kubeConfig: ns.cluster.kubeConfig, log });
    await installCrds(manager.http);
    runnerPods = new RunnerPodReconciler({
      manager,
      github,
      namespace: ns.name,
      settings: {
        registrationRecheckIntervalMs: 1000,
        registrationRecheckJitterMs: 100,
        unregistrationRetryDelayMs: 1000,
      },
    });
    runnerSets = new LaggingRunnerSetReconciler({
      manager,
      github,
      podDefaults: DEFAULT_RUNNER_POD_DEFAULTS,
      githubBaseUrl: double.apiUrl,
      namespace: ns.name,
    });
    for (const c of manager.allControllers) c.resyncEvery(5000);
    await manager.start();
    core = ns.cluster.kubeConfig.makeApiClient(CoreV1Api);
    f = fleet({
      namespace: ns.name,
      core,
      apps: ns.cluster.kubeConfig.makeApiClient(AppsV1Api),
      http: manager.http,
      double,
      logLines,
      kubeConfig: ns.cluster.kubeConfig,
    });
  });

  after(async () => {
    runnerSets?.release();
    runnerPods?.stop();
    await manager?.stop();
    client?.close();
    await double.stop();
  });

  test('busy ephemeral runners scaled to 0: every job finishes, every runner is unregistered, nothing is left — even when finished pods are replaced before the RunnerSet controller looks', async () => {
    const kubelet = f.startKubelet();
    try {
      await f.createRunnerSet('drain', 3, 'runner:v1');
      const pods = await f.registered('drain', 3);
      const jobs = f.busy(pods);
      await f.patchRunnerSet('drain', { replicas: 0 });
      // Every runner was asked, tried to unregister, and waits for its job (GitHub said busy).
      await f.waitFor('drain', 'every busy runner asked to unregister and waiting for its job', async () => {
        const now = await f.runnerPods('drain');
        return (
          now.length === 3 &&
          now.every((p) => p.metadata?.annotations?.[WAITING] && !p.metadata.deletionTimestamp)
        );
      });
      assert.equal(f.githubRunners('drain').length, 3, 'no busy runner was removed');

      // The RunnerSet controller falls behind; meanwhile every job ends, each ephemeral runner exits,
      // and the StatefulSet controller replaces each finished pod with a fresh one, which the
      // kubelet starts and whose runner registers.
      runnerSets.hold();
      await sleep(500);
      const finished = new Set(pods.map((p) => p.metadata!.uid!));
      for (const job of jobs) double.completeJob(job.id);
      await Promise.all(pods.map((p) => markRunnerSucceeded(core, ns.name, p.metadata!.name!)));
      await f.waitFor('drain', 'every finished pod replaced by a registered runner', async () => {
        const now = (await f.runnerPods('drain')).filter((p) => !finished.has(p.metadata!.uid!));
        return (
          now.length === 3 &&
          now.every((p) => p.metadata?.annotations?.[ID]) &&
          f.githubRunners('drain').length === 3
        );
      });
      runnerSets.release();

      await f.waitFor(
        'drain',
        'no StatefulSets, no pods, no GitHub runners left',
        async () =>
          (await f.statefulSets('drain')).length === 0 &&
          (await f.runnerPods('drain')).length === 0 &&
          f.githubRunners('drain').length === 0,
        60_000,
      );
      assert.deepEqual(
        jobs.map((j) => j.conclusion),
        ['success', 'success', 'success'],
      );
      // Nothing comes back.
      await sleep(3000);
      assert.equal(
        (await f.statefulSets('drain')).length,
        0,
        await f.diagnose('drain', 'still no StatefulSets'),
      );
      assert.equal(f.githubRunners('drain').length, 0, await f.diagnose('drain', 'still no GitHub runners'));
    } finally {
      runnerSets.release();
      await kubelet.stop();
    }
  });

  test('the GitHub client taken for a RunnerSet is released when the RunnerSet is deleted', async () => {
    await f.createRunnerSet('lender', 0, 'runner:v1');
    const ref = { namespace: ns.name, name: 'runnerset/lender' };
    await eventually('the RunnerSet took a client', async () => taken.some((r) => r.name === ref.name));
    assert.equal(released.filter((r) => r.name === ref.name).length, 0, 'kept while the RunnerSet exists');
    await f.deleteRunnerSet('lender');
    await eventually('the client released', async () => released.some((r) => r.name === ref.name), 15_000);
    assert.deepEqual(
      released.find((r) => r.name === ref.name),
      ref,
      'released under the name it was taken',
    );
  });
});
