import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Runner } from '../api/index.ts';
import {
  planRunner,
  type RunnerPlanInput,
  recordedTokenExpiry,
  runnerStatusFromPod,
  STATUS_SETTLE_MS,
  TOKEN_REFRESH_BEFORE_EXPIRY_MS,
} from './runner-plan.ts';

const NOW = Date.parse('2026-12-03T10:00:00Z');
const HOUR = 3_600_000;

function runner(o: Partial<Runner['metadata']> = {}, status?: Runner['status']): Runner {
  return {
    metadata: { name: 'r1', namespace: 'ns', uid: 'u1', finalizers: ['runner.actions.summerwind.dev'], ...o },
    spec: { organization: 'acme' },
    ...(status ? { status } : {}),
  };
}

type Pod = NonNullable<RunnerPlanInput['pod']>;
const rfc = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const ofSet = (r: Runner): Runner => ({
  ...r,
  metadata: {
    ...r.metadata,
    ownerReferences: [
      {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'RunnerReplicaSet',
        name: 'rs',
        uid: 'rs1',
        controller: true,
      },
    ],
  },
});
const pending: Pod = { metadata: { name: 'r1' }, status: { phase: 'Pending' } };
const running: Pod = {
  metadata: { name: 'r1' },
  status: {
    phase: 'Running',
    conditions: [{ type: 'Ready', status: 'True' }],
    containerStatuses: [{ name: 'runner', state: { running: { startedAt: '2026-12-03T09:59:00Z' } } }],
  },
};

const plan = (o: Partial<RunnerPlanInput>) =>
  planRunner({
    runner: runner(),
    pod: undefined,
    now: NOW,
    useRunnerStatusUpdateHook: false,
    done: {},
    ...o,
  });

