import type { Logger } from 'pino';
import type { Clock, Timer } from './clock.ts';
import type { EventHandler, UpdatePredicate, Watchable } from './informer.ts';
import type { RuntimeMetrics } from './metrics.ts';
import { type KubeObject, objectKey, splitKey } from './store.ts';
import { type RateLimiter, WorkQueue } from './workqueue.ts';

/**
 * A level-triggered controller: watches put keys into a deduplicating rate-limited queue, workers
 * reconcile one key at a time (never the same key twice concurrently), results map to requeues
 * as in controller-runtime.
 */

export interface ReconcileRequest {
  key: string;
  namespace?: string;
  name: string;
}

export interface ReconcileResult {
  /** Reconcile again after this long (the key's failure history is forgotten). */
  requeueAfterMs?: number;
  /** Reconcile again after the rate-limited backoff. */
  requeue?: boolean;
}

export interface ReconcileContext {
  log: Logger;
  signal: AbortSignal;
}

export type Reconciler = (
  request: ReconcileRequest,
  ctx: ReconcileContext,
) => Promise<ReconcileResult | undefined | void> | ReconcileResult | undefined | void;

/** An error that retrying cannot fix (bad spec, missing configuration): logged, counted, not retried. */
export class TerminalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TerminalError';
  }
}

export type ResultKind = 'success' | 'error' | 'requeue' | 'requeue_after';

/** What a reconcile outcome means for the queue; pure, so the mapping is testable on its own. */
export function resultAction(outcome: { result?: ReconcileResult | undefined | void } | { error: unknown }): {
  kind: ResultKind;
  action: 'forget' | 'rateLimited' | 'after';
  afterMs?: number;
  terminal?: boolean;
} {
  if ('error' in outcome) {
    if (outcome.error instanceof TerminalError) return { kind: 'error', action: 'forget', terminal: true };
    return { kind: 'error', action: 'rateLimited' };
  }
  const r = outcome.result ?? {};
  if (r.requeueAfterMs !== undefined && r.requeueAfterMs > 0) {
    return { kind: 'requeue_after', action: 'after', afterMs: r.requeueAfterMs };
  }
  if (r.requeue) return { kind: 'requeue', action: 'rateLimited' };
  return { kind: 'success', action: 'forget' };
}

export interface ControllerOptions {
  name: string;
  reconcile: Reconciler;
  clock: Clock;
  log: Logger;
  metrics?: RuntimeMetrics;
  concurrency?: number;
  rateLimiter?: RateLimiter;
  /** A key is reconciled at most once per this interval (see WorkQueue); 0: no limit. */
  minIntervalMs?: number;
}

export class Controller {
  readonly name: string;
  readonly queue: WorkQueue;
  private readonly opts: ControllerOptions;
  private readonly log: Logger;
  private readonly informers = new Set<Watchable<KubeObject>>();
  private readonly primaries = new Set<Watchable<KubeObject>>();
  private resyncTimer: Timer | undefined;
  private resyncMs = 0;
  private workers: Promise<void>[] = [];
  private abort = new AbortController();
  private started = false;

  constructor(opts: ControllerOptions) {
    this.opts = opts;
    this.name = opts.name;
    this.log = opts.log.child({ controller: opts.name });
    const metrics = opts.metrics?.queueMetrics(opts.name, () => this.queue.processingSince());
    this.queue = new WorkQueue({
      clock: opts.clock,
      ...(opts.rateLimiter ? { rateLimiter: opts.rateLimiter } : {}),
      ...(metrics ? { metrics } : {}),
      ...(opts.minIntervalMs ? { minIntervalMs: opts.minIntervalMs } : {}),
    });
  }

  /** The primary resource: every change enqueues the object's own key. */
  watchFor<T extends KubeObject>(informer: Watchable<T>, predicates: UpdatePredicate<T>[] = []): this {
    this.primaries.add(informer as unknown as Watchable<KubeObject>);
    return this.watchMapped(informer, (obj) => [objectKey(obj)], predicates);
  }

  /**
   * Reconciles every primary object at this period even without changes (`--sync-period`), the
   * safety net for anything an event could not tell us (e.g. time passing).
   */
  resyncEvery(periodMs: number): this {
    this.resyncMs = periodMs;
    return this;
  }

  private scheduleResync(): void {
    if (this.resyncMs <= 0) return;
    this.resyncTimer = this.opts.clock.setTimer(this.resyncMs, () => {
      // Spread over the whole period, each key at the same offset every time (so each key still comes
      // once a period): a thousand keys queued within seconds held up the changes that arrived
      // meanwhile by seconds (at 1,000 runners, over a quarter of the period: replacements 2 s late).
      for (const inf of this.primaries) {
        for (const key of inf.store.keys()) this.queue.addAfter(key, resyncOffset(key) * this.resyncMs);
      }
      this.scheduleResync();
    });
  }

