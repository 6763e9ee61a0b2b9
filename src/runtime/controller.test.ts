import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeClock, flushMicrotasks } from './clock.ts';
import { Controller, type ReconcileResult, resultAction, resyncOffset, TerminalError } from './controller.ts';
import { Informer } from './informer.ts';
import type { KubeHttp } from './kube-http.ts';
import { silentLogger } from './log.ts';
import { RuntimeMetrics } from './metrics.ts';

describe('reconcile result mapping', () => {
  test('as controller-runtime maps them', () => {
    assert.deepEqual(resultAction({ result: undefined }), { kind: 'success', action: 'forget' });
    assert.deepEqual(resultAction({ result: {} }), { kind: 'success', action: 'forget' });
    assert.deepEqual(resultAction({ result: { requeueAfterMs: 0 } }), { kind: 'success', action: 'forget' });
    assert.deepEqual(resultAction({ result: { requeueAfterMs: 1500 } }), {
      kind: 'requeue_after',
      action: 'after',
      afterMs: 1500,
    });
    assert.deepEqual(resultAction({ result: { requeue: true } }), { kind: 'requeue', action: 'rateLimited' });
    assert.deepEqual(resultAction({ result: { requeue: true, requeueAfterMs: 10 } }).action, 'after');
    assert.deepEqual(resultAction({ error: new Error('x') }), { kind: 'error', action: 'rateLimited' });
    assert.deepEqual(resultAction({ error: 'not an Error' }), { kind: 'error', action: 'rateLimited' });
    assert.deepEqual(resultAction({ error: new TerminalError('bad spec') }), {
      kind: 'error',
      action: 'forget',
      terminal: true,
    });
  });
});

function harness(
  reconcile: (key: string) => ReconcileResult | undefined | Promise<ReconcileResult | undefined>,
  concurrency = 1,
) {
  const clock = new FakeClock();
  const metrics = new RuntimeMetrics({ processMetrics: false, now: () => clock.now() });
  const seen: { key: string; at: number }[] = [];
  const controller = new Controller({
    name: 'test',
    clock,
    log: silentLogger(),
    metrics,
    concurrency,
    reconcile: async ({ key }) => {
      seen.push({ key, at: clock.now() });
      return await reconcile(key);
    },
  });
  return { clock, metrics, seen, controller };
}

async function metricValue(metrics: RuntimeMetrics, name: string, labels: Record<string, string>) {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values as { labels: Record<string, string>; value: number }[] | undefined)?.find((v) =>
    Object.entries(labels).every(([k, val]) => v.labels[k] === val),
  )?.value;
}

