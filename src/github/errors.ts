/**
 * Errors of the GitHub boundary. `GitHubApiError` is what a call to GitHub fails with, carrying the
 * fields callers decide on; `GitHubConfigError` is a configuration mistake (scope, credentials,
 * Secret contents) found before anything is sent. Neither ever carries a token or key.
 */

export type GitHubErrorKind =
  /** 401: the token or App key is wrong, expired or revoked. Not retried. */
  | 'invalidCredentials'
  /** 403 that is not a rate limit, e.g. "Resource not accessible by integration". */
  | 'forbidden'
  | 'notFound'
  | 'conflict'
  /** 422 */
  | 'validation'
  /** Primary or secondary limit hit, or held back by our own budget; see `rateLimitCause`. */
  | 'rateLimited'
  /** 5xx after the retries were spent. */
  | 'server'
  /** No response: connection refused or reset, DNS, TLS, or our timeout. */
  | 'network'
  | 'unexpected';

/** `primary`: the hourly limit; `secondary`: GitHub's abuse limits; `reserve`: our removal reserve. */
export type RateLimitCause = 'primary' | 'secondary' | 'reserve';

export interface GitHubApiErrorInit {
  kind: GitHubErrorKind;
  /** Route template such as `DELETE /orgs/{org}/actions/runners/{runner_id}`. */
  endpoint: string;
  /** HTTP status; undefined when no response arrived or nothing was sent. */
  status?: number | undefined;
  /** The `message` of GitHub's error body. */
  githubMessage?: string | undefined;
  /** Epoch ms at which calling again makes sense (rate limits). */
  rateLimitResetAt?: number | undefined;
  rateLimitCause?: RateLimitCause | undefined;
  /** GitHub's `retry-after`, in ms. */
  retryAfterMs?: number | undefined;
  /** `x-github-request-id`, for support tickets. */
  requestId?: string | undefined;
  /** Whether the request reached GitHub (false when our budget held it back). */
  sent?: boolean | undefined;
  /** The `errors` array of a 422 body. */
  details?: unknown[] | undefined;
  cause?: unknown;
}

export class GitHubApiError extends Error {
  readonly kind: GitHubErrorKind;
  readonly endpoint: string;
  readonly status: number | undefined;
  readonly githubMessage: string | undefined;
  readonly rateLimitResetAt: number | undefined;
  readonly rateLimitCause: RateLimitCause | undefined;
  readonly retryAfterMs: number | undefined;
  readonly requestId: string | undefined;
  readonly sent: boolean;
  readonly details: unknown[];

  constructor(init: GitHubApiErrorInit) {
    super(describe(init), init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'GitHubApiError';
    this.kind = init.kind;
    this.endpoint = init.endpoint;
    this.status = init.status;
    this.githubMessage = init.githubMessage;
    this.rateLimitResetAt = init.rateLimitResetAt;
    this.rateLimitCause = init.rateLimitCause;
    this.retryAfterMs = init.retryAfterMs;
    this.requestId = init.requestId;
    this.sent = init.sent ?? true;
    this.details = init.details ?? [];
  }

  /** Whether the same call can succeed later without anyone changing configuration. */
  get retryable(): boolean {
    return this.kind === 'rateLimited' || this.kind === 'server' || this.kind === 'network';
  }
}

function describe(init: GitHubApiErrorInit): string {
  const what = init.status === undefined ? init.kind : `${init.status}`;
  const msg = init.githubMessage ? `: ${init.githubMessage}` : '';
  const until =
    init.kind === 'rateLimited' && init.rateLimitResetAt !== undefined
      ? ` (${init.rateLimitCause ?? 'rate'} limit until ${new Date(init.rateLimitResetAt).toISOString()})`
      : '';
  const label = init.kind === 'invalidCredentials' ? ' invalid credentials' : '';
  return `GitHub ${init.endpoint}: ${what}${label}${msg}${until}`;
}

/** A configuration mistake; names the Secret and key when the mistake is in a Secret. */
export class GitHubConfigError extends Error {
  readonly secretName: string | undefined;
  readonly key: string | undefined;

  constructor(message: string, where: { secretName?: string; key?: string } = {}) {
    super(message);
    this.name = 'GitHubConfigError';
    this.secretName = where.secretName;
    this.key = where.key;
  }
}

export type ResponseHeaders = Readonly<Record<string, string | number | undefined>>;

export function headerValue(headers: ResponseHeaders | undefined, name: string): string | undefined {
  const v = headers?.[name];
  return v === undefined ? undefined : String(v);
}

/** `retry-after` as ms: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** GitHub's error body `message`, or the body itself when it is text. */
export function githubMessageOf(body: unknown): string | undefined {
  if (typeof body === 'string') return body.trim() === '' ? undefined : body.trim().slice(0, 500);
  if (body && typeof body === 'object' && 'message' in body) {
    const m = (body as { message: unknown }).message;
    if (typeof m === 'string') return m;
  }
  return undefined;
}

export interface ResponseClassification {
  kind: GitHubErrorKind;
  githubMessage: string | undefined;
  rateLimitCause?: 'primary' | 'secondary';
  /** For primary limits: `x-ratelimit-reset` in ms (or a minute ahead when absent). */
  rateLimitResetAt?: number;
  retryAfterMs?: number;
}

const PRIMARY_MESSAGE = /^API rate limit exceeded/i;
const SECONDARY_MESSAGE = /secondary rate limit|abuse detection/i;

/**
 * What a non-2xx answer means. Pure: the same status, headers and body always classify the same way.
 * A 403 is a rate limit only when GitHub says so (remaining 0, `retry-after`, or its message);
 * anything else is a real refusal.
 */
export function classifyResponse(
  status: number,
  headers: ResponseHeaders | undefined,
  body: unknown,
  now: number,
): ResponseClassification {
  const githubMessage = githubMessageOf(body);
  const retryAfterMs = parseRetryAfter(headerValue(headers, 'retry-after'), now);
  const withRetry = retryAfterMs === undefined ? {} : { retryAfterMs };
  if (status === 401) return { kind: 'invalidCredentials', githubMessage };
  if (status === 403 || status === 429) {
    const remaining = headerValue(headers, 'x-ratelimit-remaining');
    if (remaining === '0' || PRIMARY_MESSAGE.test(githubMessage ?? '')) {
      const reset = Number(headerValue(headers, 'x-ratelimit-reset'));
      let resetAt = Number.isFinite(reset) && reset > 0 ? reset * 1000 : now + 60_000;
      if (retryAfterMs !== undefined) resetAt = Math.max(resetAt, now + retryAfterMs);
      return {
        kind: 'rateLimited',
        githubMessage,
        rateLimitCause: 'primary',
        rateLimitResetAt: resetAt,
        ...withRetry,
      };
    }
    if (retryAfterMs !== undefined || status === 429 || SECONDARY_MESSAGE.test(githubMessage ?? '')) {
      return { kind: 'rateLimited', githubMessage, rateLimitCause: 'secondary', ...withRetry };
    }
    return { kind: 'forbidden', githubMessage };
  }
  if (status === 404) return { kind: 'notFound', githubMessage };
  if (status === 409) return { kind: 'conflict', githubMessage };
  if (status === 422) return { kind: 'validation', githubMessage };
  if (status >= 500) return { kind: 'server', githubMessage, ...withRetry };
  return { kind: 'unexpected', githubMessage };
}
