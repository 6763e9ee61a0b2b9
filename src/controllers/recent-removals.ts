import type { RemoveRunnerOutcome } from '../github/index.ts';

/**
 * GitHub's recent answers to "remove runner N", kept for a few seconds. A reconcile that reads a pod
 * from a cache that has not caught up with our last write (the wait or completion annotations)
 * would otherwise ask again: another rate-limited request, answered 422 again (busy) or 404 (already
 * removed, which then costs a confirming list as well). Only answers that stay true for a while are
 * kept; failures are never replayed.
 */
export class RecentRemovals {
  private readonly answers = new Map<string, { outcome: RemoveRunnerOutcome; at: number }>();
  private readonly ttlMs: number;

  constructor(ttlMs: number) {
    this.ttlMs = ttlMs;
  }

  /** The answer for this runner if it is recent enough to reuse. */
  get(key: string, now: number): RemoveRunnerOutcome | undefined {
    const hit = this.answers.get(key);
    if (!hit) return undefined;
    if (now - hit.at >= this.ttlMs) {
      this.answers.delete(key);
      return undefined;
    }
    return hit.outcome;
  }

  record(key: string, outcome: RemoveRunnerOutcome, now: number): void {
    // A 403 stays true for a while too: asking again from a stale cache would only get the same
    // refusal, or, had the fault passed, remove a runner we already let go with a Warning.
    if (outcome.kind !== 'removed' && outcome.kind !== 'busy' && outcome.kind !== 'forbidden') {
      this.answers.delete(key);
      return;
    }
    this.answers.set(key, { outcome, at: now });
    // Bounded: old entries go whenever new ones arrive.
    if (this.answers.size > 1024) {
      for (const [k, v] of this.answers) if (now - v.at >= this.ttlMs) this.answers.delete(k);
    }
  }

  get size(): number {
    return this.answers.size;
  }
}
