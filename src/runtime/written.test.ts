import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from './store.ts';
import { WrittenObjects } from './written.ts';

const obj = (rv: string, uid = 'u1'): KubeObject => ({
  metadata: { name: 'a', namespace: 'ns', uid, resourceVersion: rv },
});

test('the object last written wins until the cache has caught up, then the cache', () => {
  const w = new WrittenObjects<KubeObject>();
  w.remember(obj('12'));
  assert.equal(w.newest('ns/a', obj('10'))?.metadata.resourceVersion, '12');
  assert.equal(w.size, 1);
  assert.equal(w.newest('ns/a', obj('12'))?.metadata.resourceVersion, '12');
  assert.equal(w.size, 0, 'dropped once the cache has it');
  w.remember(obj('12'));
  assert.equal(w.newest('ns/a', obj('15'))?.metadata.resourceVersion, '15');
});

test('a deleted or recreated object, or a version that is not a number: the cache wins', () => {
  const w = new WrittenObjects<KubeObject>();
  w.remember(obj('12'));
  assert.equal(w.newest('ns/a', undefined), undefined);
  w.remember(obj('12'));
  assert.equal(w.newest('ns/a', obj('3', 'u2'))?.metadata.uid, 'u2');
  w.remember(obj('x12'));
  assert.equal(w.newest('ns/a', obj('10'))?.metadata.resourceVersion, '10');
  assert.equal(w.size, 0);
});

test('an informer event that catches up drops the write at once; an older one does not', () => {
  const w = new WrittenObjects<KubeObject>();
  w.remember(obj('12'));
  w.observe(obj('11'));
  assert.equal(w.size, 1);
  assert.equal(w.newest('ns/a', obj('11'))?.metadata.resourceVersion, '12');
  w.observe(obj('12'));
  assert.equal(w.size, 0);
  w.remember(obj('12'));
  w.observe(obj('1', 'u2'));
  assert.equal(w.size, 0, 'a new object of the same name');
  w.remember(obj('12'));
  w.observe({ metadata: { name: 'b', namespace: 'ns', uid: 'u1', resourceVersion: '99' } });
  assert.equal(w.size, 1, 'another key');
});
