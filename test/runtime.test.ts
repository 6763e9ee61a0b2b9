import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { realClock } from '../src/runtime/clock.ts';
import { EventRecorder } from '../src/runtime/events.ts';
import { Informer, type InformerEvent, type ResourceRef } from '../src/runtime/informer.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { LeaderElector, type LeaseObject } from '../src/runtime/leader-election.ts';
import { silentLogger } from '../src/runtime/log.ts';
import { Manager } from '../src/runtime/manager.ts';
import { addFinalizer, removeFinalizer } from '../src/runtime/objects.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import { type ControlPlane, startControlPlane } from '../src/testenv/control-plane.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { startStallingProxy } from './support/stalling-proxy.ts';

const CONFIGMAPS: ResourceRef = {
  group: '',
  version: 'v1',
  plural: 'configmaps',
  namespaced: true,
  kind: 'ConfigMap',
};
const log = silentLogger();

async function createConfigMap(core: CoreV1Api, namespace: string, name: string) {
  return await core.createNamespacedConfigMap({ namespace, body: { metadata: { name }, data: { v: name } } });
}

async function apiNames(core: CoreV1Api, namespace: string): Promise<string[]> {
  const list = await core.listNamespacedConfigMap({ namespace, labelSelector: '!kube-root-ca' });
  return list.items
    .map((c) => c.metadata!.name!)
    .filter((n) => n !== 'kube-root-ca.crt')
    .sort();
}

function storeNames(inf: Informer): string[] {
  return inf.store
    .list()
    .map((o) => o.metadata.name!)
    .filter((n) => n !== 'kube-root-ca.crt')
    .sort();
}

describe('finalizers and events against a real API server', () => {
  const ns = namespaceFixture('t-runtime');
  let http: KubeHttp;
  let core: CoreV1Api;
  before(() => {
    http = new KubeHttp(ns.cluster.kubeConfig);
    core = ns.cluster.kubeConfig.makeApiClient(CoreV1Api);
  });
  after(() => http?.close());

  test('concurrent finalizer writers never lose a finalizer', async () => {
    const cm = (await createConfigMap(core, ns.name, 'fin')) as unknown as KubeObject;
    const names = Array.from({ length: 12 }, (_, i) => `test.paddock.dev/f${i}`);
    // Every writer starts from the same stale copy, as controllers with a lagging cache would.
    await Promise.all(names.map((f) => addFinalizer(http, CONFIGMAPS, cm, f)));
    let current = await http.request<KubeObject>('GET', `/api/v1/namespaces/${ns.name}/configmaps/fin`);
    assert.deepEqual([...(current.metadata.finalizers ?? [])].sort(), [...names].sort());
    // Concurrent removers all hold the same copy, each removing its own finalizer.
    const seen = current;
    await Promise.all(names.slice(0, 6).map((f) => removeFinalizer(http, CONFIGMAPS, seen, f)));
    current = await http.request<KubeObject>('GET', `/api/v1/namespaces/${ns.name}/configmaps/fin`);
    assert.deepEqual([...(current.metadata.finalizers ?? [])].sort(), names.slice(6).sort());
    // Adding an existing finalizer is a no-op that returns the object.
    const same = await addFinalizer(http, CONFIGMAPS, current, names[7]!);
    assert.equal(same?.metadata.resourceVersion, current.metadata.resourceVersion);
    for (const f of names.slice(6)) await removeFinalizer(http, CONFIGMAPS, seen, f);
    current = await http.request<KubeObject>('GET', `/api/v1/namespaces/${ns.name}/configmaps/fin`);
    assert.deepEqual(current.metadata.finalizers ?? [], []);
    const gone = { metadata: { name: 'gone', namespace: ns.name, finalizers: ['x'] } };
    assert.equal(
      await removeFinalizer(http, CONFIGMAPS, gone, 'x'),
      undefined,
      'a vanished object is not an error',
    );
  });

  test('the event recorder aggregates 1,000 identical events into one series', async () => {
    const cm = (await createConfigMap(core, ns.name, 'noisy')) as unknown as KubeObject;
    cm.apiVersion = 'v1';
    cm.kind = 'ConfigMap';
    const recorder = new EventRecorder({
      http,
      clock: realClock,
      log,
      reportingController: 'paddock.dev/test',
      reportingInstance: 'test-1',
    });
    for (let i = 0; i < 1000; i++) {
      recorder.record({
        regarding: cm,
        type: 'Warning',
        reason: 'HotLoop',
        action: 'Reconcile',
        note: 'same thing again',
      });
    }
    recorder.record({ regarding: cm, type: 'Normal', reason: 'Other', note: 'a different event' });
    await recorder.flush();
    assert.ok(recorder.writes <= 3, `API writes: ${recorder.writes}`);
    const list = await http.request<{
      items: { reason: string; series?: { count: number }; regarding: { name: string } }[];
    }>('GET', `/apis/events.k8s.io/v1/namespaces/${ns.name}/events`);
    const hot = list.items.filter((e) => e.reason === 'HotLoop');
    assert.equal(hot.length, 1);
    assert.equal(hot[0]!.series?.count, 1000);
    assert.equal(hot[0]!.regarding.name, 'noisy');
    assert.equal(list.items.filter((e) => e.reason === 'Other').length, 1);
  });
});

