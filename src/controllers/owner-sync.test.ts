import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { classifyPod, type OwnerState, type PodBucket, planOwnerSync } from './owner-sync.ts';

const NOW = Date.parse('2026-06-01T12:00:00Z');
const MIN = 60_000;

function owner(
  name: string,
  bucket: PodBucket | PodBucket[],
  o: Partial<OwnerState> & { busy?: boolean } = {},
): OwnerState {
  const buckets = Array.isArray(bucket) ? bucket : [bucket];
  return {
    name,
    createdAt: o.createdAt ?? NOW - 10 * MIN,
    templateHash: o.templateHash ?? 'h1',
    deleting: o.deleting ?? false,
    annotations: o.annotations ?? {},
    synced: o.synced ?? true,
    ...(o.replicas !== undefined ? { replicas: o.replicas } : {}),
    pods:
      o.pods ??
      buckets.map((b) => ({ name: `${name}-0`, bucket: b, annotations: {}, deleting: false, busy: o.busy })),
  };
}

const plan = (
  owners: OwnerState[],
  desired: number,
  extra: Partial<Parameters<typeof planOwnerSync>[0]> = {},
) =>
  planOwnerSync({
    owners,
    desiredReplicas: desired,
    desiredHash: 'h1',
    ephemeral: true,
    effectiveTime: undefined,
    now: NOW,
    ...extra,
  });

describe('classifyPod', () => {
  const pod = (
    phase: string,
    o: { id?: boolean; readyAgo?: number; deleting?: boolean; exit0?: boolean } = {},
  ) => ({
    metadata: {
      name: 'p',
      annotations: (o.id ? { 'actions-runner/id': '1' } : {}) as Record<string, string>,
      ...(o.deleting ? { deletionTimestamp: new Date(NOW).toISOString() } : {}),
    },
    spec: { containers: [{ name: 'runner' }] },
    status: {
      phase,
      conditions:
        o.readyAgo === undefined
          ? []
          : [{ type: 'Ready', status: 'True', lastTransitionTime: new Date(NOW - o.readyAgo).toISOString() }],
      containerStatuses: [{ name: 'runner', state: o.exit0 ? { terminated: { exitCode: 0 } } : {} }],
    },
  });
  test('buckets in the spec’s order', () => {
    assert.equal(classifyPod(pod('Succeeded'), NOW, 10 * MIN), 'completed');
    assert.equal(classifyPod(pod('Running', { exit0: true }), NOW, 10 * MIN), 'completed');
    assert.equal(classifyPod(pod('Running', { readyAgo: 11 * MIN }), NOW, 10 * MIN), 'regTimeout');
    assert.equal(classifyPod(pod('Running', { readyAgo: 11 * MIN, id: true }), NOW, 10 * MIN), 'running');
    assert.equal(classifyPod(pod('Running', { readyAgo: MIN }), NOW, 10 * MIN), 'running');
    assert.equal(classifyPod(pod('Pending', { deleting: true }), NOW, 10 * MIN), 'terminating');
    assert.equal(classifyPod(pod('Pending'), NOW, 10 * MIN), 'pending');
  });
});

