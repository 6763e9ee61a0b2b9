import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  HORIZONTAL_RUNNER_AUTOSCALERS,
  type HorizontalRunnerAutoscaler,
  RUNNER_DEPLOYMENTS,
  RUNNERS,
  type Runner,
  type RunnerDeployment,
} from '../src/api/index.ts';
import type { Paddock } from '../src/cli/run.ts';
import { writeScaleTarget } from '../src/controllers/scale-target.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp, PATCH_CONTENT_TYPES } from '../src/runtime/kube-http.ts';
import { EVENTS } from '../src/runtime/resources.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { startTestPaddock, stopTestFleet } from './support/paddock.ts';

/**
 * HorizontalRunnerAutoscaler → RunnerDeployment on the real control plane (issue 12): reservations,
 * the scale-down delay (paddock comes back by itself when it ends), scheduled overrides, a
 * malformed spec, and PercentageRunnersBusy from the runners GitHub lists. No kubelet: the pods are
 * never started; the scale decisions do not need them.
 */

const rfc = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

describe('HorizontalRunnerAutoscaler', () => {
  const ns = namespaceFixture('t-hra');
  const double = new GitHubDouble();
  const logLines: string[] = [];
  let http: KubeHttp;
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
      // No resync during the test: what happens with time alone, paddock must come back for itself.
      flags: ['--sync-period', '10m'],
      logLines,
      logLevel: process.env.HRA_TEST_LOG ?? 'info',
    }));
    await http.request('POST', resourcePath(RUNNER_DEPLOYMENTS, ns.name), {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'RunnerDeployment',
        metadata: { name: 'ci' },
        spec: { template: { spec: { organization: 'acme', labels: ['linux'] } } },
      },
    });
  });

  after(() =>
    stopTestFleet({ kubeConfig: ns.cluster.kubeConfig, namespace: ns.name, paddock, http, double }),
  );

  const rd = () => http.request<RunnerDeployment>('GET', resourcePath(RUNNER_DEPLOYMENTS, ns.name, 'ci'));
  const hra = () =>
    http.request<HorizontalRunnerAutoscaler>(
      'GET',
      resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name, 'ci'),
    );
  const patchHra = (spec: Record<string, unknown>) =>
    http.request('PATCH', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name, 'ci'), {
      body: { spec },
      contentType: PATCH_CONTENT_TYPES.merge,
    });
  const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 30_000) =>
    eventually(what, fn, timeoutMs, 200).catch(async (e) => {
      const tail = logLines
        .filter((l) => /"level":"(info|warn|error)"|horizontalrunnerautoscaler-controller/.test(l))
        .slice(-30);
      const r = await rd().catch(() => undefined);
      const h = await hra().catch(() => undefined);
      throw new Error(
        `${(e as Error).message}\nRD spec: ${JSON.stringify(r?.spec.replicas)} ${r?.spec.effectiveTime}\nHRA: ${JSON.stringify(h?.spec)} ${JSON.stringify(h?.status)}\n${tail.join('')}`,
      );
    });
  const replicas = (n: number, timeoutMs?: number) =>
    waitFor(`the deployment at ${n} replicas`, async () => (await rd()).spec.replicas === n, timeoutMs);

  test('reservations add replicas within the bounds; the scale-down waits for the delay, then happens by itself', async () => {
    const now = Date.now();
    await http.request('POST', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name), {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'HorizontalRunnerAutoscaler',
        metadata: { name: 'ci' },
        spec: {
          scaleTargetRef: { kind: 'RunnerDeployment', name: 'ci' },
          minReplicas: 1,
          maxReplicas: 5,
          scaleDownDelaySecondsAfterScaleOut: 3,
          scaleUpTriggers: [{ githubEvent: { workflowJob: {} }, duration: '30m' }],
          capacityReservations: [
            { name: 'job-1', effectiveTime: rfc(now), expirationTime: rfc(now + 3_600_000), replicas: 2 },
            {
              name: 'job-0',
              effectiveTime: rfc(now - 7_200_000),
              expirationTime: rfc(now - 3_600_000),
              replicas: 9,
            },
          ],
        },
      },
    });
    await replicas(3);
    const scaled = await rd();
    assert.equal(scaled.spec.effectiveTime, rfc(now), 'ephemeral runners: the newest reservation time');
    const status = (await hra()).status;
    assert.equal(status?.desiredReplicas, 3);
    assert.ok(status?.lastSuccessfulScaleOutTime, 'a scale-out time');

    await patchHra({ capacityReservations: [] });
    // Held for the delay (3 s), then lowered without any further event.
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal((await rd()).spec.replicas, 3, 'held within the delay');
    await replicas(1, 10_000);
    assert.equal((await hra()).status?.desiredReplicas, 1);
  });

  test('an active scheduled override raises minReplicas and is summarised in the status', async () => {
    const now = Date.now();
    const end = now + 3_600_000;
    await patchHra({
      scheduledOverrides: [{ startTime: rfc(now - 60_000), endTime: rfc(end), minReplicas: 4 }],
    });
    await replicas(4);
    await waitFor('the summary', async () =>
      (await hra()).status?.scheduledOverridesSummary?.startsWith('min=1 time='),
    );
    await patchHra({ scheduledOverrides: null, scaleDownDelaySecondsAfterScaleOut: 0 });
    await replicas(1);
  });

  test('schedule boundaries: an override starts and ends with no event and no resync (sync period 10m)', async () => {
    // Whole seconds: RFC 3339 in the spec has no fractions.
    const start = Math.ceil(Date.now() / 1000) * 1000 + 3000;
    await patchHra({
      scaleDownDelaySecondsAfterScaleOut: 0,
      scheduledOverrides: [{ startTime: rfc(start), endTime: rfc(start + 4000), minReplicas: 3 }],
    });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal((await rd()).spec.replicas, 1, 'not before the period starts');
    await replicas(3, 10_000);
    assert.ok(Date.now() >= start, 'raised when the period started');
    await replicas(1, 10_000);
    assert.ok(Date.now() >= start + 4000, 'lowered when it ended');
    await patchHra({ scheduledOverrides: null });
  });

  test('a malformed spec: a Warning Event, the target left alone', async () => {
    await patchHra({
      metrics: [{ type: 'PercentageRunnersBusy' }, { type: 'PercentageRunnersBusy' }, { type: 'X' }],
    });
    await waitFor('a RunnerAutoscalingFailure Warning', async () => {
      const events = await http.request<{ items: { reason?: string; type?: string; note?: string }[] }>(
        'GET',
        resourcePath(EVENTS, ns.name),
      );
      return events.items.find(
        (e) =>
          e.reason === 'RunnerAutoscalingFailure' &&
          e.type === 'Warning' &&
          /too many autoscaling metrics/.test(e.note ?? ''),
      );
    });
    assert.equal((await rd()).spec.replicas, 1);
  });

  test('PercentageRunnersBusy: busy runners GitHub lists for the deployment scale it up', async () => {
    await patchHra({
      metrics: [{ type: 'PercentageRunnersBusy', scaleUpThreshold: '0.5', scaleUpAdjustment: 2 }],
      scaleDownDelaySecondsAfterScaleOut: 600,
    });
    const runner = await waitFor('a Runner of the deployment', async () => {
      const runners = await http.request<{ items: Runner[] }>('GET', resourcePath(RUNNERS, ns.name));
      return runners.items.find(
        (r) => r.metadata.labels?.['runner-deployment-name'] === 'ci' && !r.metadata.deletionTimestamp,
      );
    });
    // The runner registers and takes a job (as its pod would).
    const t = double.model.issueToken('orgs/acme', 'registration');
    const registered = double.registerRunner({
      registrationToken: t.token,
      name: runner.metadata.name ?? '',
    });
    double.setRunnerBusy(registered.id, true);
    // Pull metrics are looked at on every change of the HRA or its target, and each sync period.
    // The shared runner list may be a second or two old when the HRA looks: poke until it is not.
    let poke = 0;
    await waitFor('the deployment at 3 replicas (1 busy of 1 ≥ 0.5: 1 + 2)', async () => {
      if ((await rd()).spec.replicas === 3) return true;
      await http.request('PATCH', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name, 'ci'), {
        body: { metadata: { annotations: { poke: String(++poke) } } },
        contentType: PATCH_CONTENT_TYPES.merge,
      });
      await new Promise((r) => setTimeout(r, 500));
      return undefined;
    });
    // ARC's gauges, with the figures of that evaluation.
    const metrics = await paddock!.manager.metrics.registry.metrics();
    const series = (name: string) =>
      new RegExp(
        `${name}\\{horizontalrunnerautoscaler="ci",namespace="${ns.name}"[^}]*kind="runnerdeployment",name="ci"\\} (\\d+)`,
      ).exec(metrics)?.[1];
    assert.equal(series('horizontalrunnerautoscaler_runners_busy'), '1');
    assert.equal(series('horizontalrunnerautoscaler_runners_registered'), '1');
    assert.equal(series('horizontalrunnerautoscaler_replicas_desired'), '3');
    assert.match(
      metrics,
      new RegExp(
        `horizontalrunnerautoscaler_spec_max_replicas\\{horizontalrunnerautoscaler="ci",namespace="${ns.name}"\\} 5`,
      ),
    );
  });
});