describe('Controller', () => {
  test('success forgets; errors retry with per-key backoff 5 ms, 10 ms, 20 ms', async () => {
    let failures = 3;
    const { clock, seen, controller, metrics } = harness(() => {
      if (failures-- > 0) throw new Error('transient');
      return undefined;
    });
    await controller.start();
    const t0 = clock.now();
    controller.enqueue('ns/a');
    await flushMicrotasks();
    await clock.advance(5);
    await clock.advance(10);
    await clock.advance(20);
    await clock.advance(1000);
    assert.deepEqual(
      seen.map((s) => s.at - t0),
      [0, 5, 15, 35],
    );
    assert.equal(controller.queue.numRequeues('ns/a'), 0, 'success forgets the failures');
    assert.equal(await metricValue(metrics, 'controller_runtime_reconcile_total', { result: 'error' }), 3);
    assert.equal(await metricValue(metrics, 'controller_runtime_reconcile_total', { result: 'success' }), 1);
    assert.equal(
      await metricValue(metrics, 'controller_runtime_reconcile_errors_total', { controller: 'test' }),
      3,
    );
    await controller.stop();
  });

  test('requeueAfter reconciles again after exactly that long', async () => {
    const { clock, seen, controller } = harness(() => ({ requeueAfterMs: 60_000 }));
    await controller.start();
    controller.enqueue('ns/a');
    await flushMicrotasks();
    await clock.advance(59_999);
    assert.equal(seen.length, 1);
    await clock.advance(1);
    assert.equal(seen.length, 2);
    await controller.stop();
  });

  test('terminal errors are not retried; non-Error throws are caught and counted', async () => {
    const { clock, seen, controller, metrics } = harness((key) => {
      if (key === 'ns/terminal') throw new TerminalError('spec is invalid');
      throw 'a string';
    });
    await controller.start();
    controller.enqueue('ns/terminal');
    controller.enqueue('ns/panic');
    await flushMicrotasks();
    await clock.advance(10_000);
    assert.equal(seen.filter((s) => s.key === 'ns/terminal').length, 1);
    assert.ok(seen.filter((s) => s.key === 'ns/panic').length > 3, 'non-terminal keeps retrying');
    assert.equal(await metricValue(metrics, 'controller_runtime_terminal_reconcile_errors_total', {}), 1);
    assert.ok(((await metricValue(metrics, 'controller_runtime_reconcile_panics_total', {})) ?? 0) > 0);
    await controller.stop();
  });

  test('with several workers, one key is never reconciled concurrently', async () => {
    const active = new Set<string>();
    let overlaps = 0;
    let calls = 0;
    const { controller } = harness(async (key) => {
      if (active.has(key)) overlaps++;
      active.add(key);
      calls++;
      await flushMicrotasks();
      active.delete(key);
      return undefined;
    }, 4);
    await controller.start();
    for (let round = 0; round < 50; round++) {
      for (const k of ['a', 'b', 'c']) controller.enqueue(`ns/${k}`);
      await Promise.resolve();
    }
    while (controller.queue.length > 0) await flushMicrotasks();
    await flushMicrotasks();
    await controller.stop();
    assert.equal(overlaps, 0);
    assert.ok(calls >= 3);
  });

  test('stop waits for the reconcile in progress', async () => {
    let release: () => void = () => undefined;
    let finished = false;
    const { controller } = harness(async () => {
      await new Promise<void>((r) => {
        release = r;
      });
      finished = true;
      return undefined;
    });
    await controller.start();
    controller.enqueue('ns/slow');
    await flushMicrotasks();
    let stopped = false;
    const stopping = controller.stop().then(() => {
      stopped = true;
    });
    await flushMicrotasks();
    assert.equal(stopped, false);
    release();
    await stopping;
    assert.equal(finished, true);
  });

  test('a key handed to a worker just before stop is not reconciled', async () => {
    const { seen, controller } = harness(() => undefined);
    await controller.start();
    await flushMicrotasks(); // the worker waits for a key
    controller.enqueue('ns/late'); // given to the waiting worker, which resumes only later
    const stopping = controller.stop();
    await stopping;
    await flushMicrotasks();
    assert.deepEqual(seen, [], 'no reconcile starts once stop() was called');
  });

  test('stopped before its caches synced, start resolves without starting workers', async () => {
    const { seen, controller, clock } = harness(() => undefined);
    // Never started, so never synced: as a resource the API server does not serve.
    const informer = new Informer({
      http: {} as KubeHttp,
      resource: {
        group: 'x.paddock.dev',
        version: 'v1',
        plural: 'nothings',
        namespaced: true,
        kind: 'Nothing',
      },
      clock,
      log: silentLogger(),
    });
    controller.watchFor(informer).resyncEvery(60_000);
    const starting = controller.start();
    await flushMicrotasks();
    await controller.stop();
    await starting; // resolves: stopping is not a failure of start
    controller.enqueue('ns/a');
    await clock.advance(120_000);
    assert.deepEqual(seen, []);
    assert.equal(clock.timers, 0, 'no resync timer scheduled after stop');
  });

  test('stopped before start, start resolves at once', async () => {
    const { controller, clock } = harness(() => undefined);
    controller.watchFor(
      new Informer({
        http: {} as KubeHttp,
        resource: { group: '', version: 'v1', plural: 'configmaps', namespaced: true, kind: 'ConfigMap' },
        clock,
        log: silentLogger(),
      }),
    );
    await controller.stop();
    let started = false;
    void controller.start().then(() => {
      started = true;
    });
    await flushMicrotasks();
    assert.equal(started, true);
  });
});

describe('resync spread', () => {
  test('each key has a stable offset in [0, 1), and a thousand keys spread over the whole range', () => {
    const keys = Array.from({ length: 1000 }, (_, i) => `sandbox/runner-${i}`);
    const offsets = keys.map(resyncOffset);
    assert.deepEqual(keys.map(resyncOffset), offsets, 'stable');
    assert.ok(offsets.every((o) => o >= 0 && o < 1));
    // Ten equal slices each get a share near a tenth: no burst at one moment.
    const slices = Array.from(
      { length: 10 },
      (_, i) => offsets.filter((o) => Math.floor(o * 10) === i).length,
    );
    assert.ok(
      slices.every((n) => n > 60 && n < 140),
      `slices ${slices}`,
    );
  });
});
