import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  labelsMatch,
  parseRunnerLabels,
  podPhase,
  referencedSecrets,
  resolveEnv,
  runnerGroupFor,
  scopeServes,
} from './node-agent.ts';

describe('node agent: job matching', () => {
  test('a job needs all its labels on the runner, case-insensitively; self-hosted is implicit', () => {
    assert.equal(labelsMatch(['linux', 'gpu'], ['self-hosted', 'GPU']), true);
    assert.equal(labelsMatch([], ['self-hosted']), true);
    assert.equal(labelsMatch([], []), true);
    assert.equal(labelsMatch(['Linux'], ['linux', 'x64']), false);
    assert.equal(
      labelsMatch(['Self-Hosted', 'Linux', 'X64', 'big'], ['self-hosted', 'linux', 'x64', 'BIG']),
      true,
    );
    assert.equal(labelsMatch(['gpu'], ['gpu', 'arm64']), false);
  });

  test('runner scopes serve their repository, organization, or (any) enterprise', () => {
    assert.equal(scopeServes('repos/acme/app', 'acme', 'app'), true);
    assert.equal(scopeServes('repos/acme/app', 'Acme', 'App'), true);
    assert.equal(scopeServes('repos/acme/app', 'acme', 'other'), false);
    assert.equal(scopeServes('orgs/acme', 'acme', 'anything'), true);
    assert.equal(scopeServes('orgs/acme', 'globex', 'app'), false);
    assert.equal(scopeServes('enterprises/big', 'acme', 'app'), true);
  });

  test('RUNNER_GROUP: the named group of an organization or enterprise runner; ignored for a repository', () => {
    const groups = [
      { id: 1, name: 'Default' },
      { id: 7, name: 'Build-Farm' },
    ];
    assert.deepEqual(runnerGroupFor({ RUNNER_ORG: 'o', RUNNER_GROUP: 'build-farm' }, groups), { id: 7 });
    assert.deepEqual(runnerGroupFor({ RUNNER_ORG: 'o', RUNNER_GROUP: '' }, groups), {});
    assert.deepEqual(runnerGroupFor({ RUNNER_ORG: 'o' }, groups), {});
    assert.deepEqual(runnerGroupFor({ RUNNER_REPO: 'o/r', RUNNER_GROUP: 'nope' }, groups), {});
    assert.match(
      runnerGroupFor({ RUNNER_ENTERPRISE: 'e', RUNNER_GROUP: 'nope' }, groups).error ?? '',
      /nope/,
    );
  });

  test('RUNNER_LABELS parsing', () => {
    assert.deepEqual(parseRunnerLabels(' linux, gpu ,,x '), ['linux', 'gpu', 'x']);
    assert.deepEqual(parseRunnerLabels(''), []);
    assert.deepEqual(parseRunnerLabels(undefined), []);
  });
});

describe('node agent: pod phase', () => {
  test('a runner that exited next to a running sidecar leaves the pod Running', () => {
    assert.equal(podPhase([{ exitCode: 0 }, 'running'], 'Never'), 'Running');
    assert.equal(podPhase([{ exitCode: 137 }, 'running'], 'Never'), 'Running');
  });
  test('all containers terminated: the restart policy decides', () => {
    assert.equal(podPhase([{ exitCode: 0 }], 'Never'), 'Succeeded');
    assert.equal(podPhase([{ exitCode: 1 }], 'Never'), 'Failed');
    assert.equal(podPhase([{ exitCode: 0 }], 'OnFailure'), 'Succeeded');
    assert.equal(podPhase([{ exitCode: 1 }], 'OnFailure'), 'Running');
    assert.equal(podPhase([{ exitCode: 0 }], undefined), 'Running');
  });
  test('waiting containers: Pending', () => {
    assert.equal(podPhase(['waiting', 'running'], 'Never'), 'Pending');
    assert.equal(podPhase([], 'Never'), 'Pending');
  });
});

describe('node agent: container env as the kubelet resolves it', () => {
  const ref = (name: string, key: string, optional?: boolean) => ({
    secretKeyRef: { name, key, ...(optional === undefined ? {} : { optional }) },
  });
  const env = [
    { name: 'RUNNER_ORG', value: 'acme' },
    { name: 'RUNNER_TOKEN', valueFrom: ref('sts-runner-token', 'registration-token') },
    { name: 'RUNNER_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'EXTRA', valueFrom: ref('extras', 'x', true) },
  ];

  test('the Secrets the env reads, once each', () => {
    assert.deepEqual(referencedSecrets([...env, { name: 'AGAIN', valueFrom: ref('extras', 'y') }]), [
      'sts-runner-token',
      'extras',
    ]);
  });

  test('literal values and Secret keys; an optional missing one and other sources stay unset', () => {
    const secrets = new Map([['sts-runner-token', { 'registration-token': 'T' }]]);
    assert.deepEqual(resolveEnv(env, secrets), { ok: true, env: { RUNNER_ORG: 'acme', RUNNER_TOKEN: 'T' } });
  });

  test('a missing Secret or key means the container cannot start yet', () => {
    assert.deepEqual(resolveEnv(env, new Map()), {
      ok: false,
      reason: 'secret "sts-runner-token" not found',
    });
    assert.deepEqual(resolveEnv(env, new Map([['sts-runner-token', { other: 'x' }]])), {
      ok: false,
      reason: "couldn't find key registration-token in Secret sts-runner-token",
    });
  });
});
