import type { ClientHttp2Session, IncomingHttpHeaders } from 'node:http2';
import net from 'node:net';
import type { Readable } from 'node:stream';
import tls from 'node:tls';
import { KubeError } from './errors.ts';
import { http2 } from './node-builtins.ts';

/**
 * One HTTP/2 connection to the API server for every request and watch, as client-go keeps: at
 * start-up paddock's ~13 lists and then ~13 watches each opened a TLS connection of their own over
 * HTTP/1.1 (a full handshake each on this one thread, and about 150 KB of native memory each that
 * mostly stays); over HTTP/2 they are streams of one. A server that does not offer HTTP/2 (ALPN)
 * gets HTTP/1.1 from then on; `DISABLE_HTTP2` (client-go's variable) turns it off.
 */

/** An answer whose body is still to be read, over either protocol. */
export interface OpenResponse {
  status: number;
  header(name: string): string | undefined;
  body: Readable;
  /** Ends the exchange before its body is read to the end (abort, watch stop). */
  destroy(): void;
}

export interface Http2TlsOptions {
  secureContext: tls.SecureContext;
  rejectUnauthorized?: boolean | undefined;
  servername?: string | undefined;
}

/**
 * A connection that died without a word (a lost node, a dropped NAT entry) would hold every stream
 * and every new request: while streams are in flight a PING goes out this often, and a connection
 * that does not answer in time is closed, so the next request opens a new one (client-go's
 * ReadIdleTimeout and PingTimeout play this part).
 */
export const DEFAULT_PING_INTERVAL_MS = 30_000;
export const DEFAULT_PING_TIMEOUT_MS = 15_000;

/** Stream and connection windows: a large list streams without waiting on window updates. */
const STREAM_WINDOW = 4 * 1024 * 1024;
const CONNECTION_WINDOW = 32 * 1024 * 1024;

interface Held {
  context: tls.SecureContext;
  rejectUnauthorized: boolean | undefined;
  ready: Promise<ClientHttp2Session | undefined>;
  session: ClientHttp2Session | undefined;
}

export class Http2Connection {
  private readonly server: URL;
  private held: Held | undefined;
  /** The server chose HTTP/1.1: not asked again. */
  private refused = false;
  private closed = false;
  private readonly inFlight = new WeakMap<ClientHttp2Session, number>();
  private readonly pingIntervalMs: number;
  private readonly pingTimeoutMs: number;

  constructor(server: URL, opts: { pingIntervalMs?: number; pingTimeoutMs?: number } = {}) {
    this.server = server;
    this.pingIntervalMs = opts.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS;
    this.pingTimeoutMs = opts.pingTimeoutMs ?? DEFAULT_PING_TIMEOUT_MS;
  }

  /** False once the server has shown it does not speak HTTP/2. */
  get usable(): boolean {
    return !this.refused && !this.closed;
  }

  /**
   * The session for these TLS options (a new one when they changed, e.g. a rotated client
   * certificate; the old one ends once its streams have), or undefined when the server does not
   * speak HTTP/2.
   */
  session(opts: Http2TlsOptions): Promise<ClientHttp2Session | undefined> {
    const held = this.held;
    // (A destroyed session is let go here too: its 'close' comes a tick after its streams fail.)
    const alive = !held?.session || !(held.session.destroyed || held.session.closed);
    if (
      held &&
      alive &&
      held.context === opts.secureContext &&
      held.rejectUnauthorized === opts.rejectUnauthorized
    ) {
      return held.ready;
    }
    if (held) this.retire(held);
    const next: Held = {
      context: opts.secureContext,
      rejectUnauthorized: opts.rejectUnauthorized,
      ready: Promise.resolve(undefined),
      session: undefined,
    };
    next.ready = this.connect(opts, next);
    // A failed connect is the caller's error; the next request tries again.
    next.ready.catch(() => {
      if (this.held === next) this.held = undefined;
    });
    this.held = next;
    return next.ready;
  }

