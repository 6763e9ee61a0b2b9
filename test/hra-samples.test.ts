import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import {
  HORIZONTAL_RUNNER_AUTOSCALERS,
  type HorizontalRunnerAutoscaler,
  RESOURCES,
  RUNNER_DEPLOYMENTS,
  type RunnerDeployment,
} from '../src/api/index.ts';
import type { Paddock } from '../src/cli/run.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp, PATCH_CONTENT_TYPES } from '../src/runtime/kube-http.ts';
import { EVENTS } from '../src/runtime/resources.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import { deliverWebhook, GitHubDouble, workflowJobPayload } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { startTestPaddock, stopTestFleet } from './support/paddock.ts';

/**
 * ARC's documented HorizontalRunnerAutoscaler manifests (test/fixtures/arc-examples/hra-*.yaml),
 * applied unchanged, behave as ARC's documentation says: the minimum with no demand, a
 * workflow_job delivery adding a runner, queued workflow runs in the named repositories raising
 * the pull metric, schedules that have ended changing nothing, legacy triggers doing nothing. One
 * autoscaler per target at a time, as ARC requires.
 */

const EXAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'arc-examples');
const SECRET = 'samples-webhook-secret';

function docs(file: string): (KubeObject & { kind: string })[] {
  return parseAllDocuments(readFileSync(path.join(EXAMPLES, file), 'utf8'))
    .map((d) => d.toJS() as (KubeObject & { kind: string }) | null)
    .filter((d): d is KubeObject & { kind: string } => d !== null);
}

