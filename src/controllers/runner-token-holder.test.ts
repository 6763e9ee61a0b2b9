import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Runner, RunnerReplicaSet } from '../api/index.ts';
import { tokenHolder } from './runner.ts';
import type { PodObject } from './runner-pod.ts';

const API = 'actions.summerwind.dev/v1alpha1';
const set = (org: string, uid = 'rs-uid'): RunnerReplicaSet =>
  ({
    metadata: { name: 'rs', namespace: 'ns', uid },
    spec: { template: { spec: { organization: org } } },
  }) as RunnerReplicaSet;
const runner = (org: string, owner: { uid: string; apiVersion?: string } | undefined): Runner =>
  ({
    metadata: {
      name: 'rs-abcde',
      namespace: 'ns',
      uid: 'r-uid',
      ...(owner
        ? {
            ownerReferences: [
              {
                apiVersion: owner.apiVersion ?? API,
                kind: 'RunnerReplicaSet',
                name: 'rs',
                uid: owner.uid,
                controller: true,
              },
            ],
          }
        : {}),
    },
    spec: { organization: org },
  }) as Runner;
const podReading = (secret: string): PodObject =>
  ({
    metadata: { name: 'rs-abcde' },
    spec: {
      containers: [
        {
          name: 'runner',
          env: [
            {
              name: 'RUNNER_TOKEN',
              valueFrom: { secretKeyRef: { name: secret, key: 'registration-token' } },
            },
          ],
        },
      ],
    },
  }) as unknown as PodObject;

test("a replica set's Runner shares the set's Secret when the set is real and names the same scope", () => {
  assert.deepEqual(tokenHolder(runner('acme', { uid: 'rs-uid' }), undefined, set('acme')), {
    kind: 'RunnerReplicaSet',
    name: 'rs',
    uid: 'rs-uid',
  });
});

test('a claimed owner that does not hold, or another scope: the Runner gets a Secret of its own', () => {
  const own = { kind: 'Runner', name: 'rs-abcde', uid: 'r-uid' };
  // Owner references are user-writable: another organization must never get (or overwrite) the set's token.
  assert.deepEqual(tokenHolder(runner('evil', { uid: 'rs-uid' }), undefined, set('acme')), own);
  assert.deepEqual(
    tokenHolder(runner('acme', { uid: 'other-uid' }), undefined, set('acme')),
    own,
    'another UID',
  );
  assert.deepEqual(
    tokenHolder(runner('acme', { uid: 'rs-uid' }), undefined, undefined),
    own,
    'no such set in the cache',
  );
  assert.deepEqual(
    tokenHolder(runner('acme', { uid: 'rs-uid', apiVersion: 'x/v1' }), undefined, set('acme')),
    own,
  );
  assert.deepEqual(
    tokenHolder(runner('acme', undefined), undefined, set('acme')),
    own,
    'a Runner of its own',
  );
});

test('an existing pod keeps the Secret it was created with', () => {
  const r = runner('acme', { uid: 'rs-uid' });
  assert.equal(tokenHolder(r, podReading('rs-abcde-runner-token'), set('acme')).kind, 'Runner');
  assert.equal(tokenHolder(r, podReading('rs-runner-token'), set('acme')).kind, 'RunnerReplicaSet');
});
