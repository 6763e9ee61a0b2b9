import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

/**
 * A plain-HTTP proxy on 127.0.0.1 in front of the kube-apiserver of `target`, adding the target's
 * credentials. Requests matching `stall` get no answer until the proxy closes: to the client behind
 * it the API server hangs on exactly those requests while everything else (watches included) works.
 */
export interface StallingProxy {
  /** A kubeconfig that talks to the API server through the proxy. */
  readonly kubeConfig: KubeConfig;
  /** Requests for which this returns true are held from now on; undefined forwards everything. */
  stall: ((method: string, path: string) => boolean) | undefined;
  /** How many requests have been held so far (released ones included). */
  readonly stalled: number;
  close(): Promise<void>;
}

export async function startStallingProxy(target: KubeConfig): Promise<StallingProxy> {
  const upstream = new URL(target.getCurrentCluster()!.server);
  const held = new Set<http.ServerResponse>();
  let stalled = 0;
  const inflight = new Set<http.ClientRequest>();
  const agent = new https.Agent({ keepAlive: false });

  const server = http.createServer((req, res) => {
    if (proxy.stall?.(req.method ?? 'GET', (req.url ?? '/').split('?')[0]!)) {
      stalled++;
      held.add(res);
      res.on('close', () => held.delete(res));
      return;
    }
    void forward(req, res);
  });

  async function forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const opts: https.RequestOptions = {};
    await target.applyToHTTPSOptions(opts);
    const up = https.request({
      ...opts,
      agent,
      method: req.method,
      hostname: upstream.hostname,
      port: upstream.port,
      path: req.url,
      headers: { ...req.headers, ...(opts.headers as http.OutgoingHttpHeaders), host: upstream.host },
    });
    inflight.add(up);
    up.on('close', () => inflight.delete(up));
    up.on('response', (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    });
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    // The client went away (e.g. it aborted a watch): so does our request upstream.
    res.on('close', () => up.destroy());
    req.pipe(up);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'proxy', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'proxy' }],
    contexts: [{ name: 'proxy', cluster: 'proxy', user: 'proxy' }],
    currentContext: 'proxy',
  });

  const proxy: StallingProxy = {
    kubeConfig,
    stall: undefined,
    get stalled() {
      return stalled;
    },
    async close() {
      proxy.stall = undefined;
      for (const res of held) res.destroy();
      for (const up of inflight) up.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
  return proxy;
}
