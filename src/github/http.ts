import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { http, https, zlib } from '../runtime/node-builtins.ts';

/**
 * The `fetch` paddock gives Octokit: node:http(s) with keep-alive agents, an optional extra CA bundle
 * (GitHub Enterprise Server with a private CA) that leaves process-wide TLS settings alone, and only
 * as much of fetch as @octokit/request uses: method, headers, a string or byte body, redirect, signal;
 * an answer with status, headers, url and the body read whole.
 *
 * Not the global fetch: that is undici, which takes 30–50 ms to load and is not otherwise needed.
 * Like it, this asks for compressed answers and unpacks them, follows up to 20 redirects (dropping
 * the Authorization header when one leaves the origin, GET after a 303, or a 301/302 of a POST), and
 * rejects with the signal's reason when aborted and with a TypeError("fetch failed") on network errors.
 */
export function nodeFetch(options: { caBundle?: string | Buffer | undefined } = {}): typeof fetch {
  const agents = {
    'https:': new https.Agent({ keepAlive: true, ...(options.caBundle ? { ca: options.caBundle } : {}) }),
    'http:': new http.Agent({ keepAlive: true }),
  };
  return (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    let url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    let method = (init?.method ?? 'GET').toUpperCase();
    const headers = plainHeaders(init?.headers);
    headers['accept-encoding'] ??= 'gzip, deflate, br';
    let body = init?.body ?? undefined;
    if (body !== undefined && typeof body !== 'string' && !(body instanceof Uint8Array)) {
      throw new TypeError('paddock’s fetch supports string and Uint8Array bodies only');
    }
    const signal = init?.signal ?? undefined;
    for (let redirects = 0; ; redirects++) {
      if (url.protocol !== 'https:' && url.protocol !== 'http:') {
        throw new TypeError('fetch failed', { cause: new Error(`unsupported protocol ${url.protocol}`) });
      }
      const res = await exchange(url, method, headers, body, agents[url.protocol], signal);
      const location = res.headers.location;
      if (!REDIRECTS.has(res.statusCode ?? 0) || location === undefined || init?.redirect === 'manual') {
        return await bufferedResponse(res, url, signal);
      }
      res.resume();
      if (init?.redirect === 'error') throw new TypeError('fetch failed', { cause: new Error('redirected') });
      if (redirects >= 20) throw new TypeError('fetch failed', { cause: new Error('too many redirects') });
      const next = new URL(location, url);
      const status = res.statusCode ?? 0;
      if (
        (status === 303 && method !== 'HEAD') ||
        ((status === 301 || status === 302) && method === 'POST')
      ) {
        method = 'GET';
        body = undefined;
        for (const h of ['content-type', 'content-length', 'content-encoding', 'content-language'])
          delete headers[h];
      }
      if (next.origin !== url.origin) delete headers.authorization;
      url = next;
    }
  }) as typeof fetch;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Statuses whose answer has no body. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

function plainHeaders(init: RequestInit['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  if (!init) return out;
  // Duck-typed: naming the global Headers class would load undici.
  if (Array.isArray(init)) {
    for (const [k, v] of init) if (k !== undefined && v !== undefined) out[k.toLowerCase()] = v;
  } else if (typeof (init as { forEach?: unknown }).forEach === 'function') {
    (init as { forEach(fn: (value: string, key: string) => void): void }).forEach((v, k) => {
      out[k.toLowerCase()] = v;
    });
  } else {
    for (const [k, v] of Object.entries(init as Record<string, string>)) out[k.toLowerCase()] = String(v);
  }
  return out;
}

function exchange(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | Uint8Array | undefined,
  agent: import('node:http').Agent,
  signal: AbortSignal | undefined,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const lib = url.protocol === 'https:' ? https : http;
    const req = lib.request(url, { method, headers, agent, ...(signal ? { signal } : {}) }, resolve);
    req.on('error', (err) => reject(failure(err, signal)));
    req.end(body);
  });
}

