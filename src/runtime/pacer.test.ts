import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WritePacer } from './pacer.ts';

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
