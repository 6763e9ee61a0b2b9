import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { invalidNamespaceReason } from '../runtime/names.ts';
import { https } from '../runtime/node-builtins.ts';
import type { KeyPairPem } from './certs.ts';
import type { AdmissionResult } from './runner-token.ts';

/**
 * The admission webhook HTTPS server: `admission.k8s.io/v1` AdmissionReview in, AdmissionReview
 * out, one handler per path, and `GET /healthz`. Malformed reviews get a 400 with the reason;
 * handler failures and timeouts become denials, never dropped connections.
 */

export const ADMISSION_API_VERSION = 'admission.k8s.io/v1';

/** The fields of an AdmissionReview `request` the handlers use (the rest passes through untyped). */
export interface AdmissionRequest {
  uid: string;
  kind?: { group?: string; version?: string; kind?: string };
  resource?: { group?: string; version?: string; resource?: string };
  namespace?: string;
  name?: string;
  operation?: string;
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
  [key: string]: unknown;
}

export type AdmissionHandler = (request: AdmissionRequest, signal: AbortSignal) => Promise<AdmissionResult>;

export interface AdmissionReviewResponse {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: 'AdmissionReview';
  response: {
    uid: string;
    allowed: boolean;
    status?: { status: 'Failure'; code: number; message: string; reason?: string };
    patchType?: 'JSONPatch';
    /** base64 of the JSON patch. */
    patch?: string;
    warnings?: string[];
  };
}

/** HTTP answer of the framing layer: a status and a JSON or text body. */
export interface FramedAnswer {
  status: number;
  body: AdmissionReviewResponse | { message: string };
}

export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;
/**
 * Deeper JSON is refused before any handler sees it: their recursive walks (JSON.stringify,
 * structuredClone, the JSON patch diff) overflow the stack a few thousand levels down, and no pod or
 * runner object the API server sends comes near this.
 */
export const MAX_JSON_DEPTH = 500;
export const DEFAULT_HANDLER_TIMEOUT_MS = 9_500;

/**
 * Messages echo what a request carried (names, owner references, env values); past this length
 * only their start and end are kept, so a forged request never gets megabytes back and no Event
 * about a refused creation quotes them.
 */
export const MAX_MESSAGE_CHARS = 4096;

function bounded(message: string): string {
  if (message.length <= MAX_MESSAGE_CHARS) return message;
  const head = message.slice(0, 3072);
  const tail = message.slice(-960);
  return `${head}…(${message.length - head.length - tail.length} characters cut)…${tail}`;
}

/** Builds the AdmissionReview answering `uid` with `result`. */
export function admissionReviewFor(uid: string, result: AdmissionResult): AdmissionReviewResponse {
  const response: AdmissionReviewResponse['response'] = { uid, allowed: result.allowed };
  if (result.status) {
    response.status = {
      status: 'Failure',
      code: result.status.code,
      message: bounded(result.status.message),
      ...(result.status.reason ? { reason: result.status.reason } : {}),
    };
  }
  if (result.allowed && result.patch && result.patch.length > 0) {
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(result.patch), 'utf8').toString('base64');
  }
  if (result.warnings && result.warnings.length > 0) response.warnings = result.warnings;
  return { apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response };
}

const REQUEST_FIELD_TYPES = [
  ['namespace', 'string'],
  ['name', 'string'],
  ['operation', 'string'],
  ['dryRun', 'boolean'],
  ['kind', 'object'],
  ['resource', 'object'],
] as const;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Decodes an AdmissionReview body, runs `handler` on its request, and frames the answer. Pure apart
 * from the handler; the server adds HTTP concerns (method, size, content type) around it.
 */
