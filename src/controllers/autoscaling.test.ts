import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  AutoscalingError,
  afterPrimary,
  busyRatioReplicas,
  desiredReplicas,
  goDuration,
  matchSchedule,
  metricTypes,
  minReplicasAt,
  parseGoDuration,
  scheduledOverridesSummary,
  statusUpdate,
  supportedMetric,
  targetPatch,
} from './autoscaling.ts';

const t = (iso: string) => Date.parse(iso);
const HOUR = 3_600_000;
const iso = (p: { start: number; end: number } | undefined) =>
  p && [new Date(p.start).toISOString(), new Date(p.end).toISOString()];

describe('matchSchedule', () => {
  test('one-off: start inclusive, end exclusive', () => {
    const [start, end] = [t('2026-12-03T10:00:00Z'), t('2026-12-03T12:00:00Z')];
    const cases: [string, 'active' | 'upcoming' | 'none'][] = [
      ['2026-12-03T09:59:59Z', 'upcoming'],
      ['2026-12-03T10:00:00Z', 'active'],
      ['2026-12-03T11:59:59Z', 'active'],
      ['2026-12-03T12:00:00Z', 'none'],
    ];
    for (const [now, want] of cases) {
      const m = matchSchedule(t(now), start, end);
      const got = m.active ? 'active' : m.upcoming ? 'upcoming' : 'none';
      assert.equal(got, want, now);
    }
  });

  test('daily and weekly: the active occurrence and the next one within a step', () => {
    const start = t('2026-01-05T09:00:00Z'); // a Monday
    const end = t('2026-01-05T17:00:00Z');
    const daily = matchSchedule(t('2026-12-03T10:00:00Z'), start, end, { frequency: 'Daily' });
    assert.deepEqual(iso(daily.active), ['2026-12-03T09:00:00.000Z', '2026-12-03T17:00:00.000Z']);
    assert.deepEqual(iso(daily.upcoming), ['2026-12-04T09:00:00.000Z', '2026-12-04T17:00:00.000Z']);
    const evening = matchSchedule(t('2026-12-03T17:00:00Z'), start, end, { frequency: 'Daily' });
    assert.equal(evening.active, undefined, 'the end is exclusive');
    const weekly = matchSchedule(t('2026-12-03T10:00:00Z'), start, end, { frequency: 'Weekly' });
    assert.equal(weekly.active, undefined, 'Thursday: not a Monday');
    assert.deepEqual(iso(weekly.upcoming), ['2026-12-07T09:00:00.000Z', '2026-12-07T17:00:00.000Z']);
    // Before the first occurrence: only upcoming within a step.
    assert.deepEqual(
      iso(matchSchedule(t('2026-01-05T08:00:00Z'), start, end, { frequency: 'Daily' }).upcoming),
      ['2026-01-05T09:00:00.000Z', '2026-01-05T17:00:00.000Z'],
    );
    assert.deepEqual(matchSchedule(t('2025-12-01T08:00:00Z'), start, end, { frequency: 'Daily' }), {
      active: undefined,
      upcoming: undefined,
    });
  });

  test('monthly skips months without the day; yearly on 29 February only in leap years', () => {
    const start = t('2026-01-31T00:00:00Z');
    const end = t('2026-01-31T06:00:00Z');
    const april = matchSchedule(t('2026-04-15T00:00:00Z'), start, end, { frequency: 'Monthly' });
    assert.equal(april.active, undefined);
    assert.equal(april.upcoming, undefined, 'no 30 April, and 31 May is more than a month away');
    const may = matchSchedule(t('2026-05-31T03:00:00Z'), start, end, { frequency: 'Monthly' });
    assert.deepEqual(iso(may.active), ['2026-05-31T00:00:00.000Z', '2026-05-31T06:00:00.000Z']);
    const leap = t('2024-02-29T00:00:00Z');
    const y2027 = matchSchedule(t('2027-02-28T12:00:00Z'), leap, leap + HOUR, { frequency: 'Yearly' });
    assert.deepEqual(y2027, { active: undefined, upcoming: undefined });
    const y2028 = matchSchedule(t('2028-02-29T00:30:00Z'), leap, leap + HOUR, { frequency: 'Yearly' });
    assert.deepEqual(iso(y2028.active), ['2028-02-29T00:00:00.000Z', '2028-02-29T01:00:00.000Z']);
  });

  test('untilTime is the start of the last occurrence (inclusive)', () => {
    const start = t('2026-12-01T09:00:00Z');
    const until = t('2026-12-03T09:00:00Z');
    const o = { frequency: 'Daily', untilTime: until };
    assert.ok(matchSchedule(t('2026-12-03T10:00:00Z'), start, start + 2 * HOUR, o).active);
    assert.equal(matchSchedule(t('2026-12-03T10:00:00Z'), start, start + 2 * HOUR, o).upcoming, undefined);
    assert.equal(matchSchedule(t('2026-12-04T10:00:00Z'), start, start + 2 * HOUR, o).active, undefined);
  });

  test('errors: an unknown frequency, a period longer than its step; never a crash', () => {
    const start = t('2026-12-01T00:00:00Z');
    assert.throws(
      () => matchSchedule(start, start, start + HOUR, { frequency: 'Hourly' }),
      (e: unknown) =>
        e instanceof AutoscalingError &&
        e.message === 'invalid freq "Hourly": It must be one of "Daily", "Weekly", "Monthly", and "Yearly"',
    );
    assert.throws(
      () => matchSchedule(start, start, start + 48 * HOUR, { frequency: 'Daily' }),
      /override's duration 48h0m0s must be equal to sor shorter than the duration implied by freq "Daily" \(24h0m0s\)/,
    );
    for (const f of ['', 'daily', '\u0000', 'x'.repeat(10_000)]) {
      try {
        matchSchedule(start, start, start + HOUR, { frequency: f });
      } catch (e) {
        assert.ok(e instanceof AutoscalingError);
      }
    }
  });

  test('goDuration formats as Go does', () => {
    assert.equal(goDuration(48 * HOUR), '48h0m0s');
    assert.equal(goDuration(90_000), '1m30s');
    assert.equal(goDuration(1500), '1.5s');
    assert.equal(goDuration(0), '0s');
  });

  test('parseGoDuration reads what time.ParseDuration reads, and nothing else', () => {
    const cases: [string | undefined, number | undefined][] = [
      ['30m', 30 * 60_000],
      ['1h30m', 90 * 60_000],
      ['1.5h', 90 * 60_000],
      ['90s', 90_000],
      ['500ms', 500],
      ['-5s', -5000],
      ['0', 0],
      ['', undefined],
      [undefined, undefined],
      ['30', undefined],
      ['30 m', undefined],
      ['m', undefined],
      ['1d', undefined],
      ['1h junk', undefined],
    ];
    for (const [text, ms] of cases) assert.equal(parseGoDuration(text), ms, String(text));
  });
});