describe('an autoscaler writes its target only while both are as the decision saw them', () => {
  const ns = namespaceFixture('t-hra-write');
  let http: KubeHttp;
  const get = <T>(ref: typeof RUNNER_DEPLOYMENTS, name: string) =>
    http.request<T>('GET', resourcePath(ref, ns.name, name));
  const merge = (ref: typeof RUNNER_DEPLOYMENTS, name: string, body: unknown, sub = '') =>
    http.request('PATCH', `${resourcePath(ref, ns.name, name)}${sub}`, {
      body,
      contentType: PATCH_CONTENT_TYPES.merge,
    });
  /** A RunnerDeployment and an HRA for it, as a reconcile would have read them from its caches. */
  async function pair(name: string): Promise<{ rd: RunnerDeployment; hra: HorizontalRunnerAutoscaler }> {
    await http.request('POST', resourcePath(RUNNER_DEPLOYMENTS, ns.name), {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'RunnerDeployment',
        metadata: { name },
        spec: { replicas: 2, template: { spec: { organization: 'acme' } } },
      },
    });
    await http.request('POST', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name), {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'HorizontalRunnerAutoscaler',
        metadata: { name },
        spec: { scaleTargetRef: { kind: 'RunnerDeployment', name }, minReplicas: 2, maxReplicas: 5 },
      },
    });
    return {
      rd: await get<RunnerDeployment>(RUNNER_DEPLOYMENTS, name),
      hra: await get<HorizontalRunnerAutoscaler>(HORIZONTAL_RUNNER_AUTOSCALERS, name),
    };
  }
  const target = (rd: RunnerDeployment) => ({ ref: RUNNER_DEPLOYMENTS, object: rd });
  const replicasOf = async (name: string) =>
    (await get<RunnerDeployment>(RUNNER_DEPLOYMENTS, name)).spec.replicas;

  before(() => {
    http = new KubeHttp(ns.cluster.kubeConfig);
  });

  test('the documented drain: the HRA deleted, then the target scaled to zero; a decision taken before stays unwritten', async () => {
    const { rd, hra } = await pair('drain');
    await http.request('DELETE', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name, 'drain'));
    await merge(RUNNER_DEPLOYMENTS, 'drain', { spec: { replicas: 0 } });
    assert.equal(await writeScaleTarget(http, hra, target(rd), { replicas: 3 }), 'autoscaler-gone');
    assert.equal(await replicasOf('drain'), 0);
  });

  test('a HRA recreated under the same name is not the one the decision came from', async () => {
    const { rd, hra } = await pair('again');
    await http.request('DELETE', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name, 'again'));
    await http.request('POST', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name), {
      body: { ...hra, metadata: { name: 'again' }, status: undefined },
    });
    assert.equal(await writeScaleTarget(http, hra, target(rd), { replicas: 3 }), 'autoscaler-gone');
    assert.equal(await replicasOf('again'), 2);
  });

  test("the target's spec or the HRA's spec changed since: not written; a status write alone does not matter", async () => {
    const { rd, hra } = await pair('moved');
    await merge(RUNNER_DEPLOYMENTS, 'moved', { spec: { replicas: 4 } });
    assert.equal(await writeScaleTarget(http, hra, target(rd), { replicas: 3 }), 'target-changed');
    assert.equal(await replicasOf('moved'), 4);

    const fresh = await get<RunnerDeployment>(RUNNER_DEPLOYMENTS, 'moved');
    await merge(RUNNER_DEPLOYMENTS, 'moved', { status: { replicas: 1 } }, '/status');
    const t = '2026-01-02T03:04:05Z';
    assert.equal(
      await writeScaleTarget(http, hra, target(fresh), { replicas: 3, effectiveTime: t }),
      'written',
    );
    const written = await get<RunnerDeployment>(RUNNER_DEPLOYMENTS, 'moved');
    assert.equal(written.spec.replicas, 3);
    assert.equal(written.spec.effectiveTime, t);

    await merge(HORIZONTAL_RUNNER_AUTOSCALERS, 'moved', { spec: { maxReplicas: 2 } });
    assert.equal(await writeScaleTarget(http, hra, target(written), { replicas: 5 }), 'autoscaler-changed');
    assert.equal(await replicasOf('moved'), 3);
  });

  test('a target deleted since: nothing written, no error', async () => {
    const { rd, hra } = await pair('deleted');
    await http.request('DELETE', resourcePath(RUNNER_DEPLOYMENTS, ns.name, 'deleted'));
    await eventually(
      'the deployment gone',
      async () => !(await get(RUNNER_DEPLOYMENTS, 'deleted').catch(() => undefined)),
      10_000,
      100,
    );
    assert.equal(await writeScaleTarget(http, hra, target(rd), { replicas: 3 }), 'target-gone');
  });
});
