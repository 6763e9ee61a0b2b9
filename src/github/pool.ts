import { createHash } from 'node:crypto';
import { invalidSubdomainReason } from '../runtime/names.ts';
import type { GitHubClient } from './client.ts';
import {
  credentialId,
  type GitHubCredentials,
  loadCredentialsFromSecret,
  type SecretReader,
} from './credentials.ts';
import { GitHubConfigError } from './errors.ts';
import { type GitHubEndpointOptions, type GitHubEndpoints, resolveEndpoints } from './scope.ts';

/**
 * Per-resource credentials (`spec.githubAPICredentialsFrom.secretRef.name`, ARC's
 * MultiGitHubClient). A resource naming no Secret uses the controller's default client. Secrets are
 * re-read on each `clientFor` and the client is rebuilt only when their data changes; resources
 * whose Secrets hold the same credentials share one client, hence one budget and one registry.
 * "The same credentials" means the same secret material: a rotated token or App private key gets
 * a new client even though the App and installation IDs stay the same.
 */

/** The resource that depends on a client, e.g. `{ kind: 'Runner', namespace, name }`. */
export interface ResourceRef {
  kind: string;
  namespace: string;
  name: string;
}

export interface GitHubClientPoolOptions {
  readSecret: SecretReader;
  /** The controller-wide client (flags / environment), if credentials were configured. */
  defaultClient?: GitHubClient | undefined;
  /** Endpoints for Secrets that name none; default: the default client's, else github.com. */
  defaultEndpoints?: GitHubEndpoints | undefined;
  /** Builds a client; the pool decides when, and closes it when nothing uses it any more. */
  createClient: (credentials: GitHubCredentials, endpoints: GitHubEndpoints) => GitHubClient;
}

interface SecretEntry {
  hash: string;
  clientKey: string;
  refs: Set<string>;
}

interface SharedClient {
  client: GitHubClient;
  secrets: number;
}

const refKey = (r: ResourceRef) => `${r.kind}/${r.namespace}/${r.name}`;

/** A non-secret digest of the secret material, so rotating a key or token changes the client. */
function materialFingerprint(c: GitHubCredentials): string {
  const material = c.kind === 'token' ? c.token : c.privateKey;
  return createHash('sha256').update(material).digest('hex').slice(0, 16);
}

export interface ClientForOptions {
  /**
   * When the Secret is gone or no longer holds usable credentials, answer with the client last built
   * from it (if one is still alive). For cleanup only, e.g. unregistering runners while their
   * namespace is deleted (which removes the Secret first); never to hand out new registrations.
   */
  lastKnown?: boolean;
}

export class GitHubClientPool {
  private readonly readSecret: SecretReader;
  private readonly defaultClient: GitHubClient | undefined;
  private readonly defaultEndpoints: GitHubEndpoints;
  private readonly createClient: GitHubClientPoolOptions['createClient'];
  private readonly secrets = new Map<string, SecretEntry>();
  private readonly clients = new Map<string, SharedClient>();

  constructor(options: GitHubClientPoolOptions) {
    this.readSecret = options.readSecret;
    this.defaultClient = options.defaultClient;
    this.defaultEndpoints =
      options.defaultEndpoints ?? options.defaultClient?.endpoints ?? resolveEndpoints();
    this.createClient = options.createClient;
  }

  /** The client for a resource; `secretName` empty or undefined means the default client. */
  async clientFor(
    ref: ResourceRef,
    secretName: string | undefined,
    options: ClientForOptions = {},
  ): Promise<GitHubClient> {
    if (!secretName) {
      if (!this.defaultClient) {
        throw new GitHubConfigError(
          `${ref.kind} ${ref.namespace}/${ref.name}: no GitHub credentials: the controller has none configured and the resource names no githubAPICredentialsFrom secret`,
        );
      }
      return this.defaultClient;
    }
    // Users write the name (annotation or spec); it becomes part of a URL path.
    const invalid = invalidSubdomainReason('credentials Secret', secretName);
    if (invalid) throw new GitHubConfigError(`${ref.kind} ${ref.namespace}/${ref.name}: ${invalid}`);
    const secretKey = `${ref.namespace}/${secretName}`;
    let loaded: Awaited<ReturnType<typeof loadCredentialsFromSecret>>;
    try {
      loaded = await loadCredentialsFromSecret(this.readSecret, ref.namespace, secretName);
    } catch (err) {
      const known = this.secrets.get(secretKey);
      const shared = known && this.clients.get(known.clientKey);
      if (options.lastKnown && known && shared && err instanceof GitHubConfigError) {
        known.refs.add(refKey(ref));
        return shared.client;
      }
      throw err;
    }
    // Read after the await: concurrent callers for the same Secret must see each other's entry.
    let entry = this.secrets.get(secretKey);
    if (!entry || entry.hash !== loaded.hash) {
      const endpoints = this.endpointsFor(loaded.endpoints);
      const clientKey = `${credentialId(loaded.credentials)} ${materialFingerprint(loaded.credentials)} ${endpoints.apiBaseUrl}`;
      let shared = this.clients.get(clientKey);
      if (!shared) {
        shared = { client: this.createClient(loaded.credentials, endpoints), secrets: 0 };
        this.clients.set(clientKey, shared);
      }
      shared.secrets++;
      const refs = entry?.refs ?? new Set<string>();
      if (entry) this.dropClientUse(entry.clientKey);
      entry = { hash: loaded.hash, clientKey, refs };
      this.secrets.set(secretKey, entry);
    }
    entry.refs.add(refKey(ref));
    return this.clients.get(entry.clientKey)!.client;
  }

  /** The resource no longer needs its client (deleted, or its finalizer removed). */
  release(ref: ResourceRef): void {
    const key = refKey(ref);
    for (const [secretKey, entry] of this.secrets) {
      if (!entry.refs.delete(key) || entry.refs.size > 0) continue;
      this.secrets.delete(secretKey);
      this.dropClientUse(entry.clientKey);
    }
  }

  /** How many distinct Secret-based clients are alive (tests, metrics). */
  get clientCount(): number {
    return this.clients.size;
  }

  /** What the pool holds on to (leak checks): clients, Secrets and resources using them. */
  get usage(): { clients: number; secrets: number; resources: number } {
    let resources = 0;
    for (const e of this.secrets.values()) resources += e.refs.size;
    return { clients: this.clients.size, secrets: this.secrets.size, resources };
  }

  close(): void {
    for (const shared of this.clients.values()) shared.client.close();
    this.clients.clear();
    this.secrets.clear();
  }

  private dropClientUse(clientKey: string): void {
    const shared = this.clients.get(clientKey);
    if (!shared) return;
    shared.secrets--;
    if (shared.secrets <= 0) {
      shared.client.close();
      this.clients.delete(clientKey);
    }
  }

  /** A Secret's own URLs win; without them a GHES default carries over (as in ARC). */
  private endpointsFor(fromSecret: GitHubEndpointOptions): GitHubEndpoints {
    if (!fromSecret.githubUrl && !fromSecret.apiUrl) return this.defaultEndpoints;
    const githubUrl =
      fromSecret.githubUrl ??
      (this.defaultEndpoints.enterpriseServer ? this.defaultEndpoints.serverUrl : undefined);
    return resolveEndpoints({ githubUrl, apiUrl: fromSecret.apiUrl });
  }
}
