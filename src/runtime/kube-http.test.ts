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