function failure(err: Error, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted) return signal.reason;
  return new TypeError('fetch failed', { cause: err });
}

async function bufferedResponse(
  res: IncomingMessage,
  url: URL,
  signal: AbortSignal | undefined,
): Promise<Response> {
  const status = res.statusCode ?? 0;
  let raw: Buffer;
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    raw = Buffer.concat(chunks);
  } catch (err) {
    throw failure(err as Error, signal);
  }
  let body = NULL_BODY.has(status) ? Buffer.alloc(0) : raw;
  const encoding = String(res.headers['content-encoding'] ?? '')
    .trim()
    .toLowerCase();
  if (body.length > 0 && encoding !== '' && encoding !== 'identity') {
    try {
      body = decode(body, encoding);
    } catch (err) {
      throw new TypeError('fetch failed', { cause: err });
    }
  }
  return new BufferedResponse(
    status,
    res.statusMessage ?? '',
    new ResponseHeaderList(res.headers),
    body,
    url.href,
  ) as unknown as Response;
}

/** Past this, an unpacked answer is refused: no GitHub answer comes near it, a compression bomb does. */
export const MAX_UNPACKED_BYTES = 64 * 1024 * 1024;

function decode(body: Buffer, encoding: string): Buffer {
  const z = zlib();
  const limit = { maxOutputLength: MAX_UNPACKED_BYTES };
  switch (encoding) {
    case 'gzip':
    case 'x-gzip':
      return z.gunzipSync(body, limit);
    case 'deflate':
      return z.inflateSync(body, limit);
    case 'br':
      return z.brotliDecompressSync(body, limit);
    default:
      throw new Error(`unsupported content-encoding ${encoding}`);
  }
}

/** The response headers, as fetch's Headers reads them: names in lower case, repeats joined by ", ". */
export class ResponseHeaderList implements Iterable<[string, string]> {
  private readonly values = new Map<string, string>();

  constructor(headers: IncomingHttpHeaders | Record<string, string> = {}) {
    for (const [k, v] of Object.entries(headers)) {
      if (v === undefined) continue;
      this.values.set(k.toLowerCase(), Array.isArray(v) ? v.join(', ') : String(v));
    }
  }

  get(name: string): string | null {
    return this.values.get(name.toLowerCase()) ?? null;
  }

  has(name: string): boolean {
    return this.values.has(name.toLowerCase());
  }

  forEach(fn: (value: string, key: string) => void): void {
    for (const [k, v] of this) fn(v, k);
  }

  *[Symbol.iterator](): IterableIterator<[string, string]> {
    yield* [...this.values].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }
}

/** The part of fetch's Response that Octokit and the GitHub transport read, with the body in memory. */
export class BufferedResponse {
  readonly ok: boolean;
  readonly status: number;
  readonly statusText: string;
  readonly headers: ResponseHeaderList;
  readonly url: string;
  private readonly bytes: Buffer;

  constructor(status: number, statusText: string, headers: ResponseHeaderList, bytes: Buffer, url = '') {
    this.status = status;
    this.statusText = statusText;
    this.headers = headers;
    this.bytes = bytes;
    this.url = url;
    this.ok = status >= 200 && status < 300;
  }

  /** A copy of any fetch Response (an injected fetch's) with its body read, so a timer can cover the body. */
  static async read(res: Response): Promise<BufferedResponse> {
    if (res instanceof BufferedResponse) return res;
    const bytes = NULL_BODY.has(res.status) ? Buffer.alloc(0) : Buffer.from(await res.arrayBuffer());
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      headers[k] = v;
    });
    return new BufferedResponse(res.status, res.statusText, new ResponseHeaderList(headers), bytes, res.url);
  }

  async text(): Promise<string> {
    return this.bytes.toString('utf8');
  }

  async json(): Promise<unknown> {
    return JSON.parse(this.bytes.toString('utf8'));
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    return new Uint8Array(this.bytes).buffer;
  }
}
