import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { FakeClock, flushMicrotasks } from './clock.ts';
import { KubeError } from './errors.ts';
import type { KubeHttp, RequestOptions } from './kube-http.ts';
import {
  afterAttempt,
  attemptDeadline,
  LeaderElector,
  type LeaseObject,
  leaseDecision,
  nextLeaseSpec,
} from './leader-election.ts';
import { silentLogger } from './log.ts';
import { Manager } from './manager.ts';
import { RuntimeMetrics } from './metrics.ts';

const T = Date.parse('2026-06-01T12:00:00Z');
const LEASE = 15_000;

describe('leaseDecision', () => {
  const decide = (lease: Parameters<typeof leaseDecision>[0]['lease'], observedAt: number, now: number) =>
    leaseDecision({ lease, identity: 'me', observedAt, now, leaseDurationMs: LEASE });

  test('no lease → create', () => {
    assert.deepEqual(decide(undefined, T, T), { action: 'create' });
  });

  test('our own lease → renew, whatever the times say', () => {
    assert.deepEqual(decide({ holderIdentity: 'me', leaseDurationSeconds: 15 }, T - 60_000, T), {
      action: 'renew',
    });
  });

  test('released lease (empty holder) → acquire at once', () => {
    assert.deepEqual(decide({ holderIdentity: '', leaseDurationSeconds: 1 }, T, T), {
      action: 'acquire',
      takeover: false,
    });
  });

  test('another holder: wait until observed time + lease duration, then take over', () => {
    const lease = { holderIdentity: 'other', leaseDurationSeconds: 15 };
    assert.deepEqual(decide(lease, T, T), { action: 'wait', holder: 'other', expiresAt: T + LEASE });
    assert.equal(decide(lease, T, T + LEASE - 1).action, 'wait');
    assert.deepEqual(decide(lease, T, T + LEASE), { action: 'acquire', takeover: true });
    assert.deepEqual(decide(lease, T, T + LEASE + 1000), { action: 'acquire', takeover: true });
  });

  test('the holder’s own leaseDurationSeconds counts, not ours', () => {
    const lease = { holderIdentity: 'other', leaseDurationSeconds: 60 };
    assert.equal(decide(lease, T, T + 30_000).action, 'wait');
    assert.equal(decide(lease, T, T + 60_000).action, 'acquire');
  });

  test('a skewed renewTime in the record does not matter: only our observation does', () => {
    const lease = {
      holderIdentity: 'other',
      leaseDurationSeconds: 15,
      renewTime: '2000-01-01T00:00:00.000000Z',
    };
    assert.equal(decide(lease, T, T + 1000).action, 'wait');
  });
});

describe('nextLeaseSpec', () => {
  test('create starts at zero transitions', () => {
    const spec = nextLeaseSpec({ action: 'create' }, undefined, 'me', T, LEASE);
    assert.equal(spec.holderIdentity, 'me');
    assert.equal(spec.leaseDurationSeconds, 15);
    assert.equal(spec.leaseTransitions, 0);
    assert.equal(spec.acquireTime, '2026-06-01T12:00:00.000000Z');
    assert.equal(spec.renewTime, spec.acquireTime);
  });

  test('renew keeps acquireTime and transitions', () => {
    const cur = { holderIdentity: 'me', acquireTime: 'A', leaseTransitions: 4 };
    const spec = nextLeaseSpec({ action: 'renew' }, cur, 'me', T + 2000, LEASE);
    assert.equal(spec.acquireTime, 'A');
    assert.equal(spec.leaseTransitions, 4);
    assert.equal(spec.renewTime, '2026-06-01T12:00:02.000000Z');
  });

  test('taking over from another holder counts a transition', () => {
    const cur = { holderIdentity: 'other', acquireTime: 'A', leaseTransitions: 4 };
    const spec = nextLeaseSpec({ action: 'acquire', takeover: true }, cur, 'me', T, LEASE);
    assert.equal(spec.leaseTransitions, 5);
    assert.equal(spec.holderIdentity, 'me');
  });
});