describe('planOwnerSync', () => {
  test('scale up creates the missing owners', () => {
    assert.deepEqual(plan([owner('a', 'running')], 3).actions, [{ kind: 'create-owners', count: 2 }]);
    assert.deepEqual(plan([], 2).actions, [{ kind: 'create-owners', count: 2 }]);
  });

  test('pending runners count as maybe running: no double creation', () => {
    assert.deepEqual(plan([owner('a', 'running'), owner('b', 'pending')], 2).actions, []);
  });

  test('scale down prefers idle runners over busy ones (ARC would pick the newest)', () => {
    const owners = [
      owner('old-idle', 'running', { createdAt: NOW - 30 * MIN, busy: false }),
      owner('mid-busy', 'running', { createdAt: NOW - 20 * MIN, busy: true }),
      owner('new-idle', 'running', { createdAt: NOW - 10 * MIN, busy: false }),
    ];
    assert.deepEqual(plan(owners, 1).actions, [
      { kind: 'request-unregistration', owner: 'new-idle', pods: ['new-idle-0'] },
      { kind: 'request-unregistration', owner: 'old-idle', pods: ['old-idle-0'] },
    ]);
  });

  test('scale down to zero asks everyone, busy last; owners without running pods always go', () => {
    const owners = [
      owner('busy', 'running', { busy: true }),
      owner('pending', 'pending'),
      owner('idle', 'running', { busy: false }),
    ];
    // desired 0 <= running 2
    const actions = plan(owners, 0).actions.map((a) =>
      a.kind === 'request-unregistration' ? a.owner : a.kind,
    );
    assert.deepEqual(actions, ['pending', 'idle', 'busy']);
  });

  test('an owner already asked is not asked again', () => {
    const asked = owner('a', 'running', {
      annotations: { 'actions-runner/unregistration-request-timestamp': 'x' },
    });
    assert.deepEqual(
      plan([asked, owner('b', 'running')], 1).actions,
      [],
      'the asked owner already covers the scale-down',
    );
    assert.deepEqual(plan([asked, owner('b', 'running')], 0).actions, [
      { kind: 'request-unregistration', owner: 'b', pods: ['b-0'] },
    ]);
  });

  test('an asked owner whose pods all completed unregistration is marked complete, then deleted', () => {
    const asked = owner('a', 'running', {
      annotations: { 'actions-runner/unregistration-request-timestamp': 'x' },
      pods: [
        {
          name: 'a-0',
          bucket: 'running',
          annotations: { 'actions-runner/unregistration-complete-timestamp': 'y' },
          deleting: false,
          busy: false,
        },
      ],
    });
    assert.deepEqual(plan([asked], 0).actions, [{ kind: 'mark-owner-complete', owner: 'a' }]);
    const complete = owner('a', 'running', {
      annotations: { 'actions-runner/unregistration-complete-timestamp': 'y' },
    });
    assert.deepEqual(plan([complete], 0).actions, [
      { kind: 'delete-owner', owner: 'a', reason: 'unregistered' },
    ]);
  });

  test('an owner whose pods all completed is deleted and the round ends', () => {
    const p = plan([owner('done', 'completed'), owner('b', 'running')], 2);
    assert.deepEqual(p.actions, [{ kind: 'delete-owner', owner: 'done', reason: 'completed' }]);
  });

  test('an owner not yet synced stops the round', () => {
    const p = plan([owner('a', 'running', { synced: false })], 3);
    assert.deepEqual(p.actions, []);
    assert.match(p.note ?? '', /not synced/);
  });

  test('a pod the owner has but our cache has not seen yet counts as pending: no second owner', () => {
    // The StatefulSet reports its pod before the pod reaches the pod cache.
    const fresh = owner('fresh', 'pending', { replicas: 1, pods: [] });
    assert.deepEqual(plan([fresh], 1).actions, [], 'the replacement is on its way');
    assert.deepEqual(plan([fresh], 2).actions, [{ kind: 'create-owners', count: 1 }]);
    const seen = owner('seen', 'running', { replicas: 1 });
    assert.deepEqual(plan([seen], 2).actions, [{ kind: 'create-owners', count: 1 }], 'seen pods count once');
    assert.deepEqual(
      plan([owner('gone', 'running', { replicas: 0, pods: [] })], 1).actions,
      [{ kind: 'create-owners', count: 1 }],
      'an owner that reports no pod holds no place',
    );
  });

  test('outdated owners are deleted one per round', () => {
    const p = plan(
      [
        owner('old1', 'running', { templateHash: 'h0' }),
        owner('old2', 'running', { templateHash: 'h0' }),
        owner('new', 'running'),
      ],
      1,
    );
    assert.deepEqual(p.actions, [{ kind: 'delete-owner', owner: 'old1', reason: 'outdated' }]);
  });

  test('ephemeral recreation guard after a webhook scale', () => {
    const synced = owner('a', 'running', { annotations: { 'sync-time': new Date(NOW - MIN).toISOString() } });
    const p = plan([synced], 3, { effectiveTime: NOW - 2 * MIN });
    assert.deepEqual(p.actions, []);
    const later = plan([synced], 3, { effectiveTime: NOW - 2 * MIN, now: NOW + 10 * MIN });
    assert.deepEqual(later.actions, [{ kind: 'create-owners', count: 2 }]);
  });
});
