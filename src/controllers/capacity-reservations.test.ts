import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DEFAULT_TRIGGER_DURATION_MS as D,
  jobFitsLabels,
  planReservations,
  type Reservation,
  scaleTargetKeys,
} from './capacity-reservations.ts';

const NOW = Date.parse('2026-12-03T10:00:00Z');
const names = (l: Reservation[]) => l.map((r) => r.name ?? '-');

describe('planReservations', () => {
  test('queued adds one reservation per job; a redelivered queued adds nothing', () => {
    const after = planReservations(
      [],
      [
        { jobId: 1, action: 'queued', durationMs: D },
        { jobId: 2, action: 'queued', durationMs: D },
        { jobId: 1, action: 'queued', durationMs: D },
      ],
      NOW,
      undefined,
    );
    assert.deepEqual(names(after), ['job-1', 'job-2']);
    assert.deepEqual(after[0], { name: 'job-1', effectiveTime: NOW, expirationTime: NOW + D, replicas: 1 });
  });

  test("completed releases its own job's reservation, not the oldest; a repeat releases nothing more", () => {
    const current = planReservations(
      [],
      [1, 2, 3].map((jobId) => ({ jobId, action: 'queued' as const, durationMs: D })),
      NOW,
      undefined,
    );
    const after = planReservations(
      current,
      [
        { jobId: 2, action: 'completed', durationMs: D },
        { jobId: 2, action: 'completed', durationMs: D },
      ],
      NOW + 1,
      undefined,
    );
    assert.deepEqual(names(after), ['job-1', 'job-3']);
  });

  test("ARC's unnamed reservations are released oldest first by completions of jobs without one", () => {
    const arc: Reservation[] = [
      { effectiveTime: NOW - 2, expirationTime: NOW + D, replicas: 1 },
      { effectiveTime: NOW - 1, expirationTime: NOW + D, replicas: 1 },
    ];
    const after = planReservations(
      [...arc, { name: 'job-9', effectiveTime: NOW, expirationTime: NOW + D, replicas: 1 }],
      [{ jobId: 5, action: 'completed', durationMs: D }],
      NOW,
      undefined,
    );
    assert.deepEqual(
      after.map((r) => r.effectiveTime),
      [NOW - 1, NOW],
    );
    // A completion with nothing to release changes nothing (never negative).
    assert.deepEqual(
      planReservations([], [{ jobId: 5, action: 'completed', durationMs: D }], NOW, undefined),
      [],
    );
  });

  test('expired reservations go; those beyond maxReplicas restart their clock (starvation rule)', () => {
    const r = (name: string, start: number, end: number): Reservation => ({
      name,
      effectiveTime: start,
      expirationTime: end,
      replicas: 1,
    });
    const after = planReservations(
      [r('old', NOW - D - 1, NOW - 1), r('a', NOW - 5000, NOW + 1000), r('b', NOW - 5000, NOW + 1000)],
      [],
      NOW,
      1,
    );
    assert.deepEqual(after, [r('a', NOW, NOW + 6000), r('b', NOW, NOW + 6000)]);
  });
});

describe('scale target keys and labels', () => {
  test("keys per ARC's table, with the RunnerSet asymmetry", () => {
    assert.deepEqual(scaleTargetKeys({ kind: 'RunnerDeployment', repository: 'acme/app' }), ['acme/app']);
    assert.deepEqual(scaleTargetKeys({ kind: 'RunnerDeployment', organization: 'acme', group: 'g' }), [
      'acme/group/g',
    ]);
    assert.deepEqual(scaleTargetKeys({ kind: 'RunnerSet', organization: 'acme', group: 'g' }), [
      'acme',
      'acme/group/g',
    ]);
    assert.deepEqual(scaleTargetKeys({ kind: 'RunnerDeployment', enterprise: 'big' }), ['enterprises/big']);
    assert.deepEqual(scaleTargetKeys({ kind: 'RunnerSet', enterprise: 'big', group: 'g' }), [
      'enterprises/big',
      'enterprises/big/group/g',
    ]);
  });

  test('job labels: all but self-hosted must be among the target labels, case-insensitively', () => {
    assert.equal(jobFitsLabels(['self-hosted', 'Linux', 'GPU'], ['linux', 'gpu', 'x64']), true);
    assert.equal(jobFitsLabels(['self-hosted', 'arm64'], ['linux']), false);
    assert.equal(jobFitsLabels([], []), true);
    assert.equal(jobFitsLabels(['Self-Hosted'], []), false, 'only the exact self-hosted is implied');
  });
});
