import type { Clock } from '../runtime/clock.ts';

/** A runner registration token. Its JSON form hides the token, so logging one is harmless. */
export interface RegistrationToken {
  readonly token: string;
  /** Epoch ms. */
  readonly expiresAt: number;
}

/** ARC's rule: a cached token is reused only while more than 30 minutes of validity remain. */
export const REGISTRATION_TOKEN_MIN_VALIDITY_MS = 30 * 60_000;

export function shouldReuseRegistrationToken(
  token: RegistrationToken | undefined,
  now: number,
  minValidityMs = REGISTRATION_TOKEN_MIN_VALIDITY_MS,
): token is RegistrationToken {
  return token !== undefined && token.expiresAt - now > minValidityMs;
}

export function registrationToken(token: string, expiresAt: number): RegistrationToken {
  const value = { token, expiresAt };
  Object.defineProperty(value, 'toJSON', {
    enumerable: false,
    value: () => ({ token: '[redacted]', expiresAt: new Date(expiresAt).toISOString() }),
  });
  return Object.freeze(value);
}

/**
 * Registration tokens per scope: one GitHub call per scope per ~half hour however many runners
 * register, and concurrent callers for the same scope share one call.
 */
export class RegistrationTokenCache {
  private readonly clock: Clock;
  private readonly minValidityMs: number;
  private readonly tokens = new Map<string, RegistrationToken>();
  private readonly pending = new Map<string, Promise<RegistrationToken>>();

  constructor(clock: Clock, minValidityMs = REGISTRATION_TOKEN_MIN_VALIDITY_MS) {
    this.clock = clock;
    this.minValidityMs = minValidityMs;
  }

  async get(key: string, fetchToken: () => Promise<RegistrationToken>): Promise<RegistrationToken> {
    const cached = this.tokens.get(key);
    if (shouldReuseRegistrationToken(cached, this.clock.now(), this.minValidityMs)) return cached;
    let p = this.pending.get(key);
    if (!p) {
      p = fetchToken()
        .then((t) => {
          this.tokens.set(key, t);
          this.dropExpired();
          return t;
        })
        .finally(() => this.pending.delete(key));
      this.pending.set(key, p);
    }
    return p;
  }

  /** Forget a scope's token (e.g. GitHub rejected it). */
  invalidate(key: string): void {
    this.tokens.delete(key);
  }

  private dropExpired(): void {
    const now = this.clock.now();
    for (const [key, t] of this.tokens) if (t.expiresAt <= now) this.tokens.delete(key);
  }
}
