import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import type { HorizontalRunnerAutoscaler } from '../api/index.ts';
import { FakeClock } from '../runtime/clock.ts';
import { KubeError } from '../runtime/errors.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import { Store } from '../runtime/store.ts';
import { DEFAULT_TRIGGER_DURATION_MS as D, type JobOp } from './capacity-reservations.ts';
import { ReservationWriter } from './reservation-writer.ts';

/**
 * A fake API server holding one HRA, with the JSON patch `test` semantics of the real one (422
 * when the tested value differs) and switches for the failures the writer must survive.
 */
function fakeApi(opts: { maxReplicas?: number } = {}) {
  let hra: HorizontalRunnerAutoscaler | undefined = {
    metadata: { namespace: 'ns', name: 'hra', generation: 1, resourceVersion: '1' },
    spec: { maxReplicas: opts.maxReplicas ?? 10, capacityReservations: [] },
  } as unknown as HorizontalRunnerAutoscaler;
  const api = {
    gets: 0,
    patches: 0,
    failNext: 0,
    /** Every patch is refused as invalid (a validation rule), whatever the generation. */
    refuse: false,
    /** Resolved by the test to let the in-flight patch finish. */
    hold: undefined as Promise<void> | undefined,
    get object() {
      return hra;
    },
    edit() {
      hra!.metadata.generation = (hra!.metadata.generation ?? 0) + 1;
      hra!.metadata.resourceVersion = String(Number(hra!.metadata.resourceVersion) + 1);
    },
    remove() {
      hra = undefined;
    },
  };
  const http = {
    async request(method: string, _path: string, o: { body?: unknown } = {}) {
      if (!hra) throw new KubeError({ code: 404, reason: 'NotFound', message: 'not found' });
      if (method === 'GET') {
        api.gets++;
        return structuredClone(hra);
      }
      api.patches++;
      if (api.hold) await api.hold;
      if (api.failNext > 0) {
        api.failNext--;
        throw new KubeError({ code: 503, reason: 'ServiceUnavailable', message: 'etcd is down' });
      }
      if (api.refuse) {
        throw new KubeError({ code: 422, reason: 'Invalid', message: 'spec.capacityReservations: Too many' });
      }
      const ops = o.body as { op: string; path: string; value: unknown }[];
      const t = ops.find((x) => x.op === 'test')!;
      if (t.value !== hra.metadata.generation) {
        throw new KubeError({ code: 422, reason: 'Invalid', message: 'the test failed' });
      }
      hra.spec.capacityReservations = ops.find((x) => x.op === 'add')!.value as never;
      hra.metadata.generation = (hra.metadata.generation ?? 0) + 1;
      hra.metadata.resourceVersion = String(Number(hra.metadata.resourceVersion) + 1);
      return structuredClone(hra);
    },
  } as unknown as KubeHttp;
  return { api, http };
}

const log = pino({ level: 'silent' });
const q = (jobId: number): JobOp => ({ jobId, repo: 'o/r', action: 'queued', durationMs: D });
const c = (jobId: number): JobOp => ({ jobId, repo: 'o/r', action: 'completed', durationMs: D });
const names = (h: HorizontalRunnerAutoscaler | undefined) =>
  (h?.spec.capacityReservations ?? []).map((r) => r.name);
const target = { namespace: 'ns', name: 'hra' };

