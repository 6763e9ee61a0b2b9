import { createHash, createPrivateKey } from 'node:crypto';
import { GitHubConfigError } from './errors.ts';
import type { GitHubEndpointOptions, GitHubScope } from './scope.ts';

/** How paddock authenticates to GitHub: a personal access token, or a GitHub App installation. */
export type GitHubCredentials =
  | { readonly kind: 'token'; readonly token: string }
  | {
      readonly kind: 'app';
      readonly appId: number;
      readonly installationId: number;
      /** PEM (PKCS#1 or PKCS#8). */
      readonly privateKey: string;
    };

/** The Secret keys ARC reads for per-resource credentials (`githubAPICredentialsFrom`). */
export const CREDENTIAL_SECRET_KEYS = {
  token: 'github_token',
  appId: 'github_app_id',
  installationId: 'github_app_installation_id',
  privateKey: 'github_app_private_key',
  /** GHES web address (ARC's `github_enterprise_url`). */
  enterpriseUrl: 'github_enterprise_url',
  /** Exact API base (ARC's `github_url`). */
  apiUrl: 'github_url',
} as const;

/**
 * A non-secret name for a credential, used as the `credential` metric label, in logs and as the key
 * of shared state: `app:<id>/installation:<id>` or `token:<first 12 hex of its SHA-256>`.
 */
export function credentialId(credentials: GitHubCredentials): string {
  if (credentials.kind === 'app')
    return `app:${credentials.appId}/installation:${credentials.installationId}`;
  return `token:${createHash('sha256').update(credentials.token).digest('hex').slice(0, 12)}`;
}

/** GitHub's enterprise runner endpoints accept classic tokens only; an App gets a clear error early. */
export function assertCredentialsSupportScope(credentials: GitHubCredentials, scope: GitHubScope): void {
  if (scope.kind === 'enterprise' && credentials.kind === 'app') {
    throw new GitHubConfigError(
      `enterprise "${scope.enterprise}": GitHub Apps cannot manage enterprise runners; use a personal access token (classic) with the manage_runners:enterprise scope`,
    );
  }
}

export type SecretValue = string | Buffer | Uint8Array;

export interface CredentialFieldNames {
  token: string;
  appId: string;
  installationId: string;
  privateKey: string;
}

export interface CredentialFields {
  token?: string | undefined;
  appId?: string | undefined;
  installationId?: string | undefined;
  privateKey?: string | undefined;
}

/**
 * Validates credential fields (already decoded). Values are trimmed; a token wins over App fields
 * when both are present, as in ARC. `source` and `names` make the errors point at what to fix.
 */
export function parseCredentialFields(
  fields: CredentialFields,
  source: { description: string; secretName?: string },
  names: CredentialFieldNames = CREDENTIAL_SECRET_KEYS,
): GitHubCredentials {
  const fail = (key: string, problem: string): never => {
    throw new GitHubConfigError(
      `${source.description}: key "${key}" ${problem}`,
      source.secretName === undefined ? { key } : { secretName: source.secretName, key },
    );
  };
  const token = clean(fields.token);
  const appId = clean(fields.appId);
  const installationId = clean(fields.installationId);
  const privateKey = clean(fields.privateKey);

  if (token !== undefined) {
    // A token with a line break inside makes an invalid Authorization header (ARC's troubleshooting).
    if (/\s/.test(token)) fail(names.token, 'contains whitespace inside the token');
    return { kind: 'token', token };
  }
  if (appId === undefined && installationId === undefined && privateKey === undefined) {
    throw new GitHubConfigError(
      `${source.description}: no GitHub credentials: set key "${names.token}", or "${names.appId}", "${names.installationId}" and "${names.privateKey}"`,
      source.secretName === undefined
        ? { key: names.token }
        : { secretName: source.secretName, key: names.token },
    );
  }
  if (appId === undefined) return fail(names.appId, 'is missing (needed for GitHub App credentials)');
  if (installationId === undefined) {
    return fail(names.installationId, 'is missing (needed for GitHub App credentials)');
  }
  if (privateKey === undefined)
    return fail(names.privateKey, 'is missing (needed for GitHub App credentials)');
  const appIdNumber = positiveInteger(appId);
  if (appIdNumber === undefined) return fail(names.appId, 'is not a positive integer');
  const installationIdNumber = positiveInteger(installationId);
  if (installationIdNumber === undefined) return fail(names.installationId, 'is not a positive integer');
  // Keys pasted through .env files often carry literal "\n" sequences instead of line breaks.
  const pem = privateKey.includes('\n') ? privateKey : privateKey.replace(/\\n/g, '\n');
  try {
    createPrivateKey(pem);
  } catch {
    return fail(names.privateKey, 'is not a PEM-encoded private key');
  }
  return { kind: 'app', appId: appIdNumber, installationId: installationIdNumber, privateKey: pem };
}

