import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DEFAULT_TRIGGER_DURATION_MS as D,
  jobFitsLabels,
  planRepair,
  planReservations,
  type Reservation,
  reservationName,
  reservedJob,
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

  test('a reservation names its job and repository; ops match by job ID alone', () => {
    assert.equal(reservationName(7, 'octo/app'), 'job-7@octo/app');
    assert.deepEqual(reservedJob('job-7@octo/app'), { jobId: 7, repo: 'octo/app' });
    assert.deepEqual(reservedJob('job-7'), { jobId: 7 });
    for (const other of [
      undefined,
      '',
      'office-hours',
      'job-x',
      'job-7@octo',
      'job-7@a/b/c',
      'job-7@a/b c',
    ]) {
      assert.equal(reservedJob(other), undefined, String(other));
    }
    const held = planReservations(
      [],
      [{ jobId: 7, repo: 'octo/app', action: 'queued', durationMs: D }],
      NOW,
      undefined,
    );
    assert.deepEqual(names(held), ['job-7@octo/app']);
    // A completion without the repository (or a redelivery with it) finds the same reservation.
    assert.deepEqual(
      planReservations(held, [{ jobId: 7, action: 'queued', durationMs: D }], NOW, undefined),
      held,
    );
    assert.deepEqual(
      planReservations(held, [{ jobId: 7, action: 'completed', durationMs: D }], NOW, undefined),
      [],
    );
    // A reservation a person named is not released by someone else's completion.
    const manual = [{ name: 'office-hours', effectiveTime: NOW, expirationTime: NOW + D, replicas: 3 }];
    assert.deepEqual(
      planReservations(manual, [{ jobId: 8, action: 'completed', durationMs: D }], NOW, undefined),
      manual,
    );
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

describe('planRepair', () => {
  const held = (jobId: number, repo: string | undefined, at = NOW - 5 * 60_000) => ({
    name: reservationName(jobId, repo),
    effectiveTime: at,
    expirationTime: at + D * 3,
    replicas: 1,
  });
  const base = { listedRepos: new Set(['o/a']), now: NOW, graceMs: 120_000, durationMs: D };

  test('releases reservations of jobs listed as finished; adds missed queued and running jobs routed here', () => {
    const ops = planRepair({
      ...base,
      reservations: [held(1, 'o/a'), held(2, 'o/a'), held(3, 'o/a')],
      jobs: [
        { id: 2, repo: 'o/a', status: 'in_progress', routesHere: true },
        { id: 3, repo: 'o/a', status: 'completed', routesHere: true },
        { id: 4, repo: 'o/a', status: 'queued', routesHere: true },
        { id: 5, repo: 'o/a', status: 'in_progress', routesHere: true },
        { id: 6, repo: 'o/a', status: 'queued', routesHere: false },
      ],
    });
    assert.deepEqual(
      ops.map((o) => `${o.action}:${o.jobId}`),
      ['completed:1', 'completed:3', 'queued:4', 'queued:5'],
    );
    assert.ok(ops.every((o) => o.repo === 'o/a' && o.durationMs === D));
  });

  test('judges nothing it did not list or cannot place, and leaves young reservations alone', () => {
    const ops = planRepair({
      ...base,
      reservations: [
        held(1, 'o/other'), // a repository not listed this pass
        held(2, undefined), // no repository in its name (made before it was recorded)
        held(3, 'o/a', NOW - 30_000), // younger than the grace period
        { effectiveTime: NOW - 600_000, expirationTime: NOW + D, replicas: 1 }, // ARC's, unnamed
        { name: 'office-hours', effectiveTime: NOW - 600_000, expirationTime: NOW + D, replicas: 2 },
        held(4, 'o/a', NOW - D * 4), // already expired: the next write drops it anyway
      ],
      jobs: [],
    });
    assert.deepEqual(ops, []);
  });
});
