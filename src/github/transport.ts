import { Octokit } from '@octokit/core';
import type { Logger } from 'pino';
import type { Clock } from '../runtime/clock.ts';
import { type AccessTokenSource, tokenSourceFor } from './auth.ts';
import { RateLimitBudget, type RequestKind } from './budget.ts';
import { credentialId, type GitHubCredentials } from './credentials.ts';
import { classifyResponse, GitHubApiError, type RateLimitCause, type ResponseHeaders } from './errors.ts';
import { BufferedResponse, nodeFetch } from './http.ts';
import type { GitHubMetrics } from './metrics.ts';
import type { GitHubEndpoints } from './scope.ts';

/**
 * One credential's way to GitHub: Octokit with our auth, the rate-limit budget, conditional GETs
 * (ETag cache), retries with back-off on the injected clock, and metrics. Every call either returns
 * a 2xx (or a 304 turned into the cached answer) or throws `GitHubApiError`.
 */

export const API_VERSION = '2022-11-28';
const MINT_ROUTE = 'POST /app/installations/{installation_id}/access_tokens';

export interface GitHubRequestOptions {
  kind: RequestKind;
  /** Route template, e.g. `GET /orgs/{org}/actions/runners` (also the metric label). */
  route: string;
  /** Path placeholders, query parameters and body fields, as for `octokit.request`. */
  params?: Record<string, unknown>;
  /** GET only: send `If-None-Match` and answer a 304 from the cache. */
  conditional?: boolean;
  /**
   * With `conditional`: what of an answer the ETag cache stores and a 304 returns (the fields the
   * caller reads; undefined stores nothing). GitHub's run and job objects are several KB each
   * (repository, commits, steps), and a cache of 1,000 whole pages would hold tens of MiB.
   */
  keep?: ((data: unknown) => unknown) | undefined;
  /** Wait (on the clock) for the budget or a rate limit to reset instead of failing fast. */
  waitForBudget?: boolean;
  /** Retries on 5xx and network errors (default: the transport's). Use 0 for non-idempotent calls. */
  maxRetries?: number;
  signal?: AbortSignal;
}

export interface GitHubResponse<T> {
  status: number;
  data: T;
  headers: Record<string, string>;
  /** Answered by a 304 from the ETag cache (costs no primary budget). */
  notModified: boolean;
}

export interface GitHubTransportOptions {
  credentials: GitHubCredentials;
  endpoints: GitHubEndpoints;
  clock: Clock;
  logger: Logger;
  metrics?: GitHubMetrics | undefined;
  /** Custom fetch (tests); default nodeFetch, trusting `caBundle` when given. */
  fetch?: typeof fetch | undefined;
  /** PEM bundle of extra CAs for a GHES with a private CA. */
  caBundle?: string | Buffer | undefined;
  /** Send conditional requests (default true); off only to measure what they save. */
  conditionalRequests?: boolean | undefined;
  reserveFraction?: number | undefined;
  /** Retries on 5xx / network errors (default 3). */
  maxRetries?: number | undefined;
  /** First retry delay; doubles per retry (default 1 s), capped by `maxRetryDelayMs` (30 s). */
  retryBaseDelayMs?: number | undefined;
  maxRetryDelayMs?: number | undefined;
  /** Per-attempt timeout (default 30 s), on the injected clock. */
  requestTimeoutMs?: number | undefined;
  installationTokenRenewBeforeMs?: number | undefined;
  /** After a 401 that a fresh token did not fix, refuse calls this long without sending (default 60 s). */
  invalidCredentialsHoldMs?: number | undefined;
  /** ETag cache size in entries (default 1,000 pages). */
  conditionalCacheEntries?: number | undefined;
  userAgent?: string | undefined;
  /** Jitter source in [0, 1); 0.5 gives exact doubling. */
  random?: (() => number) | undefined;
}

interface CachedAnswer {
  etag: string;
  data: unknown;
  headers: Record<string, string>;
}

