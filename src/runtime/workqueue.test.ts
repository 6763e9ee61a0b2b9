import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeClock, flushMicrotasks } from './clock.ts';
import {
  defaultControllerRateLimiter,
  ExponentialBackoffLimiter,
  MaxOfLimiter,
  TokenBucketLimiter,
  WorkQueue,
} from './workqueue.ts';

function queue(clock = new FakeClock()) {
  return { clock, q: new WorkQueue({ clock }) };
}

describe('WorkQueue', () => {
  test('deduplicates keys waiting in the queue', async () => {
    const { q } = queue();
    q.add('a');
    q.add('b');
    q.add('a');
    q.add('a');
    assert.equal(q.length, 2);
    assert.equal((await q.get())?.key, 'a');
    assert.equal((await q.get())?.key, 'b');
    assert.equal(q.length, 0);
  });

  test('a key being processed is never handed out twice; re-added, it runs again after done', async () => {
    const { q } = queue();
    q.add('a');
    const first = await q.get();
    assert.equal(first?.key, 'a');
    q.add('a'); // dirty while processing
    q.add('a');
    assert.equal(q.length, 0, 'not queued while processing');
    let second: string | undefined;
    void q.get().then((i) => {
      second = i?.key;
    });
    await flushMicrotasks();
    assert.equal(second, undefined, 'a second worker must not get the key while it is processed');
    q.done('a');
    await flushMicrotasks();
    assert.equal(second, 'a', 're-added key runs once more after done');
    q.done('a');
    assert.equal(q.length, 0, 'and only once');
  });

  test('many workers never see the same key concurrently', async () => {
    const { q } = queue();
    const active = new Set<string>();
    let overlaps = 0;
    let processed = 0;
    const workers = Array.from({ length: 4 }, async () => {
      for (;;) {
        const item = await q.get();
        if (!item) return;
        if (active.has(item.key)) overlaps++;
        active.add(item.key);
        await flushMicrotasks();
        if (processed < 200) q.add(item.key); // re-add while processing
        processed++;
        active.delete(item.key);
        q.done(item.key);
      }
    });
    for (let i = 0; i < 20; i++) q.add(`k${i % 3}`);
    while (processed < 200) await flushMicrotasks();
    await q.shutdown();
    await Promise.all(workers);
    assert.equal(overlaps, 0);
  });

  test('addAfter: the key appears after the delay, and the earliest request wins', async () => {
    const { q, clock } = queue();
    q.addAfter('a', 1000);
    q.addAfter('a', 300);
    q.addAfter('a', 5000);
    assert.equal(q.scheduledAt('a'), clock.now() + 300);
    await clock.advance(299);
    assert.equal(q.length, 0);
    await clock.advance(1);
    assert.equal(q.length, 1);
    await clock.advance(10_000);
    assert.equal(q.length, 1, 'superseded timers do not add it again');
    q.addAfter('b', 0);
    assert.equal(q.length, 2, 'zero delay adds at once');
  });

  test('per-key backoff doubles from 5 ms, and forget resets it', () => {
    const limiter = new ExponentialBackoffLimiter();
    assert.deepEqual(
      Array.from({ length: 6 }, () => limiter.when('a')),
      [5, 10, 20, 40, 80, 160],
    );
    assert.equal(limiter.numRequeues('a'), 6);
    limiter.forget('a');
    assert.equal(limiter.numRequeues('a'), 0);
    assert.equal(limiter.when('a'), 5);
  });

  test('per-key backoff is capped at 1000 s', () => {
    const limiter = new ExponentialBackoffLimiter();
    let last = 0;
    for (let i = 0; i < 100; i++) last = limiter.when('a');
    assert.equal(last, 1000_000);
    assert.equal(limiter.when('b'), 5, 'other keys are independent');
  });

  test('token bucket: burst of 100, then 10 per second', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucketLimiter(clock, 10, 100);
    for (let i = 0; i < 100; i++) assert.equal(bucket.when(), 0);
    assert.equal(bucket.when(), 100);
    assert.equal(bucket.when(), 200);
    await clock.advance(1000);
    // 10 tokens came back, 2 were owed: 8 free, then delays again.
    for (let i = 0; i < 8; i++) assert.equal(bucket.when(), 0);
    assert.equal(bucket.when(), 100);
  });

  test('the default limiter is the max of both', () => {
    const clock = new FakeClock();
    const limiter = defaultControllerRateLimiter(clock);
    assert.equal(limiter.when('x'), 5);
    const l2 = new MaxOfLimiter(new ExponentialBackoffLimiter(), new TokenBucketLimiter(clock, 10, 1));
    assert.equal(l2.when('a'), 5);
    assert.equal(l2.when('b'), 100, 'bucket empty: its delay dominates the 5 ms backoff');
  });

  test('rate-limited keys enter the queue only after their backoff', async () => {
    const { q, clock } = queue();
    q.addRateLimited('a'); // 5 ms
    q.addRateLimited('a'); // 10 ms, but 5 ms is earlier and wins
    assert.equal(q.numRequeues('a'), 2);
    assert.equal(q.length, 0);
    await clock.advance(5);
    assert.equal(q.length, 1);
    q.forget('a');
    assert.equal(q.numRequeues('a'), 0);
  });

  test('shutdown wakes idle workers and waits for the keys being processed', async () => {
    const { q } = queue();
    const idle = q.get();
    q.add('busy');
    const busyItem = await idle;
    assert.equal(busyItem?.key, 'busy');
    const idle2 = q.get();
    let drained = false;
    const stopping = q.shutdown().then(() => {
      drained = true;
    });
    assert.equal(await idle2, undefined, 'idle worker is released');
    await flushMicrotasks();
    assert.equal(drained, false, 'still processing "busy"');
    q.add('late');
    assert.equal(q.length, 0, 'no new keys after shutdown');
    q.done('busy');
    await stopping;
    assert.equal(drained, true);
    assert.equal(await q.get(), undefined);
  });
});

describe('WorkQueue with a minimum interval per key', () => {
  test('events during the cool-down merge into one pass at its end; other keys are not held back', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock, minIntervalMs: 100 });
    q.add('a');
    assert.equal((await q.get())?.key, 'a');
    q.done('a');
    for (let i = 0; i < 5; i++) q.add('a');
    q.add('b');
    assert.equal(q.length, 1, 'only b is ready');
    assert.equal((await q.get())?.key, 'b');
    q.done('b');
    await clock.advance(99);
    assert.equal(q.length, 0, 'a still cooling down');
    await clock.advance(1);
    assert.equal(q.length, 1, 'one pass of a for all five events');
    assert.equal((await q.get())?.key, 'a');
    q.done('a');
    await clock.advance(100);
    q.add('a');
    assert.equal(q.length, 1, 'after the interval, at once');
  });

  test('a key re-added while it is processed waits out the interval from when its pass started', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock, minIntervalMs: 100 });
    q.add('a');
    await q.get();
    q.add('a');
    await clock.advance(30);
    q.done('a');
    assert.equal(q.length, 0);
    await clock.advance(69);
    assert.equal(q.length, 0);
    await clock.advance(1);
    assert.equal(q.length, 1);
  });

  test('a pass longer than the interval is followed at once by the next', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock, minIntervalMs: 100 });
    q.add('a');
    await q.get();
    q.add('a');
    await clock.advance(250);
    q.done('a');
    assert.equal(q.length, 1, 'no cool-down left');
    assert.equal((await q.get())?.key, 'a');
    q.add('a');
    q.done('a');
    assert.equal(q.length, 0, 'the new pass started just now: cooling down');
    await clock.advance(100);
    assert.equal(q.length, 1);
  });
});
