import type { Agent, ClientRequest } from 'node:http';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import readline from 'node:readline';
import tls from 'node:tls';
import { KubeError, kubeErrorFromResponse } from './errors.ts';
import { Http2Connection, type OpenResponse } from './kube-http2.ts';
import { http, https } from './node-builtins.ts';

/**
 * A small raw-JSON HTTP client on a kubeconfig, for what the generated clients do poorly: list and
 * watch streams (raw JSON everywhere, no Date/string mix), and patches with explicit content types.
 */

/** The cluster a kubeconfig's current context points at. */
export interface CurrentCluster {
  readonly name: string;
  readonly server: string;
  readonly skipTLSVerify?: boolean;
  readonly tlsServerName?: string | undefined;
}

/**
 * What KubeHttp needs of a kubeconfig. paddock's commands pass their own (runtime/kubeconfig.ts, which
 * spares them loading @kubernetes/client-node); tests and the test environment pass client-node's
 * KubeConfig, which has the same two methods.
 */
export interface ClusterAccess {
  getCurrentCluster(): CurrentCluster | null;
  /** Sets TLS options and authentication headers for one request (called before every request). */
  applyToHTTPSOptions(opts: HttpsRequestOptions): Promise<void>;
}

export type PatchType = 'json' | 'merge' | 'strategic' | 'apply';

export const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  json: 'application/json-patch+json',
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml',
};

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Called once the request is on its way: its connection is open (or it failed). */
  onSent?: () => void;
}

export interface WatchLine {
  type: string;
  object: Record<string, unknown>;
}

/**
 * Over HTTP/1.1 (a server without HTTP/2, plain http, or DISABLE_HTTP2), the connections the short
 * requests may hold open at once; more wait in the agent's queue. Each TLS
 * connection opened costs about 150 KB of native memory, most of which stays after it closes, so the
 * pool's peak sets a lasting share of the process's memory. At 1,000 runners a pool of 50 filled up
 * (64 sockets in all, with the watches); with 16: 31 sockets, steady RSS 114.7–120.2 MiB against
 * 118.7–124.1 (about 4 MiB less, within the spread of runs), replacement p50 126–154 ms against
 * 164–191, p99 760–1,129 against 1,085 ms, CPU 34–35 s against 36 (`node bench/fleet.ts --runs
 * runnerdeployment:1000`, same day). Same throughput: the controllers run about 40 workers, each
 * waiting on one request at a time.
 */
export const MAX_REQUEST_CONNECTIONS = 16;

export class KubeHttp {
  private readonly kc: ClusterAccess;
  private readonly server: URL;
  private readonly transport: typeof https | typeof http;
  /** Short requests share a keep-alive pool; each watch gets its own socket from another pool. */
  private readonly requestAgent: Agent;
  private readonly watchAgent: Agent;
  /** Every request and watch as a stream of one connection, when the server speaks HTTP/2. */
  private readonly h2: Http2Connection | undefined;
  /** GETs sent before anyone asked for them (start-up), by URL: the first GET of that URL takes one. */
  private readonly readsAhead = new Map<string, Promise<unknown>>();
  private readonly readsAheadSent: Promise<void>[] = [];
  private readAheadsTaken = 0;
  private secureContext?: {
    ca: HttpsRequestOptions['ca'];
    cert: HttpsRequestOptions['cert'];
    key: HttpsRequestOptions['key'];
    context: tls.SecureContext;
  };

  /**
   * `http2`: use HTTP/2 when an https server offers it (default: unless DISABLE_HTTP2 is set, as
   * client-go reads it); `pingIntervalMs`/`pingTimeoutMs`: how a silent connection is found out.
   */
  constructor(
    kc: ClusterAccess,
    opts: { http2?: boolean; pingIntervalMs?: number; pingTimeoutMs?: number } = {},
  ) {
    this.kc = kc;
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.server = new URL(cluster.server);
    this.transport = this.server.protocol === 'http:' ? http : https;
    const Agent = this.server.protocol === 'http:' ? http.Agent : https.Agent;
    this.requestAgent = new Agent({ keepAlive: true, maxSockets: MAX_REQUEST_CONNECTIONS });
    this.watchAgent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
    const useHttp2 = opts.http2 ?? !process.env.DISABLE_HTTP2;
    this.h2 =
      useHttp2 && this.server.protocol === 'https:'
        ? new Http2Connection(this.server, {
            ...(opts.pingIntervalMs ? { pingIntervalMs: opts.pingIntervalMs } : {}),
            ...(opts.pingTimeoutMs ? { pingTimeoutMs: opts.pingTimeoutMs } : {}),
          })
        : undefined;
  }

  get serverUrl(): string {
    return this.server.toString();
  }

