import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock, Timer } from './clock.ts';
import { microTime } from './clock.ts';
import { isNotFound, toKubeError } from './errors.ts';
import { resourcePath } from './informer.ts';
import { type KubeHttp, PATCH_CONTENT_TYPES } from './kube-http.ts';
import { EVENTS } from './resources.ts';
import type { KubeObject } from './store.ts';

/**
 * Writes events.k8s.io/v1 Events. Repeats of the same event (same object, type, reason, action and
 * note) become one Event whose `series` counts them; the count is written at most once per
 * `seriesFlushMs` per event, so a hot loop costs a handful of API writes, not one per repeat.
 */

export type EventType = 'Normal' | 'Warning';

export interface ObjectRef {
  apiVersion?: string;
  kind?: string;
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

export function refOf(obj: KubeObject): ObjectRef {
  return {
    ...(obj.apiVersion ? { apiVersion: obj.apiVersion } : {}),
    ...(obj.kind ? { kind: obj.kind } : {}),
    ...(obj.metadata.name ? { name: obj.metadata.name } : {}),
    ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}),
    ...(obj.metadata.uid ? { uid: obj.metadata.uid } : {}),
  };
}

export interface RecordInput {
  regarding: KubeObject | ObjectRef;
  related?: KubeObject | ObjectRef;
  type: EventType;
  reason: string;
  /** What was done or failed, e.g. `Reconcile`, `Unregister`. */
  action?: string;
  note: string;
}

interface SeriesState {
  name: string;
  namespace: string;
  count: number;
  lastObserved: number;
  flushed: number;
  timer: Timer | undefined;
  created: Promise<boolean>;
}

export interface EventRecorderOptions {
  http: KubeHttp;
  clock: Clock;
  log: Logger;
  reportingController: string;
  reportingInstance: string;
  /** Repeats further apart than this start a new Event (client-go: 6 minutes). */
  seriesWindowMs?: number;
  /** Longest a series count stays unwritten. */
  seriesFlushMs?: number;
  /** Distinct events kept for aggregation. */
  maxTracked?: number;
  /**
   * Event writes in flight at once. Events are for people, not for the reconcilers: during a burst
   * (a hundred pods created) they wait their turn instead of taking the API server from the
   * writes that bring runners up. client-go's broadcaster writes one at a time.
   */
  maxInFlight?: number;
}

const NOTE_LIMIT = 1024;
/** A repeat of an Event within this long counts in its series instead of making a new Event. */
const DEFAULT_SERIES_WINDOW_MS = 360_000;
const MAX_WAITING = 1000;

function isRef(x: KubeObject | ObjectRef): x is ObjectRef {
  return !('metadata' in x);
}

export class EventRecorder {
  private readonly opts: EventRecorderOptions;
  private readonly series = new Map<string, SeriesState>();
  /** API writes made (creates + series updates), for tests and metrics. */
  writes = 0;
  /** Events not written because too many were waiting. */
  dropped = 0;
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(opts: EventRecorderOptions) {
    this.opts = opts;
  }

  /** Series remembered for aggregation (for tests and memory checks). */
  get tracked(): number {
    return this.series.size;
  }

