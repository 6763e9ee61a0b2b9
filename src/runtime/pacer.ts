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