/**
 * The headers of a stored answer that a 304 does not repeat and callers read (pagination, polling
 * hints); the rest (rate limit, date, CORS, …) would only take memory in every entry.
 */
const KEPT_HEADERS = ['link', 'cache-control'] as const;

function keptHeaders(headers: Record<string, string>): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const h of KEPT_HEADERS) if (headers[h] !== undefined) kept[h] = headers[h];
  return kept;
}

/** Least-recently-used map, bounded by entries. */
class ConditionalCache {
  private readonly entries = new Map<string, CachedAnswer>();
  private readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
  get(key: string): CachedAnswer | undefined {
    const e = this.entries.get(key);
    if (e) {
      this.entries.delete(key);
      this.entries.set(key, e);
    }
    return e;
  }
  set(key: string, value: CachedAnswer): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    while (this.entries.size > this.max) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }
  get size(): number {
    return this.entries.size;
  }
}

/** Which primary-limit bucket a route draws from (GitHub keeps runner registration separate). */
export function resourceForRoute(route: string): string {
  return /\/actions\/runners\/(registration-token|remove-token|generate-jitconfig)$/.test(route)
    ? 'actions_runner_registration'
    : 'core';
}

/** `max-age` from `Cache-Control`, in ms. */
export function maxAgeFromCacheControl(value: string | undefined): number | undefined {
  const m = value === undefined ? null : /(?:^|[,\s])max-age=(\d+)/i.exec(value);
  return m ? Number(m[1]) * 1000 : undefined;
}

/** Back-off before retry `attempt` (0-based): base·2^attempt with ±25 % jitter, capped. */
export function retryDelay(attempt: number, baseMs: number, capMs: number, random: number): number {
  const raw = baseMs * 2 ** attempt;
  return Math.min(capMs, Math.round(raw * (0.75 + random * 0.5)));
}

type AttemptResult =
  | { ok: true; response: GitHubResponse<unknown> }
  | {
      ok: false;
      endpoint: string;
      status: number | undefined;
      headers: Record<string, string> | undefined;
      body: unknown;
      cause: unknown;
      /** A 304 arrived but the cached answer is gone: ask again unconditionally. */
      lostCache?: boolean;
    };

function normalizeHeaders(headers: ResponseHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers ?? {})) if (v !== undefined) out[k.toLowerCase()] = String(v);
  return out;
}

/** A fetch that aborts after `ms` on the injected clock. */
function withTimeout(base: typeof fetch, clock: Clock, ms: number): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const controller = new AbortController();
    const timer = clock.setTimer(ms, () =>
      controller.abort(new DOMException(`no answer within ${ms} ms`, 'TimeoutError')),
    );
    const signal = init?.signal ? AbortSignal.any([init.signal, controller.signal]) : controller.signal;
    try {
      // The body is read before the timer goes, so a stalled body also times out.
      return (await BufferedResponse.read(await base(input, { ...init, signal }))) as unknown as Response;
    } finally {
      timer.cancel();
    }
  }) as typeof fetch;
}

export class GitHubTransport {
  readonly credentialId: string;
  readonly credentials: GitHubCredentials;
  readonly endpoints: GitHubEndpoints;
  readonly budget: RateLimitBudget;
  readonly conditionalRequests: boolean;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly metrics: GitHubMetrics | undefined;
  private readonly octokit: Octokit;
  private readonly tokens: AccessTokenSource;
  private readonly cache: ConditionalCache;
  private readonly maxRetries: number;
  private readonly retryBaseDelayMs: number;
  private readonly maxRetryDelayMs: number;
  private readonly invalidCredentialsHoldMs: number;
  private readonly random: () => number;
  private invalidCredentials: { until: number; error: GitHubApiError } | undefined;