describe('manager and leader election against a real API server', () => {
  const ns = namespaceFixture('t-leader');
  let core: CoreV1Api;
  before(() => {
    core = ns.cluster.kubeConfig.makeApiClient(CoreV1Api);
  });

  function makeManager(
    identity: string,
    leaseName: string,
    reconciled: string[],
    onLost: () => void = () => undefined,
  ) {
    const m = new Manager({
      kubeConfig: ns.cluster.kubeConfig,
      log,
      probeAddress: '127.0.0.1:0',
      leaderElection: { namespace: ns.name, name: leaseName, identity },
      onLostLeadership: onLost,
    });
    const inf = m.informer(CONFIGMAPS, { namespace: ns.name });
    m.controller({
      name: `cm-${identity}`,
      reconcile: ({ name }) => {
        reconciled.push(name);
      },
    }).watchFor(inf);
    return m;
  }

  test('only the leader reconciles; a stopped leader hands over well within 17 s', async () => {
    const a: string[] = [];
    const b: string[] = [];
    const ma = makeManager('replica-a', 'paddock-test', a);
    await ma.start();
    await eventually('a leads', async () => ma.isLeader);
    const mb = makeManager('replica-b', 'paddock-test', b);
    await mb.start();
    try {
      await eventually('b synced', async () => mb.ready);
      await createConfigMap(core, ns.name, 'le-1');
      await eventually('a reconciled le-1', async () => a.includes('le-1'));
      await new Promise((r) => setTimeout(r, 2500));
      assert.equal(mb.isLeader, false);
      assert.equal(b.length, 0, 'the follower reconciles nothing');

      // Probes and metrics on both replicas.
      for (const m of [ma, mb]) {
        assert.equal((await fetch(`${m.probeUrl}/healthz`)).status, 200);
        assert.equal((await fetch(`${m.probeUrl}/readyz`)).status, 200);
      }
      const metrics = await (await fetch(`${ma.probeUrl}/metrics`)).text();
      assert.match(
        metrics,
        /controller_runtime_reconcile_total\{controller="cm-replica-a",result="success"\} \d+/,
      );
      assert.match(metrics, /workqueue_adds_total\{name="cm-replica-a",controller="cm-replica-a"\} \d+/);
      assert.match(metrics, /leader_election_master_status\{name="paddock-test"\} 1/);
      assert.match(metrics, /process_open_fds/);

      const stoppedAt = Date.now();
      await ma.stop();
      await eventually('b takes over', async () => mb.isLeader, 17_000);
      const takeoverMs = Date.now() - stoppedAt;
      await createConfigMap(core, ns.name, 'le-2');
      await eventually('b reconciles le-2', async () => b.includes('le-2'));
      assert.ok(!a.includes('le-2'));
      process.stderr.write(`[runtime] clean handover took ${takeoverMs} ms\n`);
    } finally {
      await ma.stop();
      await mb.stop();
    }
  });

  test('a crashed leader (no release) is replaced after the lease expires', async () => {
    const http = new KubeHttp(ns.cluster.kubeConfig);
    const events: string[] = [];
    const elector = (id: string) =>
      new LeaderElector({
        http,
        clock: realClock,
        log,
        namespace: ns.name,
        name: 'paddock-crash',
        identity: id,
        onStartedLeading: () => events.push(`${id} leads`),
        onStoppedLeading: () => events.push(`${id} lost`),
      });
    const a = elector('a');
    const b = elector('b');
    a.start();
    await eventually('a leads', async () => a.isLeader);
    b.start();
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(b.isLeader, false);
    const crashedAt = Date.now();
    await a.abandon();
    // Lease 15 s, renew every 2 s: a takeover later than this means the expiry is not detected.
    await eventually('b leads', async () => b.isLeader, 25_000);
    const takeoverMs = Date.now() - crashedAt;
    process.stderr.write(`[runtime] takeover after a crash took ${takeoverMs} ms\n`);
    assert.ok(takeoverMs >= 10_000, `must not take over a live lease early (${takeoverMs} ms)`);
    await b.shutdown();
    http.close();
    assert.deepEqual(events, ['a leads', 'b leads']);
  });

  test('startCaches fills the caches before start, reconciling nothing; stop() ends them without a start', async () => {
    await core.createNamespacedConfigMap({ namespace: ns.name, body: { metadata: { name: 'early' } } });
    const reconciled: string[] = [];
    const early = makeManager('early', 'paddock-early', reconciled);
    const inf = early.informer(CONFIGMAPS, { namespace: ns.name });
    early.startCaches();
    await eventually('the cache synced without start()', async () => early.ready);
    assert.ok(inf.store.list().some((cm) => cm.metadata.name === 'early'));
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(reconciled, [], 'no controller runs before start()');
    await early.stop();

    // Started later, the same caches are not listed again, and the controllers run.
    const later: string[] = [];
    const m = makeManager('later', 'paddock-later', later);
    let lists = 0;
    m.informer(CONFIGMAPS, { namespace: ns.name }).onLifecycle((e) => {
      if (e.type === 'listed') lists++;
    });
    m.startCaches();
    await eventually('synced', async () => m.ready);
    await m.start();
    try {
      await eventually('reconciled once leading', async () => later.includes('early'));
      assert.equal(lists, 1);
    } finally {
      await m.stop();
    }
  });
});