  private async baseOptions(): Promise<HttpsRequestOptions & Pick<tls.ConnectionOptions, 'secureContext'>> {
    // Asked every time: credentials may rotate (exec and file auth cache them themselves).
    const opts: HttpsRequestOptions & Pick<tls.ConnectionOptions, 'secureContext'> = {};
    await this.kc.applyToHTTPSOptions(opts);
    delete opts.agent;
    if (this.server.protocol === 'https:') opts.secureContext = this.secureContextFor(opts);
    return opts;
  }

  /**
   * One TLS context for as long as the CA and client certificate stay the same: Node.js would
   * otherwise parse them again for every connection, and a start opens one per informer's list and
   * watch. ca/cert/key stay in the options too, since the agent pools sockets by them.
   */
  private secureContextFor(opts: HttpsRequestOptions): tls.SecureContext {
    const held = this.secureContext;
    if (held && samePem(held.ca, opts.ca) && samePem(held.cert, opts.cert) && samePem(held.key, opts.key)) {
      return held.context;
    }
    const context = tls.createSecureContext({
      ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
      ...(opts.cert !== undefined ? { cert: opts.cert } : {}),
      ...(opts.key !== undefined ? { key: opts.key } : {}),
    });
    this.secureContext = { ca: opts.ca, cert: opts.cert, key: opts.key, context };
    return context;
  }

  private url(path: string, query?: RequestOptions['query']): URL {
    const u = new URL(path, this.server);
    const prefix = this.server.pathname.replace(/\/$/, '');
    if (prefix) u.pathname = `${prefix}${path.split('?')[0]}`;
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u;
  }

  private async open(
    method: string,
    path: string,
    opts: RequestOptions,
    agent: Agent,
  ): Promise<OpenResponse> {
    const base = await this.baseOptions();
    const u = this.url(path, opts.query);
    const body =
      opts.body === undefined
        ? undefined
        : typeof opts.body === 'string'
          ? opts.body
          : JSON.stringify(opts.body);
    const headers: Record<string, string> = {
      ...(base.headers as Record<string, string> | undefined),
      accept: 'application/json',
      'user-agent': 'paddock',
    };
    if (body !== undefined) {
      headers['content-type'] = opts.contentType ?? 'application/json';
      headers['content-length'] = String(Buffer.byteLength(body));
    }
    if (this.h2?.usable && base.secureContext) {
      const session = await this.h2.session({
        secureContext: base.secureContext,
        rejectUnauthorized: base.rejectUnauthorized,
        servername: base.servername ?? undefined,
      });
      if (session) {
        return this.h2.request(
          session,
          { ...headers, ':method': method, ':path': u.pathname + u.search },
          body,
          opts,
        );
      }
    }
    return await new Promise((resolve, reject) => {
      const req = this.transport.request(
        {
          ...base,
          agent,
          method,
          protocol: u.protocol,
          hostname: u.hostname,
          port: u.port,
          path: u.pathname + u.search,
          headers,
          ...(opts.signal ? { signal: opts.signal } : {}),
        },
        (res) =>
          resolve({
            status: res.statusCode ?? 0,
            header: (name) => {
              const v = res.headers[name.toLowerCase()];
              return Array.isArray(v) ? v[0] : v;
            },
            body: res,
            destroy: () => {
              req.destroy();
              res.destroy();
            },
          }),
      );
      if (opts.onSent) whenOnItsWay(req, opts.onSent);
      if (opts.timeoutMs) {
        req.setTimeout(opts.timeoutMs, () =>
          req.destroy(new Error(`request timed out after ${opts.timeoutMs} ms`)),
        );
      }
      req.on('error', (err) =>
        reject(new KubeError({ code: 0, reason: 'NetworkError', message: err.message })),
      );
      if (body !== undefined) req.write(body);
      req.end();
    });
  }

  /**
   * Sends a GET now for whoever asks for it later: the first `request('GET', path, { query })` of
   * the same URL is answered from it. At start-up the lists can go out while the rest of paddock's
   * code is still loading. Nothing read ahead is kept past `dropReadsAhead()`.
   */
  readAhead(path: string, opts: Pick<RequestOptions, 'query' | 'timeoutMs'> = {}): void {
    const key = this.readKey(path, opts.query);
    if (this.readsAhead.has(key)) return;
    let sent!: () => void;
    this.readsAheadSent.push(new Promise<void>((resolve) => (sent = resolve)));
    const read = this.request('GET', path, { ...opts, onSent: sent });
    read.catch(() => undefined); // handled by the request that takes it, if any
    read.finally(sent).catch(() => undefined);
    this.readsAhead.set(key, read);
  }

