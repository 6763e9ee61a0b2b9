import assert from 'node:assert/strict';
import { test } from 'node:test';
import { forEachConcurrently } from './concurrency.ts';

test('never more than the limit in flight, every item done once', async () => {
  let inFlight = 0;
  let peak = 0;
  const done: number[] = [];
  await forEachConcurrently([...Array(20).keys()], 4, async (i) => {
    inFlight++;
    peak = Math.max(peak, inFlight);
    await new Promise((r) => setTimeout(r, (i % 3) * 2));
    inFlight--;
    done.push(i);
  });
  assert.equal(peak, 4);
  assert.deepEqual(
    done.sort((a, b) => a - b),
    [...Array(20).keys()],
  );
});

test('a failure does not stop the other items; the first error is thrown at the end', async () => {
  const done: number[] = [];
  await assert.rejects(
    forEachConcurrently([1, 2, 3, 4], 2, async (i) => {
      if (i === 2) throw new Error('two');
      if (i === 3) throw new Error('three');
      done.push(i);
    }),
    /two/,
  );
  assert.deepEqual(done.sort(), [1, 4]);
});

test('no items: nothing is called', async () => {
  await forEachConcurrently([], 3, async () => assert.fail('called'));
});
