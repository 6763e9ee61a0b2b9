import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TurnPacer, WritePacer } from './pacer.ts';

test('one write per key per interval; other keys are not held back', () => {
  let now = 1000;
  const pacer = new WritePacer({ now: () => now } as never, 1000);
  assert.equal(pacer.waitMs('a'), 0);
  pacer.wrote('a');
  now += 300;
  assert.equal(pacer.waitMs('a'), 700);
  assert.equal(pacer.waitMs('b'), 0);
  now += 700;
  assert.equal(pacer.waitMs('a'), 0);
  pacer.forget('a');
  assert.equal(pacer.waitMs('a'), 0);
});

test('turns: a burst of keys is spread at the rate, each key keeps its turn, a far turn is not given', () => {
  let now = 0;
  const pacer = new TurnPacer({ now: () => now } as never, 10, 500);
  const waits = ['a', 'b', 'c', 'd'].map((k) => pacer.waitMs(k));
  assert.deepEqual(waits, [0, 100, 200, 300]);
  assert.equal(pacer.waitMs('c'), 200, 'asking again keeps the same turn');
  now = 200;
  assert.equal(pacer.waitMs('c'), 0, 'its turn');
  assert.equal(pacer.size, 2, 'a and c used theirs');
  // Six more: the ones past 500 ms away go at once rather than wait.
  const more = ['e', 'f', 'g', 'h', 'i', 'j'].map((k) => pacer.waitMs(k));
  assert.deepEqual(more, [200, 300, 400, 500, 0, 0]);
  pacer.forget('e');
  assert.equal(pacer.size, 5);
});
