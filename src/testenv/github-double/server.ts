import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { AuthRegistry, type Principal, principalId } from './auth.ts';
import {
  DoubleError,
  GitHubModel,
  type JobRecord,
  type RegisterRunnerInput,
  type RunnerRecord,
  type RunRecord,
  type ScopeRef,
  scopeKey,
} from './model.ts';
import { type RateLimitResource, RateLimits } from './rate-limits.ts';

/**
 * An HTTP server on 127.0.0.1 that answers like GitHub's REST API for the endpoints paddock uses,
 * written from GitHub's documentation. Tests drive it through the methods of `GitHubDouble`
 * (or the same operations over HTTP under `/_double/`, which is not a GitHub path).
 */

export interface GitHubDoubleOptions {
  /** `github.com` serves paths at the root; `ghes` serves them under `/api/v3` without rate limits. */
  flavor?: 'github.com' | 'ghes';
  /** Send `x-ratelimit-*` headers and enforce primary limits (default: on for github.com, off for GHES). */
  rateLimits?: boolean;
  /** Injected clock (epoch ms). */
  now?: () => number;
  /** `Cache-Control` max-age for authenticated GETs, as GitHub sends (60 s). */
  cacheMaxAgeSeconds?: number;
  /** Concurrent requests per credential above which the secondary limit answers 403. */
  maxConcurrentPerCredential?: number;
}

export interface FaultRule {
  /** Route template such as `DELETE /orgs/{org}/actions/runners/{runner_id}`; omitted = every route. */
  route?: string;
  /** Only requests whose path ends with this (e.g. `/actions/runners/42`): one runner, not all. */
  pathSuffix?: string;
  /** Answer with this status (a GitHub-style error body). */
  status?: number;
  /** Delay before the answer (or before the fault's status). */
  latencyMs?: number;
  /** Never answer; the connection is held until the client gives up or the double stops. */
  stall?: boolean;
  /** How many requests the fault applies to; default every matching request. */
  times?: number;
}

export interface SecondaryLimitRule {
  route?: string;
  /** Credential id (see `principalId`) or the raw token; omitted = every credential. */
  credential?: string;
  status?: 403 | 429;
  retryAfterSeconds?: number;
  times?: number;
}

export interface RequestLogEntry {
  at: number;
  method: string;
  path: string;
  /** Route template, or `unmatched`. */
  route: string;
  status: number;
  credential: string;
  resource: RateLimitResource | null;
  /** Whether the request consumed primary rate-limit budget. */
  countedAgainstRateLimit: boolean;
  notModified: boolean;
}

export interface RouteStats {
  total: number;
  countedAgainstRateLimit: number;
  notModified: number;
  byStatus: Record<string, number>;
}

const DOCS = 'https://docs.github.com/rest';
const API_VERSIONS = new Set(['2022-11-28', '2026-03-10']);

interface RouteContext {
  req: http.IncomingMessage;
  params: Record<string, string>;
  query: URLSearchParams;
  body: unknown;
  principal: Principal;
}

interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Paginated list answers carry their own Link header. */
  link?: string;
}

interface Route {
  method: string;
  template: string;
  regex: RegExp;
  names: string[];
  resource: RateLimitResource | null;
  handler: (ctx: RouteContext) => Reply | Promise<Reply>;
}

