import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  classifyPod,
  type OwnerAction,
  type OwnerState,
  type PodBucket,
  type PodState,
  planOwnerSync,
} from './owner-sync.ts';

const NOW = Date.parse('2026-06-01T12:00:00Z');
const MIN = 60_000;
const REQUEST = 'actions-runner/unregistration-request-timestamp';
const COMPLETE = 'actions-runner/unregistration-complete-timestamp';
const ID = 'actions-runner/id';

function pod(name: string, bucket: PodBucket, o: Partial<PodState> = {}): PodState {
  return { name, bucket, annotations: {}, deleting: false, busy: undefined, ...o };
}

/** Actions as short strings, so the tests read like the decisions (and compare across shapes). */
const summary = (actions: OwnerAction[]) =>
  actions.map((a) =>
    a.kind === 'create-owners'
      ? `create ${a.count}`
      : a.kind === 'delete-owner'
        ? `delete ${a.owner}`
        : a.kind === 'request-unregistration'
          ? `ask ${a.owner}${a.pods.length ? `: ${a.pods.join(',')}` : ''}`
          : (a as { kind: string }).kind,
  );

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
    ...(o.askedRecently ? { askedRecently: true } : {}),
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
      {
        kind: 'request-unregistration',
        owner: 'new-idle',
        pods: ['new-idle-0'],
        annotateOwner: true,
        reason: 'scale-down',
      },
      {
        kind: 'request-unregistration',
        owner: 'old-idle',
        pods: ['old-idle-0'],
        annotateOwner: true,
        reason: 'scale-down',
      },
    ]);
  });

  test('scale down to zero asks everyone, busy last; owners without running pods always go', () => {
    const owners = [
      owner('busy', 'running', { busy: true }),
      owner('pending', 'pending'),
      owner('idle', 'running', { busy: false }),
    ];
    // desired 0 <= running 2
    assert.deepEqual(summary(plan(owners, 0).actions), [
      'ask pending: pending-0',
      'ask idle: idle-0',
      'ask busy: busy-0',
    ]);
  });

  test('an owner already asked is not asked again', () => {
    const asked = owner('a', 'running', { annotations: { [REQUEST]: 'x' } });
    asked.pods[0]!.annotations = { [REQUEST]: 'x' };
    assert.deepEqual(
      plan([asked, owner('b', 'running')], 1).actions,
      [],
      'the asked owner already covers the scale-down',
    );
    assert.deepEqual(summary(plan([asked, owner('b', 'running')], 0).actions), ['ask b: b-0']);
  });

  test('an asked owner whose pods all completed unregistration is deleted in the same round', () => {
    const asked = owner('a', 'running', {
      annotations: { [REQUEST]: 'x' },
      pods: [pod('a-0', 'running', { annotations: { [REQUEST]: 'x', [COMPLETE]: 'y' }, busy: false })],
    });
    assert.deepEqual(plan([asked], 0).actions, [
      { kind: 'delete-owner', owner: 'a', reason: 'unregistered' },
    ]);
    const complete = owner('a', 'running', { annotations: { [COMPLETE]: 'y' } });
    assert.deepEqual(plan([complete], 0).actions, [
      { kind: 'delete-owner', owner: 'a', reason: 'unregistered' },
    ]);
  });

  test('owners whose pods all completed are deleted and replaced in the same round', () => {
    const p = plan([owner('done', 'completed'), owner('b', 'running'), owner('done2', 'completed')], 3);
    assert.deepEqual(summary(p.actions), ['delete done', 'delete done2', 'create 2']);
    assert.deepEqual(p.current, ['b']);
    // The ephemeral recreation guard still holds the replacements back after a webhook scale.
    const sync = new Date(NOW - MIN).toISOString();
    const guarded = plan(
      [owner('done', 'completed'), owner('b', 'running', { annotations: { 'sync-time': sync } })],
      2,
      { effectiveTime: NOW - 2 * MIN },
    );
    assert.deepEqual(summary(guarded.actions), ['delete done']);
  });

  test('an owner not yet synced stops the round', () => {
    const p = plan([owner('a', 'running', { synced: false })], 3);
    assert.deepEqual(p.actions, []);
    assert.match(p.note ?? '', /not synced/);
    assert.equal(p.statusUnknown, true, 'no status is computed from a stopped round');
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

  test('ephemeral recreation guard after a webhook scale', () => {
    const synced = owner('a', 'running', { annotations: { 'sync-time': new Date(NOW - MIN).toISOString() } });
    const p = plan([synced], 3, { effectiveTime: NOW - 2 * MIN });
    assert.deepEqual(p.actions, []);
    const later = plan([synced], 3, { effectiveTime: NOW - 2 * MIN, now: NOW + 10 * MIN });
    assert.deepEqual(later.actions, [{ kind: 'create-owners', count: 2 }]);
  });

  test('a scale-up that arrives in steps past the guard: the raise is created, the finished runners are not', () => {
    // The last round created for 3; since then one runner finished (1 left) and demand rose to 5.
    const synced = owner('a', 'running', {
      annotations: { 'sync-time': new Date(NOW - 1000).toISOString() },
    });
    const raised = plan([synced], 5, { effectiveTime: NOW - 2000, desiredAtLastCreation: 3 });
    assert.deepEqual(raised.actions, [{ kind: 'create-owners', count: 2 }]);
    // No raise (or no memory after a restart): ARC's guard holds.
    assert.deepEqual(plan([synced], 5, { effectiveTime: NOW - 2000, desiredAtLastCreation: 5 }).actions, []);
    assert.deepEqual(plan([synced], 5, { effectiveTime: NOW - 2000 }).actions, []);
    // A raise beyond what is missing creates only what is missing.
    const full = [
      synced,
      owner('b', 'running', { annotations: { 'sync-time': new Date(NOW - 1000).toISOString() } }),
    ];
    assert.deepEqual(plan(full, 3, { effectiveTime: NOW - 2000, desiredAtLastCreation: 1 }).actions, [
      { kind: 'create-owners', count: 1 },
    ]);
  });
});