export async function reviewAdmission(
  body: string,
  handler: AdmissionHandler,
  options: { signal?: AbortSignal; timeoutMs?: number; logger?: Logger } = {},
): Promise<FramedAnswer> {
  let review: unknown;
  try {
    review = JSON.parse(body);
  } catch (err) {
    return { status: 400, body: { message: `malformed AdmissionReview: ${(err as Error).message}` } };
  }
  if (!isObject(review))
    return { status: 400, body: { message: 'malformed AdmissionReview: not an object' } };
  if (nestedDeeperThan(body, MAX_JSON_DEPTH)) {
    return {
      status: 400,
      body: { message: `malformed AdmissionReview: nested deeper than ${MAX_JSON_DEPTH} levels` },
    };
  }
  if (review.apiVersion !== ADMISSION_API_VERSION || review.kind !== 'AdmissionReview') {
    return {
      status: 400,
      body: {
        message: bounded(
          `malformed AdmissionReview: expected apiVersion ${ADMISSION_API_VERSION} kind AdmissionReview, got ${shownValue(review.apiVersion)} ${shownValue(review.kind)}`,
        ),
      },
    };
  }
  const request = review.request;
  if (!isObject(request) || typeof request.uid !== 'string' || request.uid === '') {
    return { status: 400, body: { message: 'malformed AdmissionReview: request.uid is missing' } };
  }
  // The handlers rely on the types AdmissionRequest declares (the API server omits what is unset).
  for (const [field, type] of REQUEST_FIELD_TYPES) {
    const v = request[field];
    if (v !== undefined && (type === 'object' ? !isObject(v) : typeof v !== type)) {
      return {
        status: 400,
        body: { message: `malformed AdmissionReview: request.${field} is not a ${type}` },
      };
    }
  }
  // The API server only sends real namespace names; anything else would end up in a URL path.
  const badNamespace =
    typeof request.namespace === 'string' && request.namespace !== ''
      ? invalidNamespaceReason('request.namespace', request.namespace)
      : undefined;
  if (badNamespace) return { status: 400, body: { message: `malformed AdmissionReview: ${badNamespace}` } };
  const uid = request.uid;
  const timeoutMs = options.timeoutMs ?? DEFAULT_HANDLER_TIMEOUT_MS;
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline;
  let timer: NodeJS.Timeout | undefined;
  try {
    const timedOut = new Promise<AdmissionResult>((resolve) => {
      timer = setTimeout(
        () =>
          resolve({
            allowed: false,
            status: {
              code: 504,
              message: `paddock: admission of ${describeRequest(request)} did not finish within ${timeoutMs} ms`,
              reason: 'Timeout',
            },
          }),
        timeoutMs,
      );
    });
    const result = await Promise.race([handler(request as AdmissionRequest, signal), timedOut]);
    return { status: 200, body: admissionReviewFor(uid, result) };
  } catch (err) {
    options.logger?.error({ err, uid }, 'admission handler failed');
    return {
      status: 200,
      body: admissionReviewFor(uid, {
        allowed: false,
        status: {
          code: 500,
          message: `paddock: admission of ${describeRequest(request)} failed: ${err instanceof Error ? err.message : String(err)}`,
          reason: 'InternalError',
        },
      }),
    };
  } finally {
    clearTimeout(timer);
  }
}

/** Whether the JSON text `text` opens more than `max` arrays and objects inside each other. */
function nestedDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      // A backslash escapes the next character; a quote ends the string.
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/** Any JSON value of a request in a message; `String()` would throw on an object whose `toString` is data. */
function shownValue(v: unknown): string {
  return (JSON.stringify(v) ?? 'undefined').slice(0, 80);
}

function describeRequest(request: Record<string, unknown>): string {
  const resource =
    isObject(request.resource) && typeof request.resource.resource === 'string'
      ? request.resource.resource
      : 'object';
  const ns = typeof request.namespace === 'string' && request.namespace ? `${request.namespace}/` : '';
  const name = typeof request.name === 'string' && request.name ? request.name : '<new>';
  return `${resource} ${ns}${name}`;
}

export interface WebhookServerOptions {
  tls: KeyPairPem;
  /** Path → handler, e.g. `{ '/mutate-runner-set-pod': runnerPodAdmissionHandler(deps) }`. */
  handlers: Record<string, AdmissionHandler>;
  logger: Logger;
  /** Default `0.0.0.0`; tests use 127.0.0.1. */
  host?: string | undefined;
  /** Default 9443 (ARC's `--port`); 0 picks a free port. */
  port?: number | undefined;
  maxBodyBytes?: number | undefined;
  /** Time a handler may take before the request is denied (default 9.5 s, below the API server's 10 s). */
  handlerTimeoutMs?: number | undefined;
  /** Time to receive a whole request (default 10 s). */
  requestTimeoutMs?: number | undefined;
  /**
   * PEM of the CA that signs the API server's webhook client certificate. When set, the TLS
   * handshake fails for clients without a certificate it signed, so nobody else can call us.
   */
  clientCa?: string | undefined;
}

export class WebhookServer {
  private readonly server: Server;
  private readonly handlers: Record<string, AdmissionHandler>;
  private readonly log: Logger;
  private readonly host: string;
  private readonly requestedPort: number;
  private readonly maxBodyBytes: number;
  private readonly handlerTimeoutMs: number;
  private readonly counts = new Map<string, number>();
  private readonly clientCa: string | undefined;
  private listening = false;

