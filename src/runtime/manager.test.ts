import assert from 'node:assert/strict';
import os from 'node:os';
import { describe, test } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import type { KubeHttp } from './kube-http.ts';
import { silentLogger } from './log.ts';
import { Manager, parseListenAddress } from './manager.ts';
import { RuntimeMetrics } from './metrics.ts';

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
    const manager = probeOnlyManager('127.0.0.1:0');
    let webhookUp = false;
    manager.addReadinessGate('webhook', () => webhookUp);
    manager.addReadinessGate('github-webhook', () => true);
    await manager.start();
    try {
      const readyz = async () => {
        const res = await fetch(`${manager.probeUrl}/readyz`);
        return { status: res.status, body: await res.text() };
      };
      assert.deepEqual(await readyz(), { status: 503, body: 'webhook not ready' });
      assert.equal(manager.ready, true, 'the caches (none here) have synced: controllers may run');
      webhookUp = true;
      assert.deepEqual(await readyz(), { status: 200, body: 'ok' });
    } finally {
      await manager.stop();
    }
  });
});
