import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FAULT_KINDS, faultSchedule } from './soak-schedule.ts';

const base = {
  seed: 42,
  durationMs: 4 * 60_000,
  kinds: FAULT_KINDS,
  warmupMs: 40_000,
  quietTailMs: 45_000,
  meanRandomGapMs: 0,
};

describe('faultSchedule', () => {
  test('a short soak meets every kind exactly once, inside the window, in time order', () => {
    const s = faultSchedule(base);
    assert.deepEqual([...s.map((f) => f.kind)].sort(), [...FAULT_KINDS].sort());
    for (const f of s) {
      assert.ok(f.atMs >= base.warmupMs, `${f.kind} at ${f.atMs} is before the warm-up ends`);
      assert.ok(f.atMs <= base.durationMs - base.quietTailMs, `${f.kind} at ${f.atMs} is in the quiet tail`);
    }
    assert.deepEqual(
      s.map((f) => f.atMs),
      [...s.map((f) => f.atMs)].sort((a, b) => a - b),
    );
  });

  test('the same seed gives the same schedule; another seed another order', () => {
    assert.deepEqual(faultSchedule(base), faultSchedule(base));
    const other = faultSchedule({ ...base, seed: 43 });
    assert.notDeepEqual(
      other.map((f) => f.kind),
      faultSchedule(base).map((f) => f.kind),
    );
  });

  test('a long soak adds random faults but never stacks a lasting fault on one of its kind in progress', () => {
    const s = faultSchedule({ ...base, durationMs: 60 * 60_000, meanRandomGapMs: 2 * 60_000 });
    assert.ok(s.length > FAULT_KINDS.length + 5, `only ${s.length} faults in an hour`);
    const lastEnd = new Map<string, number>();
    for (const f of s) {
      assert.ok((lastEnd.get(f.kind) ?? -1) <= f.atMs, `${f.kind} at ${f.atMs} overlaps the previous one`);
      lastEnd.set(f.kind, f.atMs + f.durationMs);
    }
    assert.ok(s.every((f) => f.atMs <= 60 * 60_000 - base.quietTailMs));
  });

  test('only the kinds asked for; none when the window is empty', () => {
    const s = faultSchedule({ ...base, kinds: ['pod-kill', 'leader-kill'] });
    assert.deepEqual(s.map((f) => f.kind).sort(), ['leader-kill', 'pod-kill']);
    assert.deepEqual(faultSchedule({ ...base, durationMs: 60_000 }), []);
  });
});
