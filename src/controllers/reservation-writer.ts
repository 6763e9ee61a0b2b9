import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { HORIZONTAL_RUNNER_AUTOSCALERS, type HorizontalRunnerAutoscaler } from '../api/index.ts';
import type { Clock, Timer } from '../runtime/clock.ts';
import { isInvalid, isNotFound, toKubeError } from '../runtime/errors.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import { jsonPatch, objectPath } from '../runtime/objects.ts';
import type { Store } from '../runtime/store.ts';
import { WrittenObjects } from '../runtime/written.ts';
import {
  type JobOp,
  planReservations,
  type Reservation,
  reservationsFromSpec,
  reservationToSpec,
} from './capacity-reservations.ts';

/**
 * Writes the capacity reservations that workflow_job deliveries ask for (spec §7.5.4). ARC collects
 * deliveries for a fixed 3 s window before it patches; here an HRA is patched as soon as a delivery
 * arrives, and the deliveries that arrive while that patch is in flight make the next patch
 * together: one job is never 3 s late, and a burst still costs few writes. A patch is conditional
 * on the HRA's `metadata.generation` (status writes leave it alone, edits of the spec do not), so
 * a concurrent edit is read again instead of overwritten. Failed writes are retried after 1, 2, 4,
 * 8 then 16 s, with the deliveries that arrived meanwhile; other HRAs do not wait. A change the API
 * server keeps refusing (422 after every fresh read) is dropped with a Warning log, not retried.
 *
 * A `completed` delivery is remembered for an hour: a `queued` delivery of the same job that
 * arrives after it (GitHub does not promise order) adds nothing. A release by the repair pass is
 * not remembered: the job may only be missing from a listing that has not caught up.
 */

export interface ReservationWriterOptions {
  http: KubeHttp;
  clock: Clock;
  log: Logger;
  /** The HRA informer's store: read first, the API server only when it is stale. */
  cache?: Store<HorizontalRunnerAutoscaler> | undefined;
  /** Deliveries waiting to be written, over all HRAs (ARC's `--queue-limit`, default 100). */
  queueLimit?: number;
  registry?: Registry | undefined;
}

export const DEFAULT_QUEUE_LIMIT = 100;
const COMPLETED_MEMORY_MS = 60 * 60_000;
const COMPLETED_MEMORY_MAX = 100_000;
const MAX_BACKOFF_MS = 16_000;
const CONFLICT_TRIES = 5;

interface HraState {
  pending: JobOp[];
  writing: boolean;
  failures: number;
  retry: Timer | undefined;
}

export class ReservationWriter {
  private readonly opts: ReservationWriterOptions;
  private readonly limit: number;
  private readonly hras = new Map<string, HraState>();
  /**
   * The answer to our last patch of each HRA, until the cache has caught up with it. It outlives
   * the HRA's queue: a delivery that comes after the queue emptied must not be planned on a cache
   * that has not seen our write yet (a release would be judged "unchanged" and lost).
   */
  private readonly written = new WrittenObjects<HorizontalRunnerAutoscaler>();
  private readonly completed = new Map<number, number>();
  private queued = 0;
  private stopped = false;
  private readonly writes: Counter<'result'> | undefined;
  private readonly idleWaiters: (() => void)[] = [];

  constructor(opts: ReservationWriterOptions) {
    this.opts = opts;
    this.limit = opts.queueLimit && opts.queueLimit > 0 ? opts.queueLimit : DEFAULT_QUEUE_LIMIT;
    if (opts.registry) {
      this.writes =
        (opts.registry.getSingleMetric('paddock_capacity_reservation_writes_total') as
          | Counter<'result'>
          | undefined) ??
        new Counter({
          name: 'paddock_capacity_reservation_writes_total',
          help: 'Patches of HorizontalRunnerAutoscaler capacity reservations by result (written, unchanged, conflict, failed, gone, refused)',
          labelNames: ['result'],
          registers: [opts.registry],
        });
    }
  }

  /**
   * Queues one job's change for an HRA. False when the queue is full (the delivery should be
   * answered with a retryable error); true when queued or when it changes nothing.
   */
  add(hra: { namespace: string; name: string }, op: JobOp): boolean {
    if (this.stopped) return false;
    const now = this.opts.clock.now();
    this.forgetOldCompletions(now);
    if (op.action === 'queued' && this.completed.has(op.jobId)) return true;
    if (this.queued >= this.limit) return false;
    // Only a delivery says for sure that a job completed: a listing may just not show it yet.
    if (op.action === 'completed' && !op.repaired) this.completed.set(op.jobId, now);
    const key = `${hra.namespace}/${hra.name}`;
    let state = this.hras.get(key);
    if (!state) {
      state = { pending: [], writing: false, failures: 0, retry: undefined };
      this.hras.set(key, state);
    }
    state.pending.push(op);
    this.queued++;
    if (!state.writing && !state.retry) void this.flush(key, state);
    return true;
  }

  /** Deliveries waiting to be written. */
  get depth(): number {
    return this.queued;
  }