describe('minReplicasAt and the summary', () => {
  const now = t('2026-12-03T10:00:00Z');
  const active = (min?: number) => ({
    startTime: t('2026-12-03T09:00:00Z'),
    endTime: t('2026-12-03T11:00:00Z'),
    minReplicas: min,
  });
  const later = (min?: number) => ({
    startTime: t('2026-12-03T13:00:00Z'),
    endTime: t('2026-12-03T14:00:00Z'),
    minReplicas: min,
  });

  test('spec minReplicas (1 when unset or negative); the first active override wins', () => {
    assert.equal(minReplicasAt(undefined, [], now).minReplicas, 1);
    assert.equal(minReplicasAt(-3, [], now).minReplicas, 1);
    assert.equal(minReplicasAt(0, [], now).minReplicas, 0);
    assert.equal(minReplicasAt(2, [active(5), active(9)], now).minReplicas, 5);
    assert.equal(minReplicasAt(2, [active(undefined), active(9)], now).minReplicas, 2, 'later ones ignored');
    const r = minReplicasAt(2, [later(7), active(5)], now);
    assert.equal(r.minReplicas, 5);
    assert.equal(r.upcoming?.minReplicas, 7);
  });

  test('summary: the active one ending first, else the next one that sets minReplicas', () => {
    const r = minReplicasAt(2, [active(5), later(7)], now);
    assert.equal(scheduledOverridesSummary(2, r.active, r.upcoming), 'min=2 time=2026-12-03T11:00:00.000Z');
    const n = minReplicasAt(2, [later(7)], now);
    assert.equal(scheduledOverridesSummary(2, n.active, n.upcoming), 'min=7 time=2026-12-03T13:00:00.000Z');
    const u = minReplicasAt(2, [later(undefined)], now);
    assert.equal(scheduledOverridesSummary(2, u.active, u.upcoming), undefined);
    assert.equal(scheduledOverridesSummary(2, undefined, undefined), undefined);
  });
});

