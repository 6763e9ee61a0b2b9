import { createPrivateKey, type KeyObject, sign } from 'node:crypto';
import type { createAppAuth } from '@octokit/auth-app';
import type { Octokit } from '@octokit/core';
import type { Clock } from '../runtime/clock.ts';
import type { GitHubCredentials } from './credentials.ts';

type RequestFn = Octokit['request'];

/** Supplies the bearer token for each request. */
export interface AccessTokenSource {
  token(): Promise<string>;
  /** Forget a cached token (after a 401), so the next call gets a fresh one. */
  invalidate(): void;
  /** Whether `invalidate` can help, i.e. a new token may be minted. */
  readonly renewable: boolean;
}

export class StaticTokenSource implements AccessTokenSource {
  readonly renewable = false;
  private readonly value: string;
  constructor(token: string) {
    this.value = token;
  }
  async token(): Promise<string> {
    return this.value;
  }
  invalidate(): void {}
}

export interface InstallationTokenSourceOptions {
  appId: number;
  installationId: number;
  privateKey: string;
  clock: Clock;
  /** Octokit `request` bound to the API base (GHES included) and our fetch. */
  request: RequestFn;
  /** Renew this long before the token expires (default 10 min of GitHub's 60). */
  renewBeforeMs?: number;
}

/**
 * GitHub App installation tokens: minted with @octokit/auth-app (JWT signed here, on the injected
 * clock, so token ages and JWT times agree with the rest of the process), cached, and renewed
 * before they expire. Concurrent callers share one mint.
 */
export class InstallationTokenSource implements AccessTokenSource {
  readonly renewable = true;
  private readonly clock: Clock;
  private readonly renewBeforeMs: number;
  /** Loaded on the first token: @octokit/auth-app costs ~9 MiB, and token-only installs never need it. */
  private auth: Promise<ReturnType<typeof createAppAuth>> | undefined;
  private readonly makeAuth: () => Promise<ReturnType<typeof createAppAuth>>;
  private cached: { token: string; expiresAt: number } | undefined;
  private pending: Promise<string> | undefined;
  /** How many tokens were minted (observability and tests). */
  minted = 0;

  constructor(options: InstallationTokenSourceOptions) {
    this.clock = options.clock;
    this.renewBeforeMs = options.renewBeforeMs ?? 10 * 60_000;
    const key = createPrivateKey(options.privateKey);
    const clock = options.clock;
    this.makeAuth = async () =>
      (await import('@octokit/auth-app')).createAppAuth({
        appId: options.appId,
        installationId: options.installationId,
        createJwt: async (appId) => signAppJwt(appId, key, clock.now()),
        request: options.request,
        log: { warn: () => {} },
      });
  }

  /** Expiry of the cached token (epoch ms), if any. */
  get expiresAt(): number | undefined {
    return this.cached?.expiresAt;
  }

  async token(): Promise<string> {
    const c = this.cached;
    if (c && c.expiresAt - this.clock.now() > this.renewBeforeMs) return c.token;
    this.pending ??= this.mint().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  invalidate(): void {
    this.cached = undefined;
  }

  private async mint(): Promise<string> {
    this.auth ??= this.makeAuth();
    const result = await (await this.auth)({ type: 'installation', refresh: true });
    this.minted++;
    const expiresAt = Date.parse(result.expiresAt);
    // Without a readable expiry assume GitHub's one hour.
    this.cached = {
      token: result.token,
      expiresAt: Number.isNaN(expiresAt) ? this.clock.now() + 3600_000 : expiresAt,
    };
    return result.token;
  }
}

/** An App JWT (RS256): issued a minute in the past against clock drift, valid nine minutes ahead. */
export function signAppJwt(
  appId: string | number,
  key: KeyObject,
  nowMs: number,
): { jwt: string; expiresAt: string } {
  const now = Math.floor(nowMs / 1000);
  const exp = now + 540;
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const unsigned = `${enc({ alg: 'RS256', typ: 'JWT' })}.${enc({ iat: now - 60, exp, iss: String(appId) })}`;
  const signature = sign('sha256', Buffer.from(unsigned), key).toString('base64url');
  return { jwt: `${unsigned}.${signature}`, expiresAt: new Date(exp * 1000).toISOString() };
}

export function tokenSourceFor(
  credentials: GitHubCredentials,
  deps: { clock: Clock; request: RequestFn; renewBeforeMs?: number | undefined },
): AccessTokenSource {
  if (credentials.kind === 'token') return new StaticTokenSource(credentials.token);
  return new InstallationTokenSource({
    appId: credentials.appId,
    installationId: credentials.installationId,
    privateKey: credentials.privateKey,
    clock: deps.clock,
    request: deps.request,
    ...(deps.renewBeforeMs === undefined ? {} : { renewBeforeMs: deps.renewBeforeMs }),
  });
}
