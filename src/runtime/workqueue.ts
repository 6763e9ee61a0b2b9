import type { Clock, Timer } from './clock.ts';

/**
 * A deduplicating, rate-limited work queue with client-go's semantics:
 * - a key waits in the queue at most once (dedup);
 * - a key being processed is never handed to a second worker; re-added meanwhile, it is marked
 *   dirty and queued again when `done` is called;
 * - `addAfter` keeps the earliest requested time per key;
 * - `addRateLimited` delays by max(per-key exponential backoff, overall token bucket).
 */

export interface RateLimiter {
  /** Delay before the key may be processed again; counts a failure for per-key limiters. */
  when(key: string): number;
  forget(key: string): void;
  numRequeues(key: string): number;
}

/** Per-key exponential backoff: base·2^failures, capped. client-go default: 5 ms → 1000 s. */
export class ExponentialBackoffLimiter implements RateLimiter {
  private readonly failures = new Map<string, number>();
  private readonly baseMs: number;
  private readonly maxMs: number;

  constructor(baseMs = 5, maxMs = 1000_000) {
    this.baseMs = baseMs;
    this.maxMs = maxMs;
  }

  when(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = this.baseMs * 2 ** n;
    return Number.isFinite(delay) ? Math.min(delay, this.maxMs) : this.maxMs;
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}

/** Overall token bucket (client-go default 10 qps, burst 100): reservations may run into debt. */
export class TokenBucketLimiter implements RateLimiter {
  private readonly clock: Clock;
  private readonly qps: number;
  private readonly burst: number;
  private tokens: number;
  private last: number;

  constructor(clock: Clock, qps = 10, burst = 100) {
    this.clock = clock;
    this.qps = qps;
    this.burst = burst;
    this.tokens = burst;
    this.last = clock.now();
  }

  when(): number {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens / this.qps) * 1000);
  }

  forget(): void {}

  numRequeues(): number {
    return 0;
  }
}

/** The slowest of several limiters decides; failures are counted by all. */
export class MaxOfLimiter implements RateLimiter {
  private readonly limiters: RateLimiter[];
  constructor(...limiters: RateLimiter[]) {
    this.limiters = limiters;
  }
  when(key: string): number {
    return Math.max(...this.limiters.map((l) => l.when(key)));
  }
  forget(key: string): void {
    for (const l of this.limiters) l.forget(key);
  }
  numRequeues(key: string): number {
    return Math.max(...this.limiters.map((l) => l.numRequeues(key)));
  }
}

export function defaultControllerRateLimiter(clock: Clock): RateLimiter {
  return new MaxOfLimiter(new ExponentialBackoffLimiter(5, 1000_000), new TokenBucketLimiter(clock, 10, 100));
}

/** Observations the queue reports (wired to Prometheus by metrics.ts). */
export interface QueueMetrics {
  depth(n: number): void;
  added(): void;
  retried(): void;
  /** Seconds a key waited in the queue before a worker took it. */
  queued(seconds: number): void;
  /** Seconds a worker held a key. */
  worked(seconds: number): void;
}

export interface WorkItem {
  key: string;
}

export class WorkQueue {
  private readonly clock: Clock;
  private readonly limiter: RateLimiter;
  private readonly metrics: QueueMetrics | undefined;
  private queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Map<string, number>();
  private readonly addedAt = new Map<string, number>();
  private readonly waiting = new Map<string, { at: number; timer: Timer }>();
  private readonly getters: ((item: WorkItem | undefined) => void)[] = [];
  private drainWaiters: (() => void)[] = [];
  private shuttingDown = false;

  private readonly minIntervalMs: number;
  /** When each key's last pass started, while it is cooling down (only with `minIntervalMs`). */
  private readonly lastStarted = new Map<string, number>();

  /**
   * `minIntervalMs`: passes of one key start at least this far apart. Events that come meanwhile
   * are merged into that one later pass: for a key whose every pass looks at a thousand objects,
   * and whose events come by the hundred a second. Measured from the start, not the end: a pass
   * that waits on the API server longer than the interval is followed at once by the next.
   */
  constructor(opts: {
    clock: Clock;
    rateLimiter?: RateLimiter;
    metrics?: QueueMetrics;
    minIntervalMs?: number;
  }) {
    this.clock = opts.clock;
    this.limiter = opts.rateLimiter ?? defaultControllerRateLimiter(opts.clock);
    this.metrics = opts.metrics;
    this.minIntervalMs = opts.minIntervalMs ?? 0;
  }