describe('PercentageRunnersBusy', () => {
  test("ARC's worked examples and the edges", () => {
    const cases: [Parameters<typeof busyRatioReplicas>[0], number, number, number][] = [
      [{}, 4, 4, 6],
      [{}, 2, 4, 4],
      [{}, 1, 4, 2],
      [{ scaleUpAdjustment: 2 }, 4, 4, 6],
      [{ scaleDownAdjustment: 3 }, 0, 4, 1],
      [{ scaleUpThreshold: '0.5', scaleUpFactor: '2' }, 2, 4, 8],
      [{}, 0, 0, 0], // 0/0: NaN, neither threshold
      [{}, 1, 0, 0], // 1/0: +Inf ≥ up, ceil(0 × 1.3)
      [{ scaleUpAdjustment: 1 }, 1, 0, 1],
      [{ scaleDownFactor: '0.5' }, 0, 5, 2], // trunc(2.5)
    ];
    for (const [spec, busy, before, want] of cases) {
      assert.equal(busyRatioReplicas(spec, busy, before), want, JSON.stringify([spec, busy, before]));
    }
  });

  test('malformed specs: clear errors', () => {
    const errs: [Parameters<typeof busyRatioReplicas>[0], RegExp][] = [
      [{ scaleUpThreshold: 'eighty' }, /metrics\[\]\.scaleUpThreshold cannot be parsed into a float64/],
      [{ scaleDownFactor: '0,7' }, /metrics\[\]\.scaleDownFactor cannot be parsed into a float64/],
      [{ scaleUpAdjustment: -1 }, /scaleUpAdjustment cannot be lower than 0/],
      [
        { scaleDownAdjustment: 1, scaleDownFactor: '0.5' },
        /scaleDownAdjustment and scaleDownFactor cannot be specified together/,
      ],
    ];
    for (const [spec, re] of errs) {
      assert.throws(
        () => busyRatioReplicas(spec, 1, 4),
        (e: unknown) => e instanceof AutoscalingError && re.test(e.message),
      );
    }
  });
});

describe('metric selection', () => {
  const base = { name: 'hra', namespace: 'ns', minReplicas: 1, maxReplicas: 10 };
  test('bounds and count are checked first', () => {
    assert.throws(
      () => metricTypes({ ...base, minReplicas: undefined }),
      /horizontalrunnerautoscaler ns\/hra is missing minReplicas/,
    );
    assert.throws(() => metricTypes({ ...base, maxReplicas: undefined }), /is missing maxReplicas/);
    assert.throws(
      () => metricTypes({ ...base, metrics: [{}, {}, {}] }),
      /too many autoscaling metrics configured: It must be 0 to 2, but got 3/,
    );
    assert.deepEqual(metricTypes(base), []);
    assert.throws(() => supportedMetric('Nope'), /unsupported metric type "Nope"/);
  });

  test('the primary above 0 wins; else minReplicas, or the secondary of the one allowed combination', () => {
    const busyThenRuns = ['PercentageRunnersBusy', 'TotalNumberOfQueuedAndInProgressWorkflowRuns'];
    assert.equal(afterPrimary(busyThenRuns, 3), 'primary');
    assert.equal(afterPrimary(['PercentageRunnersBusy'], 0), 'minimum');
    assert.equal(afterPrimary(busyThenRuns, 0), 'secondary');
    const reversed = [...busyThenRuns].reverse();
    assert.equal(afterPrimary(reversed, 2), 'primary', 'as ARC: the combination is checked only when needed');
    assert.throws(() => afterPrimary(reversed, 0), /The only allowed combination is 0=PercentageRunnersBusy/);
  });
});

