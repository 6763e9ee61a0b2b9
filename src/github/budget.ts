import type { Clock } from '../runtime/clock.ts';
import { headerValue, type ResponseHeaders } from './errors.ts';

/**
 * The rate-limit budget of one credential. GitHub reports it on every response (`x-ratelimit-*`,
 * per resource such as `core` or `actions_runner_registration`); the budget remembers the latest
 * view, counts requests in flight against it, and answers whether a request of a given kind may
 * go out now. The last `reserveFraction` of each window is kept for runner removal, so a busy fleet
 * can still unregister runners (and stop paying for them) when reads have used everything else.
 */

/** `read`: lists and gets; `write`: tokens, JIT configs; `removal`: unregistering runners. */
export type RequestKind = 'read' | 'write' | 'removal';

export interface ResourceState {
  /** Undefined until GitHub has told us (GHES without rate limits never does). */
  limit: number | undefined;
  remaining: number | undefined;
  /** Epoch ms when the window resets. */
  resetAt: number | undefined;
  /** Requests sent and not answered yet; each may cost one. */
  inFlight: number;
}

export type BudgetDecision =
  | { ok: true }
  | { ok: false; waitUntil: number; reason: 'reserve' | 'exhausted' | 'secondary' };

/**
 * The policy, as a pure function. Unknown limits mean no limit. Removal may spend everything;
 * reads and writes stop when only the reserve is left. A secondary-limit pause stops everything.
 */
export function decideBudget(
  state: ResourceState | undefined,
  kind: RequestKind,
  now: number,
  reserveFraction: number,
  pausedUntil: number,
): BudgetDecision {
  if (pausedUntil > now) return { ok: false, waitUntil: pausedUntil, reason: 'secondary' };
  if (!state || state.limit === undefined || state.remaining === undefined || state.resetAt === undefined) {
    return { ok: true };
  }
  if (now >= state.resetAt) return { ok: true }; // a new window has begun
  const available = state.remaining - state.inFlight;
  const floor = kind === 'removal' ? 0 : reserveFor(state.limit, reserveFraction);
  if (available > floor) return { ok: true };
  return { ok: false, waitUntil: state.resetAt, reason: available > 0 ? 'reserve' : 'exhausted' };
}

export function reserveFor(limit: number, reserveFraction: number): number {
  return Math.ceil(limit * reserveFraction);
}

export interface RateLimitObservation {
  resource: string;
  limit: number;
  remaining: number;
  resetAt: number;
}

/** Reads `x-ratelimit-*`; undefined when GitHub sent none (GHES with rate limits off). */
export function parseRateLimitHeaders(
  headers: ResponseHeaders | undefined,
  fallbackResource: string,
): RateLimitObservation | undefined {
  const limit = toInt(headerValue(headers, 'x-ratelimit-limit'));
  const remaining = toInt(headerValue(headers, 'x-ratelimit-remaining'));
  const reset = toInt(headerValue(headers, 'x-ratelimit-reset'));
  if (limit === undefined || remaining === undefined || reset === undefined) return undefined;
  const resource = headerValue(headers, 'x-ratelimit-resource') || fallbackResource;
  return { resource, limit, remaining, resetAt: reset * 1000 };
}

function toInt(v: string | undefined): number | undefined {
  if (v === undefined || !/^\d+$/.test(v.trim())) return undefined;
  return Number(v.trim());
}

export interface RateLimitBudgetOptions {
  clock: Clock;
  /** Share of each window only removal may spend (default 0.1). */
  reserveFraction?: number;
  /** First pause after a secondary limit without `retry-after` (GitHub: at least a minute). */
  secondaryPauseMs?: number;
  /** Longest pause after repeated secondary limits. */
  maxSecondaryPauseMs?: number;
  /** Told about every new view of a resource (metrics). */
  onObserve?: (observation: RateLimitObservation) => void;
}

export interface BudgetTicket {
  /** Call exactly once when the answer (or the failure) is in. */
  release(): void;
}

export class RateLimitBudget {
  readonly reserveFraction: number;
  private readonly clock: Clock;
  private readonly secondaryPauseMs: number;
  private readonly maxSecondaryPauseMs: number;
  private readonly onObserve: ((o: RateLimitObservation) => void) | undefined;
  private readonly resources = new Map<string, ResourceState>();
  private pausedUntil = 0;
  private secondaryStrikes = 0;

