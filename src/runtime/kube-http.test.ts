import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { generateCertificateAuthority, issueServingCertificate } from '../webhooks/certs.ts';
import { type ClusterAccess, KubeHttp, MAX_REQUEST_CONNECTIONS } from './kube-http.ts';

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

describe('KubeHttp over HTTP/2', () => {
  const ca = generateCertificateAuthority({ commonName: 'test-ca' });
  const serving = issueServingCertificate(ca, { ipAddresses: ['127.0.0.1'] });
  const access = (url: string): ClusterAccess => ({
    getCurrentCluster: () => ({ name: 'h2', server: url }),
    applyToHTTPSOptions: async (opts) => {
      opts.ca = ca.cert;
      opts.headers = { Authorization: 'Bearer t0ken' };
    },
  });

  /** An HTTP/2 server: /watch streams a line every 20 ms until the client goes; the rest echo. */
  async function h2Server() {
    const stats = { connections: 0, streams: 0, watchesEnded: 0, auth: new Set<string>() };
    const sessions = new Set<http2.ServerHttp2Session>();
    const server = http2.createSecureServer({ cert: serving.cert, key: serving.key });
    server.on('secureConnection', () => stats.connections++);
    server.on('session', (s) => {
      sessions.add(s);
      s.on('close', () => sessions.delete(s));
    });
    server.on('stream', (stream, headers) => {
      stats.streams++;
      stats.auth.add(String(headers.authorization));
      const path = String(headers[':path']);
      if (path.startsWith('/watch')) {
        stream.respond({ ':status': 200, 'content-type': 'application/json' });
        let n = 0;
        const tick = setInterval(() => {
          if (!stream.destroyed) stream.write(`{"type":"ADDED","object":{"n":${++n}}}\n`);
        }, 20);
        stream.on('close', () => {
          clearInterval(tick);
          stats.watchesEnded++;
        });
        return;
      }
      if (path.startsWith('/refused')) {
        stream.respond({ ':status': 429, 'content-type': 'application/json', 'retry-after': '3' });
        stream.end('{"kind":"Status","code":429,"reason":"TooManyRequests","message":"slow down"}');
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        stream.respond({ ':status': 200, 'content-type': 'application/json' });
        stream.end(
          JSON.stringify({
            path,
            method: headers[':method'],
            body: Buffer.concat(chunks).toString() || null,
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return {
      url: `https://127.0.0.1:${port}`,
      stats,
      /** Tells every client to go elsewhere (a server shutting down, a load balancer rotating). */
      goaway: () => {
        for (const s of sessions) s.goaway();
      },
      close: async () => {
        for (const s of sessions) s.destroy();
        await new Promise((resolve) => server.close(resolve));
      },
    };
  }

  test('requests and watches are streams of one connection, with the credentials on each', async () => {
    const server = await h2Server();
    const client = new KubeHttp(access(server.url));
    try {
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          client.request<{ path: string; method: string; body: string | null }>('POST', `/echo/${i}`, {
            body: { i },
          }),
        ),
      );
      assert.deepEqual(
        answers.map((a) => a.path),
        Array.from({ length: 40 }, (_, i) => `/echo/${i}`),
      );
      assert.equal(answers[7]?.body, '{"i":7}');
      const stops = [new AbortController(), new AbortController(), new AbortController()];
      const seen = [0, 0, 0];
      const watches = stops.map((stop, i) =>
        client
          .watch('/watch', {}, { onLine: () => void seen[i]!++ }, stop.signal)
          .catch((err: Error) => err.message),
      );
      while (seen.some((n) => n < 3)) await new Promise((r) => setTimeout(r, 20));
      for (const stop of stops) stop.abort(new Error('stopped'));
      assert.deepEqual(await Promise.all(watches), ['stopped', 'stopped', 'stopped']);
      for (let i = 0; i < 100 && server.stats.watchesEnded < 3; i++)
        await new Promise((r) => setTimeout(r, 10));
      assert.equal(server.stats.watchesEnded, 3, 'an abort ends the stream at the server');
      await assert.rejects(client.request('GET', '/refused'), { code: 429, retryAfterMs: 3000 });
      assert.equal(server.stats.connections, 1, 'one connection for all of it');
      assert.equal(server.stats.streams, 44);
      assert.deepEqual([...server.stats.auth], ['Bearer t0ken']);
    } finally {
      client.close();
      await server.close();
    }
  });

  test('after a GOAWAY or a lost connection the next request opens a new one', async () => {
    const server = await h2Server();
    const client = new KubeHttp(access(server.url));
    try {
      await client.request('GET', '/a');
      server.goaway();
      for (let i = 0; i < 100; i++) {
        await new Promise((r) => setTimeout(r, 10));
        try {
          await client.request('GET', '/b');
          break;
        } catch {
          // a request racing the GOAWAY may fail as the connection ends; the next one must not
        }
      }
      assert.deepEqual(await client.request('GET', '/c'), { path: '/c', method: 'GET', body: null });
      assert.equal(server.stats.connections, 2);
    } finally {
      client.close();
      await server.close();
    }
  });

  test('a server without HTTP/2 gets HTTP/1.1, and is not asked again', async () => {
    let connections = 0;
    const server = https.createServer({ cert: serving.cert, key: serving.key }, (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(`{"path":"${req.url}"}`);
    });
    // TCP connections: the refused offer ends before the server counts a TLS one.
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const client = new KubeHttp(access(`https://127.0.0.1:${port}`));
    try {
      assert.deepEqual(await client.request('GET', '/one'), { path: '/one' });
      assert.deepEqual(await client.request('GET', '/two'), { path: '/two' });
      assert.deepEqual(await client.request('GET', '/three'), { path: '/three' });
      assert.equal(connections, 2, 'the refused offer, then one pooled HTTP/1.1 connection');
    } finally {
      client.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test('an idle connection does not keep the process alive; a request in flight does', async () => {
    const server = await h2Server();
    try {
      const script = `
        import { KubeHttp } from ${JSON.stringify(new URL('./kube-http.ts', import.meta.url).href)};
        const http = new KubeHttp({
          getCurrentCluster: () => ({ name: 'h2', server: ${JSON.stringify(server.url)} }),
          applyToHTTPSOptions: async (o) => { o.ca = ${JSON.stringify(ca.cert)}; },
        });
        const answer = await http.request('GET', '/slow-enough');
        process.stdout.write(JSON.stringify(answer));
        // no close(): the process must still end by itself
      `;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (c) => (out += c));
      child.stderr.on('data', (c) => (err += c));
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
      clearTimeout(timer);
      assert.equal(signal, null, 'ended by itself, not killed');
      assert.equal(code, 0, err);
      assert.deepEqual(JSON.parse(out), { path: '/slow-enough', method: 'GET', body: null });
    } finally {
      await server.close();
    }
  });
});

describe('KubeHttp over HTTP/2, a connection that goes silent', () => {
  test('is found out by PING and replaced: the stuck watch ends, and requests work again', {
    timeout: 20_000,
  }, async () => {
    const ca = generateCertificateAuthority({ commonName: 'test-ca' });
    const serving = issueServingCertificate(ca, { ipAddresses: ['127.0.0.1'] });
    const server = http2.createSecureServer({ cert: serving.cert, key: serving.key });
    // The client gives the connection up: its end of it is reset.
    server.on('session', (session) => session.on('error', () => undefined));
    server.on('stream', (stream, headers) => {
      stream.on('error', () => undefined);
      stream.respond({ ':status': 200, 'content-type': 'application/json' });
      if (String(headers[':path']).startsWith('/watch')) return; // open, silent
      stream.end('{"ok":true}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    // A TCP relay whose connections can be frozen: bytes stop in both directions, nothing closes.
    const frozen = new Set<net.Socket>();
    let connections = 0;
    const relay = net.createServer((inbound) => {
      connections++;
      const outbound = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
      const pass = (from: net.Socket, to: net.Socket) =>
        from.on('data', (c) => {
          if (!frozen.has(inbound)) to.write(c);
        });
      pass(inbound, outbound);
      pass(outbound, inbound);
      const end = () => {
        inbound.destroy();
        outbound.destroy();
      };
      inbound.on('close', end).on('error', end);
      outbound.on('close', end).on('error', end);
      relayed.add(inbound);
    });
    const relayed = new Set<net.Socket>();
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const client = new KubeHttp(
      {
        getCurrentCluster: () => ({
          name: 'h2',
          server: `https://127.0.0.1:${(relay.address() as AddressInfo).port}`,
        }),
        applyToHTTPSOptions: async (opts) => {
          opts.ca = ca.cert;
        },
      },
      { pingIntervalMs: 100, pingTimeoutMs: 200 },
    );
    try {
      assert.deepEqual(await client.request('GET', '/before'), { ok: true });
      const stop = new AbortController();
      const watch = client.watch('/watch', {}, { onLine: () => undefined }, stop.signal).then(
        () => 'ended',
        (err: Error) => `failed: ${err.message}`,
      );
      await new Promise((r) => setTimeout(r, 50));
      for (const s of relayed) frozen.add(s);
      assert.match(await watch, /PING|closed|failed/, 'the stuck stream ends instead of hanging');
      assert.deepEqual(await client.request('GET', '/after'), { ok: true }, 'over a new connection');
      assert.equal(connections, 2);
      stop.abort();
    } finally {
      client.close();
      for (const s of relayed) s.destroy();
      await new Promise((resolve) => relay.close(resolve));
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