describe('attemptDeadline', () => {
  const cases: { name: string; leading: boolean; lastRenew: number; now: number; want: number }[] = [
    {
      name: 'a leader ends its attempt by lastRenew + renewDeadline',
      leading: true,
      lastRenew: T,
      now: T + 2000,
      want: T + 10_000,
    },
    { name: 'however late the attempt starts', leading: true, lastRenew: T, now: T + 9000, want: T + 10_000 },
    {
      name: 'a candidate gets one renew deadline from now',
      leading: false,
      lastRenew: 0,
      now: T,
      want: T + 10_000,
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      assert.equal(attemptDeadline({ ...c, renewDeadlineMs: 10_000 }), c.want);
    });
  }
});

describe('afterAttempt', () => {
  const base = { startedAt: T + 2000, lastRenew: T, renewDeadlineMs: 10_000 };
  const cases: { name: string; leading: boolean; ok: boolean; now: number; want: unknown }[] = [
    {
      name: 'a candidate that wrote the lease leads, counted from when its attempt started',
      leading: false,
      ok: true,
      now: T + 2500,
      want: { step: 'started-leading', lastRenew: T + 2000 },
    },
    {
      name: 'a candidate that did not get it retries',
      leading: false,
      ok: false,
      now: T + 2500,
      want: { step: 'retry' },
    },
    {
      name: 'a leader that renewed moves its deadline to attempt start + renewDeadline',
      leading: true,
      ok: true,
      now: T + 2500,
      want: { step: 'renewed', lastRenew: T + 2000 },
    },
    {
      name: 'a leader that failed before its deadline retries',
      leading: true,
      ok: false,
      now: T + 9999,
      want: { step: 'retry' },
    },
    {
      name: 'a leader that failed at its deadline has lost',
      leading: true,
      ok: false,
      now: T + 10_000,
      want: { step: 'lost' },
    },
    {
      name: 'a success that returns after the deadline is too late',
      leading: true,
      ok: true,
      now: T + 10_000,
      want: { step: 'lost' },
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      assert.deepEqual(afterAttempt({ ...base, ...c }), c.want);
    });
  }
});

/**
 * An in-memory Lease endpoint. `stall` makes matching requests hang until their signal aborts (or
 * forever without one); `ignoreSignal` makes them ignore the signal, as a misbehaving client might.
 */
function fakeLeaseApi(clock: FakeClock) {
  let lease: LeaseObject | undefined;
  let rv = 0;
  const api = {
    stall: undefined as ((method: string) => boolean) | undefined,
    fail: undefined as ((method: string) => KubeError | undefined) | undefined,
    requests: [] as { method: string; at: number; signal: AbortSignal | undefined }[],
    stalled: [] as { method: string; signal: AbortSignal | undefined; release: () => void }[],
    get lease() {
      return lease;
    },
    /** Another replica takes the lease (or renews it) now. */
    setHolder(holder: string) {
      lease = {
        metadata: { name: 'l', namespace: 'ns', resourceVersion: String(++rv) },
        spec: { holderIdentity: holder, leaseDurationSeconds: 15, renewTime: String(clock.now()) },
      };
    },
    close() {},
    async request<T>(method: string, _path: string, opts: RequestOptions = {}): Promise<T> {
      api.requests.push({ method, at: clock.now(), signal: opts.signal });
      if (api.stall?.(method)) {
        await new Promise<void>((resolve, reject) => {
          api.stalled.push({ method, signal: opts.signal, release: resolve });
          opts.signal?.addEventListener('abort', () => reject(opts.signal?.reason), { once: true });
        });
      }
      const failure = api.fail?.(method);
      if (failure) throw failure;
      if (method === 'GET') {
        if (!lease) throw new KubeError({ code: 404, reason: 'NotFound', message: 'not found' });
        return structuredClone(lease) as T;
      }
      const body = opts.body as LeaseObject;
      if (method === 'POST' && lease)
        throw new KubeError({ code: 409, reason: 'AlreadyExists', message: 'exists' });
      if (method === 'PUT' && body.metadata.resourceVersion !== lease?.metadata.resourceVersion) {
        throw new KubeError({ code: 409, reason: 'Conflict', message: 'conflict' });
      }
      lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(++rv) } };
      return structuredClone(lease) as T;
    },
  };
  return api;
}