describe('planOwnerSync: sticky scale-down on a stale cache (issue 10 items 8, 15)', () => {
  const idle = (name: string, createdAgo: number) =>
    owner(name, 'running', { createdAt: NOW - createdAgo * MIN, busy: false });

  test('an owner asked before counts as removed first, even after it took a job: nobody else is asked', () => {
    // 3 → 2: 'a' (idle then) was asked; it took a job before the runner pod controller removed it.
    const a = owner('a', 'running', {
      createdAt: NOW - 5 * MIN,
      busy: true,
      annotations: { [REQUEST]: 'x' },
    });
    a.pods[0]!.annotations = { [REQUEST]: 'x' };
    assert.deepEqual(plan([a, idle('b', 20), idle('c', 10)], 2).actions, []);
  });

  test('the request on a pod is enough (the owner’s annotation has not reached the cache): the owner gets it, nobody else is asked', () => {
    const a = owner('a', 'running', { createdAt: NOW - 5 * MIN, busy: true });
    a.pods[0]!.annotations = { [REQUEST]: 'x' };
    assert.deepEqual(plan([a, idle('b', 20), idle('c', 10)], 2).actions, [
      { kind: 'request-unregistration', owner: 'a', pods: [], annotateOwner: true, reason: 'follow-up' },
    ]);
  });

  test('a request written moments ago counts although the cache shows none of it', () => {
    const a = owner('a', 'running', { createdAt: NOW - 5 * MIN, busy: true, askedRecently: true });
    a.pods[0]!.askedRecently = true;
    assert.deepEqual(plan([a, idle('b', 20), idle('c', 10)], 2).actions, []);
  });

  test('2 → 1 over consecutive rounds asks exactly one runner, whatever the cache shows in between', () => {
    const round1 = plan([idle('a', 20), idle('b', 10)], 1);
    assert.deepEqual(summary(round1.actions), ['ask b: b-0']);
    // Round 2, nothing visible yet but remembered; b took a job meanwhile.
    const b2 = owner('b', 'running', { createdAt: NOW - 10 * MIN, busy: true, askedRecently: true });
    b2.pods[0]!.askedRecently = true;
    assert.deepEqual(plan([idle('a', 20), b2], 1).actions, []);
    // Round 3, the memory expired; only the pod's annotations arrived, the runner is unregistered.
    const b3 = owner('b', 'running', {
      createdAt: NOW - 10 * MIN,
      pods: [pod('b-0', 'running', { annotations: { [REQUEST]: 'x', [COMPLETE]: 'y' } })],
    });
    assert.deepEqual(summary(plan([idle('a', 20), b3], 1).actions), ['delete b']);
  });

  test('a pod that carries unregistration-complete, or is being deleted, is not a running runner of the fleet', () => {
    // 'b' is being replaced (its pod was unregistered for a restart): one runner runs, desired 1. ARC
    // counted two and asked one of them to leave; here the surplus owner is b, which runs nothing.
    const restarting = owner('b', 'running', {
      pods: [pod('b-0', 'running', { annotations: { [COMPLETE]: 'y' }, busy: false })],
    });
    assert.deepEqual(summary(plan([idle('a', 20), restarting], 1).actions), ['ask b'], 'a is kept');
    assert.deepEqual(plan([idle('a', 20), restarting], 2).actions, [], 'the StatefulSet replaces b’s pod');
    const deleting = owner('b', 'running', {
      pods: [pod('b-0', 'running', { deleting: true, busy: false })],
    });
    assert.deepEqual(summary(plan([idle('a', 20), deleting], 1).actions), ['ask b'], 'a is kept');
  });

  test('scaling up again while a runner is still leaving replaces it', () => {
    const leaving = owner('a', 'running', { busy: true, annotations: { [REQUEST]: 'x' } });
    leaving.pods[0]!.annotations = { [REQUEST]: 'x' };
    assert.deepEqual(summary(plan([leaving, idle('b', 10)], 2).actions), ['create 1']);
  });

  test('a leaving owner blocks no round', () => {
    const leaving = owner('a', 'running', { synced: false, annotations: { [REQUEST]: 'x' } });
    leaving.pods[0]!.annotations = { [REQUEST]: 'x' };
    assert.deepEqual(summary(plan([leaving, idle('b', 10)], 2).actions), ['create 1']);
  });
});