  constructor(options: GitHubTransportOptions) {
    this.credentials = options.credentials;
    this.credentialId = credentialId(options.credentials);
    this.endpoints = options.endpoints;
    this.clock = options.clock;
    this.log = options.logger;
    this.metrics = options.metrics;
    this.conditionalRequests = options.conditionalRequests ?? true;
    this.maxRetries = options.maxRetries ?? 3;
    this.retryBaseDelayMs = options.retryBaseDelayMs ?? 1000;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000;
    this.invalidCredentialsHoldMs = options.invalidCredentialsHoldMs ?? 60_000;
    this.random = options.random ?? Math.random;
    this.cache = new ConditionalCache(options.conditionalCacheEntries ?? 1000);
    const metrics = this.metrics;
    const credential = this.credentialId;
    this.budget = new RateLimitBudget({
      clock: this.clock,
      reserveFraction: options.reserveFraction,
      onObserve: (o) => {
        metrics?.rateLimit.set({ credential, resource: o.resource }, o.limit);
        metrics?.rateLimitRemaining.set({ credential, resource: o.resource }, o.remaining);
      },
    });
    const baseFetch = options.fetch ?? nodeFetch({ caBundle: options.caBundle });
    const log = this.log;
    this.octokit = new Octokit({
      baseUrl: this.endpoints.apiBaseUrl,
      userAgent: options.userAgent ?? 'paddock',
      request: { fetch: withTimeout(baseFetch, this.clock, options.requestTimeoutMs ?? 30_000) },
      log: {
        debug: (m: string) => log.debug(m),
        info: (m: string) => log.info(m),
        warn: (m: string) => log.warn(m),
        error: (m: string) => log.error(m),
      },
    });
    this.tokens = tokenSourceFor(this.credentials, {
      clock: this.clock,
      request: this.octokit.request.defaults({
        headers: { accept: 'application/vnd.github+json', 'x-github-api-version': API_VERSION },
        request: {
          hook: async (send: (o: object) => Promise<{ status: number }>, endpointOptions: object) => {
            const res = await send(endpointOptions);
            this.count(MINT_ROUTE, res.status, false); // failures are counted where they are classified
            return res;
          },
        },
      }),
      renewBeforeMs: options.installationTokenRenewBeforeMs,
    });
  }

  /** The installation-token source (Apps) or the static token, for inspection in tests. */
  get tokenSource(): AccessTokenSource {
    return this.tokens;
  }

