import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatOwnerFigures, ownerFigures, parseSandboxKind, sampleManifest } from './sample.ts';

describe('sandbox sample owner', () => {
  test('--kind accepts either spelling, case-insensitively', () => {
    assert.equal(parseSandboxKind('runnerdeployment'), 'RunnerDeployment');
    assert.equal(parseSandboxKind(' RunnerSet '), 'RunnerSet');
    assert.equal(parseSandboxKind('deployment'), undefined);
  });

  const spec = { name: 'n', organization: 'o', replicas: 3, ephemeral: true, labels: ['x'] };

  test('the RunnerDeployment has the documented shape: replicas and a runner template', () => {
    assert.deepEqual(sampleManifest('RunnerDeployment', spec), {
      apiVersion: 'actions.summerwind.dev/v1alpha1',
      kind: 'RunnerDeployment',
      metadata: { name: 'n' },
      spec: { replicas: 3, template: { spec: { organization: 'o', ephemeral: true, labels: ['x'] } } },
    });
  });

  test('the RunnerSet carries the runner fields beside the StatefulSet ones', () => {
    const m = sampleManifest('RunnerSet', spec) as { spec: Record<string, unknown> };
    assert.equal(m.spec.organization, 'o');
    assert.equal(m.spec.serviceName, 'n');
    assert.deepEqual(m.spec.selector, { matchLabels: { app: 'n' } });
  });

  test('figures: desired from the spec, current and ready from the status', () => {
    const f = ownerFigures('RunnerDeployment', 'n', {
      spec: { replicas: 4 },
      status: { replicas: 3, readyReplicas: 2 },
    });
    assert.deepEqual(f, { kind: 'RunnerDeployment', name: 'n', desired: 4, current: 3, ready: 2 });
    assert.equal(formatOwnerFigures(f), 'RunnerDeployment n: desired 4  current 3  ready 2');
    assert.equal(
      formatOwnerFigures(ownerFigures('RunnerSet', 'n', undefined)),
      'RunnerSet n: desired ?  current 0  ready 0',
    );
  });
});