describe('desired replicas, the target patch and the status', () => {
  const now = t('2026-12-03T10:00:00Z');
  const base = {
    suggested: undefined,
    minReplicas: 1,
    maxReplicas: 10,
    reservations: [],
    status: {},
    scaleDownDelayMs: 10 * 60_000,
    now,
  };

  test('suggestion + unexpired reservations within [min, max], checked min first as ARC does', () => {
    assert.equal(desiredReplicas(base), 1);
    assert.equal(desiredReplicas({ ...base, suggested: 4 }), 4);
    const reservations = [
      { expirationTime: now + 1, replicas: 2 },
      { expirationTime: now, replicas: 50 }, // expired: not counted
    ];
    assert.equal(desiredReplicas({ ...base, suggested: 4, reservations }), 6);
    assert.equal(desiredReplicas({ ...base, suggested: 40 }), 10);
    // min above max: a low suggestion is raised to min, a high one cut to max (ARC's order).
    assert.equal(desiredReplicas({ ...base, minReplicas: 12, suggested: 5 }), 12);
    assert.equal(desiredReplicas({ ...base, minReplicas: 12, suggested: 40 }), 10);
  });

  test('a scale-down within the delay after a scale-out is held', () => {
    const status = { desiredReplicas: 8, lastSuccessfulScaleOutTime: now - 5 * 60_000 };
    assert.equal(desiredReplicas({ ...base, suggested: 3, status }), 8);
    assert.equal(desiredReplicas({ ...base, suggested: 3, status, scaleDownDelayMs: 5 * 60_000 }), 3);
    assert.equal(desiredReplicas({ ...base, suggested: 9, status }), 9, 'a scale-out is never held');
  });

  test('target patch: replicas when they change; the latest effectiveTime for ephemeral runners', () => {
    const reservations = [
      { effectiveTime: t('2026-12-03T09:00:00Z') },
      { effectiveTime: t('2026-12-03T09:30:00Z') },
    ];
    const p = {
      currentReplicas: 2,
      desired: 2,
      ephemeral: undefined,
      currentEffectiveTime: undefined,
      reservations: [],
    };
    assert.equal(targetPatch(p), undefined);
    assert.deepEqual(targetPatch({ ...p, desired: 3 }), { replicas: 3 });
    assert.deepEqual(
      targetPatch({ ...p, currentReplicas: undefined, desired: 1 }),
      undefined,
      'unset means 1',
    );
    assert.deepEqual(targetPatch({ ...p, desired: 3, reservations }), {
      replicas: 3,
      effectiveTime: '2026-12-03T09:30:00Z',
    });
    assert.deepEqual(targetPatch({ ...p, desired: 3, ephemeral: false, reservations }), { replicas: 3 });
    assert.equal(
      targetPatch({ ...p, reservations, currentEffectiveTime: t('2026-12-03T09:30:00Z') }),
      undefined,
    );
  });

  test('status: desiredReplicas, the scale-out time on growth, the summary', () => {
    assert.deepEqual(statusUpdate({ status: {}, desired: 1, summary: undefined, now }), {
      desiredReplicas: 1,
    });
    assert.deepEqual(statusUpdate({ status: {}, desired: 3, summary: undefined, now }), {
      desiredReplicas: 3,
      lastSuccessfulScaleOutTime: now,
    });
    assert.deepEqual(
      statusUpdate({ status: { desiredReplicas: 3 }, desired: 2, summary: 'min=1 time=x', now }),
      {
        desiredReplicas: 2,
        scheduledOverridesSummary: 'min=1 time=x',
      },
    );
    assert.deepEqual(
      statusUpdate({
        status: { desiredReplicas: 2, scheduledOverridesSummary: 'min=1 time=x' },
        desired: 2,
        summary: undefined,
        now,
      }),
      { scheduledOverridesSummary: null },
    );
    assert.equal(
      statusUpdate({ status: { desiredReplicas: 2 }, desired: 2, summary: undefined, now }),
      undefined,
    );
  });
});
