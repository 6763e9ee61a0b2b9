import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { FakeClock, type Timer } from '../runtime/clock.ts';

/**
 * Test helpers for the GitHub client: a fake clock that knows its next timer, a driver that moves
 * it only while the code under test is sleeping, and loggers.
 */

/** FakeClock that can tell when its next timer is due. */
export class SteppingClock extends FakeClock {
  private readonly dues = new Set<{ at: number }>();

  override setTimer(ms: number, fn: () => void): Timer {
    const entry = { at: this.now() + Math.max(0, ms) };
    this.dues.add(entry);
    const timer = super.setTimer(ms, () => {
      this.dues.delete(entry);
      fn();
    });
    return {
      cancel: () => {
        this.dues.delete(entry);
        timer.cancel();
      },
    };
  }

  nextDueAt(): number | undefined {
    let min: number | undefined;
    for (const d of this.dues) if (min === undefined || d.at < min) min = d.at;
    return min;
  }
}

export const realSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Awaits `promise`, jumping the clock to the next timer whenever the code is waiting on one that is
 * due within `horizonMs` (sleeps for back-off, budget, retry-after). Timers further out (request
 * timeouts) are left alone, so requests in flight are never cut short.
 */
export async function drive<T>(clock: SteppingClock, promise: Promise<T>, horizonMs = 3_600_000): Promise<T> {
  let settled = false;
  promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  for (let i = 0; i < 5000 && !settled; i++) {
    await realSleep(2);
    if (settled) break;
    const next = clock.nextDueAt();
    if (next !== undefined && next - clock.now() <= horizonMs)
      await clock.advance(Math.max(0, next - clock.now()));
  }
  return promise;
}

/** Waits (in real time) until `cond` holds. */
export async function until(cond: () => boolean, what = 'condition', timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await realSleep(2);
  }
}

export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** A debug-level logger whose output is kept in memory. */
export function capturingLogger(): { logger: Logger; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), text: () => chunks.join('') };
}

/** Request timeout far beyond anything the tests advance, so `drive` never cuts a request short. */
export const NO_TIMEOUT_MS = 10 * 24 * 3600_000;