  async request<T>(options: GitHubRequestOptions): Promise<GitHubResponse<T>> {
    const { route, kind } = options;
    const resource = resourceForRoute(route);
    const maxRetries = options.maxRetries ?? this.maxRetries;
    let retries = 0;
    let renewedToken = false;
    let limitWaits = 0;
    let unconditional = false;
    for (;;) {
      options.signal?.throwIfAborted();
      const held = this.invalidCredentials;
      if (held && this.clock.now() < held.until) {
        throw new GitHubApiError({
          kind: 'invalidCredentials',
          endpoint: route,
          status: held.error.status,
          githubMessage: held.error.githubMessage,
          sent: false,
        });
      }

      const decision = this.budget.tryAcquire(kind, resource);
      if (!decision.ok) {
        this.metrics?.budgetHeldBack.inc({ credential: this.credentialId, reason: decision.reason });
        if (options.waitForBudget) {
          this.log.info(
            { endpoint: route, reason: decision.reason, until: new Date(decision.waitUntil).toISOString() },
            'GitHub budget: waiting before calling',
          );
          await this.clock.sleep(Math.max(1, decision.waitUntil - this.clock.now()), options.signal);
          continue;
        }
        const cause: RateLimitCause =
          decision.reason === 'secondary'
            ? 'secondary'
            : decision.reason === 'reserve'
              ? 'reserve'
              : 'primary';
        throw new GitHubApiError({
          kind: 'rateLimited',
          endpoint: route,
          rateLimitResetAt: decision.waitUntil,
          rateLimitCause: cause,
          sent: false,
        });
      }

      let result: AttemptResult;
      try {
        result = await this.attempt(options, resource, unconditional);
      } finally {
        decision.ticket!.release();
      }
      if (result.ok) {
        this.budget.noteSuccess();
        return result.response as GitHubResponse<T>;
      }
      if (result.lostCache) {
        unconditional = true;
        continue;
      }
      if (options.signal?.aborted) throw options.signal.reason;

      const now = this.clock.now();
      const requestId = result.headers?.['x-github-request-id'];
      if (result.status === undefined) {
        const error = new GitHubApiError({
          kind: 'network',
          endpoint: result.endpoint,
          githubMessage: errorText(result.cause),
          requestId,
          cause: result.cause,
        });
        if (retries < maxRetries) {
          const delay = retryDelay(retries, this.retryBaseDelayMs, this.maxRetryDelayMs, this.random());
          this.log.warn(
            { endpoint: result.endpoint, err: error.message, retryInMs: delay },
            'GitHub: retrying',
          );
          retries++;
          await this.clock.sleep(delay, options.signal);
          continue;
        }
        throw error;
      }

      const c = classifyResponse(result.status, result.headers, result.body, now);
      // GitHub refusing to mint an installation token (bad key, unknown app or installation,
      // suspended installation) means the App credentials are unusable.
      if (result.endpoint === MINT_ROUTE && [401, 403, 404].includes(result.status)) {
        c.kind = 'invalidCredentials';
      }
      const base = {
        endpoint: result.endpoint,
        status: result.status,
        githubMessage: c.githubMessage,
        requestId,
        retryAfterMs: c.retryAfterMs,
        details: detailsOf(result.body),
      };
      switch (c.kind) {
        case 'invalidCredentials': {
          // An installation token may have been revoked or expired early: one fresh token, once.
          if (this.tokens.renewable && !renewedToken) {
            renewedToken = true;
            this.tokens.invalidate();
            continue;
          }
          const error = new GitHubApiError({ ...base, kind: 'invalidCredentials' });
          this.invalidCredentials = { until: now + this.invalidCredentialsHoldMs, error };
          this.log.error(
            { endpoint: result.endpoint, status: result.status, requestId },
            'GitHub: invalid credentials',
          );
          throw error;
        }
        case 'rateLimited': {
          let resetAt: number;
          if (c.rateLimitCause === 'primary') {
            resetAt = c.rateLimitResetAt ?? now + 60_000;
            this.budget.markExhausted(result.headers?.['x-ratelimit-resource'] || resource, resetAt);
          } else {
            resetAt = this.budget.pauseForSecondaryLimit(c.retryAfterMs);
          }
          this.log.warn(
            { endpoint: result.endpoint, cause: c.rateLimitCause, until: new Date(resetAt).toISOString() },
            'GitHub: rate limited',
          );
          if (options.waitForBudget && limitWaits < 3) {
            limitWaits++;
            continue; // the budget check at the top waits until resetAt
          }
          throw new GitHubApiError({
            ...base,
            kind: 'rateLimited',
            rateLimitCause: c.rateLimitCause,
            rateLimitResetAt: resetAt,
          });
        }
        case 'server': {
          if (retries < maxRetries) {
            const delay = Math.max(
              retryDelay(retries, this.retryBaseDelayMs, this.maxRetryDelayMs, this.random()),
              c.retryAfterMs ?? 0,
            );
            this.log.warn(
              { endpoint: result.endpoint, status: result.status, retryInMs: delay },
              'GitHub: retrying',
            );
            retries++;
            await this.clock.sleep(delay, options.signal);
            continue;
          }
          throw new GitHubApiError({ ...base, kind: 'server' });
        }
        default:
          throw new GitHubApiError({ ...base, kind: c.kind });
      }
    }
  }

