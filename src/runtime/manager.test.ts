import assert from 'node:assert/strict';
import os from 'node:os';
import { describe, test } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import type { KubeHttp } from './kube-http.ts';
import { silentLogger } from './log.ts';
import { Manager, parseListenAddress } from './manager.ts';
import { RuntimeMetrics } from './metrics.ts';
import { StartupTimeline } from './startup-timeline.ts';

describe('parseListenAddress', () => {
  const cases: { address: string; want: { host: string | undefined; port: number } }[] = [
    { address: ':8080', want: { host: undefined, port: 8080 } },
    { address: ':0', want: { host: undefined, port: 0 } },
    { address: '0.0.0.0:8081', want: { host: '0.0.0.0', port: 8081 } },
    { address: '127.0.0.1:0', want: { host: '127.0.0.1', port: 0 } },
    { address: 'localhost:9090', want: { host: 'localhost', port: 9090 } },
    { address: '[::1]:8080', want: { host: '::1', port: 8080 } },
    { address: '[::]:8080', want: { host: '::', port: 8080 } },
    { address: '9090', want: { host: '127.0.0.1', port: 9090 } },
  ];
  for (const c of cases) {
    test(`${c.address} → ${c.want.host ?? 'every interface'} port ${c.want.port}`, () => {
      assert.deepEqual(parseListenAddress(c.address), c.want);
    });
  }
  for (const bad of ['', ':', 'host:', ':http', '::1:8080', ':70000', 'a:b:c']) {
    test(`${JSON.stringify(bad)} is refused with a clear message`, () => {
      assert.throws(() => parseListenAddress(bad), /invalid listen address/);
    });
  }
});

/** A manager with no cluster behind it: only its probe server is exercised. */
function probeOnlyManager(probeAddress: string): Manager {
  return new Manager({
    kubeConfig: new KubeConfig(),
    http: { close: () => undefined } as unknown as KubeHttp,
    log: silentLogger(),
    metrics: new RuntimeMetrics({ processMetrics: false }),
    probeAddress,
  });
}

describe('Manager probe server', () => {
  test('":0" listens on every interface, not only loopback', async (t) => {
    const external = Object.values(os.networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;
    if (!external) return t.skip('this machine has no non-loopback IPv4 address');
    const manager = probeOnlyManager(':0');
    await manager.start();
    try {
      const port = new URL(manager.probeUrl!).port;
      const res = await fetch(`http://${external}:${port}/healthz`);
      assert.equal(res.status, 200);
    } finally {
      await manager.stop();
    }
  });
});

describe('Manager /readyz', () => {
  test('waits for every readiness gate besides the caches, and says which are closed', async () => {
    let readyCalls = 0;
    const manager = new Manager({
      kubeConfig: new KubeConfig(),
      http: { close: () => undefined } as unknown as KubeHttp,
      log: silentLogger(),
      metrics: new RuntimeMetrics({ processMetrics: false }),
      probeAddress: '127.0.0.1:0',
      startup: new StartupTimeline(fakeUptime([5, 10, 20, 30, 40, 50])),
      onReady: () => readyCalls++,
    });
    const openWebhook = manager.addReadinessGate('webhook');
    const openGitHubWebhook = manager.addReadinessGate('github-webhook');
    openGitHubWebhook();
    assert.equal(manager.startup.has('ready'), false, 'not ready before the probes are served');
    await manager.start();
    try {
      const readyz = async () => {
        const res = await fetch(`${manager.probeUrl}/readyz`);
        return { status: res.status, body: await res.text() };
      };
      assert.deepEqual(await readyz(), { status: 503, body: 'webhook not ready' });
      assert.equal(manager.ready, true, 'the caches (none here) have synced: controllers may run');
      assert.equal(readyCalls, 0);
      openWebhook();
      openWebhook();
      assert.deepEqual(await readyz(), { status: 200, body: 'ok' });
      assert.equal(readyCalls, 1, 'onReady is called once, when the last gate opens');
      assert.deepEqual(manager.startup.entries(), [
        ['gate open: github-webhook', 5],
        ['caches started', 10],
        ['probes served', 20],
        ['gate open: webhook', 30],
        ['ready', 40],
      ]);
      const metrics = await (await fetch(`${manager.probeUrl}/metrics`)).text();
      assert.match(metrics, /^process_startup_step_seconds\{step="ready"\} 0\.04$/m);
      assert.match(metrics, /^process_startup_step_seconds\{step="gate open: webhook"\} 0\.03$/m);
    } finally {
      await manager.stop();
    }
  });
});

/** Uptimes handed out in turn, the last one again once they run out. */
function fakeUptime(times: number[]): () => number {
  let i = 0;
  return () => times[Math.min(i++, times.length - 1)]!;
}

describe('StartupTimeline', () => {
  test('keeps the first time of each step and lists them in time order', () => {
    const timeline = new StartupTimeline(fakeUptime([12.4, 30.6, 50]));
    timeline.mark('caches started');
    timeline.mark('code loaded', 7.2);
    timeline.mark('caches started');
    timeline.mark('ready');
    assert.deepEqual(timeline.entries(), [
      ['code loaded', 7],
      ['caches started', 12],
      ['ready', 31],
    ]);
    assert.equal(timeline.has('ready'), true);
    assert.equal(timeline.has('webhook'), false);
  });
});
