import type { Agent, ClientRequest, IncomingMessage } from 'node:http';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import type { Socket } from 'node:net';
import readline from 'node:readline';
import tls from 'node:tls';
import { KubeError, kubeErrorFromResponse } from './errors.ts';
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
}

export interface WatchLine {
  type: string;
  object: Record<string, unknown>;
}

/**
 * Connections the short requests may hold open at once; more wait in the agent's queue. Each TLS
 * connection opened costs about 150 KB of native memory, most of which stays after it closes, so the
 * pool's peak sets a lasting share of the process's memory. At 1,000 runners a pool of 50 filled up
 * (64 sockets in all, with the watches); with 16: 31 sockets, steady RSS 114.7–120.2 MiB against
 * 118.7–124.1 (about 4 MiB less, within the spread of runs), replacement p50 126–154 ms against
 * 164–191, p99 760–1,129 against 1,085 ms, CPU 34–35 s against 36 (`node bench/fleet.ts --runs
 * runnerdeployment:1000`, same day). Same throughput: the controllers run about 40 workers, each
 * waiting on one request at a time.
 */
export const MAX_REQUEST_CONNECTIONS = 16;

/**
 * How long requests wait for the first TLS connection's session before opening full handshakes of
 * their own. A start sends a dozen requests at once (the informers' lists, the checks); with a
 * session they resume it, which skips both certificate exchanges: the client certificate's signature
 * and the server chain's verification on paddock's thread, the server's signature on the API server's.
 * The wait is one handshake, a few ms on a cluster network; the bound keeps a slow first one from
 * holding the rest back.
 */
export const FIRST_SESSION_WAIT_MS = 250;

export class KubeHttp {
  private readonly kc: ClusterAccess;
  private readonly server: URL;
  private readonly transport: typeof https | typeof http;
  /** Short requests share a keep-alive pool; each watch gets its own socket from another pool. */
  private readonly requestAgent: Agent;
  private readonly watchAgent: Agent;
  private secureContext?: {
    ca: HttpsRequestOptions['ca'];
    cert: HttpsRequestOptions['cert'];
    key: HttpsRequestOptions['key'];
    context: tls.SecureContext;
  };
  /**
   * The newest TLS session the server gave a connection made with `context`, offered by every new
   * connection (request or watch) made with the same context. A new context (rotated credentials)
   * starts over: a resumed session keeps the identity of the certificate that began it.
   */
  private tlsSession?: {
    context: tls.SecureContext;
    session?: Buffer | undefined;
    /** Settles once the leading connection has a session or ended without one. */
    first?: Promise<void>;
    waitForFirst: boolean;
  };
  private readonly watchedSockets = new WeakSet<Socket>();

  constructor(kc: ClusterAccess) {
    this.kc = kc;
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.server = new URL(cluster.server);
    this.transport = this.server.protocol === 'http:' ? http : https;
    const Agent = this.server.protocol === 'http:' ? http.Agent : https.Agent;
    this.requestAgent = this.offerSessions(
      new Agent({ keepAlive: true, maxSockets: MAX_REQUEST_CONNECTIONS }),
    );
    this.watchAgent = this.offerSessions(
      new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY }),
    );
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
  ): Promise<{ res: IncomingMessage; req: ClientRequest }> {
    const base = await this.baseOptions();
    const resume = base.secureContext ? await this.waitForFirstSession(base.secureContext) : undefined;
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
        (res) => resolve({ res, req }),
      );
      if (resume) {
        req.once('socket', (socket) => this.keepSessions(socket, resume));
        // Failed before it had a connection: the others need not wait for it.
        if (resume.lead) req.once('close', resume.lead);
      }
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
   * Before a request with `context`: while no session is kept for it, the first caller leads (`lead`
   * is set: called once its connection has a session, or ended without one) and the others wait up
   * to FIRST_SESSION_WAIT_MS for it, so that their connections can resume it (offerSessions). A
   * server that gives no sessions is not waited for again.
   */
  private async waitForFirstSession(context: tls.SecureContext): Promise<SessionUse> {
    let held = this.tlsSession;
    if (held?.context !== context) held = this.tlsSession = { context, waitForFirst: true };
    if (!held.session && held.first && held.waitForFirst) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        held.first,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, FIRST_SESSION_WAIT_MS);
        }),
      ]);
      clearTimeout(timer);
    }
    if (held.session || held.first) return { context };
    const state = held;
    let done!: () => void;
    state.first = new Promise<void>((resolve) => {
      done = resolve;
    });
    return {
      context,
      lead: () => {
        if (!state.session) state.waitForFirst = false;
        done();
      },
    };
  }

  /**
   * Makes `agent`'s new connections offer the session kept for their TLS context. Not a `session`
   * request option: the agent names its pools by their options, the session among them, so every
   * new session would start a pool of its own and strand the connections of the last.
   */
  private offerSessions(agent: Agent): Agent {
    const create = agent.createConnection.bind(agent) as (...args: unknown[]) => unknown;
    agent.createConnection = ((options: tls.ConnectionOptions, ...rest: unknown[]) => {
      const held = this.tlsSession;
      const session = held && held.context === options.secureContext ? held.session : undefined;
      return create(session ? { ...options, session } : options, ...rest);
    }) as Agent['createConnection'];
    return agent;
  }

  /** Keeps the sessions a new connection receives, for the connections after it. */
  private keepSessions(socket: Socket, use: SessionUse): void {
    if (this.watchedSockets.has(socket)) {
      use.lead?.(); // a pooled connection: its sessions are kept already
      return;
    }
    this.watchedSockets.add(socket);
    socket.on('session', (session: Buffer) => {
      if (this.tlsSession?.context === use.context) this.tlsSession.session = session;
      use.lead?.();
    });
    if (use.lead) socket.once('close', use.lead);
  }

  /** One request; resolves with the decoded JSON body, throws KubeError for non-2xx. */
  async request<T = unknown>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const { res } = await this.open(method, path, { timeoutMs: 60_000, ...opts }, this.requestAgent);
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const status = res.statusCode ?? 0;
    if (status < 200 || status >= 300) {
      throw kubeErrorFromResponse(status, text, res.headers['retry-after'] as string | undefined);
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
    const { res, req } = await this.open(
      'GET',
      path,
      { query: { ...query, watch: 'true' }, signal },
      this.watchAgent,
    );
    const status = res.statusCode ?? 0;
    if (status !== 200) {
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      throw kubeErrorFromResponse(
        status,
        Buffer.concat(chunks).toString('utf8'),
        res.headers['retry-after'] as string | undefined,
      );
    }
    res.on('data', () => handlers.onData?.());
    const rl = readline.createInterface({ input: res, crlfDelay: Number.POSITIVE_INFINITY });
    // Destroying the response does not end readline's iterator; closing the interface does.
    const onAbort = () => {
      rl.close();
      req.destroy();
      res.destroy();
    };
    res.on('close', () => rl.close());
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
    this.requestAgent.destroy();
    this.watchAgent.destroy();
  }
}

/** What one request does about TLS sessions (KubeHttp.waitForFirstSession). */
interface SessionUse {
  context: tls.SecureContext;
  /** Set for the request whose connection the others wait for. */
  lead?: () => void;
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