describe('ReservationWriter', () => {
  test('writes at once; deliveries arriving during a write make one more write together', async () => {
    const clock = new FakeClock();
    const { api, http } = fakeApi();
    const w = new ReservationWriter({ http, clock, log });
    let release!: () => void;
    api.hold = new Promise((r) => {
      release = r;
    });
    w.add(target, q(1));
    for (const id of [2, 3, 4]) w.add(target, q(id));
    w.add(target, q(2)); // a redelivery
    assert.equal(w.depth, 5);
    api.hold = undefined;
    release();
    await w.idle();
    assert.deepEqual(names(api.object), ['job-1@o/r', 'job-2@o/r', 'job-3@o/r', 'job-4@o/r']);
    assert.equal(api.patches, 2);
    assert.equal(w.depth, 0);
  });

  test('a spec edited since it was read is read again, never overwritten', async () => {
    const clock = new FakeClock();
    const { api, http } = fakeApi();
    const w = new ReservationWriter({ http, clock, log });
    w.add(target, q(1));
    await w.idle();
    api.edit(); // someone changes the spec; our last answer is now stale
    w.add(target, q(2));
    await w.idle();
    assert.deepEqual(names(api.object), ['job-1@o/r', 'job-2@o/r']);
    assert.equal(api.gets, 2, 'read once to start, once after the failed test');
  });

  test('failed writes are retried with back-off, keeping every delivery; other outcomes are final', async () => {
    const clock = new FakeClock();
    const { api, http } = fakeApi();
    const w = new ReservationWriter({ http, clock, log });
    api.failNext = 2;
    w.add(target, q(1));
    await clock.advance(0);
    w.add(target, q(2)); // waits for the retry
    await clock.advance(999);
    assert.deepEqual(names(api.object), []);
    await clock.advance(1); // 1 s: fails again
    await clock.advance(1999);
    assert.deepEqual(names(api.object), []);
    await clock.advance(1); // 2 s later: written, with the delivery that waited
    await w.idle();
    assert.deepEqual(names(api.object), ['job-1@o/r', 'job-2@o/r']);
    w.add(target, c(1));
    await w.idle();
    assert.deepEqual(names(api.object), ['job-2@o/r']);
  });

  test('a change the API server keeps refusing is dropped, and the queue behind it moves on', {
    timeout: 10_000,
  }, async () => {
    const clock = new FakeClock();
    const { api, http } = fakeApi();
    const w = new ReservationWriter({ http, clock, log, queueLimit: 2 });
    api.refuse = true;
    w.add(target, q(1));
    await w.idle();
    assert.equal(api.patches, 5, 'read again and tried as for a conflict, then given up');
    assert.equal(w.depth, 0, 'nothing held');
    api.refuse = false;
    assert.equal(w.add(target, q(2)), true);
    assert.equal(w.add(target, q(3)), true);
    await w.idle();
    assert.deepEqual(names(api.object), ['job-2@o/r', 'job-3@o/r']);
  });

  test('a completion that came first wins over a late queued of the same job', async () => {
    const clock = new FakeClock();
    const { api, http } = fakeApi();
    const w = new ReservationWriter({ http, clock, log });
    w.add(target, c(5));
    w.add(target, q(5));
    await w.idle();
    assert.deepEqual(names(api.object), []);
    assert.equal(api.patches, 0, 'nothing changed, nothing written');
    // An hour later the job ID is forgotten (a re-run gets a new ID anyway).
    await clock.advance(61 * 60_000);
    w.add(target, q(5));
    await w.idle();
    assert.deepEqual(names(api.object), ['job-5@o/r']);
  });

  test('the queue limit turns deliveries away; a deleted HRA drops its deliveries', async () => {
    const clock = new FakeClock();
    const { api, http } = fakeApi();
    const w = new ReservationWriter({ http, clock, log, queueLimit: 2 });
    api.failNext = 1;
    assert.equal(w.add(target, q(1)), true);
    assert.equal(w.add(target, q(2)), true);
    assert.equal(w.add(target, q(3)), false);
    api.remove();
    await clock.advance(1000);
    await w.idle();
    assert.equal(w.depth, 0);
    assert.equal(w.add(target, q(3)), true);
    await w.idle();
  });
});

describe('ReservationWriter with an informer cache', () => {
  test('a cache that has not seen our last write yet is not what a later delivery is planned on', async () => {
    const clock = new FakeClock();
    const { api, http } = fakeApi();
    const cache = new Store<HorizontalRunnerAutoscaler>();
    cache.set(structuredClone(api.object!)); // generation 1, no reservations; the watch then stalls
    const w = new ReservationWriter({ http, clock, log, cache });
    w.add(target, q(1));
    await w.idle();
    assert.deepEqual(names(api.object), ['job-1@o/r']);
    // The queue emptied; the job completes before the watch has delivered our write.
    w.add(target, c(1));
    await w.idle();
    assert.deepEqual(names(api.object), [], 'released, not judged unchanged on the stale cache');
    assert.equal(api.gets, 0, 'planned on our own answers, no read needed');
  });

  test('once the cache has caught up it is read again, and a remade HRA is not confused with the old one', async () => {
    const clock = new FakeClock();
    const { api, http } = fakeApi();
    const cache = new Store<HorizontalRunnerAutoscaler>();
    api.object!.metadata.uid = 'old';
    cache.set(structuredClone(api.object!));
    const w = new ReservationWriter({ http, clock, log, cache });
    w.add(target, q(1));
    await w.idle();
    // The HRA is deleted and made again with the same name; the cache sees the new one first.
    api.object!.metadata.uid = 'new';
    api.object!.spec.capacityReservations = [];
    api.edit();
    api.object!.metadata.generation = 1;
    api.object!.metadata.resourceVersion = '1';
    cache.set(structuredClone(api.object!));
    w.add(target, q(2));
    await w.idle();
    assert.deepEqual(
      names(api.object),
      ['job-2@o/r'],
      'planned on the new HRA, not on our answer about the old',
    );
    assert.equal(api.gets, 0);
  });
});

describe('ReservationWriter and the repair pass', () => {
  test("a repair's release is no completion: the job's reservation can come back", async () => {
    const clock = new FakeClock();
    const { api, http } = fakeApi();
    const w = new ReservationWriter({ http, clock, log });
    w.add(target, q(9));
    await w.idle();
    w.add(target, { ...c(9), repaired: true }); // the listing did not show the job (yet)
    await w.idle();
    assert.deepEqual(names(api.object), []);
    w.add(target, { ...q(9), repaired: true }); // the next pass sees it queued
    await w.idle();
    assert.deepEqual(names(api.object), ['job-9@o/r']);
  });
});
