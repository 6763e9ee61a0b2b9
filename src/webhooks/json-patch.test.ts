import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { diffJson, escapePointerToken, pointer } from './json-patch.ts';
import { applyJsonPatch } from './test-support.ts';

describe('json patch', () => {
  test('pointer tokens escape ~ and /', () => {
    assert.equal(escapePointerToken('a/b~c'), 'a~1b~0c');
    assert.equal(pointer(['metadata', 'annotations', 'x.io/y~z']), '/metadata/annotations/x.io~1y~0z');
  });

  test('equal documents give no operations', () => {
    assert.deepEqual(diffJson({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] }), []);
  });

  test('added, replaced and removed members', () => {
    const from = { keep: 1, change: 'x', drop: true, nested: { a: 1 } };
    const to = { keep: 1, change: 'y', nested: { a: 1, 'k/e~y': 'v' }, added: [1] };
    const ops = diffJson(from, to);
    assert.deepEqual(ops, [
      { op: 'remove', path: '/drop' },
      { op: 'replace', path: '/change', value: 'y' },
      { op: 'add', path: '/nested/k~1e~0y', value: 'v' },
      { op: 'add', path: '/added', value: [1] },
    ]);
    assert.deepEqual(applyJsonPatch(from, ops), to);
  });

  test('arrays: appends add at the next index, shrinking removes from the end', () => {
    const grown = diffJson({ env: [{ name: 'A' }] }, { env: [{ name: 'A' }, { name: 'B', value: 'b' }] });
    assert.deepEqual(grown, [{ op: 'add', path: '/env/1', value: { name: 'B', value: 'b' } }]);
    const from = { l: [1, 2, 3, 4] };
    const shrunk = diffJson(from, { l: [1, 2] });
    assert.deepEqual(shrunk, [
      { op: 'remove', path: '/l/3' },
      { op: 'remove', path: '/l/2' },
    ]);
    assert.deepEqual(applyJsonPatch(from, shrunk), { l: [1, 2] });
  });

  test('an array mostly rewritten is replaced whole', () => {
    const ops = diffJson({ l: [1, 2, 3] }, { l: [4, 5, 6] });
    assert.deepEqual(ops, [{ op: 'replace', path: '/l', value: [4, 5, 6] }]);
  });

  test('type changes and null become replace; undefined counts as absent', () => {
    assert.deepEqual(diffJson({ a: null }, { a: { b: 1 } }), [
      { op: 'replace', path: '/a', value: { b: 1 } },
    ]);
    assert.deepEqual(diffJson({ a: 1, b: undefined }, { a: 1 }), []);
    assert.deepEqual(diffJson({ a: 1 }, { a: 1, b: undefined }), []);
  });

  test('randomised round trips', () => {
    let seed = 7;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const gen = (depth: number): unknown => {
      const r = rnd();
      if (depth > 3 || r < 0.3) return [1, 'a/b', null, true][Math.floor(rnd() * 4)];
      if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 4) }, () => gen(depth + 1));
      const o: Record<string, unknown> = {};
      for (let i = 0; i < Math.floor(rnd() * 4); i++)
        o[['x', 'y~', 'z/', 'w'][Math.floor(rnd() * 4)]!] = gen(depth + 1);
      return o;
    };
    for (let i = 0; i < 500; i++) {
      const a = { root: gen(0) };
      const b = { root: gen(0) };
      assert.deepEqual(applyJsonPatch(a, diffJson(a, b)), b);
    }
  });
});