describe('planRunner', () => {
  test('a Runner without our finalizer gets it first', () => {
    assert.deepEqual(plan({ runner: runner({ finalizers: [] }) }), { kind: 'add-finalizer' });
  });

  test('a new Runner: token into its Secret, RBAC objects, then the pod', () => {
    assert.deepEqual(plan({}), { kind: 'ensure-token', reason: 'new-pod' });
    const token = { expiresAt: NOW + HOUR };
    assert.deepEqual(plan({ done: { token } }), { kind: 'ensure-rbac' });
    assert.deepEqual(plan({ done: { token, rbac: true } }), { kind: 'create-pod' });
    assert.equal(plan({ done: { token, rbac: true, podCreated: true } }).kind, 'done');
  });

  test('a pod state that has held long enough leads to one status write that records the token expiry', () => {
    const token = { expiresAt: NOW + HOUR };
    const step = plan({ pod: pending, done: { token, rbac: true, podCreated: true } });
    assert.deepEqual(step, {
      kind: 'patch-status',
      status: { phase: 'Pending', ready: false, reason: null, message: null },
      tokenExpiresAt: NOW + HOUR,
    });
    // Known from memory (a later reconcile) is recorded the same way.
    assert.deepEqual(plan({ pod: pending, knownTokenExpiry: NOW + HOUR }), step);
  });

  test('the status waits until the pod state has held for STATUS_SETTLE_MS, the expiry record with it', () => {
    const token = { expiresAt: NOW + HOUR };
    // Just created: nothing written yet; back when the state has settled.
    const fresh = plan({ pod: pending, podStateSince: NOW, done: { token, rbac: true, podCreated: true } });
    assert.deepEqual(fresh, {
      kind: 'done',
      requeueAfterMs: STATUS_SETTLE_MS,
      note: 'status waits for the pod state to settle',
    });
    assert.equal(
      plan({ pod: pending, podStateSince: NOW - STATUS_SETTLE_MS, knownTokenExpiry: NOW + HOUR }).kind,
      'patch-status',
    );
    // A status that already says it: an unrecorded expiry is written at once.
    const recorded = runner({}, { phase: 'Pending', ready: false });
    assert.deepEqual(
      plan({ runner: recorded, pod: pending, podStateSince: NOW, knownTokenExpiry: NOW + HOUR }),
      {
        kind: 'patch-status',
        status: { phase: 'Pending', ready: false },
        tokenExpiresAt: NOW + HOUR,
      },
    );
    // Settled for a second already: back when the rest of the settle is over.
    const r = runner(
      {},
      { phase: 'Pending', ready: false, registration: { token: '', expiresAt: rfc(NOW + HOUR) } },
    );
    const soon = plan({ runner: r, pod: running, podStateSince: NOW - 1_000, knownTokenExpiry: NOW + HOUR });
    assert.deepEqual(soon, {
      kind: 'done',
      requeueAfterMs: STATUS_SETTLE_MS - 1_000,
      note: 'status waits for the pod state to settle',
    });
    // A settling status does not hold up what else is due: a Runner of its own whose runner stopped.
    const stopped: Pod = {
      metadata: { name: 'r1' },
      status: {
        phase: 'Succeeded',
        containerStatuses: [{ name: 'runner', state: { terminated: { exitCode: 0 } } }],
      },
    };
    assert.deepEqual(plan({ runner: r, pod: stopped, podStateSince: NOW }), {
      kind: 'delete-pod',
      why: 'pod-stopped',
    });
    // A replica set's stopped runner settles; its replica set deletes the Runner meanwhile.
    assert.equal(plan({ runner: ofSet(r), pod: stopped, podStateSince: NOW }).kind, 'done');
  });

  test('a Runner asked to unregister gets no new pod', () => {
    for (const key of [
      'actions-runner/unregistration-request-timestamp',
      'actions-runner/unregistration-complete-timestamp',
    ]) {
      const step = plan({ runner: runner({ annotations: { [key]: '2026-12-03T09:00:00Z' } }) });
      assert.equal(step.kind, 'done', key);
    }
  });

  test('a stopped pod: a Runner of its own gets it deleted for a fresh one; a replica set replaces its Runner instead', () => {
    const status = { phase: 'Succeeded', ready: false };
    const finished: Pod = {
      metadata: { name: 'r1' },
      status: {
        phase: 'Succeeded',
        containerStatuses: [{ name: 'runner', state: { terminated: { exitCode: 0 } } }],
      },
    };
    const crashed: Pod = {
      metadata: { name: 'r1' },
      status: {
        phase: 'Running',
        containerStatuses: [{ name: 'runner', state: { terminated: { exitCode: 1 } } }],
      },
    };
    const own = runner({}, status);
    assert.deepEqual(plan({ runner: own, pod: finished }), { kind: 'delete-pod', why: 'pod-stopped' });
    assert.deepEqual(plan({ runner: runner({}, { ...status, phase: 'Running' }), pod: crashed }), {
      kind: 'delete-pod',
      why: 'pod-stopped',
    });
    assert.equal(plan({ runner: own, pod: finished, done: { podDeleted: true } }).kind, 'done');
    const ofSet = runner(
      {
        ownerReferences: [
          {
            apiVersion: 'actions.summerwind.dev/v1alpha1',
            kind: 'RunnerReplicaSet',
            name: 'rs',
            uid: 'rs1',
            controller: true,
          },
        ],
      },
      status,
    );
    assert.equal(plan({ runner: ofSet, pod: finished }).kind, 'done');
    // Still running: nothing to delete.
    assert.equal(
      plan({
        runner: runner({}, { phase: 'Running', ready: true }),
        pod: running,
      }).kind,
      'done',
    );
  });

  test('a pod of the same name that another owner controls is left alone', () => {
    assert.equal(plan({ foreignPod: true }).kind, 'done');
  });

  test('deletion: the pod is deleted (its finalizer unregisters), then our finalizer goes', () => {
    const deleting = runner({ deletionTimestamp: '2026-12-03T09:59:00Z' });
    assert.deepEqual(plan({ runner: deleting, pod: running }), { kind: 'delete-pod', why: 'runner-deleted' });
    assert.deepEqual(plan({ runner: deleting, pod: running, done: { podDeleted: true } }), {
      kind: 'remove-finalizer',
    });
    assert.deepEqual(plan({ runner: deleting, pod: undefined }), { kind: 'remove-finalizer' });
    const podDeleting = {
      ...running,
      metadata: { ...running.metadata, deletionTimestamp: '2026-12-03T09:59:30Z' },
    };
    assert.deepEqual(plan({ runner: deleting, pod: podDeleting }), { kind: 'remove-finalizer' });
    // Not ours any more: nothing to do.
    assert.deepEqual(plan({ runner: runner({ deletionTimestamp: 'x', finalizers: ['other'] }) }), {
      kind: 'done',
    });
  });

  test('status mirrors the pod; with the status hook only the first phase is ours', () => {
    const r = runner(
      {},
      { phase: 'Pending', ready: false, registration: { token: '', expiresAt: '2026-12-03T11:00:00Z' } },
    );
    assert.deepEqual(plan({ runner: r, pod: running }), {
      kind: 'patch-status',
      status: { phase: 'Running', ready: true, reason: null, message: null },
    });
    assert.equal(runnerStatusFromPod(r, running, true), undefined, 'the hook owns the phase once set');
    assert.deepEqual(runnerStatusFromPod(runner(), running, true), {
      phase: 'Running',
      ready: true,
      reason: null,
      message: null,
    });
    assert.deepEqual(runnerStatusFromPod(runner(), { metadata: {}, status: {} }, false)?.phase, 'Created');
  });

  test('a pod that has not started its runner keeps a valid token: refreshed before expiry, else requeued for then', () => {
    const expiresAt = NOW + HOUR;
    const r = runner(
      {},
      {
        phase: 'Pending',
        ready: false,
        registration: { token: '', expiresAt: new Date(expiresAt).toISOString() },
      },
    );
    assert.deepEqual(plan({ runner: r, pod: pending }), {
      kind: 'done',
      requeueAfterMs: expiresAt - TOKEN_REFRESH_BEFORE_EXPIRY_MS - NOW + 1_000,
    });
    const later = expiresAt - TOKEN_REFRESH_BEFORE_EXPIRY_MS + 1;
    assert.deepEqual(plan({ runner: r, pod: pending, now: later }), {
      kind: 'ensure-token',
      reason: 'refresh',
    });
    // A started runner consumed its token: nothing to refresh.
    const started = structuredClone(running);
    const rr = runner(
      {},
      {
        phase: 'Running',
        ready: true,
        registration: { token: '', expiresAt: new Date(expiresAt).toISOString() },
      },
    );
    assert.deepEqual(plan({ runner: rr, pod: started, now: later }), { kind: 'done' });
  });

  test('a token ARC left in the status is not a record of ours: a fresh one goes to the Secret, the status drops it', () => {
    const arc = runner(
      {},
      { phase: 'Pending', registration: { token: 'AAAA', expiresAt: '2026-12-03T11:00:00Z' } },
    );
    assert.equal(recordedTokenExpiry(arc), undefined);
    assert.deepEqual(plan({ runner: arc, pod: pending }), { kind: 'scrub-status-token' });
    const scrubbed = runner(
      {},
      { phase: 'Pending', registration: { token: '', expiresAt: '2026-12-03T11:00:00Z' } },
    );
    assert.deepEqual(plan({ runner: scrubbed, pod: pending }), {
      kind: 'done',
      requeueAfterMs: HOUR - TOKEN_REFRESH_BEFORE_EXPIRY_MS + 1_000,
    });
    assert.equal(
      recordedTokenExpiry(runner({}, { registration: { token: '', expiresAt: '2026-12-03T11:00:00Z' } })),
      Date.parse('2026-12-03T11:00:00Z'),
    );
  });
});
