import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { GitHubRunner } from '../github/index.ts';
import { recordedRunnerFor, staleRunnerVerdict } from './jit-collision.ts';
import {
  ANNOTATION_JIT_RUNNER_ID,
  ANNOTATION_JIT_RUNNER_NAME,
  invalidTokenSecretName,
  recordedJitRunner,
  tokenSecret,
  tokenSecretName,
} from './token-secret.ts';

const STS = { name: 'rs-abcde', uid: 'sts-uid' };

describe('runner token Secret', () => {
  test('named after its StatefulSet; a name that would not be valid is reported', () => {
    assert.equal(tokenSecretName('rs-abcde'), 'rs-abcde-runner-token');
    assert.equal(invalidTokenSecretName('rs-abcde'), undefined);
    assert.match(
      invalidTokenSecretName('x'.repeat(250)) ?? '',
      /runner token Secret "x+…" is not a valid name/,
    );
  });

  test('owned by the StatefulSet (no blockOwnerDeletion), labelled, the credential base64 in data', () => {
    const secret = tokenSecret({
      namespace: 'ns',
      statefulSet: STS,
      runnerSetName: 'rs',
      credential: { kind: 'registrationToken', token: 'TOKEN' },
    });
    assert.deepEqual(secret, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: 'rs-abcde-runner-token',
        namespace: 'ns',
        labels: { 'app.kubernetes.io/managed-by': 'paddock', 'runnerset-name': 'rs' },
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'rs-abcde', uid: 'sts-uid', controller: true },
        ],
      },
      type: 'Opaque',
      data: { 'registration-token': Buffer.from('TOKEN').toString('base64') },
    });
  });

  test('a JIT Secret records its runner, which reads back only from a paddock Secret of this StatefulSet', () => {
    const secret = tokenSecret({
      namespace: 'ns',
      statefulSet: STS,
      runnerSetName: 'rs',
      credential: { kind: 'jitConfig', encodedJitConfig: 'JIT', runnerId: 42, runnerName: 'rs-abcde-0' },
    });
    assert.deepEqual(secret.data, { 'jit-config': Buffer.from('JIT').toString('base64') });
    assert.deepEqual(recordedJitRunner(secret, 'sts-uid'), { runnerId: 42, runnerName: 'rs-abcde-0' });
    assert.equal(recordedJitRunner(secret, 'other-uid'), undefined);
    assert.equal(recordedJitRunner(undefined, 'sts-uid'), undefined);
    const foreign = structuredClone(secret);
    foreign.metadata.labels = {};
    assert.equal(recordedJitRunner(foreign, 'sts-uid'), undefined);
    for (const id of ['', '0', '-1', '1e3', 'x']) {
      const bad = structuredClone(secret);
      bad.metadata.annotations![ANNOTATION_JIT_RUNNER_ID] = id;
      assert.equal(recordedJitRunner(bad, 'sts-uid'), undefined, id);
    }
    const noName = structuredClone(secret);
    delete noName.metadata.annotations![ANNOTATION_JIT_RUNNER_NAME];
    assert.equal(recordedJitRunner(noName, 'sts-uid'), undefined);
  });
});

describe('JIT name collision decision', () => {
  const runner: GitHubRunner = {
    id: 5,
    name: 'p-0',
    os: 'linux',
    status: 'offline',
    busy: false,
    ephemeral: true,
    runnerGroupId: 1,
    labels: [],
  };

  test('the record must name the pod’s runner', () => {
    assert.deepEqual(recordedRunnerFor('p-0', { runnerId: 5, runnerName: 'p-0' }), { ok: true, runnerId: 5 });
    assert.equal(recordedRunnerFor('p-0', undefined).ok, false);
    assert.equal(recordedRunnerFor('p-0', { runnerId: 5, runnerName: 'p-1' }).ok, false);
  });

  test('only a listed, same-named, offline, idle runner may go', () => {
    assert.deepEqual(staleRunnerVerdict('p-0', 5, runner), { remove: true, runnerId: 5 });
    const refusals = [
      staleRunnerVerdict('p-0', 5, undefined),
      staleRunnerVerdict('p-0', 5, { ...runner, name: 'other' }),
      staleRunnerVerdict('p-0', 5, { ...runner, status: 'online' }),
      staleRunnerVerdict('p-0', 5, { ...runner, busy: true, status: 'offline' }),
    ].map((v) => (v.remove ? 'remove' : v.reason));
    assert.deepEqual(refusals, [
      'runner 5, which paddock created for the pod, is no longer listed, so the name belongs to another runner',
      'runner 5 is now named "other"',
      'runner 5 is online',
      'runner 5 is running a job',
    ]);
  });
});