  /**
   * An owned resource: a change enqueues the key of its controlling owner of `ownerKind` (same
   * namespace), as controller-runtime's EnqueueRequestForOwner with OnlyControllerOwner does.
   */
  watchOwned<T extends KubeObject>(
    informer: Watchable<T>,
    ownerKind: string,
    predicates: UpdatePredicate<T>[] = [],
  ): this {
    return this.watchMapped(
      informer,
      (obj) => {
        const owner = obj.metadata.ownerReferences?.find((r) => r.controller && r.kind === ownerKind);
        if (!owner) return [];
        return [obj.metadata.namespace ? `${obj.metadata.namespace}/${owner.name}` : owner.name];
      },
      predicates,
    );
  }

  /** Any mapping from a watched object to the keys it affects. */
  watchMapped<T extends KubeObject>(
    informer: Watchable<T>,
    map: (obj: T) => string[],
    predicates: UpdatePredicate<T>[] = [],
  ): this {
    this.informers.add(informer as unknown as Watchable<KubeObject>);
    const enqueue = (obj: T) => {
      for (const key of map(obj)) this.queue.add(key);
    };
    const handler: EventHandler<T> = {
      onAdd: enqueue,
      onUpdate: (oldObj, newObj) => {
        // An owner change must reach the old owner too.
        enqueue(oldObj);
        enqueue(newObj);
      },
      onDelete: enqueue,
    };
    informer.addHandler(handler, predicates);
    return this;
  }

  enqueue(key: string): void {
    this.queue.add(key);
  }

  enqueueAfter(key: string, delayMs: number): void {
    this.queue.addAfter(key, delayMs);
  }

  /**
   * Starts the workers once every watched informer has synced. Stopped before that, it resolves
   * without starting anything (stopping is not a failure of start).
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    const stopped = this.abort.signal;
    try {
      await Promise.all([...this.informers].map((i) => i.waitForSync(stopped)));
    } catch (err) {
      if (stopped.aborted) return;
      throw err;
    }
    if (stopped.aborted) return;
    const concurrency = this.opts.concurrency ?? 1;
    this.opts.metrics?.maxConcurrent.set({ controller: this.name }, concurrency);
    this.log.info({ concurrency }, 'starting workers');
    this.workers = Array.from({ length: concurrency }, () => this.worker());
    this.scheduleResync();
  }

  /**
   * Stops taking keys and waits for reconciles in progress to finish. No worker takes another key
   * from the moment this is called (everything before the first await runs synchronously), and the
   * signal of reconciles in progress is aborted.
   */
  async stop(): Promise<void> {
    this.abort.abort(new Error('controller stopping'));
    this.resyncTimer?.cancel();
    await this.queue.shutdown();
    await Promise.all(this.workers);
  }

  private async worker(): Promise<void> {
    for (;;) {
      const item = await this.queue.get();
      if (!item) return;
      // The key may have been handed over just before stop(): the worker resumes only afterwards.
      if (this.abort.signal.aborted) {
        this.queue.done(item.key);
        return;
      }
      try {
        await this.process(item.key);
      } finally {
        this.queue.done(item.key);
      }
    }
  }

  private async process(key: string): Promise<void> {
    const { metrics, clock } = this.opts;
    const labels = { controller: this.name };
    const { namespace, name } = splitKey(key);
    const log = this.log.child(namespace ? { namespace, name } : { name });
    const started = clock.now();
    metrics?.activeWorkers.inc(labels);
    let outcome: { result?: ReconcileResult | undefined | void } | { error: unknown };
    try {
      const result = await this.opts.reconcile(
        { key, name, ...(namespace ? { namespace } : {}) },
        { log, signal: this.abort.signal },
      );
      outcome = { result };
    } catch (error) {
      outcome = { error };
    } finally {
      metrics?.activeWorkers.dec(labels);
      metrics?.reconcileTime.observe(labels, (clock.now() - started) / 1000);
    }
    const action = resultAction(outcome);
    metrics?.reconcileTotal.inc({ ...labels, result: action.kind });
    if ('error' in outcome) {
      const err = outcome.error;
      metrics?.reconcileErrors.inc(labels);
      if (!(err instanceof Error)) metrics?.reconcilePanics.inc(labels);
      if (action.terminal) {
        metrics?.terminalErrors.inc(labels);
        log.error({ err }, 'reconcile failed permanently; not retrying');
      } else {
        log.warn({ err, retries: this.queue.numRequeues(key) }, 'reconcile failed; will retry');
      }
    }
    switch (action.action) {
      case 'forget':
        this.queue.forget(key);
        return;
      case 'rateLimited':
        this.queue.addRateLimited(key);
        return;
      case 'after':
        this.queue.forget(key);
        this.queue.addAfter(key, action.afterMs ?? 0);
        return;
    }
  }
}

/** A key's stable place in [0, 1) (FNV-1a, then mixed), so resyncs of one key stay a period apart. */
export function resyncOffset(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  // Murmur3's finaliser: keys that differ in a digit land far apart.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return (h >>> 0) / 0x100000000;
}
