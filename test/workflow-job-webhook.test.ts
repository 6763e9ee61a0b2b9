import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import {
  HORIZONTAL_RUNNER_AUTOSCALERS,
  type HorizontalRunnerAutoscaler,
  RUNNER_DEPLOYMENTS,
  type RunnerDeployment,
} from '../src/api/index.ts';
import { parseFlags } from '../src/cli/flags.ts';
import type { Paddock } from '../src/cli/run.ts';
import { startWebhookServer, WEBHOOK_SERVER_FLAGS, webhookServerConfig } from '../src/cli/webhook-server.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { PODS } from '../src/runtime/resources.ts';
import {
  deliverWebhook,
  GitHubDouble,
  type JobRecord,
  workflowJobPayload,
} from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { startTestPaddock, stopTestFleet } from './support/paddock.ts';

/**
 * The workflow_job webhook on the real control plane (issue 12): signed deliveries from the GitHub
 * double scale a RunnerDeployment from zero (with `effectiveTime`, so the set makes runners for
 * the reservation), redeliveries and duplicates add nothing, a completion releases its own job,
 * bad deliveries change nothing, and the repair pass undoes lost deliveries. No kubelet: a pod
 * created is what is observed.
 */

const SECRET = 'integration-webhook-secret';

describe('workflow_job webhook → HorizontalRunnerAutoscaler → RunnerDeployment', () => {
  const ns = namespaceFixture('t-wjob');
  const double = new GitHubDouble();
  const logLines: string[] = [];
  let http: KubeHttp;
  let paddock: Paddock | undefined;
  let url = '';

  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg('acme');
    double.addRepo('acme', 'app');
    const { token } = double.addToken();
    http = new KubeHttp(ns.cluster.kubeConfig);
    ({ paddock } = await startTestPaddock({
      kubeConfig: ns.cluster.kubeConfig,
      namespace: ns.name,
      env: { GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl },
      flags: [
        '--sync-period',
        '10m',
        '--github-webhook-addr',
        '127.0.0.1:0',
        '--github-webhook-secret-token',
        SECRET,
        '--reservation-repair-interval',
        '1s',
      ],
      logLines,
    }));
    url = paddock.githubWebhook!.url;
    await http.request('POST', resourcePath(RUNNER_DEPLOYMENTS, ns.name), {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'RunnerDeployment',
        metadata: { name: 'ci' },
        spec: { replicas: 0, template: { spec: { organization: 'acme', labels: ['linux'] } } },
      },
    });
    await http.request('POST', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name), {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'HorizontalRunnerAutoscaler',
        metadata: { name: 'ci' },
        spec: {
          scaleTargetRef: { kind: 'RunnerDeployment', name: 'ci' },
          minReplicas: 0,
          maxReplicas: 5,
          scaleDownDelaySecondsAfterScaleOut: 1,
          scaleUpTriggers: [{ githubEvent: { workflowJob: {} }, duration: '30m' }],
        },
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
  const reserved = async () => ((await hra()).spec.capacityReservations ?? []).map((r) => r.name);
  const pods = async () =>
    (
      await http.request<{ items: { metadata: { deletionTimestamp?: string } }[] }>(
        'GET',
        resourcePath(PODS, ns.name),
      )
    ).items.filter((p) => !p.metadata.deletionTimestamp);
  const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 30_000) =>
    eventually(what, fn, timeoutMs, 100).catch(async (e) => {
      const tail = logLines.filter((l) => /"level":"(info|warn|error)"/.test(l)).slice(-15);
      const h = await hra().catch(() => undefined);
      throw new Error(
        `${(e as Error).message}\nHRA: ${JSON.stringify(h?.spec.capacityReservations)} ${JSON.stringify(h?.status)}\n${tail.join('')}`,
      );
    });
  const deliver = (job: JobRecord, action: 'queued' | 'completed', deliveryId?: string) =>
    deliverWebhook({
      url,
      secret: SECRET,
      payload: workflowJobPayload(double, job, action),
      ...(deliveryId ? { deliveryId } : {}),
    });

  test('queued scales from zero with effectiveTime and a runner pod; redeliveries add nothing; completed releases its job', async () => {
    // Before paddock's caches know the HRA, a delivery would find no autoscaler: wait for them.
    await waitFor('the webhook server ready', async () => paddock!.manager.ready);
    await new Promise((r) => setTimeout(r, 500));
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted', 'Linux'] });
    const first = await deliver(job, 'queued');
    assert.equal(first.status, 200, first.body);
    assert.equal(first.body, 'scaled ci by 1\n');
    const again = await deliver(job, 'queued', first.deliveryId);
    assert.match(again.body, /handled already/);
    // GitHub may also send the same event twice under two delivery IDs.
    assert.equal((await deliver(job, 'queued')).status, 200);

    await waitFor('one reservation named after the job', async () =>
      (await reserved()).join() === `job-${job.id}@acme/app` ? true : undefined,
    );
    const scaled = await waitFor('the deployment at 1 replica', async () => {
      const d = await rd();
      return d.spec.replicas === 1 ? d : undefined;
    });
    const reservation = (await hra()).spec.capacityReservations![0]!;
    assert.equal(scaled.spec.effectiveTime, reservation.effectiveTime, 'scale from zero: effectiveTime set');
    await waitFor('a runner pod', async () => (await pods()).length === 1);

    // The job runs on a runner (a success without one is a check run's, which ARC ignores).
    const runner = double.registerRunner({
      registrationToken: double.model.issueToken('orgs/acme', 'registration').token,
      name: 'some-runner',
    });
    double.startJob(job.id, runner.id);
    const done = double.completeJob(job.id, 'success');
    assert.equal((await deliver(done, 'completed')).body, 'scaled ci by -1\n');
    await waitFor('no reservation', async () => (await reserved()).length === 0);
    await waitFor('the deployment back at 0', async () => (await rd()).spec.replicas === 0);
  });

  test('bad deliveries are refused with their status and change nothing', async () => {
    const before = await hra();
    // A job no autoscaler here serves: the repair pass (every second) must not reserve for it meanwhile.
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['windows'] });
    const payload = workflowJobPayload(double, job, 'queued');
    const wrong = await deliverWebhook({ url, secret: 'not-the-secret', payload });
    assert.equal(wrong.status, 401);
    const unsigned = await deliverWebhook({ url, payload });
    assert.equal(unsigned.status, 401);
    const malformed = await deliverWebhook({ url, secret: SECRET, payload: { action: 'queued' } });
    assert.equal(malformed.status, 400);
    assert.match(malformed.body, /malformed workflow_job payload: workflow_job/);
    const other = await deliverWebhook({ url, secret: SECRET, event: 'push', payload: { ref: 'main' } });
    assert.equal(other.status, 200);
    assert.match(other.body, /not push/);
    const gpu = double.createJob({ owner: 'acme', repo: 'app', labels: ['gpu'] });
    const unmatched = await deliver(gpu, 'queued');
    assert.equal(unmatched.body, 'no horizontalrunnerautoscaler to scale for this github event\n');
    const pong = await deliverWebhook({ url, secret: SECRET, event: 'ping', payload: { zen: 'hi' } });
    assert.equal(pong.body, 'pong\n');
    const afterAll = await hra();
    assert.equal(afterAll.metadata.generation, before.metadata.generation, 'the spec was not written');
    double.completeJob(job.id, 'cancelled');
    double.completeJob(gpu.id, 'cancelled');
  });

  test('the repair pass undoes lost deliveries: a lost completed is released, a lost queued is added', async () => {
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['linux'] });
    assert.equal((await deliver(job, 'queued')).status, 200);
    await waitFor('the reservation', async () => (await reserved()).length === 1);
    await waitFor('the deployment at 1 replica', async () => (await rd()).spec.replicas === 1);
    // The completed delivery is lost: the repair pass finds the job finished.
    double.completeJob(job.id, 'success');
    await waitFor('the reservation released by the repair pass', async () => (await reserved()).length === 0);
    await waitFor('the deployment back at 0', async () => (await rd()).spec.replicas === 0);

    // A queued delivery is lost: the repair pass finds the job waiting (this repository has sent
    // deliveries before, so the pass looks at it).
    const missed = double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted', 'linux'] });
    await waitFor('the reservation added by the repair pass', async () =>
      (await reserved()).join() === `job-${missed.id}@acme/app` ? true : undefined,
    );
    await waitFor('the deployment at 1 replica', async () => (await rd()).spec.replicas === 1);
    assert.ok(logLines.some((l) => l.includes('repaired capacity reservations')));
    const metrics = await paddock!.manager.metrics.registry.metrics();
    assert.match(metrics, /paddock_capacity_reservation_repairs_total\{action="added"\} [1-9]/);
    assert.match(metrics, /paddock_capacity_reservation_repairs_total\{action="released"\} [1-9]/);
    // Nothing in the logs carries the webhook secret.
    assert.ok(!logLines.some((l) => l.includes(SECRET)));
    double.completeJob(missed.id, 'success');
    await waitFor('released again', async () => (await reserved()).length === 0);
  });

  test('runner groups: a group the repository may not use is not scaled; once GitHub lets it, it is', async () => {
    const group = double.model.addRunnerGroup('gpu-farm', undefined, ['acme/other']);
    await http.request('POST', resourcePath(RUNNER_DEPLOYMENTS, ns.name), {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'RunnerDeployment',
        metadata: { name: 'gpu' },
        spec: {
          replicas: 0,
          template: { spec: { organization: 'acme', group: 'gpu-farm', labels: ['gpu'] } },
        },
      },
    });
    await http.request('POST', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name), {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'HorizontalRunnerAutoscaler',
        metadata: { name: 'gpu' },
        spec: {
          scaleTargetRef: { name: 'gpu' },
          minReplicas: 0,
          maxReplicas: 2,
          scaleUpTriggers: [{ githubEvent: { workflowJob: {} }, duration: '5m' }],
        },
      },
    });
    await waitFor('the gpu autoscaler in the cache', async () =>
      paddock!.githubWebhook!.scaler.candidates().some((c) => c.name === 'gpu' && c.target),
    );
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted', 'gpu'] });
    const hidden = await deliver(job, 'queued');
    assert.equal(hidden.body, 'no horizontalrunnerautoscaler to scale for this github event\n');
    // GitHub's answer is kept a minute; a new repository name asks again.
    double.model.runnerGroups.get(group)!.repositories = ['acme/other', 'acme/app2'];
    double.addRepo('acme', 'app2');
    const other = double.createJob({ owner: 'acme', repo: 'app2', labels: ['self-hosted', 'gpu'] });
    assert.equal((await deliver(other, 'queued')).body, 'scaled gpu by 1\n');
    double.completeJob(job.id, 'cancelled');
    double.completeJob(other.id, 'cancelled');
    assert.equal((await deliver(other, 'completed')).body, 'scaled gpu by -1\n');
  });

  test('`paddock webhook-server` alone (ARC flags, no GitHub credentials) writes the same reservations', async () => {
    const { values } = parseFlags(
      WEBHOOK_SERVER_FLAGS,
      [
        '--webhook-addr',
        '127.0.0.1:0',
        '--metrics-addr',
        '0',
        '--watch-namespace',
        ns.name,
        '--sync-period',
        '10m',
      ],
      { GITHUB_WEBHOOK_SECRET_TOKEN: SECRET },
    );
    const server = await startWebhookServer(webhookServerConfig(values), {
      kubeConfig: ns.cluster.kubeConfig,
      log: pino({ level: 'warn' }, { write: (l: string) => logLines.push(l) }),
    });
    try {
      await waitFor('its caches synced', async () => server.manager.ready);
      const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['linux'] });
      const res = await deliverWebhook({
        url: server.webhook.url,
        secret: SECRET,
        payload: workflowJobPayload(double, job, 'queued'),
      });
      assert.equal(res.body, 'scaled ci by 1\n');
      await waitFor('its reservation', async () => (await reserved()).includes(`job-${job.id}@acme/app`));
      await waitFor('the deployment scaled by paddock run', async () => (await rd()).spec.replicas === 1);
      double.completeJob(job.id, 'cancelled');
      const gone = await deliverWebhook({
        url: server.webhook.url,
        secret: SECRET,
        payload: workflowJobPayload(double, job, 'completed'),
      });
      assert.equal(gone.body, 'scaled ci by -1\n');
      await waitFor('released', async () => (await reserved()).length === 0);
    } finally {
      await server.stop();
    }
  });
});