  /** Records an event; never throws (a failed Event must not fail a reconcile). */
  record(input: RecordInput): void {
    const regarding = isRef(input.regarding) ? input.regarding : refOf(input.regarding);
    const related = input.related ? (isRef(input.related) ? input.related : refOf(input.related)) : undefined;
    const namespace = regarding.namespace ?? 'default';
    const action = input.action ?? input.reason;
    const note = input.note.length > NOTE_LIMIT ? `${input.note.slice(0, NOTE_LIMIT - 3)}...` : input.note;
    const key = JSON.stringify([
      regarding.uid ?? `${regarding.kind}/${namespace}/${regarding.name}`,
      input.type,
      input.reason,
      action,
      note,
    ]);
    const now = this.opts.clock.now();
    const existing = this.series.get(key);
    if (existing && now - existing.lastObserved <= (this.opts.seriesWindowMs ?? DEFAULT_SERIES_WINDOW_MS)) {
      existing.count++;
      existing.lastObserved = now;
      // Kept in order of last observation, so eviction reads the map from its start.
      this.series.delete(key);
      this.series.set(key, existing);
      existing.timer ??= this.opts.clock.setTimer(this.opts.seriesFlushMs ?? 10_000, () => {
        existing.timer = undefined;
        void this.flushSeries(existing);
      });
      return;
    }
    existing?.timer?.cancel();
    const name = `${regarding.name ?? 'object'}.${now.toString(16)}${randomBytes(3).toString('hex')}`;
    const state: SeriesState = {
      name,
      namespace,
      count: 1,
      lastObserved: now,
      flushed: 1,
      timer: undefined,
      created: Promise.resolve(false),
    };
    state.created = this.create({
      name,
      namespace,
      now,
      regarding,
      related,
      type: input.type,
      reason: input.reason,
      action,
      note,
    });
    this.series.set(key, state);
    this.evict(now);
  }

  /** Writes every pending series count now (on shutdown). */
  async flush(): Promise<void> {
    await Promise.all(
      [...this.series.values()].map((s) => {
        s.timer?.cancel();
        s.timer = undefined;
        return this.flushSeries(s);
      }),
    );
  }

  /**
   * Forgets series past their window (a repeat starts a new Event anyway) and, beyond
   * `maxTracked`, the least recently observed: memory follows the last few minutes' Events, not
   * every object that ever had one.
   */
  private evict(now: number): void {
    const max = this.opts.maxTracked ?? 4096;
    const window = this.opts.seriesWindowMs ?? DEFAULT_SERIES_WINDOW_MS;
    for (const [key, s] of this.series) {
      if (this.series.size <= max && now - s.lastObserved <= window) break;
      if (s.count > s.flushed) void this.flushSeries(s);
      else s.timer?.cancel();
      this.series.delete(key);
    }
  }

  private async create(e: {
    name: string;
    namespace: string;
    now: number;
    regarding: ObjectRef;
    related: ObjectRef | undefined;
    type: EventType;
    reason: string;
    action: string;
    note: string;
  }): Promise<boolean> {
    const body = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: e.name, namespace: e.namespace },
      eventTime: microTime(e.now),
      reportingController: this.opts.reportingController,
      reportingInstance: this.opts.reportingInstance,
      action: e.action,
      reason: e.reason,
      note: e.note,
      type: e.type,
      regarding: e.regarding,
      ...(e.related ? { related: e.related } : {}),
    };
    // Best effort: with the API server slow or down, Events beyond a backlog are dropped, not hoarded.
    if (this.waiting.length >= MAX_WAITING) {
      this.dropped++;
      return false;
    }
    await this.turn();
    try {
      this.writes++;
      await this.opts.http.request('POST', resourcePath(EVENTS, e.namespace), {
        body,
      });
      return true;
    } catch (err) {
      this.opts.log.warn({ err: toKubeError(err).message, reason: e.reason }, 'could not write Event');
      return false;
    } finally {
      this.done();
    }
  }

  private async turn(): Promise<void> {
    if (this.inFlight < (this.opts.maxInFlight ?? 4)) {
      this.inFlight++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  /** Hands the slot to the next waiting write, if any. */
  private done(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.inFlight--;
  }

  private async flushSeries(s: SeriesState): Promise<void> {
    if (s.count <= s.flushed) return;
    if (!(await s.created)) return;
    const count = s.count;
    await this.turn();
    try {
      this.writes++;
      await this.opts.http.request('PATCH', resourcePath(EVENTS, s.namespace, s.name), {
        body: { series: { count, lastObservedTime: microTime(s.lastObserved) } },
        contentType: PATCH_CONTENT_TYPES.merge,
      });
      s.flushed = Math.max(s.flushed, count);
    } catch (err) {
      if (!isNotFound(err)) {
        this.opts.log.warn({ err: toKubeError(err).message }, 'could not update Event series');
      }
    } finally {
      this.done();
    }
  }
}