  /**
   * Resolves once every read ahead is on its way (connected, TLS done, request written): what is
   * left is the server's work. Until then a long synchronous task, such as compiling code, would
   * hold the handshakes back, since they need this thread.
   */
  async readsAheadOnTheirWay(): Promise<void> {
    await Promise.all(this.readsAheadSent);
  }

  /**
   * Forgets what no request has taken (a later GET reads the server again) and says what was taken
   * and what was not: a read ahead that nobody took was sent for nothing.
   */
  dropReadsAhead(): { taken: number; untaken: string[] } {
    const untaken = [...this.readsAhead.keys()];
    this.readsAhead.clear();
    return { taken: this.readAheadsTaken, untaken };
  }

  /** The key of a read: path and sorted query, as the server sees them. */
  readKey(path: string, query?: RequestOptions['query']): string {
    const u = this.url(path, query);
    u.searchParams.sort();
    return `${u.pathname}${u.search}`;
  }

  /** One request; resolves with the decoded JSON body, throws KubeError for non-2xx. */
  async request<T = unknown>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    if (this.readsAhead.size > 0 && method === 'GET' && opts.body === undefined) {
      const key = this.readKey(path, opts.query);
      const read = this.readsAhead.get(key);
      if (read) {
        this.readsAhead.delete(key);
        this.readAheadsTaken++;
        return (opts.signal ? untilAborted(read, opts.signal) : read) as Promise<T>;
      }
    }
    const res = await this.open(method, path, { timeoutMs: 60_000, ...opts }, this.requestAgent);
    const chunks: Buffer[] = [];
    for await (const c of res.body) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const { status } = res;
    if (status < 200 || status >= 300) {
      throw kubeErrorFromResponse(status, text, res.header('retry-after'));
    }
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /**
   * Opens a watch stream. `onLine` gets each decoded event, `onData` every received chunk (for idle
   * watchdogs). Resolves when the server closes the stream; rejects on errors or abort.
   */
  async watch(
    path: string,
    query: RequestOptions['query'],
    handlers: { onLine: (line: WatchLine) => void; onData?: () => void },
    signal: AbortSignal,
  ): Promise<void> {
    const res = await this.open('GET', path, { query: { ...query, watch: 'true' }, signal }, this.watchAgent);
    const { status } = res;
    if (status !== 200) {
      const chunks: Buffer[] = [];
      for await (const c of res.body) chunks.push(c as Buffer);
      throw kubeErrorFromResponse(status, Buffer.concat(chunks).toString('utf8'), res.header('retry-after'));
    }
    res.body.on('data', () => handlers.onData?.());
    const rl = readline.createInterface({ input: res.body, crlfDelay: Number.POSITIVE_INFINITY });
    // Destroying the response does not end readline's iterator; closing the interface does.
    const onAbort = () => {
      rl.close();
      res.destroy();
    };
    res.body.on('close', () => rl.close());
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const line of rl) {
        if (!line.trim()) continue;
        let parsed: WatchLine;
        try {
          parsed = JSON.parse(line) as WatchLine;
        } catch {
          throw new KubeError({ code: 0, reason: 'NetworkError', message: 'malformed watch event' });
        }
        handlers.onLine(parsed);
      }
      if (signal.aborted) throw signal.reason ?? new Error('aborted');
    } finally {
      signal.removeEventListener('abort', onAbort);
      rl.close();
    }
  }

  close(): void {
    this.readsAhead.clear();
    this.h2?.close();
    this.requestAgent.destroy();
    this.watchAgent.destroy();
  }
}

/** Calls `done` once `req`'s connection is open (TLS included) or the request failed. */
function whenOnItsWay(req: ClientRequest, done: () => void): void {
  let called = false;
  const once = () => {
    if (called) return;
    called = true;
    done();
  };
  req.once('error', once);
  req.once('response', once);
  req.once('socket', (socket) => {
    if (req.reusedSocket) return once();
    socket.once(socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect', once);
  });
}

/** `read`, or the signal's reason once it aborts (the read itself goes on: others may not want it). */
function untilAborted<T>(read: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason ?? new Error('aborted'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason ?? new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    read.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

type Pem = string | Buffer | (string | Buffer | tls.KeyObject)[] | tls.KeyObject[] | undefined;

/** Equal contents (a kubeconfig loader may hand out fresh buffers of the same files every time). */
function samePem(a: Pem, b: Pem): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) &&
      Array.isArray(b) &&
      a.length === b.length &&
      a.every((x, i) => samePem(x as Pem, b[i] as Pem))
    );
  }
  if (typeof a === 'string' || typeof b === 'string') return false;
  return Buffer.isBuffer(a) && Buffer.isBuffer(b) && a.equals(b);
}
