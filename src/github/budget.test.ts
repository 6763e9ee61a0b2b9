import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeClock } from '../runtime/clock.ts';
import { decideBudget, parseRateLimitHeaders, RateLimitBudget } from './budget.ts';
import { classifyResponse } from './errors.ts';

const T0 = Date.parse('2026-01-01T00:00:00Z');

describe('budget policy (pure)', () => {
  const state = (remaining: number, inFlight = 0) => ({
    limit: 5000,
    remaining,
    resetAt: T0 + 60_000,
    inFlight,
  });

  test('unknown limits (GHES without headers) never hold anything back', () => {
    assert.deepEqual(decideBudget(undefined, 'read', T0, 0.1, 0), { ok: true });
    const unknown = { limit: undefined, remaining: undefined, resetAt: undefined, inFlight: 50 };
    assert.deepEqual(decideBudget(unknown, 'read', T0, 0.1, 0), { ok: true });
  });

  test('reads and writes stop at the 10 % reserve; removal spends it down to zero', () => {
    assert.deepEqual(decideBudget(state(501), 'read', T0, 0.1, 0), { ok: true });
    assert.deepEqual(decideBudget(state(500), 'read', T0, 0.1, 0), {
      ok: false,
      waitUntil: T0 + 60_000,
      reason: 'reserve',
    });
    assert.equal(decideBudget(state(500), 'write', T0, 0.1, 0).ok, false);
    assert.deepEqual(decideBudget(state(1), 'removal', T0, 0.1, 0), { ok: true });
    assert.deepEqual(decideBudget(state(0), 'removal', T0, 0.1, 0), {
      ok: false,
      waitUntil: T0 + 60_000,
      reason: 'exhausted',
    });
    assert.equal(decideBudget(state(501, 1), 'read', T0, 0.1, 0).ok, false, 'requests in flight count');
    assert.equal(decideBudget(state(2600), 'read', T0, 0.5, 0).ok, true, 'configurable reserve');
    assert.equal(decideBudget(state(2500), 'read', T0, 0.5, 0).ok, false);
  });

  test('a finished window or a secondary pause', () => {
    assert.deepEqual(decideBudget(state(0), 'read', T0 + 60_000, 0.1, 0), { ok: true });
    assert.deepEqual(decideBudget(state(4000), 'removal', T0, 0.1, T0 + 5000), {
      ok: false,
      waitUntil: T0 + 5000,
      reason: 'secondary',
    });
  });
});

