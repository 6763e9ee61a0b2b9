import { GitHubConfigError } from './errors.ts';

/**
 * Where runners live on GitHub: an enterprise, an organization or a single repository. Every runner
 * endpoint exists once per kind, under `/enterprises/{enterprise}`, `/orgs/{org}` or
 * `/repos/{owner}/{repo}`.
 */
export type GitHubScope =
  | { readonly kind: 'enterprise'; readonly enterprise: string }
  | { readonly kind: 'organization'; readonly org: string }
  | { readonly kind: 'repository'; readonly owner: string; readonly repo: string };

export interface ScopeFields {
  enterprise?: string | undefined;
  organization?: string | undefined;
  repository?: string | undefined;
}

/**
 * Picks the scope a resource names. As in ARC, the most specific one wins when several are set:
 * repository over organization over enterprise. A repository must be `owner/name`.
 */
export function resolveScope(fields: ScopeFields): GitHubScope {
  const repository = fields.repository?.trim() ?? '';
  const organization = fields.organization?.trim() ?? '';
  const enterprise = fields.enterprise?.trim() ?? '';
  if (repository !== '') {
    const parts = repository.split('/');
    if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
      throw new GitHubConfigError(`invalid repository name: '${repository}' (expected owner/name)`);
    }
    return { kind: 'repository', owner: parts[0]!, repo: parts[1]! };
  }
  if (organization !== '') return { kind: 'organization', org: organization };
  if (enterprise !== '') return { kind: 'enterprise', enterprise };
  throw new GitHubConfigError('enterprise, organization and repository are all empty');
}

/** The scope the fields name, or undefined when they name none or a malformed one. */
export function scopeIfValid(fields: ScopeFields): GitHubScope | undefined {
  try {
    return resolveScope(fields);
  } catch {
    return undefined;
  }
}

/** A stable, readable key such as `orgs/acme` (also the `scope` metric label). */
export function scopeKey(scope: GitHubScope): string {
  switch (scope.kind) {
    case 'enterprise':
      return `enterprises/${scope.enterprise}`;
    case 'organization':
      return `orgs/${scope.org}`;
    case 'repository':
      return `repos/${scope.owner}/${scope.repo}`;
  }
}

/** The route template prefix, e.g. `/orgs/{org}`; endpoint metrics use templates, never names. */
export function scopeRoutePrefix(scope: GitHubScope): string {
  switch (scope.kind) {
    case 'enterprise':
      return '/enterprises/{enterprise}';
    case 'organization':
      return '/orgs/{org}';
    case 'repository':
      return '/repos/{owner}/{repo}';
  }
}

/** The values for the placeholders of `scopeRoutePrefix`. */
export function scopeRouteParams(scope: GitHubScope): Record<string, string> {
  switch (scope.kind) {
    case 'enterprise':
      return { enterprise: scope.enterprise };
    case 'organization':
      return { org: scope.org };
    case 'repository':
      return { owner: scope.owner, repo: scope.repo };
  }
}

export interface GitHubEndpointOptions {
  /**
   * Web address of GitHub: `https://github.com` (the default) or a GitHub Enterprise Server such as
   * `https://ghes.example.com`, whose REST API lives under `/api/v3`.
   */
  githubUrl?: string | undefined;
  /** Exact REST API base, overriding what `githubUrl` implies (ARC's `github_url`; proxies, tests). */
  apiUrl?: string | undefined;
}

export interface GitHubEndpoints {
  /** REST API base without a trailing slash, e.g. `https://api.github.com`, `https://ghes/api/v3`. */
  readonly apiBaseUrl: string;
  /** Web address runners register against (their `GITHUB_URL`), with a trailing slash. */
  readonly serverUrl: string;
  /** Whether this is a GitHub Enterprise Server (which may send no rate-limit headers). */
  readonly enterpriseServer: boolean;
}

const GITHUB_COM: GitHubEndpoints = {
  apiBaseUrl: 'https://api.github.com',
  serverUrl: 'https://github.com/',
  enterpriseServer: false,
};

function parseUrl(value: string, what: string): URL {
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw new GitHubConfigError(`${what} is not a URL: '${value}'`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new GitHubConfigError(`${what} must be an http(s) URL: '${value}'`);
  }
  return url;
}

const trimSlashes = (path: string) => path.replace(/\/+$/, '');

/**
 * Derives the API base and the runners' server URL. A GHES address gets `/api/v3` appended unless it
 * already ends with it or names an API host (`api.` prefix), as ARC does; github.com maps to
 * api.github.com.
 */
export function resolveEndpoints(options: GitHubEndpointOptions = {}): GitHubEndpoints {
  const githubUrl = options.githubUrl?.trim() || undefined;
  const apiUrl = options.apiUrl?.trim() || undefined;
  let derived: GitHubEndpoints = GITHUB_COM;
  if (githubUrl) {
    const url = parseUrl(githubUrl, 'GitHub URL');
    const host = url.hostname.toLowerCase();
    if (host !== 'github.com' && host !== 'api.github.com') {
      const path = trimSlashes(url.pathname);
      const apiHost = host.startsWith('api.') || host.includes('.api.');
      const apiPath = path.endsWith('/api/v3') || apiHost ? path : `${path}/api/v3`;
      const webPath = path.endsWith('/api/v3') ? path.slice(0, -'/api/v3'.length) : path;
      // GHE.com style API hosts (api.<name>.ghe.com) serve the web UI on the host without `api.`.
      const webOrigin = host.startsWith('api.') ? `${url.protocol}//${url.host.slice(4)}` : url.origin;
      derived = {
        apiBaseUrl: `${url.origin}${apiPath}`,
        serverUrl: `${webOrigin}${webPath}/`,
        enterpriseServer: true,
      };
    }
  }
  if (apiUrl) {
    const url = parseUrl(apiUrl, 'GitHub API URL');
    return { ...derived, apiBaseUrl: `${url.origin}${trimSlashes(url.pathname)}` };
  }
  return derived;
}
