/**
 * Time as a dependency: everything that waits or reads the time takes a Clock, so unit tests use
 * FakeClock and never sleep for real.
 */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  /** Runs `fn` after `ms` (never synchronously). */
  setTimer(ms: number, fn: () => void): Timer;
  /** Resolves after `ms`; rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, Math.max(0, ms));
    return { cancel: () => clearTimeout(t) };
  },
  sleep(ms, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const t = setTimeout(
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.max(0, ms),
      );
      const onAbort = () => {
        clearTimeout(t);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
};

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
}

/** A manual clock: time moves only through `advance`, which fires due timers in order. */
export class FakeClock implements Clock {
  private current: number;
  private seq = 0;
  private pending: Pending[] = [];

  constructor(start = Date.parse('2026-01-01T00:00:00Z')) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const p: Pending = { at: this.current + Math.max(0, ms), seq: this.seq++, fn };
    this.pending.push(p);
    return {
      cancel: () => {
        this.pending = this.pending.filter((x) => x !== p);
      },
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer = this.setTimer(ms, () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      });
      const onAbort = () => {
        timer.cancel();
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Number of timers waiting to fire. */
  get timers(): number {
    return this.pending.length;
  }

  /**
   * Moves time forward by `ms`, firing every timer that falls due, in time order, and letting
   * promise callbacks run between them (so code awaiting a sleep continues before the next timer).
   */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      await flushMicrotasks();
      const due = this.pending.filter((p) => p.at <= target).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.pending = this.pending.filter((p) => p !== due);
      this.current = Math.max(this.current, due.at);
      due.fn();
    }
    this.current = target;
    await flushMicrotasks();
  }
}

/** Lets queued promise callbacks (several hops deep) run. */
export async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
  await new Promise((r) => setImmediate(r));
}

/** Kubernetes MicroTime (RFC 3339 with microseconds), as Events and Leases carry. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