  constructor(options: WebhookServerOptions) {
    this.handlers = options.handlers;
    this.log = options.logger.child({ component: 'webhook-server' });
    this.host = options.host ?? '0.0.0.0';
    this.requestedPort = options.port ?? 9443;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.handlerTimeoutMs = options.handlerTimeoutMs ?? DEFAULT_HANDLER_TIMEOUT_MS;
    this.clientCa = options.clientCa;
    this.server = https.createServer(
      {
        ...this.secureContext(options.tls),
        ...(this.clientCa ? { requestCert: true, rejectUnauthorized: true } : {}),
      },
      (req, res) => {
        this.serve(req, res).catch((err) => {
          this.log.error({ err }, 'webhook request failed');
          if (!res.headersSent) send(res, 500, { message: 'internal error' });
          else res.destroy();
        });
      },
    );
    this.server.requestTimeout = options.requestTimeoutMs ?? 10_000;
    this.server.headersTimeout = Math.min(this.server.requestTimeout, 10_000);
    this.server.keepAliveTimeout = 30_000;
  }

  /** Listens; resolves with the port. */
  async start(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      this.server.once('error', onError);
      this.server.listen(this.requestedPort, this.host, () => {
        this.server.off('error', onError);
        resolve();
      });
    });
    this.listening = true;
    this.log.info({ host: this.host, port: this.port }, 'webhook server listening');
    return this.port;
  }

  get port(): number {
    const a = this.server.address() as AddressInfo | null;
    if (!a) throw new Error('webhook server is not listening');
    return a.port;
  }

  /** `https://<host>:<port><path>` (for a `url` clientConfig in development). */
  url(path: string): string {
    const host =
      this.host === '0.0.0.0' ? '127.0.0.1' : this.host.includes(':') ? `[${this.host}]` : this.host;
    return `https://${host}:${this.port}${path}`;
  }

  /** Admission requests received (on one path, or all). */
  requestCount(path?: string): number {
    if (path !== undefined) return this.counts.get(path) ?? 0;
    let n = 0;
    for (const v of this.counts.values()) n += v;
    return n;
  }

  /** Serves a renewed certificate to new connections (still asking for client certificates). */
  setCertificate(tls: KeyPairPem): void {
    this.server.setSecureContext(this.secureContext(tls));
  }

  private secureContext(tls: KeyPairPem) {
    return {
      key: tls.key,
      cert: tls.cert,
      minVersion: 'TLSv1.2' as const,
      ...(this.clientCa ? { ca: this.clientCa } : {}),
    };
  }

  async stop(): Promise<void> {
    if (!this.listening) return;
    this.listening = false;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const force = setTimeout(() => this.server.closeAllConnections(), 2_000);
    await closed;
    clearTimeout(force);
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    if (path === '/healthz' || path === '/readyz') {
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, { message: 'use GET' });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
      return;
    }
    const handler = Object.hasOwn(this.handlers, path) ? this.handlers[path] : undefined;
    if (!handler) return send(res, 404, { message: `no admission webhook at ${path}` });
    if (req.method !== 'POST') return send(res, 405, { message: 'admission reviews are POSTed' });
    this.counts.set(path, (this.counts.get(path) ?? 0) + 1);
    const type = (req.headers['content-type'] ?? 'application/json').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') {
      return send(res, 415, { message: `content type ${type} is not supported; send application/json` });
    }
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > this.maxBodyBytes) {
      return tooLarge(res, req, this.maxBodyBytes);
    }
    const body = await readBody(req, this.maxBodyBytes);
    if (body === undefined) return tooLarge(res, req, this.maxBodyBytes);
    // The API server gave up (its timeout): stop working on its behalf.
    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) gone.abort(new Error('the API server closed the connection'));
    });
    const started = Date.now();
    const answer = await reviewAdmission(body, handler, {
      signal: gone.signal,
      timeoutMs: this.handlerTimeoutMs,
      logger: this.log,
    });
    if ('response' in answer.body) {
      const r = answer.body.response;
      this.log.debug(
        {
          path,
          uid: r.uid,
          allowed: r.allowed,
          patched: r.patch !== undefined,
          code: r.status?.code,
          ms: Date.now() - started,
        },
        'admission review',
      );
    } else {
      this.log.warn({ path, message: answer.body.message }, 'malformed admission review');
    }
    send(res, answer.status, answer.body);
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The body as text, or undefined when it grows past `max`. Past `max` the rest is read and dropped,
 * not kept, so the 413 reaches a sender still streaming (closing on unread data resets the
 * connection before it can read the answer); the server's requestTimeout bounds a slow one.
 */
function readBody(req: IncomingMessage, max: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) chunks.length = 0;
      else chunks.push(chunk);
    });
    req.once('end', () => resolve(size > max ? undefined : Buffer.concat(chunks).toString('utf8')));
    req.once('error', reject);
  });
}

function tooLarge(res: ServerResponse, req: IncomingMessage, max: number): void {
  res.setHeader('connection', 'close');
  send(res, 413, { message: `admission review larger than ${max} bytes` });
  res.on('finish', () => req.destroy());
}