describe('RateLimitBudget', () => {
  test('reads x-ratelimit-*; out-of-order answers of one window keep the lowest remaining', () => {
    const clock = new FakeClock(T0);
    const seen: number[] = [];
    const budget = new RateLimitBudget({ clock, onObserve: (o) => seen.push(o.remaining) });
    const h = (remaining: number, reset = (T0 + 3600_000) / 1000) => ({
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': String(remaining),
      'x-ratelimit-reset': String(reset),
      'x-ratelimit-resource': 'core',
    });
    budget.observe(h(4990), 'core');
    budget.observe(h(4995), 'core');
    assert.equal(budget.view().core?.remaining, 4990);
    budget.observe(h(4999, (T0 + 7200_000) / 1000), 'core');
    assert.equal(budget.view().core?.remaining, 4999, 'a new window replaces the old view');
    assert.deepEqual(seen, [4990, 4990, 4999]);
    assert.equal(budget.observe({}, 'core'), undefined, 'no headers, no change');
    assert.equal(
      parseRateLimitHeaders(
        { 'x-ratelimit-limit': 'x', 'x-ratelimit-remaining': '1', 'x-ratelimit-reset': '1' },
        'core',
      ),
      undefined,
    );
  });

  test('tickets count in flight until released', () => {
    const clock = new FakeClock(T0);
    const budget = new RateLimitBudget({ clock });
    budget.observe(
      {
        'x-ratelimit-limit': '100',
        'x-ratelimit-remaining': '12',
        'x-ratelimit-reset': String((T0 + 60_000) / 1000),
      },
      'core',
    );
    const a = budget.tryAcquire('read', 'core');
    assert.equal(a.ok, true);
    assert.equal(budget.tryAcquire('read', 'core').ok, true);
    assert.equal(budget.tryAcquire('read', 'core').ok, false, '12 - 2 in flight = reserve of 10');
    a.ticket?.release();
    a.ticket?.release(); // idempotent
    assert.equal(budget.view().core?.inFlight, 1);
  });

  test('blocking acquire waits on the clock until the reset', async () => {
    const clock = new FakeClock(T0);
    const budget = new RateLimitBudget({ clock });
    budget.markExhausted('core', T0 + 30_000);
    let got = false;
    const p = budget.acquire('removal', 'core').then(() => {
      got = true;
    });
    await clock.advance(29_999);
    assert.equal(got, false);
    await clock.advance(1);
    await p;
    assert.equal(got, true);
  });

  test('secondary limits: retry-after, else one minute doubling to the cap, reset by success', () => {
    const clock = new FakeClock(T0);
    const budget = new RateLimitBudget({ clock, maxSecondaryPauseMs: 180_000 });
    assert.equal(budget.pauseForSecondaryLimit(7000), T0 + 7000);
    assert.equal(budget.check('removal', 'core').ok, false);
    assert.equal(budget.pauseForSecondaryLimit(undefined), T0 + 120_000, 'second strike: 2 min');
    assert.equal(budget.pauseForSecondaryLimit(undefined), T0 + 180_000, 'capped');
    budget.noteSuccess();
    const fresh = new RateLimitBudget({ clock });
    assert.equal(fresh.pauseForSecondaryLimit(undefined), T0 + 60_000);
  });
});

describe('classifying GitHub’s answers', () => {
  const now = T0;
  test('403 is a rate limit only when GitHub says so', () => {
    const primary = classifyResponse(
      403,
      { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String((T0 + 90_000) / 1000) },
      { message: 'API rate limit exceeded for user ID 1.' },
      now,
    );
    assert.equal(primary.kind, 'rateLimited');
    assert.equal(primary.rateLimitCause, 'primary');
    assert.equal(primary.rateLimitResetAt, T0 + 90_000);
    const secondary = classifyResponse(
      403,
      { 'x-ratelimit-remaining': '4000', 'retry-after': '30' },
      { message: 'You have exceeded a secondary rate limit.' },
      now,
    );
    assert.equal(secondary.kind, 'rateLimited');
    assert.equal(secondary.rateLimitCause, 'secondary');
    assert.equal(secondary.retryAfterMs, 30_000);
    const noRetryAfter = classifyResponse(
      403,
      {},
      { message: 'You have exceeded a secondary rate limit' },
      now,
    );
    assert.equal(noRetryAfter.rateLimitCause, 'secondary');
    assert.equal(noRetryAfter.retryAfterMs, undefined);
    assert.equal(classifyResponse(429, {}, {}, now).kind, 'rateLimited');
    const forbidden = classifyResponse(
      403,
      { 'x-ratelimit-remaining': '4000' },
      { message: 'Resource not accessible by integration' },
      now,
    );
    assert.deepEqual(forbidden, {
      kind: 'forbidden',
      githubMessage: 'Resource not accessible by integration',
    });
  });

  test('other statuses', () => {
    assert.equal(classifyResponse(401, {}, { message: 'Bad credentials' }, now).kind, 'invalidCredentials');
    assert.equal(classifyResponse(404, {}, {}, now).kind, 'notFound');
    assert.equal(classifyResponse(409, {}, {}, now).kind, 'conflict');
    assert.equal(classifyResponse(422, {}, { message: 'busy' }, now).githubMessage, 'busy');
    assert.equal(classifyResponse(502, {}, 'Bad gateway', now).kind, 'server');
    assert.equal(classifyResponse(400, {}, {}, now).kind, 'unexpected');
    const dated = classifyResponse(503, { 'retry-after': new Date(T0 + 5000).toUTCString() }, {}, now);
    assert.equal(dated.retryAfterMs, 5000);
  });
});
