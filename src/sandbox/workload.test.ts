import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeClock } from '../runtime/clock.ts';
import { GitHubDouble } from '../testenv/github-double/index.ts';
import { seededRandom } from '../testenv/seeded-random.ts';
import {
  exponentialSample,
  pickWeighted,
  sampleDuration,
  WorkloadGenerator,
  type WorkloadOptions,
} from './workload.ts';

function setup(opts: Partial<WorkloadOptions> = {}) {
  const clock = new FakeClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  const gen = new WorkloadGenerator({
    double,
    ratePerMinute: 60,
    duration: { kind: 'fixed', ms: 1000 },
    target: { owner: 'acme', repo: 'app' },
    clock,
    random: seededRandom(42),
    ...opts,
  });
  return { clock, double, gen };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('workload generator', () => {
  test('arrivals follow the rate (Poisson: about rate × time, exponential gaps)', async () => {
    const { clock, double, gen } = setup({ ratePerMinute: 120 });
    gen.start();
    await clock.advance(10 * 60_000);
    gen.stop();
    const n = gen.stats().created;
    // 1200 expected; a Poisson count's standard deviation is about 35.
    assert.ok(n > 1100 && n < 1300, `${n} jobs in 10 minutes at 120/min`);
    const jobs = [...double.model.jobs.values()];
    assert.equal(jobs.length, n);
    assert.ok(jobs.every((j) => j.status === 'queued' && j.owner === 'acme' && j.repo === 'app'));
    const times = jobs.map((j) => j.created_at);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    const m = mean(gaps);
    assert.ok(Math.abs(m - 500) < 50, `mean gap ${m} ms, expected 500`);
    // Exponential: about 63 % of gaps are below the mean.
    const below = gaps.filter((g) => g < 500).length / gaps.length;
    assert.ok(below > 0.57 && below < 0.69, `${below} of gaps below the mean`);
  });

  test('same seed, same workload', async () => {
    const a = setup({ duration: { kind: 'exponential', meanMs: 5000 } });
    const b = setup({ duration: { kind: 'exponential', meanMs: 5000 } });
    for (const s of [a, b]) {
      s.gen.start();
      await s.clock.advance(60_000);
      s.gen.stop();
    }
    const trace = (s: typeof a) =>
      [...s.double.model.jobs.values()].map((j) => [j.created_at - s.clock.now(), s.gen.durationOf(j.id)]);
    assert.deepEqual(trace(a), trace(b));
  });

  test('stops after maxJobs and leaves no timer', async () => {
    const { clock, gen } = setup({ maxJobs: 5 });
    gen.start();
    await clock.advance(60 * 60_000);
    assert.equal(gen.stats().created, 5);
    assert.equal(gen.exhausted, true);
    assert.equal(gen.stats().running, false);
    assert.equal(clock.timers, 0);
    gen.start();
    await clock.advance(60_000);
    assert.equal(gen.stats().created, 5, 'an exhausted generator does not start again');
  });

  test('stop() stops arrivals; start() resumes them', async () => {
    const { clock, gen } = setup();
    gen.start();
    gen.start();
    await clock.advance(30_000);
    gen.stop();
    gen.stop();
    const n = gen.stats().created;
    assert.ok(n > 0);
    assert.equal(clock.timers, 0);
    await clock.advance(60_000);
    assert.equal(gen.stats().created, n);
    gen.start();
    await clock.advance(60_000);
    assert.ok(gen.stats().created > n);
    gen.stop();
  });

  test('durations: fixed, uniform and exponential, exposed per job', async () => {
    const run = async (duration: WorkloadOptions['duration']) => {
      const clock = new FakeClock();
      const seen = new Map<number, number>();
      const g = new WorkloadGenerator({
        double: new GitHubDouble(),
        ratePerMinute: 600,
        target: { owner: 'acme', repo: 'app' },
        duration,
        clock,
        random: seededRandom(7),
        onJob: (job, ms) => seen.set(job.id, ms),
      });
      g.start();
      await clock.advance(5 * 60_000);
      g.stop();
      for (const [id, ms] of seen) assert.equal(g.durationOf(id), ms);
      assert.equal(g.durationOf(999_999), undefined);
      assert.equal(g.jobIds().length, seen.size);
      return [...seen.values()];
    };
    const fixed = await run({ kind: 'fixed', ms: 1234 });
    assert.ok(fixed.length > 2500 && fixed.every((d) => d === 1234));
    const uniform = await run({ kind: 'uniform', minMs: 1000, maxMs: 3000 });
    assert.ok(uniform.every((d) => d >= 1000 && d <= 3000));
    assert.ok(Math.abs(mean(uniform) - 2000) < 60, `uniform mean ${mean(uniform)}`);
    const exp = await run({ kind: 'exponential', meanMs: 10_000 });
    assert.ok(exp.every((d) => d >= 0));
    assert.ok(Math.abs(mean(exp) - 10_000) < 600, `exponential mean ${mean(exp)}`);
  });

  test('label sets are drawn by weight; repositories uniformly', async () => {
    const { clock, double, gen } = setup({
      ratePerMinute: 600,
      labels: [
        { labels: ['self-hosted', 'linux'], weight: 3 },
        { labels: ['self-hosted', 'gpu'], weight: 1 },
      ],
      target: { owner: 'acme', repo: ['a', 'b'] },
    });
    gen.start();
    await clock.advance(10 * 60_000);
    gen.stop();
    const { byLabels, created } = gen.stats();
    const linux = byLabels['self-hosted,linux'] ?? 0;
    const gpu = byLabels['self-hosted,gpu'] ?? 0;
    assert.equal(linux + gpu, created);
    assert.ok(Math.abs(linux / created - 0.75) < 0.03, `linux share ${linux / created}`);
    const jobs = [...double.model.jobs.values()];
    const inA = jobs.filter((j) => j.repo === 'a').length / jobs.length;
    assert.ok(Math.abs(inA - 0.5) < 0.03, `repo a share ${inA}`);
    assert.ok(jobs.every((j) => j.labels.length === 2 && j.labels[0] === 'self-hosted'));
  });

  test('default label set and validation', async () => {
    const { clock, double, gen } = setup({ maxJobs: 1 });
    gen.start();
    await clock.advance(60_000);
    assert.deepEqual([...double.model.jobs.values()][0]?.labels, ['self-hosted']);
    const base = { double, duration: { kind: 'fixed', ms: 1 } as const, target: { owner: 'a', repo: 'b' } };
    assert.throws(() => new WorkloadGenerator({ ...base, ratePerMinute: 0 }), /ratePerMinute/);
    assert.throws(
      () =>
        new WorkloadGenerator({
          ...base,
          ratePerMinute: 1,
          duration: { kind: 'uniform', minMs: 5, maxMs: 1 },
        }),
      /maxMs/,
    );
    assert.throws(
      () => new WorkloadGenerator({ ...base, ratePerMinute: 1, target: { owner: 'a', repo: [] } }),
    );
  });

  test('sampling helpers', () => {
    assert.equal(exponentialSample(100, 0), 0);
    assert.ok(Math.abs(exponentialSample(100, 1 - Math.exp(-1)) - 100) < 1e-9);
    assert.ok(Number.isFinite(exponentialSample(100, 1)));
    assert.equal(sampleDuration({ kind: 'uniform', minMs: 10, maxMs: 20 }, 0.5), 15);
    assert.equal(sampleDuration({ kind: 'fixed', ms: -5 }, 0.3), 0);
    assert.equal(pickWeighted([{ weight: 1 }, { weight: 3 }], 0.24), 0);
    assert.equal(pickWeighted([{ weight: 1 }, { weight: 3 }], 0.26), 1);
    assert.equal(pickWeighted([{ weight: 0 }, {}], 0), 1);
    assert.equal(pickWeighted([{}, {}], 0.9999999), 1);
  });
});