function clean(value: string | undefined): string | undefined {
  const v = value?.trim();
  return v === undefined || v === '' ? undefined : v;
}

function positiveInteger(value: string): number | undefined {
  if (!/^\d+$/.test(value)) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

function decode(value: SecretValue | undefined): string | undefined {
  if (value === undefined) return undefined;
  return typeof value === 'string' ? value : Buffer.from(value).toString('utf8');
}

export interface ParsedCredentialsSecret {
  credentials: GitHubCredentials;
  /** Endpoint overrides the Secret carries (`github_enterprise_url`, `github_url`); may be empty. */
  endpoints: GitHubEndpointOptions;
}

/**
 * Reads ARC's keys from a credentials Secret's decoded data. `secretName` (e.g. `ns/name`) appears in
 * every error together with the offending key.
 */
export function parseCredentialsSecret(
  secretName: string,
  data: Readonly<Record<string, SecretValue | undefined>>,
): ParsedCredentialsSecret {
  const k = CREDENTIAL_SECRET_KEYS;
  const credentials = parseCredentialFields(
    {
      token: decode(data[k.token]),
      appId: decode(data[k.appId]),
      installationId: decode(data[k.installationId]),
      privateKey: decode(data[k.privateKey]),
    },
    { description: `Secret "${secretName}"`, secretName },
  );
  const endpoints: GitHubEndpointOptions = {};
  const enterpriseUrl = clean(decode(data[k.enterpriseUrl]));
  const apiUrl = clean(decode(data[k.apiUrl]));
  if (enterpriseUrl !== undefined) endpoints.githubUrl = enterpriseUrl;
  if (apiUrl !== undefined) endpoints.apiUrl = apiUrl;
  return { credentials, endpoints };
}

/**
 * SHA-256 over the Secret's values in key order (ARC's change detection): a different hash means
 * the client must be rebuilt.
 */
export function secretDataHash(data: Readonly<Record<string, SecretValue | undefined>>): string {
  const hash = createHash('sha256');
  for (const key of Object.keys(data).sort()) {
    const v = data[key];
    if (v !== undefined) hash.update(typeof v === 'string' ? Buffer.from(v, 'utf8') : v);
  }
  return hash.digest('hex');
}

/** A Secret as the Kubernetes API returns it: `data` values base64-encoded. */
export interface SecretObject {
  data?: Record<string, string> | undefined;
  stringData?: Record<string, string> | undefined;
}

/** Returns the Secret, or undefined when it does not exist. Injected so this module needs no client. */
export type SecretReader = (namespace: string, name: string) => Promise<SecretObject | undefined>;

/** The decoded data of a Secret object (`stringData` wins over `data`, as the API server applies it). */
export function decodeSecretData(secret: SecretObject): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  for (const [key, value] of Object.entries(secret.data ?? {})) out[key] = Buffer.from(value, 'base64');
  for (const [key, value] of Object.entries(secret.stringData ?? {})) out[key] = Buffer.from(value, 'utf8');
  return out;
}

export interface LoadedCredentialsSecret extends ParsedCredentialsSecret {
  /** `secretDataHash` of the data the credentials came from. */
  hash: string;
}

export async function loadCredentialsFromSecret(
  readSecret: SecretReader,
  namespace: string,
  name: string,
): Promise<LoadedCredentialsSecret> {
  const secretName = `${namespace}/${name}`;
  const secret = await readSecret(namespace, name);
  if (!secret) throw new GitHubConfigError(`Secret "${secretName}" not found`, { secretName });
  const data = decodeSecretData(secret);
  return { ...parseCredentialsSecret(secretName, data), hash: secretDataHash(data) };
}
