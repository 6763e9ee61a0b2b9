import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type tls from 'node:tls';
import {
  generateCertificateAuthority,
  issueClientCertificate,
  issueServingCertificate,
  type KeyPairPem,
} from '../webhooks/certs.ts';
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

describe('KubeHttp TLS sessions', () => {
  const ca = generateCertificateAuthority({ commonName: 'session-test-ca' });
  const serving = issueServingCertificate(ca, { ipAddresses: ['127.0.0.1'] });
  let server: https.Server;
  let port: number;
  /** One entry per TLS connection: whether it resumed a session, and the client certificate's CN. */
  let handshakes: { resumed: boolean; clientCN: string | undefined }[] = [];

  before(async () => {
    server = https.createServer(
      { cert: serving.cert, key: serving.key, ca: ca.cert, requestCert: true, rejectUnauthorized: true },
      (req, res) => {
        const body = `{"path":"${req.url}"}`;
        if (req.url?.includes('watch=true')) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(`{"type":"ADDED","object":${body}}\n`);
          return;
        }
        setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(body), 30);
      },
    );
    server.on('secureConnection', (socket: tls.TLSSocket) => {
      const peer = socket.getPeerCertificate();
      const cn = peer.subject?.CN;
      handshakes.push({ resumed: socket.isSessionReused(), clientCN: Array.isArray(cn) ? cn.join() : cn });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  /** A client whose credentials are `current()` at every request, as a rotating kubeconfig's are. */
  const clientWith = (current: () => KeyPairPem) =>
    new KubeHttp({
      getCurrentCluster: () => ({ name: 'tls', server: `https://127.0.0.1:${port}` }),
      applyToHTTPSOptions: async (opts) => {
        opts.ca = ca.cert;
        opts.cert = current().cert;
        opts.key = current().key;
      },
    });

  test('a burst at start makes one full handshake; the other connections, watches too, resume its session', async () => {
    handshakes = [];
    const identity = issueClientCertificate(ca, { commonName: 'burst' });
    const client = clientWith(() => identity);
    try {
      const paths = Array.from({ length: 12 }, (_, i) => `/api/v1/namespaces/n${i}`);
      const answers = await Promise.all(paths.map((p) => client.request<{ path: string }>('GET', p)));
      assert.deepEqual(
        answers.map((a) => a.path),
        paths,
      );
      const lines: string[] = [];
      await client.watch(
        '/api/v1/pods',
        {},
        { onLine: (l) => lines.push(l.type) },
        new AbortController().signal,
      );
      assert.deepEqual(lines, ['ADDED']);
      // The pool keeps its connections: a second burst opens none.
      const opened = handshakes.length;
      await Promise.all(paths.map((p) => client.request('GET', p)));
      assert.equal(handshakes.length, opened, JSON.stringify(handshakes));
      assert.ok(handshakes.length >= 3, `the burst used several connections (${handshakes.length})`);
      assert.equal(handshakes.filter((h) => !h.resumed).length, 1, JSON.stringify(handshakes));
      assert.deepEqual(new Set(handshakes.map((h) => h.clientCN)), new Set(['burst']));
    } finally {
      client.close();
    }
  });

  test('rotated client credentials start over: no connection resumes the old certificate’s session', async () => {
    handshakes = [];
    const before = issueClientCertificate(ca, { commonName: 'before-rotation' });
    const rotated = issueClientCertificate(ca, { commonName: 'after-rotation' });
    let identity = before;
    const client = clientWith(() => identity);
    try {
      await Promise.all([1, 2, 3].map((i) => client.request('GET', `/a/${i}`)));
      identity = rotated;
      await Promise.all([1, 2, 3].map((i) => client.request('GET', `/b/${i}`)));
      const after = handshakes.slice(handshakes.findIndex((h) => h.clientCN === 'after-rotation'));
      assert.ok(after.length > 0, JSON.stringify(handshakes));
      // A resumed session would carry the identity of the certificate that began it.
      assert.equal(after[0]?.resumed, false, JSON.stringify(handshakes));
      assert.ok(
        after.every((h) => h.clientCN === 'after-rotation'),
        JSON.stringify(handshakes),
      );
    } finally {
      client.close();
    }
  });
});
