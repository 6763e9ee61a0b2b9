/**
 * When each step of a process's start happened, in milliseconds since the process began (Node's
 * `performance.now()` counts from there). A slow start can then be read off the process itself: how
 * long Node.js took, the code, the first lists, the servers. Each step keeps its first time only:
 * a cache that relists later has not started again.
 */
export class StartupTimeline {
  private readonly steps = new Map<string, number>();
  private readonly sinceProcessStartMs: () => number;

  constructor(sinceProcessStartMs: () => number = () => performance.now()) {
    this.sinceProcessStartMs = sinceProcessStartMs;
  }

  /** Records `step` now, or at `atMs` (a time taken earlier, on the same scale). */
  mark(step: string, atMs?: number): void {
    if (this.steps.has(step)) return;
    this.steps.set(step, Math.round(atMs ?? this.sinceProcessStartMs()));
  }

  has(step: string): boolean {
    return this.steps.has(step);
  }

  /** Steps in the order of their times. */
  entries(): [step: string, ms: number][] {
    return [...this.steps].sort((a, b) => a[1] - b[1]);
  }
}
