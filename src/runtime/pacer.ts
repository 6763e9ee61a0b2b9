import type { Clock } from './clock.ts';

/**
 * Paces writes that would otherwise follow every small change, such as an owner's status figures
 * while a thousand runners come and go: at most one write per key per interval. A caller that must
 * wait requeues itself for `waitMs` and then writes the figures of that moment, so nothing is lost,
 * only merged.
 */
export class WritePacer {
  private readonly last = new Map<string, number>();
  private readonly clock: Clock;
  private readonly intervalMs: number;

  constructor(clock: Clock, intervalMs: number) {
    this.clock = clock;
    this.intervalMs = intervalMs;
  }

  /** Milliseconds until `key` may be written again; 0 when it may be now. */
  waitMs(key: string): number {
    const at = this.last.get(key);
    if (at === undefined) return 0;
    return Math.max(0, at + this.intervalMs - this.clock.now());
  }

  wrote(key: string): void {
    this.last.set(key, this.clock.now());
  }

  forget(key: string): void {
    this.last.delete(key);
  }
}

/**
 * Hands out turns at `perSecond` to keys that ask, each key keeping its turn until it takes it: a
 * burst of writes that can wait (a thousand runners listed at once) is spread out instead of
 * loading the API server all at once. A key whose turn would be more than `maxWaitMs` away goes at
 * once: pacing must never turn a burst into a growing backlog.
 */
export class TurnPacer {
  private readonly turns = new Map<string, number>();
  private nextFree = 0;
  private readonly clock: Clock;
  private readonly gapMs: number;
  private readonly maxWaitMs: number;

  constructor(clock: Clock, perSecond: number, maxWaitMs: number) {
    this.clock = clock;
    this.gapMs = 1000 / perSecond;
    this.maxWaitMs = maxWaitMs;
  }

  /** Milliseconds until `key`'s turn; 0 means now (and the turn is used up). */
  waitMs(key: string): number {
    const now = this.clock.now();
    let at = this.turns.get(key);
    if (at === undefined) {
      at = Math.max(now, this.nextFree);
      if (at - now > this.maxWaitMs) return 0;
      this.nextFree = at + this.gapMs;
      this.turns.set(key, at);
      if (this.turns.size > 4096) this.sweep(now);
    }
    if (at > now) return Math.ceil(at - now);
    this.turns.delete(key);
    return 0;
  }

  /** The key no longer needs its turn (its object is gone). */
  forget(key: string): void {
    this.turns.delete(key);
  }

  get size(): number {
    return this.turns.size;
  }

  /** Turns long past that nobody came for. */
  private sweep(now: number): void {
    for (const [k, at] of this.turns) if (at + this.maxWaitMs < now) this.turns.delete(k);
  }
}