function electorHarness() {
  const clock = new FakeClock();
  const api = fakeLeaseApi(clock);
  const events: { what: string; at: number }[] = [];
  const elector = new LeaderElector({
    http: api as unknown as KubeHttp,
    clock,
    log: silentLogger(),
    namespace: 'ns',
    name: 'l',
    identity: 'me',
    onStartedLeading: () => events.push({ what: 'started', at: clock.now() }),
    onStoppedLeading: () => events.push({ what: 'stopped', at: clock.now() }),
  });
  return { clock, api, events, elector, t0: clock.now() };
}

describe('LeaderElector on a fake clock (lease 15 s, renew deadline 10 s, retry 2 s)', () => {
  test('a leader whose lease read hangs gives up at lastRenew + renewDeadline, and aborts the read', async () => {
    const { clock, api, events, elector, t0 } = electorHarness();
    elector.start();
    await flushMicrotasks();
    assert.equal(elector.isLeader, true);
    await clock.advance(2000); // renewed: lastRenew = t0 + 2 s
    assert.equal(api.requests.filter((r) => r.method === 'PUT').length, 1);
    api.stall = (m) => m === 'GET';
    await clock.advance(2000); // the renew at t0 + 4 s hangs on its read
    assert.equal(api.stalled.length, 1);
    await clock.advance(12_000 - 4000 - 1);
    assert.equal(elector.isLeader, true, 'still within the renew deadline');
    assert.deepEqual(events, [{ what: 'started', at: t0 }]);
    await clock.advance(1);
    assert.equal(elector.isLeader, false);
    assert.deepEqual(events, [
      { what: 'started', at: t0 },
      { what: 'stopped', at: t0 + 12_000 },
    ]);
    assert.equal(api.stalled[0]!.signal?.aborted, true, 'the hanging read was aborted');
    const requests = api.requests.length;
    await clock.advance(60_000);
    assert.equal(api.requests.length, requests, 'campaigning ended with the loss');
    assert.equal(events.length, 2, 'onStoppedLeading fires once');
    assert.equal(clock.timers, 0, 'no timer left behind');
    await elector.shutdown();
  });

  test('a hanging write is bounded the same way', async () => {
    const { clock, api, events, elector, t0 } = electorHarness();
    elector.start();
    await flushMicrotasks();
    api.stall = (m) => m === 'PUT';
    await clock.advance(2000);
    assert.equal(api.stalled.length, 1);
    await clock.advance(10_000 - 2000 - 1);
    assert.equal(elector.isLeader, true);
    await clock.advance(1);
    assert.deepEqual(events.at(-1), { what: 'stopped', at: t0 + 10_000 });
    assert.equal(api.stalled[0]!.signal?.aborted, true);
  });

  test('failing renewals lose the lease at the deadline, not at the first failure', async () => {
    const { clock, api, events, elector, t0 } = electorHarness();
    elector.start();
    await flushMicrotasks();
    api.fail = (m) =>
      m === 'PUT' ? new KubeError({ code: 503, reason: 'ServiceUnavailable', message: 'down' }) : undefined;
    await clock.advance(9999);
    assert.equal(
      elector.isLeader,
      true,
      `failed renewals so far: ${api.requests.filter((r) => r.method === 'PUT').length}`,
    );
    await clock.advance(1);
    assert.deepEqual(events.at(-1), { what: 'stopped', at: t0 + 10_000 });
  });

  test('a read that ignores its signal and returns after the loss does not lead to a write', async () => {
    const { clock, api, elector } = electorHarness();
    elector.start();
    await flushMicrotasks();
    api.stall = (m) => m === 'GET';
    // A client that does not honour the signal: the request stays pending until released by hand.
    const request = api.request.bind(api);
    api.request = <T>(method: string, path: string, opts: RequestOptions = {}) =>
      request<T>(method, path, { ...opts, signal: undefined as never }).then((v) => v);
    await clock.advance(2000);
    await clock.advance(10_000);
    assert.equal(elector.isLeader, false);
    const writes = api.requests.filter((r) => r.method === 'PUT').length;
    api.stall = undefined;
    api.stalled[0]!.release();
    await clock.advance(10_000);
    assert.equal(api.requests.filter((r) => r.method === 'PUT').length, writes, 'no write after the loss');
    assert.equal(elector.isLeader, false);
  });

  test('renewals that succeed keep the lease indefinitely', async () => {
    const { clock, api, events, elector } = electorHarness();
    elector.start();
    await flushMicrotasks();
    await clock.advance(120_000);
    assert.equal(elector.isLeader, true);
    assert.deepEqual(
      events.map((e) => e.what),
      ['started'],
    );
    assert.equal(api.requests.filter((r) => r.method === 'PUT').length, 60);
    assert.ok(
      api.requests.every((r) => r.signal),
      'every request carries the attempt signal',
    );
    await elector.shutdown();
    assert.equal(api.lease?.spec?.holderIdentity, '', 'released on shutdown');
  });

  test('a candidate abandons a hanging read after the renew deadline and tries again', async () => {
    const { clock, api, events, elector } = electorHarness();
    api.setHolder('other');
    api.stall = (m) => m === 'GET';
    elector.start();
    await flushMicrotasks();
    assert.equal(api.stalled.length, 1);
    await clock.advance(10_000);
    assert.equal(api.stalled[0]!.signal?.aborted, true);
    api.stall = undefined;
    await clock.advance(2400); // retry period + at most 20 % jitter
    assert.equal(
      api.requests.filter((r) => r.method === 'GET').length,
      2,
      'a new attempt after the abandoned one',
    );
    assert.equal(elector.isLeader, false, 'the other holder’s lease is still fresh');
    assert.deepEqual(events, []);
    await elector.shutdown();
  });
});

