import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { KubeHttp, MAX_REQUEST_CONNECTIONS } from './kube-http.ts';

describe('KubeHttp connection pool', () => {
  let server: http.Server;
  let client: KubeHttp;
  let open = 0;
  let mostOpen = 0;
  const sockets = new Set<unknown>();

  before(async () => {
    server = http.createServer((req, res) => {
      // Held long enough for every request of a burst to be in flight at once.
      setTimeout(
        () => res.writeHead(200, { 'content-type': 'application/json' }).end(`{"path":"${req.url}"}`),
        50,
      );
    });
    server.on('connection', (socket) => {
      sockets.add(socket);
      open++;
      mostOpen = Math.max(mostOpen, open);
      socket.on('close', () => open--);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    client = new KubeHttp({
      getCurrentCluster: () => ({ name: 'fake', server: `http://127.0.0.1:${port}` }),
      applyToHTTPSOptions: async () => {},
    });
  });
  after(async () => {
    client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  test('a burst of requests shares at most MAX_REQUEST_CONNECTIONS connections, and every request is answered', async () => {
    const paths = Array.from({ length: MAX_REQUEST_CONNECTIONS * 4 }, (_, i) => `/api/v1/namespaces/n${i}`);
    const answers = await Promise.all(paths.map((p) => client.request<{ path: string }>('GET', p)));
    assert.deepEqual(
      answers.map((a) => a.path),
      paths,
    );
    assert.equal(mostOpen, MAX_REQUEST_CONNECTIONS);
    assert.equal(sockets.size, MAX_REQUEST_CONNECTIONS, 'the queued requests reuse the pooled connections');
  });
});

describe('KubeHttp read ahead', () => {
  let server: http.Server;
  let client: KubeHttp;
  const seen: string[] = [];
  let answer = 0;

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      const status = req.url?.startsWith('/missing') ? 404 : 200;
      const body =
        status === 404
          ? '{"kind":"Status","code":404,"reason":"NotFound","message":"missing"}'
          : `{"answer":${++answer}}`;
      // Slow enough for an abort to come first.
      const delay = req.url?.startsWith('/slow') ? 200 : 0;
      setTimeout(() => res.writeHead(status, { 'content-type': 'application/json' }).end(body), delay);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    client = new KubeHttp({
      getCurrentCluster: () => ({ name: 'fake', server: `http://127.0.0.1:${port}` }),
      applyToHTTPSOptions: async () => {},
    });
  });
  after(async () => {
    client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  test('the first GET of the same URL (query in any order) takes the read; later ones and other methods go to the server', async () => {
    seen.length = 0;
    client.readAhead('/api/v1/pods', {
      query: { limit: 500, labelSelector: 'a,!b', fieldSelector: undefined },
    });
    for (let i = 0; i < 500 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(seen, ['GET /api/v1/pods?limit=500&labelSelector=a%2C%21b'], 'sent before anyone asked');
    await client.request('DELETE', '/api/v1/pods');
    assert.equal(seen.length, 2, 'another method is not answered from it');
    const first = await client.request<{ answer: number }>('GET', '/api/v1/pods', {
      query: { labelSelector: 'a,!b', limit: 500 },
    });
    assert.equal(seen.length, 2, 'answered from the read ahead');
    const second = await client.request<{ answer: number }>('GET', '/api/v1/pods', {
      query: { labelSelector: 'a,!b', limit: 500 },
    });
    assert.equal(seen.length, 3, 'read again');
    assert.ok(second.answer > first.answer);
    assert.deepEqual(client.dropReadsAhead(), { taken: 1, untaken: [] });
  });

  test('a refused read ahead is the error of the request that takes it; one nobody takes is dropped and named', async () => {
    client.readAhead('/missing');
    client.readAhead('/api/v1/nodes', { query: { limit: 1 } });
    await assert.rejects(client.request('GET', '/missing'), { code: 404, reason: 'NotFound' });
    const { untaken } = client.dropReadsAhead();
    assert.deepEqual(untaken, ['/api/v1/nodes?limit=1']);
    const nodeReads = () => seen.filter((r) => r === 'GET /api/v1/nodes?limit=1').length;
    for (let i = 0; i < 500 && nodeReads() === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await client.request('GET', '/api/v1/nodes', { query: { limit: 1 } });
    assert.equal(nodeReads(), 2, 'dropped: read from the server again');
  });

  test("an aborted taker gets the abort; the read itself is not another caller's problem", async () => {
    client.readAhead('/slow');
    const stop = new AbortController();
    const taking = client.request('GET', '/slow', { signal: stop.signal });
    stop.abort(new Error('informer stopped'));
    await assert.rejects(taking, /informer stopped/);
    client.dropReadsAhead();
  });
});
