import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeClock } from './clock.ts';
import { Backoff, DEFAULT_BACKOFF, predicates, resourcePath } from './informer.ts';
import { type KubeObject, Store } from './store.ts';

describe('reconnect backoff', () => {
  test('800 ms doubling to a 30 s cap without jitter', () => {
    const b = new Backoff(new FakeClock(), DEFAULT_BACKOFF, () => 0);
    assert.deepEqual(
      Array.from({ length: 8 }, () => b.next()),
      [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000],
    );
  });

  test('jitter adds up to 100 %', () => {
    const b = new Backoff(new FakeClock(), DEFAULT_BACKOFF, () => 0.999);
    const d = b.next();
    assert.ok(d > 1590 && d <= 1600, String(d));
  });

  test('two healthy minutes reset it', async () => {
    const clock = new FakeClock();
    const b = new Backoff(clock, DEFAULT_BACKOFF, () => 0);
    b.next();
    b.next();
    assert.equal(b.next(), 3200);
    await clock.advance(120_000);
    assert.equal(b.next(), 6400, 'exactly two minutes is not yet a reset');
    await clock.advance(120_001);
    assert.equal(b.next(), 800);
  });
});

describe('store', () => {
  const obj = (name: string, labels: Record<string, string>, owners: string[] = []): KubeObject => ({
    metadata: {
      name,
      namespace: 'ns',
      labels,
      resourceVersion: '1',
      ownerReferences: owners.map((uid) => ({
        apiVersion: 'v1',
        kind: 'X',
        name: uid,
        uid,
        controller: true,
      })),
    },
  });

  test('indexes by owner UID and labels, and keeps them current on update and delete', () => {
    const s = new Store();
    s.set(obj('a', { app: 'x' }, ['u1']));
    s.set(obj('b', { app: 'x' }, ['u1', 'u2']));
    s.set(obj('c', { app: 'y' }));
    assert.deepEqual(
      s
        .byOwnerUid('u1')
        .map((o) => o.metadata.name)
        .sort(),
      ['a', 'b'],
    );
    assert.deepEqual(
      s
        .byLabel('app', 'x')
        .map((o) => o.metadata.name)
        .sort(),
      ['a', 'b'],
    );
    s.set(obj('b', { app: 'y' }, ['u2']));
    assert.deepEqual(
      s.byOwnerUid('u1').map((o) => o.metadata.name),
      ['a'],
    );
    assert.deepEqual(
      s
        .byLabel('app', 'y')
        .map((o) => o.metadata.name)
        .sort(),
      ['b', 'c'],
    );
    s.delete('ns/a');
    assert.deepEqual(s.byOwnerUid('u1'), []);
    assert.equal(s.get('ns/c')?.metadata.name, 'c');
    assert.equal(s.size, 2);
  });

  test('predicates', () => {
    const a: KubeObject = { metadata: { generation: 1, resourceVersion: '1', labels: { a: '1' } } };
    const b: KubeObject = { metadata: { generation: 1, resourceVersion: '2', labels: { a: '1' } } };
    const c: KubeObject = { metadata: { generation: 2, resourceVersion: '3', labels: { a: '2' } } };
    assert.equal(predicates.generationChanged(a, b), false);
    assert.equal(predicates.generationChanged(b, c), true);
    assert.equal(predicates.resourceVersionChanged(a, b), true);
    assert.equal(predicates.labelsChanged(a, b), false);
    assert.equal(predicates.labelsChanged(b, c), true);
    assert.equal(predicates.or(predicates.generationChanged, predicates.labelsChanged)(a, b), false);
  });

  test('resource paths', () => {
    const pods = { group: '', version: 'v1', plural: 'pods', namespaced: true, kind: 'Pod' };
    assert.equal(resourcePath(pods, 'ns'), '/api/v1/namespaces/ns/pods');
    assert.equal(resourcePath(pods), '/api/v1/pods');
    const rs = {
      group: 'actions.summerwind.dev',
      version: 'v1alpha1',
      plural: 'runnersets',
      namespaced: true,
      kind: 'RunnerSet',
    };
    assert.equal(
      resourcePath(rs, 'ci', 'x'),
      '/apis/actions.summerwind.dev/v1alpha1/namespaces/ci/runnersets/x',
    );
  });
});