describe('ARC documentation HorizontalRunnerAutoscaler manifests', () => {
  const ns = namespaceFixture('t-hra-docs');
  const double = new GitHubDouble();
  const logLines: string[] = [];
  let http: KubeHttp;
  let paddock: Paddock | undefined;

  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg('octo-org');
    double.addRepo('octo-org', 'octo-repo');
    double.addRepo('octo-org', 'other-repo');
    const { token } = double.addToken();
    http = new KubeHttp(ns.cluster.kubeConfig);
    ({ paddock } = await startTestPaddock({
      kubeConfig: ns.cluster.kubeConfig,
      namespace: ns.name,
      env: { GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl, GITHUB_WEBHOOK_SECRET_TOKEN: SECRET },
      flags: ['--github-webhook-addr', '127.0.0.1:0'],
      logLines,
    }));
  });

  after(() =>
    stopTestFleet({ kubeConfig: ns.cluster.kubeConfig, namespace: ns.name, paddock, http, double }),
  );

  /** Every job of the double done, so one manifest's demand does not reach the next one's metric. */
  const finishAllJobs = () => {
    for (const j of double.model.jobs.values())
      if (j.status !== 'completed') double.completeJob(j.id, 'cancelled');
  };
  const apply = async (file: string) => {
    for (const doc of docs(file)) {
      const ref = RESOURCES.find((r) => r.kind === doc.kind)!;
      await http.request('POST', resourcePath(ref, ns.name), { body: doc });
    }
  };
  const removeHra = async (name: string) => {
    await http.request('DELETE', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name, name));
    await eventually(`${name} gone`, async () =>
      http
        .request('GET', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name, name))
        .then(() => false)
        .catch(() => true),
    );
  };
  const replicas = (rd: string, n: number, timeoutMs = 30_000) =>
    eventually(
      `${rd} at ${n} replicas`,
      async () =>
        // Unset is ARC's default of one.
        ((await http.request<RunnerDeployment>('GET', resourcePath(RUNNER_DEPLOYMENTS, ns.name, rd))).spec
          .replicas ?? 1) === n,
      timeoutMs,
      200,
    ).catch(async (e: Error) => {
      const tail = logLines.filter((l) => /"level":"(info|warn|error)"/.test(l)).slice(-10);
      const hras = await http.request<{ items: HorizontalRunnerAutoscaler[] }>(
        'GET',
        resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name),
      );
      const seen = hras.items.map((h) => `${h.metadata.name}: ${JSON.stringify(h.status)}`);
      throw new Error(
        `${e.message}\n${seen.join('\n')}\n${JSON.stringify(await warnings())}\n${tail.join('')}`,
      );
    });
  const status = async (name: string) =>
    (
      await http.request<HorizontalRunnerAutoscaler>(
        'GET',
        resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, ns.name, name),
      )
    ).status;
  const warnings = async () =>
    (
      await http.request<{ items: { type?: string; reason?: string; note?: string }[] }>(
        'GET',
        resourcePath(EVENTS, ns.name),
      )
    ).items.filter((e) => e.type === 'Warning' && e.reason === 'RunnerAutoscalingFailure');

  test('hra-webhook-workflow-job.yaml: the minimum, then one more runner per queued job', async () => {
    await apply('hra-webhook-workflow-job.yaml');
    await replicas('webhook-runners', 1);
    await eventually('the webhook server ready', async () => paddock!.manager.ready);
    for (let i = 0; i < 2; i++) {
      const job = double.createJob({ owner: 'octo-org', repo: 'octo-repo', labels: ['self-hosted'] });
      const res = await deliverWebhook({
        url: paddock!.githubWebhook!.url,
        secret: SECRET,
        payload: workflowJobPayload(double, job, 'queued'),
      });
      assert.equal(res.body, 'scaled webhook-runners by 1\n');
    }
    await replicas('webhook-runners', 3);
    finishAllJobs();
  });

  test('hra-percentage-runners-busy.yaml: no busy runners, the minimum', async () => {
    await apply('hra-percentage-runners-busy.yaml');
    await replicas('busy-scaled', 1);
    await eventually(
      'desiredReplicas in the status',
      async () => (await status('busy-scaled-autoscaler'))?.desiredReplicas === 1,
    );
    await removeHra('busy-scaled-autoscaler');
  });

  test("hra-total-queued.yaml: queued and running jobs of the target's repository raise it from zero", async () => {
    await apply('hra-total-queued.yaml');
    await replicas('busy-scaled', 0);
    double.createJob({ owner: 'octo-org', repo: 'octo-repo', labels: ['self-hosted'] });
    double.createJob({
      owner: 'octo-org',
      repo: 'octo-repo',
      labels: ['self-hosted'],
      status: 'in_progress',
    });
    // The target is a repository's runners: as in ARC, its repository is the one looked at, and
    // repositoryNames (for organization runners) do not add other-repo.
    double.createJob({ owner: 'octo-org', repo: 'other-repo', labels: ['self-hosted'] });
    // Pull metrics are read each sync period (5 s in tests).
    await replicas('busy-scaled', 2);
    finishAllJobs();
    await removeHra('queue-autoscaler');
  });

  for (const file of ['hra-percentage-adjustment.yaml', 'hra-combined-metrics.yaml']) {
    test(`${file}: no busy runners, the minimum`, async () => {
      const [hra] = docs(file);
      await apply(file);
      await replicas('busy-scaled', 1);
      await eventually(
        'desiredReplicas',
        async () => (await status(hra!.metadata.name!))?.desiredReplicas === 1,
      );
      await removeHra(hra!.metadata.name!);
    });
  }

  test('hra-scheduled-overrides.yaml: overrides that ended years ago leave minReplicas', async () => {
    await apply('hra-scheduled-overrides.yaml');
    await http.request('PATCH', resourcePath(RUNNER_DEPLOYMENTS, ns.name, 'busy-scaled'), {
      body: { spec: { replicas: 4 } },
      contentType: PATCH_CONTENT_TYPES.merge,
    });
    await replicas('busy-scaled', 1);
    await removeHra('scheduled-autoscaler');
  });

  test("hra-legacy-triggers.yaml: ARC's check_run, pull_request and push triggers change nothing", async () => {
    await apply('hra-legacy-triggers.yaml');
    await replicas('busy-scaled', 1);
    const push = await deliverWebhook({
      url: paddock!.githubWebhook!.url,
      secret: SECRET,
      event: 'push',
      payload: { ref: 'refs/heads/main', repository: { name: 'octo-repo', owner: { login: 'octo-org' } } },
    });
    assert.equal(push.status, 200);
    await new Promise((r) => setTimeout(r, 1000));
    await replicas('busy-scaled', 1);
    await removeHra('legacy-triggers');
    assert.deepEqual(await warnings(), [], 'no autoscaling failure for any documented manifest');
  });
});