  private cooldownMs(key: string): number {
    if (this.minIntervalMs <= 0) return 0;
    const at = this.lastStarted.get(key);
    if (at === undefined) return 0;
    const wait = at + this.minIntervalMs - this.clock.now();
    if (wait > 0) return wait;
    this.lastStarted.delete(key);
    return 0;
  }

  get length(): number {
    return this.queue.length;
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Keys currently held by workers (for the longest-running-processor metric). */
  processingSince(): number[] {
    return [...this.processing.values()];
  }

  add(key: string): void {
    if (this.shuttingDown) return;
    if (this.dirty.has(key)) return;
    if (!this.processing.has(key)) {
      const wait = this.cooldownMs(key);
      if (wait > 0) {
        this.addAfter(key, wait);
        return;
      }
    }
    this.metrics?.added();
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    this.push(key);
  }

  private push(key: string): void {
    this.addedAt.set(key, this.clock.now());
    const getter = this.getters.shift();
    if (getter) {
      this.take(key, getter);
      return;
    }
    this.queue.push(key);
    this.metrics?.depth(this.queue.length);
  }

  private take(key: string, deliver: (item: WorkItem) => void): void {
    const now = this.clock.now();
    this.dirty.delete(key);
    this.processing.set(key, now);
    if (this.minIntervalMs > 0) {
      this.lastStarted.set(key, now);
      if (this.lastStarted.size > 1024) {
        for (const [k, at] of this.lastStarted)
          if (at + this.minIntervalMs <= now) this.lastStarted.delete(k);
      }
    }
    const at = this.addedAt.get(key);
    this.addedAt.delete(key);
    if (at !== undefined) this.metrics?.queued((now - at) / 1000);
    deliver({ key });
  }

  /** Waits for the next key; resolves `undefined` once the queue is shut down and empty. */
  get(): Promise<WorkItem | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.metrics?.depth(this.queue.length);
      return new Promise((resolve) => this.take(key, resolve));
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.getters.push(resolve));
  }

  /** Marks a key finished; if it was re-added meanwhile, it goes back into the queue now. */
  done(key: string): void {
    const started = this.processing.get(key);
    if (started === undefined) return;
    this.processing.delete(key);
    const now = this.clock.now();
    this.metrics?.worked((now - started) / 1000);
    if (this.dirty.has(key) && !this.shuttingDown) {
      const wait = this.cooldownMs(key);
      if (wait > 0) {
        this.dirty.delete(key);
        this.addAfter(key, wait);
      } else {
        this.push(key);
      }
    } else if (this.dirty.has(key)) this.dirty.delete(key);
    if (this.processing.size === 0) {
      for (const w of this.drainWaiters) w();
      this.drainWaiters = [];
    }
  }

  /** Adds the key after `delayMs`; when called repeatedly, the earliest time wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = this.clock.now() + delayMs;
    const existing = this.waiting.get(key);
    if (existing && existing.at <= at) return;
    existing?.timer.cancel();
    const timer = this.clock.setTimer(delayMs, () => {
      this.waiting.delete(key);
      this.add(key);
    });
    this.waiting.set(key, { at, timer });
  }

  /** Adds the key after its rate-limited backoff; counts as a retry. */
  addRateLimited(key: string): void {
    this.metrics?.retried();
    this.addAfter(key, this.limiter.when(key));
  }

  /** Clears the key's failure history (after a success). */
  forget(key: string): void {
    this.limiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.limiter.numRequeues(key);
  }

  /** Whether the key has a pending delayed add, and when (epoch ms). */
  scheduledAt(key: string): number | undefined {
    return this.waiting.get(key)?.at;
  }

  /**
   * Stops accepting keys, wakes idle workers, and resolves once every key held by a worker is done
   * (keys still waiting in the queue are dropped: a restarted controller relists and requeues them).
   */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    for (const w of this.waiting.values()) w.timer.cancel();
    this.waiting.clear();
    this.queue = [];
    for (const g of this.getters.splice(0)) g(undefined);
    if (this.processing.size === 0) return;
    await new Promise<void>((resolve) => this.drainWaiters.push(resolve));
  }
}