describe('leader election when the API server hangs, and stopping before caches sync', () => {
  const ns = namespaceFixture('t-stall');

  test('a leader whose lease reads hang stops acting before the other replica acquires the lease', async () => {
    // Short timings keep the test quick; the order they guarantee is the same as with the defaults.
    const timings = { leaseDurationMs: 4000, renewDeadlineMs: 2000, retryPeriodMs: 500 };
    const lease = 'paddock-stall';
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${ns.name}/leases/${lease}`;
    const happenings: string[] = [];
    const reconciledBy = { a: [] as string[], b: [] as string[] };
    let aStoppedAt: number | undefined;
    let aQueuesShutAtStop = false;
    const proxy = await startStallingProxy(ns.cluster.kubeConfig);
    const replica = (id: 'a' | 'b', kubeConfig: KubeConfig) => {
      const m: Manager = new Manager({
        kubeConfig,
        log,
        leaderElection: { namespace: ns.name, name: lease, identity: `stall-${id}`, timings },
        onLostLeadership: () => {
          aStoppedAt = Date.now();
          aQueuesShutAtStop = m.allControllers.every((c) => c.queue.isShuttingDown);
          happenings.push(`${id} stopped`);
        },
      });
      m.controller({
        name: `stall-${id}`,
        reconcile: ({ name }) => {
          if (reconciledBy[id].length === 0) happenings.push(`${id} reconciles`);
          reconciledBy[id].push(name);
        },
      }).watchFor(m.informer(CONFIGMAPS, { namespace: ns.name }));
      return m;
    };
    const ma = replica('a', proxy.kubeConfig);
    const mb = replica('b', ns.cluster.kubeConfig);
    const http = new KubeHttp(ns.cluster.kubeConfig);
    try {
      await ma.start();
      await eventually('a leads', async () => ma.isLeader);
      await eventually('a reconciles', async () => reconciledBy.a.length > 0);
      await mb.start();
      await eventually('b synced', async () => mb.ready);
      assert.equal(mb.isLeader, false);

      proxy.stall = (method, path) => method === 'GET' && path === leasePath;
      await eventually('b takes over', async () => mb.isLeader, 30_000).catch(async (err: Error) => {
        const seen = await http
          .request<LeaseObject>('GET', leasePath, { timeoutMs: 5000 })
          .then((l) => JSON.stringify(l.spec), String);
        throw new Error(
          `${err.message}; lease: ${seen}; a leads: ${ma.isLeader}; held reads: ${proxy.stalled}; ${JSON.stringify(happenings)}`,
        );
      });
      assert.ok(proxy.stalled > 0, 'a’s lease read was held by the proxy');
      assert.ok(aStoppedAt !== undefined, `a stopped before b took over (${JSON.stringify(happenings)})`);
      assert.equal(aQueuesShutAtStop, true, 'a’s controllers stopped taking work when it stopped leading');
      const current = await http.request<LeaseObject>('GET', leasePath);
      assert.equal(current.spec?.holderIdentity, 'stall-b');
      // acquireTime is b's clock (this process's) just before its acquiring write.
      const acquiredAt = Date.parse(current.spec!.acquireTime!);
      assert.ok(aStoppedAt < acquiredAt, `a stopped at ${aStoppedAt}, b acquired at ${acquiredAt}`);
      assert.equal(ma.isLeader, false);

      await createConfigMap(ns.cluster.kubeConfig.makeApiClient(CoreV1Api), ns.name, 'after-stall');
      await eventually('b reconciles after-stall', async () => reconciledBy.b.includes('after-stall'));
      assert.ok(!reconciledBy.a.includes('after-stall'), 'a no longer acts');
      assert.deepEqual(happenings, ['a reconciles', 'a stopped', 'b reconciles']);
    } finally {
      await mb.stop();
      await ma.stop();
      await proxy.close();
      http.close();
    }
  });

  test('a manager stopped before its caches sync: stop resolves, start does not fail, no unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    // The API server serves no such resource: the informer lists, gets 404, backs off, never syncs.
    const nothing: ResourceRef = {
      group: 'nothing.paddock.dev',
      version: 'v1',
      plural: 'widgets',
      namespaced: true,
      kind: 'Widget',
    };
    const manager = (leaderElection: boolean) => {
      const m = new Manager({
        kubeConfig: ns.cluster.kubeConfig,
        log,
        ...(leaderElection
          ? { leaderElection: { namespace: ns.name, name: 'paddock-nosync', identity: 'nosync' } }
          : {}),
        onLostLeadership: () => undefined,
      });
      const inf = m.informer(nothing, { namespace: ns.name });
      let failedLists = 0;
      inf.onLifecycle((e) => {
        if (e.type === 'backoff') failedLists++;
      });
      m.controller({ name: 'nosync', reconcile: () => undefined }).watchFor(inf);
      return Object.assign(m, { failedLists: () => failedLists });
    };
    const elected = manager(true);
    const plain = manager(false);
    try {
      // With leader election the controllers start in the background once this replica leads.
      await elected.start();
      await eventually('leads', async () => elected.isLeader);
      await eventually('a failed list', async () => elected.failedLists() > 0);
      assert.equal(elected.ready, false);
      await elected.stop();

      // Without it, start() itself waits for the caches.
      const starting = plain.start();
      await eventually('a failed list', async () => plain.failedLists() > 0);
      await plain.stop();
      await starting;

      // Unhandled rejections are reported once the microtask queue is empty.
      await new Promise((r) => setTimeout(r, 200));
      assert.deepEqual(unhandled.map(String), []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await elected.stop();
      await plain.stop();
    }
  });
});

describe('informer on a private API server (watch cache off, so old resourceVersions reach etcd)', () => {
  let plane: ControlPlane;
  let http: KubeHttp;
  let core: CoreV1Api;
  const ns = { name: 'default' };
  before(async () => {
    plane = await startControlPlane({
      controllerManager: false,
      apiServerArgs: ['--watch-cache=false'],
      log: () => undefined,
    });
    const kc = new KubeConfig();
    kc.loadFromFile(plane.kubeconfigPath);
    http = new KubeHttp(kc);
    core = kc.makeApiClient(CoreV1Api);
  });
  after(async () => {
    http?.close();
    await plane?.stop();
  });

  test('a forced 410 relists and emits deletes for objects removed meanwhile', async () => {
    for (const n of ['a', 'b', 'c']) await createConfigMap(core, ns.name, n);
    const inf = new Informer({ http, resource: CONFIGMAPS, namespace: ns.name, clock: realClock, log });
    const deleted: string[] = [];
    const added: string[] = [];
    const lifecycle: InformerEvent[] = [];
    inf.onLifecycle((e) => lifecycle.push(e));
    inf.addHandler({
      onAdd: (o) => added.push(o.metadata.name!),
      onDelete: (o) => deleted.push(o.metadata.name!),
    });
    inf.start();
    try {
      await inf.waitForSync();
      assert.deepEqual(storeNames(inf), ['a', 'b', 'c']);
      assert.equal(inf.store.get(`${ns.name}/a`)?.kind, 'ConfigMap', 'list items get their kind back');
      assert.equal(inf.store.get(`${ns.name}/a`)?.metadata.managedFields, undefined, 'managedFields dropped');

      // Stop watching, change the world behind the informer's back, resume from an ancient RV.
      const compacted = await plane.compactEtcd();
      assert.ok(compacted > 1);
      inf.restartWatch('1');
      await core.deleteNamespacedConfigMap({ name: 'b', namespace: ns.name });
      await createConfigMap(core, ns.name, 'd');
      await eventually('relist after 410', async () =>
        lifecycle.some((e) => e.type === 'watch-ended' && e.reason === 'gone'),
      );
      await eventually(
        'store converged',
        async () => JSON.stringify(storeNames(inf)) === JSON.stringify(['a', 'c', 'd']),
      );
      assert.ok(deleted.includes('b'), `delete emitted for b (deleted: ${deleted})`);
      assert.ok(added.includes('d'));
      assert.equal(lifecycle.filter((e) => e.type === 'listed').length >= 2, true);
    } finally {
      await inf.stop();
    }
  });

  test('after an API server restart mid-watch, reconnects with backoff and converges', async () => {
    const lifecycle: InformerEvent[] = [];
    const inf = new Informer({
      http,
      resource: CONFIGMAPS,
      namespace: 'default',
      clock: realClock,
      log,
      backoff: { initialMs: 200, maxMs: 2000, factor: 2, jitter: 0.5, resetAfterMs: 120_000 },
    });
    inf.onLifecycle((e) => lifecycle.push(e));
    try {
      for (const n of ['r1', 'r2']) await createConfigMap(core, 'default', n);
      inf.start();
      await inf.waitForSync();
      assert.ok(['r1', 'r2'].every((n) => storeNames(inf).includes(n)));
      await plane.restartApiServer();
      await core.deleteNamespacedConfigMap({ name: 'r1', namespace: 'default' });
      for (const n of ['r3', 'r4']) await createConfigMap(core, 'default', n);
      await eventually('store converged after restart', async () => {
        const want = await apiNames(core, 'default');
        return (
          JSON.stringify(storeNames(inf)) === JSON.stringify(want) &&
          want.includes('r4') &&
          !want.includes('r1')
        );
      });
      assert.ok(!storeNames(inf).includes('r1'));
      assert.ok(storeNames(inf).includes('r3') && storeNames(inf).includes('r4'));
      assert.ok(
        lifecycle.some((e) => e.type === 'backoff'),
        `the watch noticed the restart and backed off (${JSON.stringify(lifecycle.map((e) => e.type))})`,
      );
    } finally {
      await inf.stop();
    }
  });
});