function compile(
  method: string,
  template: string,
  handler: Route['handler'],
  resource: RateLimitResource | null = 'core',
): Route {
  const names: string[] = [];
  const src = template.replace(/\{([a-z_]+)\}/g, (_m, n: string) => {
    names.push(n);
    return '([^/]+)';
  });
  return {
    method,
    template: `${method} ${template}`,
    regex: new RegExp(`^${src}/?$`),
    names,
    resource,
    handler,
  };
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function problem(status: number, message: string): Reply {
  return { status, body: { message, documentation_url: DOCS, status: String(status) } };
}

export class GitHubDouble {
  readonly model: GitHubModel;
  readonly auth: AuthRegistry;
  readonly rateLimits: RateLimits;
  readonly flavor: 'github.com' | 'ghes';
  readonly rateLimitsEnabled: boolean;
  readonly log: RequestLogEntry[] = [];
  cacheMaxAgeSeconds: number;
  maxConcurrentPerCredential: number;
  private readonly now: () => number;
  private readonly routes: Route[];
  private readonly faults: (FaultRule & { used: number })[] = [];
  /** Called before a page of a whole runner list (no `name` filter) is answered; see `duringRunnerListings`. */
  private readonly listingHooks = new Set<(scope: string, page: number) => void>();
  private lostRunnerTimer: NodeJS.Timeout | undefined;
  private readonly secondary: (SecondaryLimitRule & { used: number })[] = [];
  private readonly inflight = new Map<string, number>();
  private readonly sockets = new Set<Socket>();
  private server: http.Server | undefined;
  private port = 0;

  constructor(options: GitHubDoubleOptions = {}) {
    this.now = options.now ?? Date.now;
    this.flavor = options.flavor ?? 'github.com';
    this.rateLimitsEnabled = options.rateLimits ?? this.flavor === 'github.com';
    this.cacheMaxAgeSeconds = options.cacheMaxAgeSeconds ?? 60;
    this.maxConcurrentPerCredential = options.maxConcurrentPerCredential ?? 100;
    this.model = new GitHubModel(this.now);
    this.auth = new AuthRegistry(this.now);
    this.rateLimits = new RateLimits(this.now);
    this.routes = this.buildRoutes();
  }

  // ---------------------------------------------------------------- lifecycle

  async start(): Promise<this> {
    const server = http.createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) {
          res.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
          res.end(JSON.stringify({ message: `double internal error: ${String(err)}` }));
        }
      });
    });
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  /**
   * From now on, jobs of runners offline longer than `timeoutMs` fail as on GitHub ("lost
   * communication with the server"), checked every second until `stop()`.
   */
  failLostRunnersAfter(timeoutMs: number): void {
    if (this.lostRunnerTimer) clearInterval(this.lostRunnerTimer);
    this.lostRunnerTimer = setInterval(() => this.model.failJobsOfLostRunners(timeoutMs), 1000);
    this.lostRunnerTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.lostRunnerTimer) clearInterval(this.lostRunnerTimer);
    this.lostRunnerTimer = undefined;
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Root of the server (`http://127.0.0.1:PORT`). */
  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** What a client passes as its API base URL. */
  get apiUrl(): string {
    return this.flavor === 'ghes' ? `${this.origin}/api/v3` : this.origin;
  }

  // ---------------------------------------------------------------- simulation API (not GitHub's)

  addEnterprise(enterprise: string): string {
    return this.model.addScope({ kind: 'enterprise', enterprise });
  }
  addOrg(org: string): string {
    return this.model.addScope({ kind: 'organization', org });
  }
  addRepo(owner: string, repo: string): string {
    return this.model.addScope({ kind: 'repository', owner, repo });
  }
  addScope(scope: ScopeRef): string {
    return this.model.addScope(scope);
  }

  addToken(input: { token?: string; login?: string; scopes?: string[] } = {}) {
    return this.auth.addToken(input);
  }
  addApp(input: { appId: number; publicKeyPem?: string }) {
    return this.auth.addApp(input);
  }
  addInstallation(input: Parameters<AuthRegistry['addInstallation']>[0]) {
    return this.auth.addInstallation(input);
  }

  registerRunner(input: RegisterRunnerInput): RunnerRecord {
    return this.model.registerRunner(input);
  }
  setRunnerStatus(id: number, status: 'online' | 'offline'): RunnerRecord {
    return this.model.setRunnerState(id, { status });
  }
  setRunnerBusy(id: number, busy: boolean): RunnerRecord {
    return this.model.setRunnerState(id, { busy });
  }
  vanishRunner(id: number): void {
    this.model.vanishRunner(id);
  }
  runners(scope?: string): RunnerRecord[] {
    return scope ? this.model.runnersIn(scope) : [...this.model.runners.values()];
  }
  runnerByName(scope: string, name: string): RunnerRecord | undefined {
    return this.model.findRunnerByName(scope, name);
  }

  createJob(input: Parameters<GitHubModel['createJob']>[0]): JobRecord {
    return this.model.createJob(input);
  }
  startJob(jobId: number, runnerId?: number): JobRecord {
    return this.model.startJob(jobId, runnerId);
  }
  completeJob(jobId: number, conclusion?: Parameters<GitHubModel['completeJob']>[1]): JobRecord {
    return this.model.completeJob(jobId, conclusion);
  }

  /** Sets a credential's primary limit; `credential` is a raw token or a `principalId`. */
  setRateLimit(
    credential: string,
    opts: { resource?: RateLimitResource; limit?: number; remaining?: number; resetInMs?: number },
  ) {
    return this.rateLimits.set(this.credentialId(credential), opts);
  }
  rateLimit(credential: string, resource: RateLimitResource = 'core') {
    return this.rateLimits.view(this.credentialId(credential), resource);
  }

  /** Adds a fault; returns what removes it (and only it). */
  /**
   * Runs `hook` before each page of a scope's whole runner list is answered (a list filtered by
   * `name` excepted): runners that register or go between a client's page requests, as a fleet under
   * churn does, so that the pages disagree. Returns the function that removes it.
   */
  duringRunnerListings(hook: (scope: string, page: number) => void): () => void {
    this.listingHooks.add(hook);
    return () => this.listingHooks.delete(hook);
  }

  injectFault(rule: FaultRule): () => void {
    const entry = { ...rule, used: 0 };
    this.faults.push(entry);
    return () => {
      const i = this.faults.indexOf(entry);
      if (i >= 0) this.faults.splice(i, 1);
    };
  }
  /** Adds a secondary-limit rule; returns what removes it (and only it). */
  injectSecondaryLimit(rule: SecondaryLimitRule): () => void {
    const entry = {
      ...rule,
      credential: rule.credential && this.credentialId(rule.credential),
      used: 0,
    };
    this.secondary.push(entry);
    return () => {
      const i = this.secondary.indexOf(entry);
      if (i >= 0) this.secondary.splice(i, 1);
    };
  }
  clearFaults(): void {
    this.faults.length = 0;
    this.secondary.length = 0;
  }

  /** Per-route totals from the request log. */
  stats(filter: { credential?: string; since?: number } = {}): Record<string, RouteStats> {
    const cred = filter.credential && this.credentialId(filter.credential);
    const out: Record<string, RouteStats> = {};
    for (const e of this.log) {
      if (cred && e.credential !== cred) continue;
      if (filter.since !== undefined && e.at < filter.since) continue;
      const s = out[e.route] ?? { total: 0, countedAgainstRateLimit: 0, notModified: 0, byStatus: {} };
      out[e.route] = s;
      s.total++;
      if (e.countedAgainstRateLimit) s.countedAgainstRateLimit++;
      if (e.notModified) s.notModified++;
      s.byStatus[e.status] = (s.byStatus[e.status] ?? 0) + 1;
    }
    return out;
  }

  /** Number of logged requests for a route template (e.g. `GET /orgs/{org}/actions/runners`). */
  requestCount(route: string): number {
    return this.log.filter((e) => e.route === route).length;
  }

  /** Requests that consumed rate-limit budget, optionally for one credential. */
  rateLimitedRequestCount(credential?: string): number {
    const cred = credential && this.credentialId(credential);
    return this.log.filter((e) => e.countedAgainstRateLimit && (!cred || e.credential === cred)).length;
  }

  private credentialId(credential: string): string {
    const pat = this.auth.tokens.get(credential);
    if (pat) return pat.id;
    const inst = this.auth.installationTokens.get(credential);
    if (inst) return `installation:${inst.installationId}`;
    return credential;
  }

  // ---------------------------------------------------------------- HTTP

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.origin);
    const method = (req.method ?? 'GET').toUpperCase();
    const raw = await readBody(req);

    if (url.pathname.startsWith('/_double/')) {
      const reply = await this.handleSimulation(method, url, raw);
      return send(res, reply.status, reply.body, {});
    }

    let path = url.pathname;
    if (this.flavor === 'ghes') {
      if (!path.startsWith('/api/v3/') && path !== '/api/v3') {
        return this.finish(
          req,
          res,
          method,
          url,
          'unmatched',
          problem(404, 'Not Found'),
          null,
          'none',
          false,
        );
      }
      path = path.slice('/api/v3'.length) || '/';
    }

    const version = req.headers['x-github-api-version'];
    if (typeof version === 'string' && !API_VERSIONS.has(version)) {
      return this.finish(
        req,
        res,
        method,
        url,
        'unmatched',
        problem(400, `API version ${version} is not supported.`),
        null,
        'none',
        false,
      );
    }

    let route: Route | undefined;
    let params: Record<string, string> = {};
    for (const r of this.routes) {
      if (r.method !== method) continue;
      const m = r.regex.exec(path);
      if (!m) continue;
      route = r;
      params = Object.fromEntries(r.names.map((n, i) => [n, decodeURIComponent(m[i + 1] ?? '')]));
      break;
    }
    const routeName = route?.template ?? 'unmatched';

    let principal: Principal;
    try {
      principal = this.auth.authenticate(req.headers.authorization, req.socket.remoteAddress ?? '127.0.0.1');
    } catch (err) {
      const e = err as DoubleError;
      return this.finish(
        req,
        res,
        method,
        url,
        routeName,
        problem(e.status, e.message),
        null,
        'invalid',
        false,
      );
    }
    const cred = principalId(principal);
    const resource = route?.resource ?? null;
    // Requests in flight per credential feed the concurrency secondary limit.
    const inflight = (this.inflight.get(cred) ?? 0) + 1;
    this.inflight.set(cred, inflight);
    try {
      await this.serve(
        req,
        res,
        method,
        url,
        raw,
        route,
        routeName,
        params,
        principal,
        cred,
        resource,
        inflight,
      );
    } finally {
      this.inflight.set(cred, (this.inflight.get(cred) ?? 1) - 1);
    }
  }

  private async serve(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    method: string,
    url: URL,
    raw: Buffer,
    route: Route | undefined,
    routeName: string,
    params: Record<string, string>,
    principal: Principal,
    cred: string,
    resource: RateLimitResource | null,
    inflight: number,
  ): Promise<void> {
    // Fault injection comes first: it models the network and GitHub's own outages.
    const fault = this.takeRule(this.faults, routeName, cred, url.pathname);
    if (fault?.latencyMs) await sleep(fault.latencyMs);
    if (fault?.stall) {
      this.log.push(this.entry(method, url, routeName, 0, cred, resource, false, false));
      return; // never answered; stop() destroys the socket
    }
    if (fault?.status) {
      const message = fault.status >= 500 ? 'Server Error' : 'Injected fault';
      return this.finish(
        req,
        res,
        method,
        url,
        routeName,
        problem(fault.status, message),
        resource,
        cred,
        false,
      );
    }

    if (!route) {
      return this.finish(req, res, method, url, routeName, problem(404, 'Not Found'), resource, cred, true);
    }

    // Primary limit: exhausted budgets answer 403 with remaining 0 (GitHub may also use 429).
    const free = route.template === 'GET /rate_limit';
    if (this.rateLimitsEnabled && resource && !free && this.rateLimits.exhausted(cred, resource)) {
      const who =
        principal.kind === 'installation'
          ? `installation ID ${principal.installation.id}`
          : principal.kind === 'anonymous'
            ? principal.id.slice(3)
            : `user ID ${cred}`;
      const reply = problem(
        403,
        `API rate limit exceeded for ${who}. If you reach out to GitHub Support for help, please include the request ID ${requestId()}.`,
      );
      reply.body = {
        ...(reply.body as object),
        documentation_url: `${DOCS}/overview/rate-limits-for-the-rest-api`,
      };
      return this.finish(req, res, method, url, routeName, reply, resource, cred, false);
    }

    const secondary = this.takeRule(this.secondary, routeName, cred);
    if (secondary || inflight > this.maxConcurrentPerCredential) {
      const reply = problem(
        secondary?.status ?? 403,
        `You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID ${requestId()}.`,
      );
      reply.headers = { 'retry-after': String(secondary?.retryAfterSeconds ?? 60) };
      return this.finish(req, res, method, url, routeName, reply, resource, cred, false);
    }

    let body: unknown;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        return this.finish(
          req,
          res,
          method,
          url,
          routeName,
          problem(400, 'Problems parsing JSON'),
          resource,
          cred,
          true,
        );
      }
    }

    let reply: Reply;
    try {
      reply = await route.handler({ req, params, query: url.searchParams, body, principal });
    } catch (err) {
      if (err instanceof DoubleError) reply = problem(err.status, err.message);
      else throw err;
    }

    // Conditional GET: a matching If-None-Match answers 304 and costs no budget.
    if (method === 'GET' && reply.status === 200) {
      const etag = `W/"${createHash('sha256').update(cred).update(JSON.stringify(reply.body)).digest('hex')}"`;
      reply.headers = {
        ...reply.headers,
        etag,
        'cache-control': `private, max-age=${this.cacheMaxAgeSeconds}, s-maxage=${this.cacheMaxAgeSeconds}`,
        vary: 'Accept, Authorization, Cookie, X-GitHub-OTP',
      };
      if (etagMatches(req.headers['if-none-match'], etag)) {
        return this.finish(
          req,
          res,
          method,
          url,
          routeName,
          { status: 304, headers: reply.headers },
          resource,
          cred,
          false,
          true,
        );
      }
    }
    return this.finish(req, res, method, url, routeName, reply, resource, cred, !free);
  }

  private takeRule<
    T extends { route?: string; pathSuffix?: string; credential?: string; times?: number; used: number },
  >(rules: T[], route: string, cred: string, path = ''): T | undefined {
    for (const rule of rules) {
      if (rule.route && rule.route !== route) continue;
      if (rule.pathSuffix && !path.endsWith(rule.pathSuffix)) continue;
      if (rule.credential && rule.credential !== cred) continue;
      if (rule.times !== undefined && rule.used >= rule.times) continue;
      rule.used++;
      return rule;
    }
    return undefined;
  }

  private entry(
    method: string,
    url: URL,
    route: string,
    status: number,
    credential: string,
    resource: RateLimitResource | null,
    counted: boolean,
    notModified: boolean,
  ): RequestLogEntry {
    return {
      at: this.now(),
      method,
      path: url.pathname + url.search,
      route,
      status,
      credential,
      resource,
      countedAgainstRateLimit: counted,
      notModified,
    };
  }

  private finish(
    _req: http.IncomingMessage,
    res: http.ServerResponse,
    method: string,
    url: URL,
    route: string,
    reply: Reply,
    resource: RateLimitResource | null,
    cred: string,
    counts: boolean,
    notModified = false,
  ): void {
    const headers: Record<string, string> = {
      'x-github-media-type': 'github.v3; format=json',
      'x-github-api-version-selected': '2022-11-28',
      'x-github-request-id': requestId(),
      ...reply.headers,
    };
    const counted =
      counts && this.rateLimitsEnabled && resource !== null && cred !== 'none' && cred !== 'invalid';
    if (counted && resource) this.rateLimits.consume(cred, resource);
    if (this.rateLimitsEnabled && resource && cred !== 'none' && cred !== 'invalid') {
      const v = this.rateLimits.view(cred, resource);
      headers['x-ratelimit-limit'] = String(v.limit);
      headers['x-ratelimit-remaining'] = String(v.remaining);
      headers['x-ratelimit-used'] = String(v.used);
      headers['x-ratelimit-reset'] = String(v.reset);
      headers['x-ratelimit-resource'] = v.resource;
    }
    if (reply.link) headers.link = reply.link;
    this.log.push(this.entry(method, url, route, reply.status, cred, resource, counted, notModified));
    send(res, reply.status, reply.status === 204 || reply.status === 304 ? undefined : reply.body, headers);
  }

  // ---------------------------------------------------------------- GitHub routes

  private buildRoutes(): Route[] {
    const routes: Route[] = [];
    const scoped: [string, (p: Record<string, string>) => ScopeRef][] = [
      ['/enterprises/{enterprise}', (p) => ({ kind: 'enterprise', enterprise: p.enterprise! })],
      ['/orgs/{org}', (p) => ({ kind: 'organization', org: p.org! })],
      ['/repos/{owner}/{repo}', (p) => ({ kind: 'repository', owner: p.owner!, repo: p.repo! })],
    ];

    routes.push(
      compile(
        'GET',
        '/rate_limit',
        ({ principal }) => {
          const cred = principalId(principal);
          const core = this.rateLimits.view(cred, 'core');
          const reg = this.rateLimits.view(cred, 'actions_runner_registration');
          const shape = (v: typeof core) => ({
            limit: v.limit,
            remaining: v.remaining,
            used: v.used,
            reset: v.reset,
          });
          return {
            status: 200,
            body: {
              resources: { core: shape(core), actions_runner_registration: shape(reg) },
              rate: shape(core),
            },
          };
        },
        'core',
      ),
    );

    // GitHub App endpoints (JWT).
    const requireApp = (p: Principal) => {
      if (p.kind !== 'app') {
        throw new DoubleError(401, 'A JSON web token could not be decoded');
      }
      return p.app;
    };
    routes.push(
      compile('GET', '/app', ({ principal }) => {
        const app = requireApp(principal);
        return {
          status: 200,
          body: { id: app.appId, slug: app.slug, client_id: app.clientId, name: app.slug },
        };
      }),
      compile('GET', '/app/installations', ({ principal }) => {
        const app = requireApp(principal);
        const list = [...this.auth.installations.values()].filter((i) => i.appId === app.appId);
        return { status: 200, body: list.map((i) => this.installationJson(i.id)) };
      }),
      compile('POST', '/app/installations/{installation_id}/access_tokens', ({ principal, params }) => {
        const app = requireApp(principal);
        const inst = this.auth.installations.get(Number(params.installation_id));
        if (!inst || inst.appId !== app.appId) return problem(404, 'Not Found');
        const t = this.auth.mintInstallationToken(inst.id);
        return {
          status: 201,
          body: {
            token: t.token,
            expires_at: iso(t.expiresAt),
            permissions: inst.permissions,
            repository_selection: 'all',
          },
        };
      }),
      compile('GET', '/orgs/{org}/installation', ({ principal, params }) => {
        const app = requireApp(principal);
        const inst = [...this.auth.installations.values()].find(
          (i) => i.appId === app.appId && i.account.toLowerCase() === params.org!.toLowerCase(),
        );
        return inst ? { status: 200, body: this.installationJson(inst.id) } : problem(404, 'Not Found');
      }),
      compile('GET', '/repos/{owner}/{repo}/installation', ({ principal, params }) => {
        const app = requireApp(principal);
        const inst = [...this.auth.installations.values()].find(
          (i) => i.appId === app.appId && i.account.toLowerCase() === params.owner!.toLowerCase(),
        );
        return inst ? { status: 200, body: this.installationJson(inst.id) } : problem(404, 'Not Found');
      }),
    );

    for (const [prefix, toScope] of scoped) {
      const withScope = (params: Record<string, string>, principal: Principal) => {
        const key = scopeKey(toScope(params));
        const authz = this.auth.authorizeScope(principal, key);
        if (!authz.ok) throw new DoubleError(authz.status, authz.message);
        if (!this.model.hasScope(key)) throw new DoubleError(404, 'Not Found');
        return key;
      };

      routes.push(
        compile('GET', `${prefix}/actions/runners`, ({ params, principal, query, req }) => {
          const key = withScope(params, principal);
          const name = query.get('name');
          if (!name) {
            const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
            for (const hook of this.listingHooks) hook(key, page);
          }
          let runners = this.model.runnersIn(key);
          if (name) runners = runners.filter((r) => r.name === name);
          const page = paginate(runners, query, this.linkBase(req));
          return {
            status: 200,
            body: { total_count: runners.length, runners: page.items.map(runnerJson) },
            ...(page.link ? { link: page.link } : {}),
          };
        }),
        compile('GET', `${prefix}/actions/runners/{runner_id}`, ({ params, principal }) => {
          const key = withScope(params, principal);
          const r = this.model.runners.get(Number(params.runner_id));
          if (!r || r.scope !== key) return problem(404, 'Not Found');
          return { status: 200, body: runnerJson(r) };
        }),
        compile('DELETE', `${prefix}/actions/runners/{runner_id}`, ({ params, principal }) => {
          const key = withScope(params, principal);
          this.model.deleteRunner(key, Number(params.runner_id));
          return { status: 204 };
        }),
        compile(
          'POST',
          `${prefix}/actions/runners/registration-token`,
          ({ params, principal }) => {
            const key = withScope(params, principal);
            const t = this.model.issueToken(key, 'registration');
            return { status: 201, body: { token: t.token, expires_at: iso(t.expiresAt) } };
          },
          'actions_runner_registration',
        ),
        compile(
          'POST',
          `${prefix}/actions/runners/remove-token`,
          ({ params, principal }) => {
            const key = withScope(params, principal);
            const t = this.model.issueToken(key, 'remove');
            return { status: 201, body: { token: t.token, expires_at: iso(t.expiresAt) } };
          },
          'actions_runner_registration',
        ),
      );

      if (prefix !== '/enterprises/{enterprise}') {
        routes.push(
          compile(
            'POST',
            `${prefix}/actions/runners/generate-jitconfig`,
            ({ params, principal, body }) => {
              const key = withScope(params, principal);
              const b = (body ?? {}) as {
                name?: unknown;
                runner_group_id?: unknown;
                labels?: unknown;
                work_folder?: unknown;
              };
              const errors: string[] = [];
              if (typeof b.name !== 'string' || b.name === '') errors.push('name');
              if (typeof b.runner_group_id !== 'number' || !Number.isInteger(b.runner_group_id))
                errors.push('runner_group_id');
              if (
                !Array.isArray(b.labels) ||
                b.labels.length < 1 ||
                b.labels.length > 100 ||
                !b.labels.every((l) => typeof l === 'string' && l !== '')
              ) {
                errors.push('labels');
              }
              if (errors.length > 0) {
                return {
                  status: 422,
                  body: {
                    message: 'Invalid request.',
                    errors: errors.map((field) => ({ resource: 'Runner', field, code: 'invalid' })),
                    documentation_url: DOCS,
                    status: '422',
                  },
                };
              }
              const { runner, encoded } = this.model.generateJitConfig(key, {
                name: b.name as string,
                runnerGroupId: b.runner_group_id as number,
                labels: b.labels as string[],
                ...(typeof b.work_folder === 'string' ? { workFolder: b.work_folder } : {}),
              });
              return { status: 201, body: { runner: runnerJson(runner), encoded_jit_config: encoded } };
            },
            'actions_runner_registration',
          ),
        );
      }
    }

    routes.push(
      compile('GET', '/orgs/{org}/actions/runner-groups', ({ params, principal, query, req }) => {
        const key = scopeKey({ kind: 'organization', org: params.org! });
        const authz = this.auth.authorizeScope(principal, key);
        if (!authz.ok) return problem(authz.status, authz.message);
        if (!this.model.hasScope(key)) return problem(404, 'Not Found');
        // `visible_to_repository` takes a repository name within the organization.
        const visibleTo = query.get('visible_to_repository');
        const all = [...this.model.runnerGroups.values()].filter(
          (g) => !visibleTo || !g.repositories || g.repositories.includes(`${params.org}/${visibleTo}`),
        );
        const page = paginate(all, query, this.linkBase(req));
        return {
          status: 200,
          body: {
            total_count: all.length,
            runner_groups: page.items.map((g) => ({
              id: g.id,
              name: g.name,
              visibility: g.repositories ? 'selected' : 'all',
              default: g.id === 1,
              inherited: false,
              allows_public_repositories: false,
            })),
          },
          ...(page.link ? { link: page.link } : {}),
        };
      }),
    );

    // Workflow runs and jobs (pull-based autoscaling).
    const repoRead = (params: Record<string, string>, principal: Principal) => {
      const authz = this.auth.authorizeRepoRead(principal, params.owner!);
      if (!authz.ok) throw new DoubleError(authz.status, authz.message);
      if (!this.model.hasScope(scopeKey({ kind: 'repository', owner: params.owner!, repo: params.repo! }))) {
        throw new DoubleError(404, 'Not Found');
      }
    };
    routes.push(
      compile('GET', '/repos/{owner}/{repo}/actions/runs', ({ params, principal, query, req }) => {
        repoRead(params, principal);
        let runs = this.model.runsOf(params.owner!, params.repo!);
        const status = query.get('status');
        if (status) {
          runs = runs.filter((r) => {
            const s = this.model.runStatus(r.id);
            return s.status === status || s.conclusion === status;
          });
        }
        const page = paginate(runs, query, this.linkBase(req));
        return {
          status: 200,
          body: { total_count: runs.length, workflow_runs: page.items.map((r) => this.runJson(r)) },
          ...(page.link ? { link: page.link } : {}),
        };
      }),
      compile('GET', '/repos/{owner}/{repo}/actions/runs/{run_id}', ({ params, principal }) => {
        repoRead(params, principal);
        const run = this.model.runs.get(Number(params.run_id));
        if (!run || run.owner !== params.owner || run.repo !== params.repo) return problem(404, 'Not Found');
        return { status: 200, body: this.runJson(run) };
      }),
      compile(
        'GET',
        '/repos/{owner}/{repo}/actions/runs/{run_id}/jobs',
        ({ params, principal, query, req }) => {
          repoRead(params, principal);
          const run = this.model.runs.get(Number(params.run_id));
          if (!run || run.owner !== params.owner || run.repo !== params.repo)
            return problem(404, 'Not Found');
          const jobs = this.model.jobsOfRun(run.id);
          const page = paginate(jobs, query, this.linkBase(req));
          return {
            status: 200,
            body: { total_count: jobs.length, jobs: page.items.map((j) => this.jobJson(j)) },
            ...(page.link ? { link: page.link } : {}),
          };
        },
      ),
      compile('GET', '/repos/{owner}/{repo}/actions/jobs/{job_id}', ({ params, principal }) => {
        repoRead(params, principal);
        const job = this.model.jobs.get(Number(params.job_id));
        if (!job || job.owner !== params.owner || job.repo !== params.repo) return problem(404, 'Not Found');
        return { status: 200, body: this.jobJson(job) };
      }),
    );
    return routes;
  }

  private linkBase(req: http.IncomingMessage): URL {
    return new URL(req.url ?? '/', this.origin);
  }

  private installationJson(id: number) {
    const i = this.auth.installations.get(id)!;
    return {
      id: i.id,
      app_id: i.appId,
      account: { login: i.account, type: i.accountType },
      target_type: i.accountType,
      permissions: i.permissions,
      repository_selection: 'all',
    };
  }

  runJson(r: RunRecord) {
    const s = this.model.runStatus(r.id);
    const base = `${this.apiUrl}/repos/${r.owner}/${r.repo}`;
    return {
      id: r.id,
      name: r.name,
      node_id: `WFR_${r.id}`,
      head_branch: r.head_branch,
      head_sha: r.head_sha,
      run_number: r.id,
      run_attempt: r.run_attempt,
      event: 'push',
      status: s.status,
      conclusion: s.conclusion,
      workflow_id: 1,
      url: `${base}/actions/runs/${r.id}`,
      html_url: `https://github.com/${r.owner}/${r.repo}/actions/runs/${r.id}`,
      jobs_url: `${base}/actions/runs/${r.id}/jobs`,
      created_at: iso(r.created_at),
      updated_at: iso(r.updated_at),
      repository: { name: r.repo, full_name: `${r.owner}/${r.repo}`, owner: { login: r.owner } },
    };
  }

  jobJson(j: JobRecord) {
    const run = this.model.runs.get(j.run_id);
    const base = `${this.apiUrl}/repos/${j.owner}/${j.repo}`;
    return {
      id: j.id,
      run_id: j.run_id,
      run_url: `${base}/actions/runs/${j.run_id}`,
      run_attempt: run?.run_attempt ?? 1,
      node_id: `CR_${j.id}`,
      head_sha: run?.head_sha ?? '',
      head_branch: run?.head_branch ?? 'main',
      url: `${base}/actions/jobs/${j.id}`,
      html_url: `https://github.com/${j.owner}/${j.repo}/actions/runs/${j.run_id}/job/${j.id}`,
      status: j.status,
      conclusion: j.conclusion,
      created_at: iso(j.created_at),
      started_at: iso(j.started_at ?? j.created_at),
      completed_at: iso(j.completed_at),
      name: j.name,
      workflow_name: run?.name ?? 'CI',
      steps: [],
      check_run_url: `${base}/check-runs/${j.id}`,
      labels: j.labels,
      runner_id: j.runner_id,
      runner_name: j.runner_name,
      runner_group_id: j.runner_group_id,
      runner_group_name: j.runner_group_name,
    };
  }

  // ---------------------------------------------------------------- /_double/ over HTTP

  private async handleSimulation(method: string, url: URL, raw: Buffer): Promise<Reply> {
    let body: Record<string, unknown> = {};
    try {
      if (raw.length > 0) body = JSON.parse(raw.toString('utf8'));
    } catch {
      return { status: 400, body: { message: 'body is not JSON' } };
    }
    const path = url.pathname.slice('/_double'.length);
    try {
      const runnerPath = /^\/runners\/(\d+)$/.exec(path);
      const jobPath = /^\/jobs\/(\d+)\/(start|complete)$/.exec(path);
      if (method === 'POST' && path === '/runners/register') {
        return { status: 201, body: runnerJson(this.registerRunner(body as RegisterRunnerInput)) };
      }
      if (method === 'GET' && path === '/runners') {
        return { status: 200, body: this.runners().map((r) => ({ ...runnerJson(r), scope: r.scope })) };
      }
      if (runnerPath) {
        const id = Number(runnerPath[1]);
        if (method === 'PATCH') {
          const state: { status?: 'online' | 'offline'; busy?: boolean } = {};
          if (body.status === 'online' || body.status === 'offline') state.status = body.status;
          if (typeof body.busy === 'boolean') state.busy = body.busy;
          return { status: 200, body: runnerJson(this.model.setRunnerState(id, state)) };
        }
        if (method === 'DELETE') {
          this.vanishRunner(id);
          return { status: 204 };
        }
      }
      if (method === 'POST' && path === '/jobs') {
        const job = this.createJob(body as unknown as Parameters<GitHubModel['createJob']>[0]);
        return { status: 201, body: this.jobJson(job) };
      }
      if (method === 'POST' && jobPath) {
        const id = Number(jobPath[1]);
        const job =
          jobPath[2] === 'start'
            ? this.startJob(id, typeof body.runnerId === 'number' ? body.runnerId : undefined)
            : this.completeJob(id, (body.conclusion as 'success' | undefined) ?? 'success');
        return { status: 200, body: this.jobJson(job) };
      }
      if (path === '/faults') {
        if (method === 'POST') {
          this.injectFault(body as FaultRule);
          return { status: 201, body: {} };
        }
        if (method === 'DELETE') {
          this.clearFaults();
          return { status: 204 };
        }
      }
      if (method === 'POST' && path === '/rate-limits') {
        const { credential, ...opts } = body as { credential: string } & Parameters<
          GitHubDouble['setRateLimit']
        >[1];
        return { status: 200, body: this.setRateLimit(credential, opts) };
      }
      if (method === 'GET' && path === '/requests') {
        return {
          status: 200,
          body: { total: this.log.length, rateLimited: this.rateLimitedRequestCount(), routes: this.stats() },
        };
      }
    } catch (err) {
      if (err instanceof DoubleError) return { status: err.status, body: { message: err.message } };
      throw err;
    }
    return { status: 404, body: { message: `no simulation endpoint ${method} ${path}` } };
  }
}

