import { createPublicKey, createVerify, generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { DoubleError, parseScopeKey } from './model.ts';

/**
 * Credentials the double accepts: classic personal access tokens with OAuth scopes, and GitHub Apps
 * whose RS256 JWTs are exchanged for one-hour installation access tokens.
 */

export interface RateLimitSettings {
  limit: number;
}

export interface TokenCredential {
  kind: 'token';
  id: string;
  token: string;
  login: string;
  /** Classic PAT scopes, e.g. `repo`, `admin:org`, `manage_runners:enterprise`. */
  scopes: string[];
}

export interface AppCredential {
  appId: number;
  clientId: string;
  slug: string;
  publicKey: KeyObject;
}

export interface Installation {
  id: number;
  appId: number;
  /** Organization or user login the app is installed on. */
  account: string;
  accountType: 'Organization' | 'User';
  permissions: Record<string, 'read' | 'write'>;
}

export interface InstallationToken {
  kind: 'installation';
  id: string;
  token: string;
  installationId: number;
  expiresAt: number;
}

/** The identity behind one request, as the rate limiter and the authoriser see it. */
export type Principal =
  | { kind: 'token'; credential: TokenCredential }
  | { kind: 'installation'; credential: InstallationToken; installation: Installation }
  | { kind: 'app'; app: AppCredential }
  | { kind: 'anonymous'; id: string };

export function principalId(p: Principal): string {
  switch (p.kind) {
    case 'token':
      return p.credential.id;
    case 'installation':
      return `installation:${p.installation.id}`;
    case 'app':
      return `app:${p.app.appId}`;
    case 'anonymous':
      return p.id;
  }
}

export class AuthRegistry {
  private readonly now: () => number;
  readonly tokens = new Map<string, TokenCredential>();
  readonly apps = new Map<number, AppCredential>();
  readonly installations = new Map<number, Installation>();
  readonly installationTokens = new Map<string, InstallationToken>();
  installationTokenTtlMs = 3600_000;

  constructor(now: () => number) {
    this.now = now;
  }

  addToken(input: { token?: string; login?: string; scopes?: string[] }): TokenCredential {
    const token = input.token ?? `ghp_${randomBytes(18).toString('hex')}`;
    const cred: TokenCredential = {
      kind: 'token',
      id: `token:${input.login ?? token.slice(0, 8)}`,
      token,
      login: input.login ?? 'paddock-bot',
      scopes: input.scopes ?? ['repo', 'admin:org', 'manage_runners:enterprise'],
    };
    this.tokens.set(token, cred);
    return cred;
  }

  /** Registers an app; generates its key pair unless a public key is given. Returns the private key PEM. */
  addApp(input: { appId: number; publicKeyPem?: string; slug?: string }): {
    app: AppCredential;
    privateKeyPem?: string;
  } {
    let privateKeyPem: string | undefined;
    let publicKey: KeyObject;
    if (input.publicKeyPem) {
      publicKey = createPublicKey(input.publicKeyPem);
    } else {
      const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
      publicKey = pair.publicKey;
      privateKeyPem = pair.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    }
    const app: AppCredential = {
      appId: input.appId,
      clientId: `Iv1.${randomBytes(8).toString('hex')}`,
      slug: input.slug ?? `paddock-test-app-${input.appId}`,
      publicKey,
    };
    this.apps.set(app.appId, app);
    return privateKeyPem === undefined ? { app } : { app, privateKeyPem };
  }

  addInstallation(input: {
    id: number;
    appId: number;
    account: string;
    accountType?: 'Organization' | 'User';
    permissions?: Record<string, 'read' | 'write'>;
  }): Installation {
    if (!this.apps.has(input.appId)) throw new Error(`app ${input.appId} is not registered`);
    const inst: Installation = {
      id: input.id,
      appId: input.appId,
      account: input.account,
      accountType: input.accountType ?? 'Organization',
      permissions: input.permissions ?? {
        organization_self_hosted_runners: 'write',
        administration: 'write',
        actions: 'read',
      },
    };
    this.installations.set(inst.id, inst);
    return inst;
  }

  mintInstallationToken(installationId: number): InstallationToken {
    const t: InstallationToken = {
      kind: 'installation',
      id: `installation:${installationId}`,
      token: `ghs_${randomBytes(18).toString('hex')}`,
      installationId,
      expiresAt: this.now() + this.installationTokenTtlMs,
    };
    this.installationTokens.set(t.token, t);
    return t;
  }

  /**
   * Resolves an Authorization header. Throws DoubleError(401) with GitHub's messages for anything
   * that is not a valid credential. `undefined` header means an anonymous request.
   */
  authenticate(header: string | undefined, remoteAddress: string): Principal {
    if (!header) return { kind: 'anonymous', id: `ip:${remoteAddress}` };
    const m = /^(token|bearer)\s+(\S+)$/i.exec(header.trim());
    if (!m?.[2]) throw new DoubleError(401, 'Bad credentials');
    const value = m[2];
    const pat = this.tokens.get(value);
    if (pat) return { kind: 'token', credential: pat };
    const inst = this.installationTokens.get(value);
    if (inst) {
      const installation = this.installations.get(inst.installationId);
      if (inst.expiresAt <= this.now() || !installation) throw new DoubleError(401, 'Bad credentials');
      return { kind: 'installation', credential: inst, installation };
    }
    if (value.split('.').length === 3) return { kind: 'app', app: this.verifyJwt(value) };
    throw new DoubleError(401, 'Bad credentials');
  }

  /** Verifies an app JWT the way GitHub documents: RS256, `iss` = app ID or client ID, ≤ 10 min life. */
  verifyJwt(jwt: string): AppCredential {
    const [h, p, s] = jwt.split('.') as [string, string, string];
    let header: { alg?: string };
    let payload: { iss?: string | number; iat?: number; exp?: number };
    try {
      header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8'));
      payload = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
    } catch {
      throw new DoubleError(401, 'A JSON web token could not be decoded');
    }
    if (header.alg !== 'RS256') throw new DoubleError(401, 'A JSON web token could not be decoded');
    const app = [...this.apps.values()].find(
      (a) => String(a.appId) === String(payload.iss) || a.clientId === payload.iss,
    );
    if (!app) throw new DoubleError(401, "'Issuer' claim ('iss') must be an Integer");
    const verifier = createVerify('RSA-SHA256');
    verifier.update(`${h}.${p}`);
    if (!verifier.verify(app.publicKey, Buffer.from(s, 'base64url'))) {
      throw new DoubleError(401, 'A JSON web token could not be decoded');
    }
    const nowSec = Math.floor(this.now() / 1000);
    if (typeof payload.iat !== 'number' || payload.iat > nowSec + 60) {
      throw new DoubleError(
        401,
        "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
      );
    }
    if (typeof payload.exp !== 'number' || payload.exp <= nowSec) {
      throw new DoubleError(
        401,
        "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
      );
    }
    if (payload.exp - payload.iat > 600) {
      throw new DoubleError(401, "'Expiration time' claim ('exp') is too far in the future");
    }
    return app;
  }

  /**
   * Whether a principal may use a runner endpoint of the given scope. Mirrors GitHub's rules: classic
   * PATs need `repo` / `admin:org` / `manage_runners:enterprise`; installation tokens work only on
   * their own account and never on enterprise endpoints.
   */
  authorizeScope(
    p: Principal,
    scopeKey: string,
  ): { ok: true } | { ok: false; status: number; message: string } {
    const scope = parseScopeKey(scopeKey);
    if (p.kind === 'anonymous') return { ok: false, status: 401, message: 'Requires authentication' };
    if (p.kind === 'app') {
      return { ok: false, status: 403, message: 'A JSON web token cannot be used to access this resource' };
    }
    if (p.kind === 'installation') {
      if (scope.kind === 'enterprise') {
        return { ok: false, status: 403, message: 'Resource not accessible by integration' };
      }
      const account = scope.kind === 'organization' ? scope.org : scope.owner;
      if (account.toLowerCase() !== p.installation.account.toLowerCase()) {
        return { ok: false, status: 404, message: 'Not Found' };
      }
      const perm =
        scope.kind === 'organization'
          ? p.installation.permissions.organization_self_hosted_runners
          : p.installation.permissions.administration;
      if (perm !== 'write')
        return { ok: false, status: 403, message: 'Resource not accessible by integration' };
      return { ok: true };
    }
    const needed =
      scope.kind === 'enterprise'
        ? 'manage_runners:enterprise'
        : scope.kind === 'organization'
          ? 'admin:org'
          : 'repo';
    if (!p.credential.scopes.includes(needed)) {
      return { ok: false, status: 403, message: 'Resource not accessible by personal access token' };
    }
    return { ok: true };
  }

  /** Read access for workflow runs and jobs. */
  authorizeRepoRead(
    p: Principal,
    owner: string,
  ): { ok: true } | { ok: false; status: number; message: string } {
    if (p.kind === 'anonymous' || p.kind === 'token') return { ok: true };
    if (p.kind === 'app') {
      return { ok: false, status: 403, message: 'A JSON web token cannot be used to access this resource' };
    }
    if (owner.toLowerCase() !== p.installation.account.toLowerCase()) {
      return { ok: false, status: 404, message: 'Not Found' };
    }
    return { ok: true };
  }
}
