import type { Logger } from 'pino';
import type { Clock, Timer } from './clock.ts';
import { isGone, KubeError, toKubeError } from './errors.ts';
import type { KubeHttp, WatchLine } from './kube-http.ts';
import { type IndexFunc, type KubeObject, objectKey, type ReadonlyStore, Store } from './store.ts';

/**
 * A reflector and informer in client-go's manner: a paged list, then a watch with bookmarks and a
 * rotated timeout; resourceVersion bookkeeping; on 410 Gone a relist that emits deletes for objects
 * that vanished meanwhile; reconnect backoff with jitter; an idle watchdog against half-open
 * connections; Retry-After on 429.
 */

export interface ResourceRef {
  /** '' for the core group. */
  group: string;
  version: string;
  plural: string;
  namespaced: boolean;
  /** Kind, for logs and owner mapping. */
  kind: string;
}

export function resourcePath(r: ResourceRef, namespace?: string, name?: string): string {
  const root = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  const ns = r.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${root}${ns}/${r.plural}${name ? `/${encodeURIComponent(name)}` : ''}`;
}

export function apiVersionOf(r: ResourceRef): string {
  return r.group === '' ? r.version : `${r.group}/${r.version}`;
}

export interface EventHandler<T extends KubeObject> {
  onAdd?(obj: T): void;
  onUpdate?(oldObj: T, newObj: T): void;
  onDelete?(obj: T): void;
}

/** Decides whether an update is worth handling; all predicates of a handler must agree. */
export type UpdatePredicate<T extends KubeObject = KubeObject> = (oldObj: T, newObj: T) => boolean;

export const predicates = {
  generationChanged: (o: KubeObject, n: KubeObject) => o.metadata.generation !== n.metadata.generation,
  resourceVersionChanged: (o: KubeObject, n: KubeObject) =>
    o.metadata.resourceVersion !== n.metadata.resourceVersion,
  labelsChanged: (o: KubeObject, n: KubeObject) =>
    JSON.stringify(o.metadata.labels ?? {}) !== JSON.stringify(n.metadata.labels ?? {}),
  annotationsChanged: (o: KubeObject, n: KubeObject) =>
    JSON.stringify(o.metadata.annotations ?? {}) !== JSON.stringify(n.metadata.annotations ?? {}),
  /**
   * Anything but the status changed: the spec (generation), labels, annotations, finalizers, owners
   * or the deletion. A controller that writes an object's status itself need not wake up for it.
   */
  specOrMetadataChanged: (o: KubeObject, n: KubeObject) => {
    const a = o.metadata;
    const b = n.metadata;
    return (
      a.generation !== b.generation ||
      a.deletionTimestamp !== b.deletionTimestamp ||
      JSON.stringify([a.labels, a.annotations, a.finalizers, a.ownerReferences]) !==
        JSON.stringify([b.labels, b.annotations, b.finalizers, b.ownerReferences])
    );
  },
  or:
    <T extends KubeObject>(...ps: UpdatePredicate<T>[]): UpdatePredicate<T> =>
    (o, n) =>
      ps.some((p) => p(o, n)),
};

/**
 * What a controller watches and reads: an Informer, or several informers with disjoint selectors
 * seen as one (InformerUnion).
 */
export interface Watchable<T extends KubeObject = KubeObject> {
  readonly store: ReadonlyStore<T>;
  addHandler(handler: EventHandler<T>, predicates?: UpdatePredicate<T>[]): void;
  waitForSync(signal?: AbortSignal): Promise<void>;
  hasSynced(): boolean;
}

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  factor: number;
  /** Adds up to `jitter` × delay at random. */
  jitter: number;
  /** A connection healthy this long resets the backoff. */
  resetAfterMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = {
  initialMs: 800,
  maxMs: 30_000,
  factor: 2,
  jitter: 1,
  resetAfterMs: 120_000,
};

export class Backoff {
  private readonly opts: BackoffOptions;
  private readonly clock: Clock;
  private readonly random: () => number;
  private current: number;
  private lastFailure = Number.NEGATIVE_INFINITY;

  constructor(clock: Clock, opts: BackoffOptions = DEFAULT_BACKOFF, random: () => number = Math.random) {
    this.clock = clock;
    this.opts = opts;
    this.random = random;
    this.current = opts.initialMs;
  }

  /** Delay before the next attempt after a failure. */
  next(): number {
    const now = this.clock.now();
    if (now - this.lastFailure > this.opts.resetAfterMs) this.current = this.opts.initialMs;
    this.lastFailure = now;
    const base = this.current;
    this.current = Math.min(this.opts.maxMs, this.current * this.opts.factor);
    return Math.round(base * (1 + this.random() * this.opts.jitter));
  }
}

export interface InformerOptions<T extends KubeObject> {
  http: KubeHttp;
  resource: ResourceRef;
  clock: Clock;
  log: Logger;
  /** Restrict to one namespace (namespaced resources). */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  indexers?: Record<string, IndexFunc<T>>;
  pageSize?: number;
  /** Reconnect when nothing (not even a bookmark) arrived for this long. */
  idleTimeoutMs?: number;
  /** Watch `timeoutSeconds` is drawn from [min, 2·min). */
  minWatchTimeoutSeconds?: number;
  backoff?: BackoffOptions;
  /** Applied to every object before it is stored; defaults to dropping managedFields. */
  transform?: (obj: T) => T;
}

export type InformerEvent =
  | { type: 'listed'; count: number; resourceVersion: string }
  | { type: 'watch-started'; resourceVersion: string }
  | { type: 'watch-ended'; reason: 'timeout' | 'idle' | 'error' | 'gone'; error?: string }
  | { type: 'backoff'; delayMs: number };

export class Informer<T extends KubeObject = KubeObject> implements Watchable<T> {
  readonly store: Store<T>;
  readonly resource: ResourceRef;
  private readonly opts: InformerOptions<T>;
  private readonly log: Logger;
  private readonly handlers: { handler: EventHandler<T>; predicates: UpdatePredicate<T>[] }[] = [];
  private readonly lifecycle = new Set<(e: InformerEvent) => void>();
  private readonly backoff: Backoff;
  private resourceVersion = '';
  private needList = true;
  private synced = false;
  private syncWaiters: (() => void)[] = [];
  private stopController: AbortController | undefined;
  private watchController: AbortController | undefined;
  private running: Promise<void> | undefined;
  private forcedRewatchFrom: string | undefined;

  constructor(opts: InformerOptions<T>) {
    this.opts = opts;
    this.resource = opts.resource;
    this.store = new Store<T>(opts.indexers);
    this.log = opts.log.child({ informer: opts.resource.plural, namespace: opts.namespace ?? '*' });
    this.backoff = new Backoff(opts.clock, opts.backoff ?? DEFAULT_BACKOFF);
  }

  addHandler(handler: EventHandler<T>, predicates: UpdatePredicate<T>[] = []): void {
    this.handlers.push({ handler, predicates });
    // Late subscribers see what is already known, as client-go's shared informers do.
    if (this.synced) for (const obj of this.store.list()) this.safe(() => handler.onAdd?.(obj));
  }

  /** Lifecycle notifications (listed, watch started/ended, backoff), for logs, metrics and tests. */
  onLifecycle(fn: (e: InformerEvent) => void): () => void {
    this.lifecycle.add(fn);
    return () => this.lifecycle.delete(fn);
  }

  hasSynced(): boolean {
    return this.synced;
  }

  get lastResourceVersion(): string {
    return this.resourceVersion;
  }

  /** Resolves once the first list is in the store; rejects with the signal's reason when it aborts first. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.synced) return Promise.resolve();
    // An abort listener added to an already aborted signal never fires: the wait would never end.
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const waiter = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        this.syncWaiters = this.syncWaiters.filter((w) => w !== waiter);
        reject(signal?.reason);
      };
      this.syncWaiters.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  start(): void {
    if (this.running) return;
    this.stopController = new AbortController();
    this.running = this.run(this.stopController.signal);
  }

  async stop(): Promise<void> {
    this.stopController?.abort(new Error('informer stopped'));
    this.watchController?.abort(new Error('informer stopped'));
    await this.running;
    this.running = undefined;
  }

  /**
   * Ends the current watch and resumes from `resourceVersion` (default: the last one seen). Lets
   * tests force a stale resourceVersion, and so a 410, without waiting for etcd compaction.
   */
  restartWatch(resourceVersion?: string): void {
    this.forcedRewatchFrom = resourceVersion;
    this.watchController?.abort(new Error('watch restart requested'));
  }

  private emit(e: InformerEvent): void {
    for (const fn of this.lifecycle) this.safe(() => fn(e));
  }

  private safe(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log.error({ err }, 'informer event handler threw');
    }
  }

  private async run(stop: AbortSignal): Promise<void> {
    const { clock } = this.opts;
    while (!stop.aborted) {
      try {
        if (this.needList) await this.list(stop);
        await this.watch(stop);
      } catch (err) {
        if (stop.aborted) break;
        const kerr = toKubeError(err);
        if (isGone(kerr)) {
          // Our resourceVersion is older than what the server keeps: relist (consistent read).
          this.log.info({ resourceVersion: this.resourceVersion }, 'resourceVersion expired; relisting');
          this.emit({ type: 'watch-ended', reason: 'gone' });
          this.needList = true;
          this.resourceVersion = '';
          continue;
        }
        const delayMs = Math.max(this.backoff.next(), kerr.retryAfterMs ?? 0);
        this.log.warn({ err: kerr.message, code: kerr.code, delayMs }, 'list/watch failed; retrying');
        this.emit({ type: 'backoff', delayMs });
        await clock.sleep(delayMs, stop).catch(() => undefined);
      }
    }
  }

  private query(): Record<string, string | undefined> {
    return { labelSelector: this.opts.labelSelector, fieldSelector: this.opts.fieldSelector };
  }

  private transform(obj: T): T {
    if (this.opts.transform) return this.opts.transform(obj);
    if (obj.metadata?.managedFields) {
      const { managedFields: _drop, ...metadata } = obj.metadata;
      return { ...obj, metadata } as T;
    }
    return obj;
  }

  private async list(stop: AbortSignal): Promise<void> {
    const path = resourcePath(this.resource, this.opts.namespace);
    const fresh = new Map<string, T>();
    let cont: string | undefined;
    let rv = '';
    do {
      const page: { metadata?: { resourceVersion?: string; continue?: string }; items?: T[] } =
        await this.opts.http.request('GET', path, {
          query: { ...this.query(), limit: this.opts.pageSize ?? 500, continue: cont },
          signal: stop,
        });
      for (const item of page.items ?? []) {
        // List items carry no kind; restore it so handlers see complete objects.
        const obj = this.transform({
          apiVersion: apiVersionOf(this.resource),
          kind: this.resource.kind,
          ...item,
        });
        fresh.set(objectKey(obj), obj);
      }
      cont = page.metadata?.continue || undefined;
      rv = page.metadata?.resourceVersion ?? rv;
    } while (cont);

    // Replace the store, emitting the difference as events.
    for (const key of this.store.keys()) {
      if (!fresh.has(key)) {
        const gone = this.store.delete(key)!;
        this.dispatchDelete(gone);
      }
    }
    for (const obj of fresh.values()) {
      const old = this.store.set(obj);
      if (!old) this.dispatchAdd(obj);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.dispatchUpdate(old, obj);
    }
    this.resourceVersion = rv;
    this.needList = false;
    this.emit({ type: 'listed', count: fresh.size, resourceVersion: rv });
    if (!this.synced) {
      this.synced = true;
      for (const w of this.syncWaiters.splice(0)) w();
    }
  }

  private async watch(stop: AbortSignal): Promise<void> {
    const { clock } = this.opts;
    const controller = new AbortController();
    this.watchController = controller;
    const onStop = () => controller.abort(stop.reason);
    // stop() may have run while the list was finishing; a listener added now would never fire.
    if (stop.aborted) return;
    stop.addEventListener('abort', onStop, { once: true });
    const idleMs = this.opts.idleTimeoutMs ?? 120_000;
    let idleTimer: Timer | undefined;
    let idled = false;
    const arm = () => {
      idleTimer?.cancel();
      idleTimer = clock.setTimer(idleMs, () => {
        idled = true;
        controller.abort(new Error(`no data for ${idleMs} ms`));
      });
    };
    const min = this.opts.minWatchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.floor(min + Math.random() * min);
    this.emit({ type: 'watch-started', resourceVersion: this.resourceVersion });
    arm();
    try {
      await this.opts.http.watch(
        resourcePath(this.resource, this.opts.namespace),
        {
          ...this.query(),
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: 'true',
          timeoutSeconds,
        },
        { onLine: (line) => this.apply(line), onData: arm },
        controller.signal,
      );
      this.emit({ type: 'watch-ended', reason: 'timeout' });
    } catch (err) {
      if (stop.aborted) return;
      if (this.forcedRewatchFrom !== undefined || (controller.signal.aborted && !idled)) {
        if (this.forcedRewatchFrom !== undefined) this.resourceVersion = this.forcedRewatchFrom;
        this.forcedRewatchFrom = undefined;
        this.emit({ type: 'watch-ended', reason: 'error', error: 'restart requested' });
        return;
      }
      if (idled) {
        this.emit({ type: 'watch-ended', reason: 'idle' });
        throw new KubeError({ code: 0, reason: 'Timeout', message: `watch idle for ${idleMs} ms` });
      }
      this.emit({ type: 'watch-ended', reason: isGone(err) ? 'gone' : 'error', error: String(err) });
      throw err;
    } finally {
      idleTimer?.cancel();
      stop.removeEventListener('abort', onStop);
      this.watchController = undefined;
    }
  }

  private apply(line: WatchLine): void {
    const raw = line.object as T;
    switch (line.type) {
      case 'ADDED':
      case 'MODIFIED': {
        const obj = this.transform(raw);
        const old = this.store.set(obj);
        this.resourceVersion = obj.metadata.resourceVersion ?? this.resourceVersion;
        if (old) this.dispatchUpdate(old, obj);
        else this.dispatchAdd(obj);
        return;
      }
      case 'DELETED': {
        const obj = this.transform(raw);
        this.store.delete(objectKey(obj));
        this.resourceVersion = obj.metadata.resourceVersion ?? this.resourceVersion;
        this.dispatchDelete(obj);
        return;
      }
      case 'BOOKMARK':
        this.resourceVersion = raw.metadata?.resourceVersion ?? this.resourceVersion;
        return;
      case 'ERROR': {
        const status = line.object as { code?: number; reason?: string; message?: string };
        throw new KubeError({
          code: status.code ?? 500,
          reason: status.reason ?? 'Unknown',
          message: status.message ?? 'watch error',
        });
      }
    }
  }

  private dispatchAdd(obj: T): void {
    for (const { handler } of this.handlers) this.safe(() => handler.onAdd?.(obj));
  }

  private dispatchUpdate(old: T, obj: T): void {
    for (const { handler, predicates } of this.handlers) {
      if (predicates.every((p) => p(old, obj))) this.safe(() => handler.onUpdate?.(old, obj));
    }
  }

  private dispatchDelete(obj: T): void {
    for (const { handler } of this.handlers) this.safe(() => handler.onDelete?.(obj));
  }
}