  private async attempt(
    options: GitHubRequestOptions,
    resource: string,
    unconditional: boolean,
  ): Promise<AttemptResult> {
    let token: string;
    try {
      token = await this.tokens.token();
    } catch (err) {
      return this.failure(MINT_ROUTE, err);
    }
    const params = options.params ?? {};
    const method = options.route.split(' ', 1)[0];
    const conditional = this.conditionalRequests && options.conditional === true && method === 'GET';
    const cacheKey = conditional ? this.octokit.request.endpoint(options.route, params).url : undefined;
    const cached = cacheKey !== undefined && !unconditional ? this.cache.get(cacheKey) : undefined;
    const headers: Record<string, string> = {
      accept: 'application/vnd.github+json',
      'x-github-api-version': API_VERSION,
      authorization: `Bearer ${token}`,
    };
    if (cached) headers['if-none-match'] = cached.etag;
    try {
      const res = await this.octokit.request(options.route, {
        ...params,
        headers,
        ...(options.signal ? { request: { signal: options.signal } } : {}),
      });
      const resHeaders = normalizeHeaders(res.headers);
      this.budget.observe(resHeaders, resource);
      this.count(options.route, res.status, false);
      if (cacheKey !== undefined && resHeaders.etag) {
        const data = options.keep ? options.keep(res.data) : res.data;
        if (data !== undefined) {
          this.cache.set(cacheKey, { etag: resHeaders.etag, data, headers: keptHeaders(resHeaders) });
        }
      }
      return {
        ok: true,
        response: { status: res.status, data: res.data, headers: resHeaders, notModified: false },
      };
    } catch (err) {
      const status = statusOf(err);
      if (status === 304) {
        const resHeaders = normalizeHeaders(responseOf(err)?.headers);
        this.budget.observe(resHeaders, resource);
        this.count(options.route, 304, true);
        if (!cached || cacheKey === undefined) {
          return {
            ok: false,
            endpoint: options.route,
            status: 304,
            headers: resHeaders,
            body: undefined,
            cause: err,
            lostCache: true,
          };
        }
        // A 304 revalidates the stored answer; its headers (rate limit, cache-control) are newer.
        const merged = { ...cached.headers, ...resHeaders };
        this.cache.set(cacheKey, { ...cached, headers: keptHeaders(merged) });
        return { ok: true, response: { status: 200, data: cached.data, headers: merged, notModified: true } };
      }
      return this.failure(options.route, err, resource);
    }
  }

  private failure(endpoint: string, err: unknown, resource?: string): AttemptResult {
    const response = responseOf(err);
    if (!response) {
      this.count(endpoint, undefined, false);
      return { ok: false, endpoint, status: undefined, headers: undefined, body: undefined, cause: err };
    }
    const headers = normalizeHeaders(response.headers);
    if (resource !== undefined) this.budget.observe(headers, resource);
    this.count(endpoint, response.status, false);
    return { ok: false, endpoint, status: response.status, headers, body: response.data, cause: err };
  }

  private count(endpoint: string, status: number | undefined, notModified: boolean): void {
    this.metrics?.requests.inc({
      endpoint,
      status: status === undefined ? 'network_error' : String(status),
      not_modified: String(notModified),
    });
    this.log.debug({ endpoint, status, notModified }, 'GitHub request');
  }
}

interface ErrorResponse {
  status: number;
  headers: ResponseHeaders;
  data: unknown;
}

/** The HTTP answer inside an Octokit RequestError; undefined for network failures and timeouts. */
function responseOf(err: unknown): ErrorResponse | undefined {
  if (err && typeof err === 'object' && 'response' in err) {
    const r = (err as { response?: ErrorResponse }).response;
    if (r && typeof r.status === 'number') return r;
  }
  return undefined;
}

function statusOf(err: unknown): number | undefined {
  return responseOf(err)?.status;
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return `${err.message}${cause}`;
  }
  return String(err);
}

function detailsOf(body: unknown): unknown[] | undefined {
  if (body && typeof body === 'object' && 'errors' in body) {
    const e = (body as { errors: unknown }).errors;
    if (Array.isArray(e)) return e;
  }
  return undefined;
}
