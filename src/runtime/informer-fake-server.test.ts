import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { realClock } from './clock.ts';
import { Controller } from './controller.ts';
import { kubeErrorFromResponse, toKubeError } from './errors.ts';
import { Informer, type InformerEvent } from './informer.ts';
import { KubeHttp } from './kube-http.ts';
import { silentLogger } from './log.ts';

/**
 * Failure modes a real API server will not produce on demand: half-open watches, 429 with
 * Retry-After. A loopback server plays the API server here.
 */

type Mode = { list: 'ok' | '429'; watch: 'stall' | 'events' };

function fakeApiServer() {
  const requests: string[] = [];
  let mode: Mode = { list: 'ok', watch: 'stall' };
  const pods = [
    { metadata: { name: 'owner', namespace: 'ns', uid: 'u-owner', resourceVersion: '10' } },
    {
      metadata: {
        name: 'child',
        namespace: 'ns',
        uid: 'u-child',
        resourceVersion: '11',
        ownerReferences: [
          { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: 'u-owner', controller: true },
        ],
      },
    },
  ];
  const open = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const watch = url.searchParams.get('watch') === 'true';
    requests.push(`${watch ? 'WATCH' : 'LIST'} rv=${url.searchParams.get('resourceVersion') ?? ''}`);
    if (!watch) {
      if (mode.list === '429') {
        mode = { ...mode, list: 'ok' };
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' });
        res.end(
          JSON.stringify({ kind: 'Status', code: 429, reason: 'TooManyRequests', message: 'slow down' }),
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'ConfigMapList', metadata: { resourceVersion: '20' }, items: pods }));
      return;
    }
    assert.equal(url.searchParams.get('allowWatchBookmarks'), 'true');
    const timeout = Number(url.searchParams.get('timeoutSeconds'));
    assert.ok(timeout >= 300 && timeout < 600, `timeoutSeconds ${timeout}`);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.flushHeaders();
    open.add(res);
    res.on('close', () => open.delete(res));
    if (mode.watch === 'events') {
      const child = { ...pods[1]!, metadata: { ...pods[1]!.metadata, resourceVersion: '21' } };
      res.write(`${JSON.stringify({ type: 'MODIFIED', object: child })}\n`);
      res.write(`${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '25' } } })}\n`);
    }
    // Then silence: a half-open connection as far as the client can tell.
  });
  return {
    requests,
    setMode: (m: Mode) => {
      mode = m;
    },
    async start() {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
    async stop() {
      for (const r of open) r.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('informer against a fake API server', () => {
  const fake = fakeApiServer();
  let kc: KubeConfig;
  before(async () => {
    const server = await fake.start();
    kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'c', cluster: 'fake', user: 'u' }],
      currentContext: 'c',
    });
  });
  after(() => fake.stop());

  test('an idle watch is abandoned and resumed from the last resourceVersion (bookmarks count)', async () => {
    fake.setMode({ list: 'ok', watch: 'events' });
    fake.requests.length = 0;
    const lifecycle: InformerEvent[] = [];
    const httpClient = new KubeHttp(kc);
    const inf = new Informer({
      http: httpClient,
      resource: { group: '', version: 'v1', plural: 'configmaps', namespaced: true, kind: 'ConfigMap' },
      namespace: 'ns',
      clock: realClock,
      log: silentLogger(),
      idleTimeoutMs: 300,
      backoff: { initialMs: 10, maxMs: 20, factor: 2, jitter: 0, resetAfterMs: 1000 },
    });
    inf.onLifecycle((e) => lifecycle.push(e));

    // Owned objects map to their controlling owner.
    const controller = new Controller({
      name: 'owner',
      clock: realClock,
      log: silentLogger(),
      reconcile: () => undefined,
    });
    controller.watchOwned(inf, 'ConfigMap');
    inf.start();
    await inf.waitForSync();
    // The watch goes idle 300 ms after its last event; a loaded machine may take longer to resume.
    const deadline = Date.now() + 10_000;
    while (fake.requests.filter((r) => r.startsWith('WATCH')).length < 2 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    await inf.stop();
    httpClient.close();
    assert.ok(lifecycle.some((e) => e.type === 'watch-ended' && e.reason === 'idle'));
    const watches = fake.requests.filter((r) => r.startsWith('WATCH'));
    assert.ok(watches.length >= 2, fake.requests.join(', '));
    assert.equal(watches[0], 'WATCH rv=20', 'first watch from the list RV');
    assert.equal(watches[1], 'WATCH rv=25', 'resumes from the bookmark RV, without a relist');
    assert.equal(fake.requests.filter((r) => r.startsWith('LIST')).length, 1);
    assert.equal(inf.store.get('ns/child')?.metadata.resourceVersion, '21');
    assert.ok(controller.queue.length >= 1);
    assert.equal((await controller.queue.get())?.key, 'ns/owner', 'child events enqueue the owner');
  });

  test('429 on list waits at least Retry-After', async () => {
    fake.setMode({ list: '429', watch: 'stall' });
    fake.requests.length = 0;
    const lifecycle: InformerEvent[] = [];
    const httpClient = new KubeHttp(kc);
    const inf = new Informer({
      http: httpClient,
      resource: { group: '', version: 'v1', plural: 'configmaps', namespaced: true, kind: 'ConfigMap' },
      clock: realClock,
      log: silentLogger(),
      backoff: { initialMs: 10, maxMs: 20, factor: 2, jitter: 0, resetAfterMs: 1000 },
    });
    inf.onLifecycle((e) => lifecycle.push(e));
    const t0 = Date.now();
    inf.start();
    await inf.waitForSync();
    const waited = Date.now() - t0;
    await inf.stop();
    httpClient.close();
    assert.deepEqual(
      lifecycle.find((e) => e.type === 'backoff'),
      { type: 'backoff', delayMs: 1000 },
    );
    assert.ok(waited >= 1000, `waited ${waited} ms`);
  });
});

describe('KubeError', () => {
  test('from an API server Status body', () => {
    const e = kubeErrorFromResponse(
      422,
      JSON.stringify({
        kind: 'Status',
        reason: 'Invalid',
        message: 'spec.replicas: Invalid value: -1',
        details: { causes: [{ field: 'spec.replicas', message: 'must be >= 0' }] },
      }),
    );
    assert.equal(e.code, 422);
    assert.equal(e.reason, 'Invalid');
    assert.equal(e.retryable, false);
    assert.equal(e.causes[0]?.field, 'spec.replicas');
  });

  test('from client-node ApiException (raw text body, header map)', () => {
    const apiException = {
      code: 409,
      body: '{"kind":"Status","reason":"AlreadyExists","message":"exists"}',
      headers: {},
    };
    const e = toKubeError(apiException);
    assert.equal(e.reason, 'AlreadyExists');
    assert.equal(e.retryable, false);
    const conflict = toKubeError({
      code: 409,
      body: '{"reason":"Conflict","message":"modified"}',
      headers: {},
    });
    assert.equal(conflict.retryable, true);
    const limited = toKubeError({ code: 429, body: 'x', headers: { 'retry-after': '3' } });
    assert.equal(limited.retryAfterMs, 3000);
    assert.equal(limited.retryable, true);
  });

  test('network errors are retryable with code 0', () => {
    const e = toKubeError(new TypeError('fetch failed', { cause: new Error('ECONNREFUSED') }));
    assert.equal(e.code, 0);
    assert.equal(e.retryable, true);
    assert.match(e.message, /ECONNREFUSED/);
  });
});