describe('Manager losing the lease (fake clock)', () => {
  test('stops handing out work and calls onLostLeadership at the deadline, without waiting for reconciles in flight', async () => {
    const clock = new FakeClock();
    const api = fakeLeaseApi(clock);
    const events: string[] = [];
    let releaseSlow: () => void = () => undefined;
    let slowSignal: AbortSignal | undefined;
    const manager = new Manager({
      kubeConfig: new KubeConfig(),
      http: api as unknown as KubeHttp,
      clock,
      log: silentLogger(),
      metrics: new RuntimeMetrics({ processMetrics: false, now: () => clock.now() }),
      leaderElection: { namespace: 'ns', name: 'l', identity: 'me' },
      onLostLeadership: () =>
        events.push(`lost at +${clock.now() - t0} ms; queue shut: ${controller.queue.isShuttingDown}`),
    });
    const controller = manager.controller({
      name: 'c',
      reconcile: async ({ key }, ctx) => {
        events.push(`reconcile ${key}`);
        if (key === 'ns/slow') {
          slowSignal = ctx.signal;
          await new Promise<void>((r) => {
            releaseSlow = r;
          });
          events.push('slow finished');
        }
      },
    });
    const t0 = clock.now();
    await manager.start();
    await flushMicrotasks();
    assert.equal(manager.isLeader, true);
    controller.enqueue('ns/slow');
    controller.enqueue('ns/next'); // waits: one worker, busy with ns/slow
    await flushMicrotasks();
    api.stall = (m) => m === 'GET';
    await clock.advance(10_000);
    assert.equal(manager.isLeader, false);
    assert.deepEqual(events, ['reconcile ns/slow', 'lost at +10000 ms; queue shut: true']);
    assert.equal(slowSignal?.aborted, true, 'the reconcile in flight is told to stop');
    controller.enqueue('ns/after');
    releaseSlow();
    await clock.advance(60_000);
    assert.deepEqual(events.slice(2), ['slow finished'], 'no reconcile starts after the loss');
    await manager.stop();
  });
});
