import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { http } from '../runtime/node-builtins.ts';
import { checkDelivery, MAX_DELIVERY_BYTES } from './github-delivery.ts';

/**
 * The HTTP endpoint GitHub sends webhooks to (`paddock webhook-server`, spec §7.5.1): every path
 * answers, GET says the server runs, POST is a delivery. Each delivery is checked (size, content
 * type, signature, JSON) before anything reads it, then handed to `handle`. Beyond ARC:
 *   - a delivery ID (`X-GitHub-Delivery`, which a redelivery repeats) is handled once;
 *   - while the caches are still syncing the answer is 503, not a wrong "no autoscaler";
 *   - a full queue is 503 with Retry-After, so a redelivery can succeed later;
 *   - answers never echo the body, the signature or the secret.
 */

export interface DeliveryAnswer {
  status: number;
  body: string;
  /** The writer's queue is full: nothing was recorded for this delivery. */
  queueFull?: boolean;
}

export interface GitHubWebhookServerOptions {
  host: string;
  port: number;
  /** HMAC secret; empty or undefined: deliveries are not authenticated (as ARC, with a warning). */
  secret: string | undefined;
  handle: (event: string, payload: unknown, signal: AbortSignal) => Promise<DeliveryAnswer>;
  /** False while the caches the handler reads have not synced. */
  ready: () => boolean;
  log: Logger;
  registry?: Registry | undefined;
  now?: () => number;
}

const RUNNING = 'webhook server is running\n';
/** How long a delivery ID is remembered (GitHub lets a delivery be redelivered for 3 days). */
const DELIVERY_MEMORY_MS = 3 * 24 * 3600_000;
/** At most this many (about 2 MiB): at 600 deliveries a minute, the last half hour's. */
const DELIVERY_MEMORY_MAX = 20_000;
/** Deliveries being read or handled at once; more are turned away with 503 (bodies can be 25 MiB). */
const MAX_IN_FLIGHT = 32;
const HANDLE_TIMEOUT_MS = 10_000;

export class GitHubWebhookServer {
  private readonly opts: GitHubWebhookServerOptions;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly deliveries = new Map<string, number>();
  private inFlight = 0;
  private readonly counter: Counter<'event' | 'code'> | undefined;
  private readonly now: () => number;

  constructor(opts: GitHubWebhookServerOptions) {
    this.opts = opts;
    this.now = opts.now ?? Date.now;
    if (opts.registry) {
      this.counter =
        (opts.registry.getSingleMetric('paddock_github_webhook_deliveries_total') as
          | Counter<'event' | 'code'>
          | undefined) ??
        new Counter({
          name: 'paddock_github_webhook_deliveries_total',
          help: 'GitHub webhook deliveries by event and HTTP status answered (duplicates count as "duplicate")',
          labelNames: ['event', 'code'],
          registers: [opts.registry],
        });
    }
  }

  async start(): Promise<number> {
    const server = http.createServer((req, res) => {
      this.serve(req, res).catch((err: unknown) => {
        this.opts.log.error({ err }, 'webhook delivery failed');
        if (!res.headersSent) this.reply(res, 500, 'internal error\n');
        else res.destroy();
      });
    });
    server.headersTimeout = 10_000;
    server.requestTimeout = 60_000;
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    if (!this.opts.secret) {
      this.opts.log.warn(
        'no GitHub webhook secret: anyone who can reach this port can add capacity reservations; set --github-webhook-secret-token',
      );
    }
    return (server.address() as AddressInfo).port;
  }

