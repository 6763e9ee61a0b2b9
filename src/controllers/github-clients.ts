import type { Logger } from 'pino';
import {
  GitHubClient,
  GitHubClientPool,
  type GitHubCredentials,
  type GitHubEndpoints,
  type GitHubMetrics,
  type SecretObject,
} from '../github/index.ts';
import type { Clock } from '../runtime/clock.ts';
import { isNotFound } from '../runtime/errors.ts';
import { resourcePath } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import { SECRETS } from '../runtime/resources.ts';
import type { GitHubClientSource } from './runner-pod.ts';

/**
 * GitHub clients for runner pods: the pod's `actions-runner/github-api-creds-secret` Secret when
 * it names one (read from the API server, never cached in an informer), else the default client.
 * Resources whose Secrets hold the same credentials share one client, budget and runner registry.
 */
export function podGitHubClients(opts: {
  http: KubeHttp;
  clock: Clock;
  log: Logger;
  metrics?: GitHubMetrics;
  defaultClient?: GitHubClient;
  defaultEndpoints?: GitHubEndpoints;
  reserveFraction?: number;
  caBundle?: Buffer;
}): GitHubClientSource & { pool: GitHubClientPool } {
  const pool = new GitHubClientPool({
    readSecret: async (namespace, name) => {
      try {
        return await opts.http.request<SecretObject>('GET', resourcePath(SECRETS, namespace, name));
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    defaultClient: opts.defaultClient,
    defaultEndpoints: opts.defaultEndpoints,
    createClient: (credentials: GitHubCredentials, endpoints: GitHubEndpoints) =>
      new GitHubClient({
        credentials,
        endpoints,
        clock: opts.clock,
        logger: opts.log,
        metrics: opts.metrics,
        reserveFraction: opts.reserveFraction,
        caBundle: opts.caBundle,
      }),
  });
  return {
    pool,
    clientFor: ({ namespace, name, credentialsSecret, lastKnown }) =>
      pool.clientFor({ kind: 'Pod', namespace, name }, credentialsSecret, { lastKnown: lastKnown === true }),
    release: ({ namespace, name }) => pool.release({ kind: 'Pod', namespace, name }),
  };
}