export function runnerJson(r: RunnerRecord) {
  return {
    id: r.id,
    name: r.name,
    os: r.os,
    status: r.status,
    busy: r.busy,
    ephemeral: r.ephemeral,
    runner_group_id: r.runner_group_id,
    labels: r.labels.map((l) => ({ id: l.id, name: l.name, type: l.type })),
  };
}

/** `per_page` (default 30, at most 100) and `page`, with GitHub's `Link` header. */
function paginate<T>(all: T[], query: URLSearchParams, base: URL): { items: T[]; link?: string } {
  const perPage = Math.min(100, Math.max(1, Number.parseInt(query.get('per_page') ?? '30', 10) || 30));
  const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  const last = Math.max(1, Math.ceil(all.length / perPage));
  const items = all.slice((page - 1) * perPage, page * perPage);
  const urlFor = (p: number) => {
    const u = new URL(base.toString());
    u.searchParams.set('per_page', String(perPage));
    u.searchParams.set('page', String(p));
    return u.toString();
  };
  const rels: string[] = [];
  if (page > 1) rels.push(`<${urlFor(Math.min(page - 1, last))}>; rel="prev"`);
  if (page < last) rels.push(`<${urlFor(page + 1)}>; rel="next"`, `<${urlFor(last)}>; rel="last"`);
  if (page > 1) rels.push(`<${urlFor(1)}>; rel="first"`);
  return rels.length > 0 ? { items, link: rels.join(', ') } : { items };
}

function etagMatches(header: string | string[] | undefined, etag: string): boolean {
  if (!header) return false;
  const strip = (t: string) => t.trim().replace(/^W\//, '');
  const values = (Array.isArray(header) ? header.join(',') : header).split(',');
  return values.some((v) => v.trim() === '*' || strip(v) === strip(etag));
}

function requestId(): string {
  return `${randomBytes(2).toString('hex').toUpperCase()}:${randomBytes(3).toString('hex').toUpperCase()}:${randomBytes(4).toString('hex').toUpperCase()}`;
}

function send(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string>,
): void {
  if (body === undefined) {
    res.writeHead(status, headers);
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
