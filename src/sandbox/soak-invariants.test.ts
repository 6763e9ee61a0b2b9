import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { coveredMs, InvariantMonitor, minuteMaxima, rssSlopeMiBPerHour } from './soak-invariants.ts';

const limits = {
  forceDeleteTimeoutMs: 60_000,
  replacementBoundMs: 60_000,
  takeoverBoundMs: 25_000,
  memoryGrowthMiBPerHour: 20,
  memoryTrendMinSpanMs: 15 * 60_000,
};
const T = Date.UTC(2026, 11, 4);

describe('InvariantMonitor', () => {
  test('a cancelled job is a violation unless chaos explains it', () => {
    const m = new InvariantMonitor(limits);
    m.jobCancelled({ at: T, jobId: 1, pod: 'a', chaos: true });
    assert.equal(m.violations.length, 0);
    m.jobCancelled({ at: T, jobId: 2, pod: 'b', chaos: false, message: 'runner removed' });
    assert.deepEqual(
      m.violations.map((v) => [v.invariant, v.evidence]),
      [['job-cancelled-by-paddock', 'job 2 on pod b was cancelled: runner removed']],
    );
  });

  test('a pod Terminating past the force-delete timeout + 1 min is reported once', () => {
    const m = new InvariantMonitor(limits);
    const pods = [{ name: 'p', deletingSince: T, node: 'n1' }];
    m.terminating(T + 120_000, pods);
    assert.equal(m.violations.length, 0);
    m.terminating(T + 120_001, pods);
    m.terminating(T + 200_000, pods);
    assert.equal(m.violations.length, 1);
    assert.equal(m.violations[0]!.invariant, 'pod-terminating-too-long');
    assert.match(
      m.violations[0]!.evidence,
      /pod p on n1 still Terminating 120 s after its grace period ended/,
    );
  });

  test('time the control plane was down does not count against a Terminating pod; a lost node does', () => {
    const m = new InvariantMonitor(limits);
    m.excuse(T + 10_000, T + 40_000, 'etcd restarted', { controlPlane: true });
    m.excuse(T, T + 600_000, 'node n1 lost');
    const pods = [{ name: 'p', deletingSince: T, node: 'n1' }];
    m.terminating(T + 150_000, pods); // 120 s with the control plane up
    assert.equal(m.violations.length, 0);
    m.terminating(T + 151_000, pods);
    assert.equal(m.violations.length, 1);
    assert.match(
      m.violations[0]!.evidence,
      /151 s after its grace period ended \(121 s with the control plane up\)/,
    );
  });

  test('a runner short is fine while its slot was emptied within the bound, outside faults', () => {
    const m = new InvariantMonitor(limits);
    m.fleet(T, 10, 10); // the first sample opens the desired slots, filled at once
    m.vacancy(T + 1000);
    m.fleet(T + 30_000, 10, 9);
    m.fleet(T + 61_000, 10, 9); // emptied 60 s ago: still within the bound
    assert.equal(m.violations.length, 0);
    m.fleet(T + 62_000, 10, 9);
    assert.equal(m.violations.length, 1);
    assert.equal(m.violations[0]!.invariant, 'fleet-below-desired');
    assert.match(m.violations[0]!.evidence, /9 of 10 runners live: 1 short, but only 0 slots/);
    m.fleet(T + 200_000, 10, 9);
    assert.equal(m.violations.length, 1, 'one episode, one violation');
    m.fleet(T + 210_000, 10, 10);
    m.vacancy(T + 211_000);
    m.fleet(T + 272_000, 10, 9);
    assert.equal(m.violations.length, 2, 'a new episode is judged afresh');
  });

  test('steady churn (slots emptied and refilled all the time) is no shortfall; a stalled refill is', () => {
    const m = new InvariantMonitor(limits);
    m.fleet(T, 250, 250);
    // Three runners leave every second and are replaced within about five: ~15 short at any time.
    for (let t = 1; t <= 300; t++) {
      m.vacancy(T + t * 1000, 3);
      if (t % 5 === 0) m.fleet(T + t * 1000, 250, 235);
    }
    assert.equal(m.violations.length, 0);
    // Replacements stop: the shortfall grows past what the last minute's departures explain.
    for (let t = 301; t <= 400; t++) {
      m.vacancy(T + t * 1000, 3);
      if (t % 5 === 0) m.fleet(T + t * 1000, 250, 235 - 3 * (t - 300));
    }
    assert.equal(m.violations.length, 1);
  });

  test('time in an excused window does not age an empty slot; a raised desired count opens slots', () => {
    const m = new InvariantMonitor(limits);
    m.fleet(T, 10, 10);
    m.excuse(T + 10_000, T + 70_000, 'GitHub answering 502');
    m.vacancy(T + 5000);
    m.fleet(T + 100_000, 10, 9); // 95 s since, 60 s excused: 35 s
    m.fleet(T + 125_000, 10, 9); // 60 s
    assert.equal(m.violations.length, 0);
    m.fleet(T + 126_000, 10, 9);
    assert.equal(m.violations.length, 1);
    const raised = new InvariantMonitor(limits);
    raised.fleet(T, 10, 10);
    raised.fleet(T + 5000, 15, 10);
    raised.fleet(T + 60_000, 15, 10);
    assert.equal(raised.violations.length, 0, 'five new slots, 55 s old');
    raised.fleet(T + 70_000, 15, 12);
    assert.equal(raised.violations.length, 1, 'three of them still empty after 65 s');
  });

  test('takeover beyond lease duration + renew deadline', () => {
    const m = new InvariantMonitor(limits);
    m.takeover(T, 17_000);
    assert.equal(m.violations.length, 0);
    m.takeover(T, 25_001);
    assert.equal(m.violations[0]!.invariant, 'slow-takeover');
  });

  test('a takeover is not charged for the time the API server was down', () => {
    const m = new InvariantMonitor(limits);
    // etcd was down for 8 s of the takeover (outages before it are another test's).
    m.outage(T - 20_000, T - 12_000);
    m.takeover(T, 30_000);
    assert.equal(m.violations.length, 0);
    m.takeover(T, 33_001);
    assert.equal(m.violations.length, 1);
    assert.match(m.violations[0]!.evidence, /33001 ms \(25001 ms with the API server up\)/);
    // Only the part of an outage inside the takeover counts: 4 s of this one.
    const n = new InvariantMonitor(limits);
    n.outage(T - 60_000, T - 26_000);
    n.takeover(T, 30_000);
    assert.match(n.violations[0]?.evidence ?? '', /30000 ms \(26000 ms with the API server up\)/);
  });

  test('leaked runners and memory growth are judged at the end; short series are not', () => {
    const m = new InvariantMonitor(limits);
    for (let i = 0; i <= 30; i++) m.rssSample('paddock-0#1', { at: T + i * 60_000, mib: 80 + i }); // 60 MiB/h
    for (let i = 0; i <= 30; i++) m.rssSample('paddock-1#2', { at: T + i * 60_000, mib: 80 + (i % 2) });
    for (let i = 0; i <= 5; i++) m.rssSample('paddock-1#3', { at: T + i * 60_000, mib: 80 + 10 * i });
    const v = m.finish(T + 31 * 60_000, ['runner-x (id 7, offline)']);
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['runner-leaked', 'memory-growth'],
    );
    assert.match(v[1]!.evidence, /paddock-0#1: RSS grew 60\.0 MiB\/h/);
  });

  test('a standby that takes over grows to a leader once; only growth in the second half is a trend', () => {
    const m = new InvariantMonitor(limits);
    // 146 MiB as a standby for 5 min, up to 241 MiB by minute 14 as the leader, then flat.
    for (let i = 0; i <= 31; i++) {
      const mib = i < 5 ? 146 : i < 14 ? 146 + ((i - 4) * 95) / 10 : 241 + (i % 2) * 0.4;
      m.rssSample('paddock-1#2', { at: T + i * 60_000, mib });
    }
    assert.deepEqual(m.finish(T + 32 * 60_000, []), []);
  });

  // The leader of the 30-minute, 200-runner soak (seed 2026), RSS per minute: a step of 30 MiB in
  // minutes 12–15 (faults), then 11 minutes flat. A least-squares line over the second half read 40 MiB/h.
  const SOAK_LEADER = [
    161.4, 175.8, 207.9, 205.2, 216.2, 230.8, 232.3, 232.4, 232.5, 232.8, 232.9, 233, 252.9, 254.8, 256.7,
    262.9, 263, 263.2, 263.2, 263.3, 263.9, 264, 264, 264, 264.1, 264.1,
  ];

  test('a step after a fault, then a plateau, is not a trend (the soak leader of seed 2026)', () => {
    const m = new InvariantMonitor(limits);
    SOAK_LEADER.forEach((mib, i) => {
      m.rssSample('paddock-0#1', { at: T + i * 60_000, mib });
    });
    assert.deepEqual(m.finish(T + 27 * 60_000, []), []);
  });

  test('a leak is a trend: steady, in steps, or under noise', () => {
    const series: Record<string, (i: number) => number> = {
      steady: (i) => 200 + i * 0.5, // 30 MiB/h
      staircase: (i) => 200 + 2 * Math.floor(i / 4), // 2 MiB every 4 min: 30 MiB/h
      noisy: (i) => 200 + i * 0.5 + ((i * 7) % 5) - 2,
      // The soak leader's plateau, then growing again by 30 MiB/h.
      resumed: (i) => (i < SOAK_LEADER.length ? SOAK_LEADER[i]! : 264.1 + (i - 25) * 0.5),
    };
    for (const [name, mibAt] of Object.entries(series)) {
      const m = new InvariantMonitor(limits);
      for (let i = 0; i <= 50; i++) m.rssSample(`paddock-0#${name}`, { at: T + i * 60_000, mib: mibAt(i) });
      assert.deepEqual(
        m.finish(T + 51 * 60_000, []).map((v) => v.invariant),
        ['memory-growth'],
        name,
      );
    }
  });
});