  /** Resolves when nothing is waiting or being written (for tests and shutdown). */
  async idle(): Promise<void> {
    if (this.isIdle()) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  stop(): void {
    this.stopped = true;
    for (const s of this.hras.values()) {
      s.retry?.cancel();
      s.retry = undefined;
    }
    this.wakeIdle(true);
  }

  private isIdle(): boolean {
    for (const s of this.hras.values()) if (s.writing || s.pending.length > 0) return false;
    return true;
  }

  private wakeIdle(force = false): void {
    if (!force && !this.isIdle()) return;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  private forgetOldCompletions(now: number): void {
    for (const [id, at] of this.completed) {
      if (at > now - COMPLETED_MEMORY_MS && this.completed.size <= COMPLETED_MEMORY_MAX) break;
      this.completed.delete(id);
    }
  }

  private async flush(key: string, state: HraState): Promise<void> {
    if (this.stopped) return;
    state.writing = true;
    const ops = state.pending.splice(0);
    const log = this.opts.log.child({ horizontalrunnerautoscaler: key });
    try {
      await this.write(key, ops, log);
      this.queued -= ops.length;
      state.failures = 0;
    } catch (err) {
      state.pending.unshift(...ops);
      state.failures++;
      const delay = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** (state.failures - 1));
      this.writes?.inc({ result: 'failed' });
      log.warn(
        { err: toKubeError(err).message, jobs: ops.length, retryInMs: delay },
        'cannot write capacity reservations; will retry',
      );
      state.writing = false;
      if (this.stopped) return;
      state.retry = this.opts.clock.setTimer(delay, () => {
        state.retry = undefined;
        if (!state.writing) void this.flush(key, state);
      });
      return;
    }
    state.writing = false;
    if (state.pending.length > 0 && !state.retry) {
      void this.flush(key, state);
      return;
    }
    if (state.pending.length === 0 && !state.retry) this.hras.delete(key);
    this.wakeIdle();
  }

  private async write(key: string, ops: JobOp[], log: Logger): Promise<void> {
    const [namespace, name] = key.split('/') as [string, string];
    let hra = this.freshest(key);
    for (let attempt = 1; ; attempt++) {
      if (!hra) {
        try {
          hra = await this.opts.http.request<HorizontalRunnerAutoscaler>(
            'GET',
            objectPath(HORIZONTAL_RUNNER_AUTOSCALERS, { metadata: { namespace, name } }),
          );
        } catch (err) {
          if (!isNotFound(err)) throw err;
          this.gone(key, ops, log);
          return;
        }
      }
      if (hra.metadata.deletionTimestamp) {
        this.gone(key, ops, log);
        return;
      }
      const current = reservationsFromSpec(hra.spec.capacityReservations);
      const next = planReservations(current, ops, this.opts.clock.now(), hra.spec.maxReplicas ?? undefined);
      if (sameReservations(current, next)) {
        this.writes?.inc({ result: 'unchanged' });
        return;
      }
      try {
        const answer = await jsonPatch<HorizontalRunnerAutoscaler>(
          this.opts.http,
          HORIZONTAL_RUNNER_AUTOSCALERS,
          hra,
          [
            { op: 'test', path: '/metadata/generation', value: hra.metadata.generation ?? 0 },
            { op: 'add', path: '/spec/capacityReservations', value: next.map(reservationToSpec) },
          ],
        );
        this.written.remember(answer);
        this.writes?.inc({ result: 'written' });
        log.debug({ reservations: next.length, jobs: ops.length }, 'wrote capacity reservations');
        return;
      } catch (err) {
        if (isNotFound(err)) {
          this.gone(key, ops, log);
          return;
        }
        // A failed `test` is the API server's 422: someone changed the spec since we read it.
        if (!isInvalid(err)) throw err;
        if (attempt >= CONFLICT_TRIES) {
          // Still refused after as many fresh reads: no conflict but a change the API server will
          // never accept (a validation rule). Retrying would hold these deliveries, and the queue
          // behind them, forever; the scaler's repair pass reconciles reservations from GitHub's jobs.
          this.writes?.inc({ result: 'refused' });
          log.warn(
            { err: toKubeError(err).message, jobs: ops.length },
            'the API server refuses these capacity reservations; their deliveries are dropped',
          );
          return;
        }
        this.writes?.inc({ result: 'conflict' });
        this.written.forget(key);
        hra = undefined;
      }
    }
  }

  private gone(key: string, ops: JobOp[], log: Logger): void {
    this.written.forget(key);
    this.writes?.inc({ result: 'gone' });
    log.info({ jobs: ops.length }, 'horizontalrunnerautoscaler is gone; its deliveries are dropped');
  }

  /**
   * Our own last write or the cache, whichever is newer; without a cache (tests) nothing, so the
   * API server is read.
   */
  private freshest(key: string): HorizontalRunnerAutoscaler | undefined {
    return this.written.newest(key, this.opts.cache?.get(key));
  }
}

function sameReservations(a: readonly Reservation[], b: readonly Reservation[]): boolean {
  const wire = (l: readonly Reservation[]) => JSON.stringify(l.map(reservationToSpec));
  return wire(a) === wire(b);
}