describe('planOwnerSync: a scale-down never strands a runner (issue 10 item 14)', () => {
  test('a pod of a leaving owner that lacks the request gets it (the StatefulSet replaced a finished pod)', () => {
    const leaving = owner('a', 'pending', {
      annotations: { [REQUEST]: 'x' },
      pods: [pod('a-0', 'pending')], // the replacement: nobody asked it
    });
    assert.deepEqual(plan([leaving], 0).actions, [
      {
        kind: 'request-unregistration',
        owner: 'a',
        pods: ['a-0'],
        annotateOwner: false,
        reason: 'follow-up',
      },
    ]);
    const running = owner('a', 'running', {
      annotations: { [REQUEST]: 'x' },
      pods: [pod('a-0', 'running', { annotations: { [ID]: '7' }, busy: false })],
    });
    assert.deepEqual(summary(plan([running, owner('b', 'running')], 1).actions), ['ask a: a-0']);
  });

  test('an owner asked before its pod reached the cache: the pod is asked once it shows', () => {
    const before = owner('a', 'pending', { replicas: 1, pods: [] });
    assert.deepEqual(summary(plan([before], 0).actions), ['ask a'], 'only the owner can be asked now');
    const after = owner('a', 'pending', { replicas: 1, annotations: { [REQUEST]: 'x' } });
    assert.deepEqual(summary(plan([after], 0).actions), ['ask a: a-0']);
  });

  test('a leaving owner is not deleted while its StatefulSet reports a pod the cache has not shown', () => {
    const unseen = owner('a', 'pending', { replicas: 1, pods: [], annotations: { [REQUEST]: 'x' } });
    assert.deepEqual(plan([unseen], 0).actions, []);
    const none = owner('a', 'pending', { replicas: 0, pods: [], annotations: { [REQUEST]: 'x' } });
    assert.deepEqual(summary(plan([none], 0).actions), ['delete a']);
  });

  test('a leaving owner goes as soon as its pods are unregistered, being deleted or stopped', () => {
    const mixed = owner('a', 'running', {
      annotations: { [REQUEST]: 'x' },
      pods: [pod('a-0', 'completed', { annotations: { [REQUEST]: 'x' } })],
    });
    assert.deepEqual(plan([mixed], 0).actions, [{ kind: 'delete-owner', owner: 'a', reason: 'completed' }]);
    const deleting = owner('a', 'running', {
      annotations: { [REQUEST]: 'x' },
      pods: [pod('a-0', 'running', { annotations: { [REQUEST]: 'x' }, deleting: true })],
    });
    assert.deepEqual(plan([deleting], 0).actions, [
      { kind: 'delete-owner', owner: 'a', reason: 'unregistered' },
    ]);
    const busy = owner('a', 'running', {
      annotations: { [REQUEST]: 'x' },
      pods: [pod('a-0', 'running', { annotations: { [REQUEST]: 'x' }, busy: true })],
    });
    assert.deepEqual(plan([busy], 0).actions, [], 'a busy runner is waited for');
  });
});