  get url(): string {
    const a = this.server?.address() as AddressInfo | undefined;
    const host = !a || a.address === '0.0.0.0' || a.address === '::' ? '127.0.0.1' : a.address;
    return `http://${host.includes(':') ? `[${host}]` : host}:${a?.port ?? 0}`;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private reply(
    res: ServerResponse,
    status: number,
    body: string,
    headers: Record<string, string> = {},
  ): void {
    res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...headers });
    res.end(body);
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = (req.method ?? '').toUpperCase();
    if (method === 'GET' || method === 'HEAD') {
      this.reply(res, 200, RUNNING);
      return;
    }
    if (method !== 'POST') {
      req.resume();
      this.reply(res, 405, 'only POST (deliveries) and GET\n', { allow: 'GET, HEAD, POST' });
      return;
    }
    if (this.inFlight >= MAX_IN_FLIGHT) {
      req.resume();
      this.reply(res, 503, 'too many deliveries at once; retry later\n', { 'retry-after': '5' });
      return;
    }
    this.inFlight++;
    try {
      await this.delivery(req, res);
    } finally {
      this.inFlight--;
    }
  }

  private async delivery(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_DELIVERY_BYTES) {
      this.count('(unread)', 413);
      // Answered without reading 25 MiB first; the connection goes once the answer is out.
      res.on('finish', () => req.socket.destroy());
      this.reply(res, 413, `payload larger than GitHub's ${MAX_DELIVERY_BYTES} bytes\n`, {
        connection: 'close',
      });
      return;
    }
    const { body, truncated } = await readBody(req, MAX_DELIVERY_BYTES);
    const checked = checkDelivery({ secret: this.opts.secret, headers: req.headers, body, truncated });
    const eventHeader = req.headers['x-github-event'];
    const eventLabel = typeof eventHeader === 'string' ? eventLabelOf(eventHeader) : '(none)';
    if (!checked.ok) {
      this.count(eventLabel, checked.status);
      this.opts.log.info(
        {
          status: checked.status,
          reason: checked.message,
          delivery: safeId(req.headers['x-github-delivery']),
        },
        'rejected a webhook delivery',
      );
      this.reply(res, checked.status, `${checked.message}\n`, truncated ? { connection: 'close' } : {});
      return;
    }
    const delivery = safeId(checked.delivery);
    const log = this.opts.log.child({ delivery, event: eventLabel });
    if (!this.opts.ready()) {
      this.count(eventLabel, 503);
      this.reply(res, 503, 'starting: the autoscaler caches are not synced yet; redeliver shortly\n', {
        'retry-after': '5',
      });
      return;
    }
    if (delivery && this.seen(delivery)) {
      this.count(eventLabel, 'duplicate');
      log.debug('duplicate delivery ignored');
      this.reply(res, 200, `delivery ${delivery} was handled already\n`);
      return;
    }
    // Taken before it is handled, so the same delivery arriving twice at once is handled once.
    if (delivery) this.remember(delivery);
    let answer: DeliveryAnswer;
    try {
      answer = await this.opts.handle(checked.event, checked.payload, AbortSignal.timeout(HANDLE_TIMEOUT_MS));
    } catch (err) {
      if (delivery) this.deliveries.delete(delivery);
      throw err;
    }
    if (delivery && (answer.queueFull || answer.status >= 300)) this.deliveries.delete(delivery);
    if (answer.queueFull) {
      this.count(eventLabel, 503);
      log.warn('reservation queue full; delivery not taken');
      this.reply(res, 503, 'queue full: the delivery was not taken; redeliver it later\n', {
        'retry-after': '5',
      });
      return;
    }
    this.count(eventLabel, answer.status);
    log.debug({ status: answer.status, answer: answer.body }, 'handled a webhook delivery');
    this.reply(res, answer.status, answer.body ? `${answer.body}\n` : '');
  }

  private count(event: string, code: number | string): void {
    this.counter?.inc({ event, code: String(code) });
  }

  private seen(id: string): boolean {
    const at = this.deliveries.get(id);
    return at !== undefined && at > this.now() - DELIVERY_MEMORY_MS;
  }

  private remember(id: string): void {
    const now = this.now();
    this.deliveries.set(id, now);
    for (const [k, at] of this.deliveries) {
      if (at > now - DELIVERY_MEMORY_MS && this.deliveries.size <= DELIVERY_MEMORY_MAX) break;
      this.deliveries.delete(k);
    }
  }
}

/** Reads at most `limit` bytes (and notes whether there was more) without holding more in memory. */
async function readBody(req: IncomingMessage, limit: number): Promise<{ body: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    if (truncated) continue;
    size += chunk.length;
    if (size > limit) {
      // Drained, not kept, so the 413 still reaches the sender (requestTimeout bounds a slow one).
      truncated = true;
      chunks.length = 0;
      continue;
    }
    chunks.push(chunk);
  }
  return { body: truncated ? Buffer.alloc(0) : Buffer.concat(chunks), truncated };
}

/** Event names as metric labels: GitHub's are lower-case words; anything else is one bucket. */
function eventLabelOf(event: string): string {
  return /^[a-z_]{1,40}$/.test(event) ? event : '(other)';
}

/** A delivery ID fit for logs and memory (GUIDs); anything else is not trusted as one. */
function safeId(v: unknown): string | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  return typeof s === 'string' && /^[A-Za-z0-9-]{1,64}$/.test(s) ? s : undefined;
}