describe('helpers', () => {
  test('rssSlopeMiBPerHour', () => {
    assert.equal(rssSlopeMiBPerHour([]), null);
    const flat = [0, 1, 2, 3].map((i) => ({ at: i * 1000, mib: 50 }));
    assert.equal(rssSlopeMiBPerHour(flat), 0);
    const rising = [0, 1, 2].map((i) => ({ at: i * 3_600_000, mib: 50 + 10 * i }));
    assert.equal(rssSlopeMiBPerHour(rising), 10);
  });

  test('coveredMs merges overlapping windows and clips them', () => {
    assert.equal(coveredMs(0, 100, []), 0);
    assert.equal(
      coveredMs(0, 100, [
        { from: -50, to: 10 },
        { from: 5, to: 20 },
        { from: 50, to: 60 },
        { from: 90, to: 500 },
      ]),
      40,
    );
  });
});

test('minuteMaxima: the highest sample of each minute, a minute without samples as 0', () => {
  const at = (s: number) => 1_000_000 + s * 1000;
  assert.deepEqual(minuteMaxima([]), []);
  assert.deepEqual(
    minuteMaxima([
      { at: at(0), mib: 10 },
      { at: at(30), mib: 12 },
      { at: at(59), mib: 11 },
      { at: at(61), mib: 9 },
      { at: at(185), mib: 14 },
    ]),
    [12, 9, 0, 14],
  );
});