describe('planOwnerSync: template rollouts never delete a busy runner (issue 10 item 7)', () => {
  const old = (name: string, o: { busy?: boolean; bucket?: PodBucket } = {}) =>
    owner(name, o.bucket ?? 'running', {
      templateHash: 'h0',
      createdAt: NOW - 60 * MIN,
      pods: [pod(`${name}-0`, o.bucket ?? 'running', { annotations: { [ID]: '1' }, busy: o.busy ?? false })],
    });
  const fresh = (name: string, registered: boolean) =>
    owner(name, 'running', {
      pods: [pod(`${name}-0`, 'running', { annotations: registered ? { [ID]: '2' } : {} })],
    });

  test('first the new template’s runners are created; nothing old is touched', () => {
    const owners = [old('o1', { busy: true }), old('o2'), old('o3')];
    assert.deepEqual(summary(plan(owners, 3).actions), ['create 3']);
  });

  test('older runners wait until the current template has the desired number registered', () => {
    const owners = [
      old('o1', { busy: true }),
      old('o2'),
      old('o3'),
      fresh('n1', true),
      fresh('n2', true),
      fresh('n3', false),
    ];
    const p = plan(owners, 3);
    assert.deepEqual(p.actions, []);
    assert.match(p.note ?? '', /2 of 3/);
  });

  test('then every older runner is asked to unregister — the busy one finishes its job first — and none is deleted', () => {
    const owners = [
      old('o1', { busy: true }),
      old('o2'),
      old('o3'),
      fresh('n1', true),
      fresh('n2', true),
      fresh('n3', true),
    ];
    const p = plan(owners, 3);
    assert.deepEqual(
      p.actions.map((a) => (a.kind === 'request-unregistration' ? `${a.reason} ${a.owner}` : a.kind)),
      ['outdated o1', 'outdated o2', 'outdated o3'],
    );
  });

  test('older owners without a running runner leave at once (they hold no capacity)', () => {
    const owners = [old('o1'), old('o2', { bucket: 'pending' }), fresh('n1', false), fresh('n2', false)];
    assert.deepEqual(summary(plan(owners, 2).actions), ['ask o2: o2-0']);
  });

  test('an older owner already leaving is not asked again; runners removed in this round do not count as available', () => {
    const leaving = old('o1');
    leaving.annotations = { [REQUEST]: 'x' };
    leaving.pods[0]!.annotations = { ...leaving.pods[0]!.annotations, [REQUEST]: 'x' };
    assert.deepEqual(plan([leaving, fresh('n1', true)], 1).actions, []);
    // Desired 1; n1 (registered, idle) and n2 (not registered yet) run. n1 is asked to go in this
    // round, which leaves no registered runner of the current template: o2 stays for now.
    const n1 = fresh('n1', true);
    n1.pods[0]!.busy = false;
    n1.createdAt = NOW - MIN;
    const owners = [old('o2'), n1, fresh('n2', false)];
    assert.deepEqual(summary(plan(owners, 1).actions), ['ask n1: n1-0']);
  });
});
