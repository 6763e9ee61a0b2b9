/**
 * Primary rate limits per credential and resource, as GitHub reports them in `x-ratelimit-*`
 * headers: a fixed one-hour window that starts with the first counted request.
 */

export type RateLimitResource = 'core' | 'actions_runner_registration';

export interface BucketState {
  limit: number;
  used: number;
  /** Epoch milliseconds at which the window resets. */
  resetAt: number;
}

export interface RateLimitView {
  limit: number;
  remaining: number;
  used: number;
  /** Epoch seconds, as in `x-ratelimit-reset`. */
  reset: number;
  resource: RateLimitResource;
}

const WINDOW_MS = 3600_000;

export class RateLimits {
  private readonly now: () => number;
  private readonly buckets = new Map<string, BucketState>();
  /** Limits for buckets not configured explicitly, by principal kind and resource. */
  readonly defaults = {
    anonymous: 60,
    core: 5000,
    actions_runner_registration: 10_000,
  };

  constructor(now: () => number) {
    this.now = now;
  }

  private key(principal: string, resource: RateLimitResource): string {
    return `${principal}|${resource}`;
  }

  private bucket(principal: string, resource: RateLimitResource): BucketState {
    const key = this.key(principal, resource);
    let b = this.buckets.get(key);
    const t = this.now();
    if (!b) {
      const limit = principal.startsWith('ip:') ? this.defaults.anonymous : this.defaults[resource];
      b = { limit, used: 0, resetAt: t + WINDOW_MS };
      this.buckets.set(key, b);
    } else if (t >= b.resetAt) {
      b.used = 0;
      b.resetAt = t + WINDOW_MS;
    }
    return b;
  }

  view(principal: string, resource: RateLimitResource): RateLimitView {
    const b = this.bucket(principal, resource);
    return {
      limit: b.limit,
      remaining: Math.max(0, b.limit - b.used),
      used: b.used,
      reset: Math.ceil(b.resetAt / 1000),
      resource,
    };
  }

  exhausted(principal: string, resource: RateLimitResource): boolean {
    const b = this.bucket(principal, resource);
    return b.used >= b.limit;
  }

  consume(principal: string, resource: RateLimitResource): void {
    const b = this.bucket(principal, resource);
    b.used = Math.min(b.limit, b.used + 1);
  }

  /** Test control: set the limit, what remains, and when the window resets. */
  set(
    principal: string,
    opts: { resource?: RateLimitResource; limit?: number; remaining?: number; resetInMs?: number },
  ): RateLimitView {
    const resource = opts.resource ?? 'core';
    const b = this.bucket(principal, resource);
    if (opts.limit !== undefined) b.limit = opts.limit;
    if (opts.remaining !== undefined) b.used = Math.max(0, b.limit - opts.remaining);
    if (opts.resetInMs !== undefined) b.resetAt = this.now() + opts.resetInMs;
    return this.view(principal, resource);
  }
}