  private async connect(opts: Http2TlsOptions, held: Held): Promise<ClientHttp2Session | undefined> {
    const host = this.server.hostname.replace(/^\[|\]$/g, '');
    const socket = tls.connect({
      host,
      port: Number(this.server.port || 443),
      secureContext: opts.secureContext,
      ...(opts.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
      // Node refuses an IP address as the server name (SNI carries host names only).
      ...(opts.servername
        ? { servername: opts.servername }
        : net.isIP(host) === 0
          ? { servername: host }
          : {}),
      ALPNProtocols: ['h2', 'http/1.1'],
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('secureConnect', resolve);
      socket.once('error', (err) =>
        reject(new KubeError({ code: 0, reason: 'NetworkError', message: err.message })),
      );
    });
    if (socket.alpnProtocol !== 'h2') {
      this.refused = true;
      socket.destroy();
      if (this.held === held) this.held = undefined;
      return undefined;
    }
    const session = http2().connect(this.server.origin, {
      createConnection: () => socket,
      settings: { enablePush: false, initialWindowSize: STREAM_WINDOW },
    });
    session.setLocalWindowSize(CONNECTION_WINDOW);
    const forget = () => {
      if (this.held === held) this.held = undefined;
    };
    // GOAWAY (a server shutting down or rotating connections): streams in flight finish, new
    // ones go to a new session. An error or close ends this one for good.
    session.once('goaway', forget);
    session.once('close', forget);
    session.on('error', forget);
    session.unref(); // held open only by streams in flight (see track)
    this.keepChecking(session);
    held.session = session;
    return session;
  }

  private keepChecking(session: ClientHttp2Session): void {
    const pinger = setInterval(() => {
      if ((this.inFlight.get(session) ?? 0) === 0 || session.destroyed) return;
      const ms = this.pingTimeoutMs;
      const deadline = setTimeout(
        () => session.destroy(new Error(`the API server did not answer a PING within ${ms} ms`)),
        ms,
      );
      deadline.unref();
      const sent = session.ping((err) => {
        clearTimeout(deadline);
        if (err && !session.destroyed) session.destroy(err);
      });
      if (!sent) clearTimeout(deadline); // earlier PINGs still outstanding: their deadline stands
    }, this.pingIntervalMs);
    pinger.unref();
    session.once('close', () => clearInterval(pinger));
  }

  private retire(held: Held): void {
    if (this.held === held) this.held = undefined;
    void held.ready.then((s) => s?.close()).catch(() => undefined);
  }

  /** Sends one request on `session`; resolves once the response headers have arrived. */
  request(
    session: ClientHttp2Session,
    headers: Record<string, string>,
    body: string | undefined,
    opts: { signal?: AbortSignal | undefined; timeoutMs?: number | undefined; onSent?: () => void },
  ): Promise<OpenResponse> {
    const h2 = http2();
    const outgoing: Record<string, string> = {
      [h2.constants.HTTP2_HEADER_METHOD]: headers[':method'] as string,
      [h2.constants.HTTP2_HEADER_PATH]: headers[':path'] as string,
    };
    for (const [k, v] of Object.entries(headers)) {
      const name = k.toLowerCase();
      // Connection-specific headers are not allowed in HTTP/2 (RFC 9113 §8.2.2).
      if (name.startsWith(':') || name === 'host' || name === 'connection' || name === 'keep-alive') continue;
      if (name === 'transfer-encoding' || name === 'upgrade' || name === 'proxy-connection') continue;
      outgoing[name] = v;
    }
    let stream: ReturnType<ClientHttp2Session['request']>;
    try {
      stream = session.request(outgoing, {
        endStream: body === undefined,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    } catch (err) {
      // The session went away between being handed out and this request.
      if (this.held?.session === session) this.held = undefined;
      return Promise.reject(
        new KubeError({ code: 0, reason: 'NetworkError', message: (err as Error).message }),
      );
    }
    this.track(session, stream);
    if (body !== undefined) stream.end(body);
    opts.onSent?.();
    return new Promise<OpenResponse>((resolve, reject) => {
      if (opts.timeoutMs) {
        const ms = opts.timeoutMs;
        stream.setTimeout(ms, () => stream.destroy(new Error(`request timed out after ${ms} ms`)));
      }
      stream.once('error', (err) =>
        reject(new KubeError({ code: 0, reason: 'NetworkError', message: err.message })),
      );
      stream.once('close', () =>
        reject(
          new KubeError({ code: 0, reason: 'NetworkError', message: 'stream closed before its response' }),
        ),
      );
      stream.once('response', (h: IncomingHttpHeaders) => {
        resolve({
          status: Number(h[':status'] ?? 0),
          header: (name) => {
            const v = h[name.toLowerCase()];
            return Array.isArray(v) ? v[0] : v;
          },
          body: stream,
          destroy: () => stream.destroy(),
        });
      });
    });
  }

  /** A session keeps the process alive only while a stream of it is in flight, as pooled sockets do. */
  private track(session: ClientHttp2Session, stream: { once(e: 'close', fn: () => void): unknown }): void {
    const n = this.inFlight.get(session) ?? 0;
    this.inFlight.set(session, n + 1);
    if (n === 0) session.ref();
    stream.once('close', () => {
      const left = (this.inFlight.get(session) ?? 1) - 1;
      this.inFlight.set(session, left);
      if (left === 0 && !session.destroyed) session.unref();
    });
  }

  close(): void {
    this.closed = true;
    const held = this.held;
    this.held = undefined;
    if (held) void held.ready.then((s) => s?.destroy()).catch(() => undefined);
  }
}
