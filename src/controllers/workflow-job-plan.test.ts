import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type HraCandidate, planWorkflowJob } from './workflow-job-plan.ts';

const hra = (name: string, target: HraCandidate['target'], o: Partial<HraCandidate> = {}): HraCandidate => ({
  namespace: 'ns',
  name,
  deleting: false,
  triggers: [{ workflowJob: true, durationMs: 30 * 60_000 }],
  target,
  ...o,
});
const job = (o: Record<string, unknown> = {}, action = 'queued') => ({
  action,
  workflow_job: { id: 42, labels: ['self-hosted', 'linux'], conclusion: null, runner_id: null, ...o },
  repository: { name: 'app', owner: { login: 'acme', type: 'Organization' } },
});

describe('planWorkflowJob', () => {
  const repoHra = hra('repo', { kind: 'RunnerDeployment', repository: 'acme/app', labels: ['linux'] });
  const orgHra = hra('org', { kind: 'RunnerDeployment', organization: 'acme', labels: ['linux'] });
  const groupHra = hra('group', {
    kind: 'RunnerDeployment',
    organization: 'acme',
    group: 'g',
    labels: ['linux'],
  });

  test('queued → +1 on the repository HRA first, with the job as the reservation key', () => {
    const d = planWorkflowJob({ event: 'workflow_job', payload: job(), hras: [orgHra, repoHra] });
    assert.deepEqual(d, {
      status: 200,
      body: 'scaled repo by 1',
      scale: {
        namespace: 'ns',
        name: 'repo',
        op: { jobId: 42, repo: 'acme/app', action: 'queued', durationMs: 30 * 60_000 },
      },
    });
  });

  test('organization runners: default group before custom; visible groups restrict; user repos only by repository', () => {
    assert.equal(
      planWorkflowJob({ event: 'workflow_job', payload: job(), hras: [groupHra, orgHra] }).scale?.name,
      'org',
    );
    const onlyCustom = planWorkflowJob({
      event: 'workflow_job',
      payload: job(),
      hras: [groupHra, orgHra],
      visibleGroups: [{ scope: 'Organization', kind: 'Custom', name: 'g' }],
    });
    assert.equal(onlyCustom.scale?.name, 'group');
    const user = job();
    user.repository.owner.type = 'User';
    assert.equal(planWorkflowJob({ event: 'workflow_job', payload: user, hras: [orgHra] }).scale, undefined);
  });

  test('labels, trigger count, deletion and a missing target rule an HRA out', () => {
    const gpu = job({ labels: ['self-hosted', 'GPU'] });
    const none = 'no horizontalrunnerautoscaler to scale for this github event';
    assert.equal(planWorkflowJob({ event: 'workflow_job', payload: gpu, hras: [repoHra] }).body, none);
    for (const h of [
      hra('two', repoHra.target, { triggers: [repoHra.triggers[0]!, repoHra.triggers[0]!] }),
      hra('push', repoHra.target, { triggers: [{ workflowJob: false, durationMs: undefined }] }),
      hra('gone', repoHra.target, { deleting: true }),
      hra('no-target', undefined),
    ]) {
      assert.equal(planWorkflowJob({ event: 'workflow_job', payload: job(), hras: [h] }).body, none, h.name);
    }
    const defaultDuration = hra('d', repoHra.target, { triggers: [{ workflowJob: true, durationMs: 0 }] });
    assert.equal(
      planWorkflowJob({ event: 'workflow_job', payload: job(), hras: [defaultDuration] }).scale?.op
        .durationMs,
      10 * 60_000,
    );
  });

  test('completed → −1, except skipped jobs and check-run completions', () => {
    const done = planWorkflowJob({
      event: 'workflow_job',
      payload: job({ conclusion: 'failure', runner_id: 7 }, 'completed'),
      hras: [repoHra],
    });
    assert.equal(done.body, 'scaled repo by -1');
    assert.equal(done.scale?.op.action, 'completed');
    for (const o of [{ conclusion: 'skipped' }, { conclusion: 'success', runner_id: null }]) {
      const d = planWorkflowJob({ event: 'workflow_job', payload: job(o, 'completed'), hras: [repoHra] });
      assert.equal(d.status, 200);
      assert.equal(d.scale, undefined, JSON.stringify(o));
    }
  });

  test('ping, other events and other actions: 200 with a reason; malformed payloads: 400 naming the field', () => {
    assert.deepEqual(planWorkflowJob({ event: 'ping', payload: {}, hras: [] }), {
      status: 200,
      body: 'pong',
    });
    assert.match(planWorkflowJob({ event: 'push', payload: {}, hras: [] }).body, /not push/);
    // What the sender wrote is echoed only when it looks like GitHub's names.
    const odd = planWorkflowJob({ event: '<script>alert(1)</script>', payload: {}, hras: [] }).body;
    assert.equal(odd, 'ignored: paddock scales on workflow_job events, not (unrecognised)');
    assert.equal(
      planWorkflowJob({ event: 'workflow_job', payload: job({}, 'x'.repeat(500)), hras: [repoHra] }).body,
      'ignored: workflow_job action (unrecognised)',
    );
    assert.match(
      planWorkflowJob({ event: 'workflow_job', payload: job({}, 'in_progress'), hras: [repoHra] }).body,
      /ignored: workflow_job action in_progress/,
    );
    const bad = planWorkflowJob({
      event: 'workflow_job',
      payload: { ...job(), workflow_job: { id: 'x' } },
      hras: [],
    });
    assert.equal(bad.status, 400);
    assert.match(bad.body, /workflow_job\.id/);
    for (const payload of [null, [], 'x', { action: 'queued' }, { ...job(), repository: { name: '' } }]) {
      assert.equal(planWorkflowJob({ event: 'workflow_job', payload, hras: [repoHra] }).status, 400);
    }
  });
});
