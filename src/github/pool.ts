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
  async clientFor(ref: ResourceRef, secretName: string | undefined): Promise<GitHubClient> {
    if (!secretName) {
      if (!this.defaultClient) {
        throw new GitHubConfigError(
          `${ref.kind} ${ref.namespace}/${ref.name}: no GitHub credentials: the controller has none configured and the resource names no githubAPICredentialsFrom secret`,
        );
      }
      return this.defaultClient;
    }
    const secretKey = `${ref.namespace}/${secretName}`;
    const loaded = await loadCredentialsFromSecret(this.readSecret, ref.namespace, secretName);
    let entry = this.secrets.get(secretKey);
    if (!entry || entry.hash !== loaded.hash) {
      const endpoints = this.endpointsFor(loaded.endpoints);
      const clientKey = `${credentialId(loaded.credentials)} ${endpoints.apiBaseUrl}`;
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