  constructor(options: RateLimitBudgetOptions) {
    this.clock = options.clock;
    this.reserveFraction = options.reserveFraction ?? 0.1;
    if (!(this.reserveFraction >= 0 && this.reserveFraction < 1)) {
      throw new RangeError(`reserveFraction must be in [0, 1), got ${this.reserveFraction}`);
    }
    this.secondaryPauseMs = options.secondaryPauseMs ?? 60_000;
    this.maxSecondaryPauseMs = options.maxSecondaryPauseMs ?? 15 * 60_000;
    this.onObserve = options.onObserve;
  }

  private state(resource: string): ResourceState {
    let s = this.resources.get(resource);
    if (!s) {
      s = { limit: undefined, remaining: undefined, resetAt: undefined, inFlight: 0 };
      this.resources.set(resource, s);
    }
    return s;
  }

  /** Would a request go out now? No side effects. */
  check(kind: RequestKind, resource: string): BudgetDecision {
    return decideBudget(
      this.resources.get(resource),
      kind,
      this.clock.now(),
      this.reserveFraction,
      this.pausedUntil,
    );
  }

  /** Non-blocking: on success the request counts as in flight until the ticket is released. */
  tryAcquire(kind: RequestKind, resource: string): BudgetDecision & { ticket?: BudgetTicket } {
    const decision = this.check(kind, resource);
    if (!decision.ok) return decision;
    const s = this.state(resource);
    s.inFlight++;
    let released = false;
    return {
      ok: true,
      ticket: {
        release: () => {
          if (released) return;
          released = true;
          s.inFlight = Math.max(0, s.inFlight - 1);
        },
      },
    };
  }

  /** Blocking: waits (on the clock) until the request may go out. */
  async acquire(kind: RequestKind, resource: string, signal?: AbortSignal): Promise<BudgetTicket> {
    for (;;) {
      const d = this.tryAcquire(kind, resource);
      if (d.ok) return d.ticket!;
      await this.clock.sleep(Math.max(1, d.waitUntil - this.clock.now()), signal);
    }
  }

  /** Takes in what a response said about the budget. */
  observe(headers: ResponseHeaders | undefined, fallbackResource: string): RateLimitObservation | undefined {
    const o = parseRateLimitHeaders(headers, fallbackResource);
    if (!o) return undefined;
    const s = this.state(o.resource);
    if (s.resetAt === o.resetAt && s.remaining !== undefined) {
      // Same window: remaining only goes down on GitHub's side, so the lowest value is the newest
      // (answers to concurrent requests can arrive out of order).
      s.remaining = Math.min(s.remaining, o.remaining);
      s.limit = o.limit;
    } else {
      s.limit = o.limit;
      s.remaining = o.remaining;
      s.resetAt = o.resetAt;
    }
    this.onObserve?.({ resource: o.resource, limit: s.limit, remaining: s.remaining, resetAt: s.resetAt });
    return o;
  }

  /** A primary limit was hit: nothing of that resource goes out before `resetAt`. */
  markExhausted(resource: string, resetAt: number): void {
    const s = this.state(resource);
    s.remaining = 0;
    s.resetAt = resetAt;
    if (s.limit === undefined) s.limit = 0;
  }

  /**
   * A secondary limit was hit: pause the whole credential for `retry-after`, or, without one, for a
   * minute doubling on each repeat. Returns the end of the pause.
   */
  pauseForSecondaryLimit(retryAfterMs: number | undefined): number {
    this.secondaryStrikes++;
    const pause =
      retryAfterMs ??
      Math.min(this.maxSecondaryPauseMs, this.secondaryPauseMs * 2 ** (this.secondaryStrikes - 1));
    this.pausedUntil = Math.max(this.pausedUntil, this.clock.now() + pause);
    return this.pausedUntil;
  }

  /** A request succeeded: the secondary back-off starts over. */
  noteSuccess(): void {
    this.secondaryStrikes = 0;
  }

  /** The current view per resource, with the reserve. */
  view(): Record<string, ResourceState & { reserve: number | undefined; pausedUntil: number }> {
    const out: Record<string, ResourceState & { reserve: number | undefined; pausedUntil: number }> = {};
    for (const [resource, s] of this.resources) {
      out[resource] = {
        ...s,
        reserve: s.limit === undefined ? undefined : reserveFor(s.limit, this.reserveFraction),
        pausedUntil: this.pausedUntil,
      };
    }
    return out;
  }
}
