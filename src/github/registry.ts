import type { Logger } from 'pino';
import type { Clock, Timer } from '../runtime/clock.ts';
import { GitHubApiError } from './errors.ts';
import type { GitHubMetrics } from './metrics.ts';
import { type GitHubScope, scopeKey } from './scope.ts';

/**
 * One shared view, per credential and scope, of the runners GitHub knows. Controllers look runners
 * up here instead of listing them: a refresh lists every page (`per_page=100`) with conditional
 * requests, so an unchanged page costs no budget, and it happens at most once per `Cache-Control`
 * max-age however many pods ask. Differences between two views are published as change events.
 */

export interface RunnerLabel {
  readonly id?: number | undefined;
  readonly name: string;
  readonly type?: string | undefined;
}

export interface GitHubRunner {
  readonly id: number;
  readonly name: string;
  readonly os: string;
  /** GitHub documents `online` and `offline`. */
  readonly status: string;
  readonly busy: boolean;
  readonly ephemeral: boolean;
  readonly runnerGroupId: number | undefined;
  readonly labels: readonly RunnerLabel[];
}

export interface RunnerPage {
  runners: GitHubRunner[];
  totalCount: number;
  hasNext: boolean;
  /** `Cache-Control` max-age of the answer, ms. */
  maxAgeMs: number | undefined;
  notModified: boolean;
}

export interface ListOptions {
  waitForBudget?: boolean | undefined;
  signal?: AbortSignal | undefined;
}

/** Lists one page of a scope's runners (GitHubClient implements it). */
export interface RunnerPageLister {
  readonly credentialId: string;
  listRunnerPage(scope: GitHubScope, page: number, options: ListOptions): Promise<RunnerPage>;
}

/** An immutable list of a scope's runners with lookups by name and ID. */
export class RunnerSnapshot {
  readonly scope: GitHubScope;
  readonly scopeKey: string;
  readonly runners: readonly GitHubRunner[];
  /** Epoch ms at which the listing that produced this snapshot started. */
  readonly fetchedAt: number;
  readonly maxAgeMs: number;
  /**
   * The pages agreed with each other (same total, no runner twice). When runners changed while the
   * pages were listed and re-listing did not help, a runner may be missing although registered:
   * such a snapshot still answers "found", but its "not found" proves nothing.
   */
  readonly complete: boolean;
  private readonly names: Map<string, GitHubRunner>;
  private readonly ids: Map<number, GitHubRunner>;

  constructor(
    scope: GitHubScope,
    runners: readonly GitHubRunner[],
    fetchedAt: number,
    maxAgeMs: number,
    complete = true,
  ) {
    this.scope = scope;
    this.scopeKey = scopeKey(scope);
    this.runners = runners;
    this.fetchedAt = fetchedAt;
    this.maxAgeMs = maxAgeMs;
    this.complete = complete;
    this.names = new Map(runners.map((r) => [r.name, r]));
    this.ids = new Map(runners.map((r) => [r.id, r]));
  }

  byName(name: string): GitHubRunner | undefined {
    return this.names.get(name);
  }

  byId(id: number): GitHubRunner | undefined {
    return this.ids.get(id);
  }

  isFresh(now: number): boolean {
    return now - this.fetchedAt < this.maxAgeMs;
  }
}

export type RunnerChange =
  | { type: 'appeared'; scope: string; runner: GitHubRunner; initialLoad: boolean }
  | { type: 'vanished'; scope: string; runner: GitHubRunner }
  | {
      type: 'busy' | 'idle' | 'online' | 'offline';
      scope: string;
      runner: GitHubRunner;
      previous: GitHubRunner;
    };

export type RunnerChangeListener = (change: RunnerChange) => void;

/**
 * What changed between two lists of the same scope. Identity is the runner ID: a runner re-created
 * under the same name is one `vanished` and one `appeared`. With no previous list, every runner
 * `appeared` with `initialLoad`.
 */
export function diffRunners(
  previous: readonly GitHubRunner[] | undefined,
  next: readonly GitHubRunner[],
  scope: string,
): RunnerChange[] {
  const changes: RunnerChange[] = [];
  const before = new Map((previous ?? []).map((r) => [r.id, r]));
  const initialLoad = previous === undefined;
  const seen = new Set<number>();
  for (const runner of next) {
    seen.add(runner.id);
    const prev = before.get(runner.id);
    if (!prev) {
      changes.push({ type: 'appeared', scope, runner, initialLoad });
      continue;
    }
    if (prev.busy !== runner.busy) {
      changes.push({ type: runner.busy ? 'busy' : 'idle', scope, runner, previous: prev });
    }
    const wasOnline = prev.status === 'online';
    const isOnline = runner.status === 'online';
    if (wasOnline !== isOnline) {
      changes.push({ type: isOnline ? 'online' : 'offline', scope, runner, previous: prev });
    }
  }
  for (const prev of previous ?? []) {
    if (!seen.has(prev.id)) changes.push({ type: 'vanished', scope, runner: prev });
  }
  return changes;
}

interface LocalEdit {
  seq: number;
  kind: 'removed' | 'added';
  runner: GitHubRunner | undefined;
  id: number;
}

interface ScopeState {
  scope: GitHubScope;
  key: string;
  snapshot: RunnerSnapshot | undefined;
  inflight: { promise: Promise<RunnerSnapshot>; startSeq: number; startedAt: number } | undefined;
  followUp: Promise<RunnerSnapshot> | undefined;
  failure: { error: unknown; retryAt: number } | undefined;
  /** Our own writes (removal, JIT creation) made while a listing was in flight. */
  edits: LocalEdit[];
  keepers: number;
  timer: Timer | undefined;
  /** Once no resource uses the scope: drops its state when its snapshot expires. */
  release: Timer | undefined;
  /**
   * The last listing's pages still disagreed after every re-listing: runners keep changing (a large
   * fleet under churn), so listing again at once would only disagree again. One pass per listing
   * until one agrees.
   */
  churning: boolean;
}

export interface RunnerRegistryOptions {
  lister: RunnerPageLister;
  clock: Clock;
  logger: Logger;
  metrics?: GitHubMetrics | undefined;
  /** Used when GitHub sends no `Cache-Control` max-age (default 60 s, GitHub's value). */
  defaultMaxAgeMs?: number | undefined;
  /** After a failed refresh, `get` answers with the failure this long without calling (default 5 s). */
  failureHoldMs?: number | undefined;
  /** Re-list at most this many extra times when pages disagree (runners changed mid-listing). */
  inconsistentRetries?: number | undefined;
}

/** Why a listing started (the `reason` of `github_runner_registry_listings_total`). */
export type ListingReason = 'first' | 'max-age' | 'requested' | 'pages-disagreed';

export interface GetOptions extends ListOptions {
  /** On a failed refresh, answer with the last (stale) snapshot instead of throwing. */
  allowStale?: boolean | undefined;
}

const MAX_PAGES = 1000; // 100,000 runners
/** Pages of one listing in flight together: a few, far below GitHub's 100 concurrent requests. */
const PAGES_AT_ONCE = 5;
/** Runners come or gone during a listing below which listing again is likely to agree. */
const SMALL_DRIFT = 2;

export class RunnerRegistry {
  readonly credentialId: string;
  private readonly lister: RunnerPageLister;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly defaultMaxAgeMs: number;
  private readonly failureHoldMs: number;
  private readonly inconsistentRetries: number;
  private readonly states = new Map<string, ScopeState>();
  private readonly listeners = new Set<RunnerChangeListener>();
  private readonly untrack: (() => void) | undefined;
  private readonly metrics: GitHubMetrics | undefined;
  private seq = 0;
  /** Completed refreshes (each lists every page once, conditionally). */
  refreshes = 0;

  constructor(options: RunnerRegistryOptions) {
    this.lister = options.lister;
    this.credentialId = options.lister.credentialId;
    this.clock = options.clock;
    this.log = options.logger;
    this.defaultMaxAgeMs = options.defaultMaxAgeMs ?? 60_000;
    this.failureHoldMs = options.failureHoldMs ?? 5000;
    this.inconsistentRetries = options.inconsistentRetries ?? 2;
    this.metrics = options.metrics;
    this.untrack = options.metrics?.trackRegistry({
      credential: this.credentialId,
      ages: () => this.ages(),
    });
  }

  private state(scope: GitHubScope): ScopeState {
    const key = scopeKey(scope);
    let s = this.states.get(key);
    if (!s) {
      s = {
        scope,
        key,
        snapshot: undefined,
        inflight: undefined,
        followUp: undefined,
        failure: undefined,
        edits: [],
        keepers: 0,
        timer: undefined,
        release: undefined,
        churning: false,
      };
      this.states.set(key, s);
    }
    return s;
  }

  /** The scope's runners: cached while younger than max-age, else refreshed (one refresh shared by all callers). */
  async get(scope: GitHubScope, options: GetOptions = {}): Promise<RunnerSnapshot> {
    const s = this.state(scope);
    const now = this.clock.now();
    if (s.snapshot?.isFresh(now)) return s.snapshot;
    if (s.inflight) return this.settle(s, s.inflight.promise, options);
    if (s.failure && now < s.failure.retryAt) {
      if (options.allowStale && s.snapshot) return s.snapshot;
      throw s.failure.error;
    }
    return this.settle(s, this.startRefresh(s, options, s.snapshot ? 'max-age' : 'first'), options);
  }

  /**
   * Lists now, ignoring max-age (still conditionally, so unchanged pages are free). Callers that
   * arrive while a listing runs share one follow-up listing that starts after it.
   */
  async refreshNow(scope: GitHubScope, options: ListOptions = {}): Promise<RunnerSnapshot> {
    const s = this.state(scope);
    if (!s.inflight) return this.startRefresh(s, options, 'requested');
    s.followUp ??= s.inflight.promise
      .catch(() => undefined)
      .then(() => {
        s.followUp = undefined;
        return this.startRefresh(s, options, 'requested');
      });
    return s.followUp;
  }

  /**
   * A snapshot whose listing started at or after `notBefore` (epoch ms): the cached one when it is
   * that recent, else a listing in flight that started late enough, else a new one (conditional, so
   * unchanged pages cost nothing). For decisions that must not rest on a list older than a known
   * event (a runner container's stop, a registration deadline).
   */
  async fresherThan(
    scope: GitHubScope,
    notBefore: number,
    options: ListOptions = {},
  ): Promise<RunnerSnapshot> {
    const s = this.state(scope);
    if (s.snapshot && s.snapshot.fetchedAt >= notBefore) return s.snapshot;
    if (s.inflight && s.inflight.startedAt >= notBefore) return s.inflight.promise;
    return this.refreshNow(scope, options);
  }

  /** The last snapshot, however old; never calls GitHub. */
  peek(scope: GitHubScope): RunnerSnapshot | undefined {
    return this.states.get(scopeKey(scope))?.snapshot;
  }

  async lookupByName(
    scope: GitHubScope,
    name: string,
    options: GetOptions = {},
  ): Promise<GitHubRunner | undefined> {
    return (await this.get(scope, options)).byName(name);
  }

  async lookupById(
    scope: GitHubScope,
    id: number,
    options: GetOptions = {},
  ): Promise<GitHubRunner | undefined> {
    return (await this.get(scope, options)).byId(id);
  }

  /** Change events of every scope; returns the unsubscribe function. */
  subscribe(listener: RunnerChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Keeps a scope fresh without callers: refreshes whenever the snapshot reaches its max-age, so
   * change events flow. Returns the function that stops it (when every keeper has stopped).
   */
  keepFresh(scope: GitHubScope): () => void {
    const s = this.state(scope);
    s.keepers++;
    if (s.keepers === 1) {
      s.release?.cancel();
      s.release = undefined;
      // A snapshot still fresh is served, not listed again: the keeper lists when it expires.
      this.scheduleKeeper(s, 0);
    }
    let stopped = false;
    return () => {
      if (stopped) return;
      stopped = true;
      s.keepers--;
      if (s.keepers === 0) {
        s.timer?.cancel();
        s.timer = undefined;
      }
    };
  }

  private scheduleKeeper(s: ScopeState, delayMs: number): void {
    s.timer = this.clock.setTimer(delayMs, () => {
      s.timer = undefined;
      this.get(s.scope)
        .catch(() => undefined)
        .then(() => {
          if (s.keepers === 0 || s.timer) return;
          const now = this.clock.now();
          let next = this.defaultMaxAgeMs;
          if (s.failure && s.failure.retryAt > now) next = s.failure.retryAt - now;
          else if (s.snapshot) next = s.snapshot.fetchedAt + s.snapshot.maxAgeMs - now;
          this.scheduleKeeper(s, Math.max(1000, next));
        });
    });
  }

  /** Our own removal succeeded (or GitHub said the runner is gone): update the view without listing. */
  recordRemoved(scope: GitHubScope, runnerId: number): void {
    const s = this.state(scope);
    if (s.inflight) s.edits.push({ seq: ++this.seq, kind: 'removed', runner: undefined, id: runnerId });
    const snap = s.snapshot;
    const runner = snap?.byId(runnerId);
    if (!snap || !runner) return;
    s.snapshot = new RunnerSnapshot(
      snap.scope,
      snap.runners.filter((r) => r.id !== runnerId),
      snap.fetchedAt,
      snap.maxAgeMs,
      snap.complete,
    );
    this.emit([{ type: 'vanished', scope: s.key, runner }]);
  }

  /** A runner we created (JIT config): add it to the view without listing. */
  recordCreated(scope: GitHubScope, runner: GitHubRunner): void {
    const s = this.state(scope);
    if (s.inflight) s.edits.push({ seq: ++this.seq, kind: 'added', runner, id: runner.id });
    const snap = s.snapshot;
    if (!snap || snap.byId(runner.id)) return;
    s.snapshot = new RunnerSnapshot(
      snap.scope,
      [...snap.runners, runner],
      snap.fetchedAt,
      snap.maxAgeMs,
      snap.complete,
    );
    this.emit([{ type: 'appeared', scope: s.key, runner, initialLoad: false }]);
  }

  /**
   * No resource uses the scope any more: its state goes once its snapshot expires (at once without
   * a fresh one). Runner pods come and go by the hundred, and the last of a scope to go is often
   * followed within seconds by the next to ask: dropping a fresh snapshot had that one list every
   * page again, as often as reconcile timing (GC pauses) happened to empty the scope.
   */
  forget(scope: GitHubScope): void {
    const s = this.states.get(scopeKey(scope));
    if (!s || s.keepers > 0) return;
    s.timer?.cancel();
    s.timer = undefined;
    this.releaseWhenUnused(s);
  }

  private releaseWhenUnused(s: ScopeState): void {
    s.release?.cancel();
    s.release = undefined;
    const busy = s.inflight !== undefined || s.followUp !== undefined;
    const delayMs = releaseDelayMs(s.snapshot, busy, this.clock.now());
    if (delayMs === 0) {
      if (this.states.get(s.key) === s) this.states.delete(s.key);
      return;
    }
    s.release = this.clock.setTimer(delayMs, () => {
      s.release = undefined;
      if (s.keepers === 0) this.releaseWhenUnused(s);
    });
  }

  /** Stops keepers and metrics. */
  close(): void {
    for (const s of this.states.values()) {
      s.timer?.cancel();
      s.release?.cancel();
    }
    this.states.clear();
    this.untrack?.();
  }

  /** Age of each scope's snapshot in seconds (the registry age metric). */
  *ages(): Iterable<{ scope: string; ageSeconds: number }> {
    const now = this.clock.now();
    for (const s of this.states.values()) {
      if (s.snapshot) yield { scope: s.key, ageSeconds: (now - s.snapshot.fetchedAt) / 1000 };
    }
  }

  private async settle(
    s: ScopeState,
    refresh: Promise<RunnerSnapshot>,
    options: GetOptions,
  ): Promise<RunnerSnapshot> {
    try {
      return await refresh;
    } catch (err) {
      if (options.allowStale && s.snapshot) return s.snapshot;
      throw err;
    }
  }

  private startRefresh(s: ScopeState, options: ListOptions, reason: ListingReason): Promise<RunnerSnapshot> {
    const startSeq = ++this.seq;
    const promise = this.refresh(s, startSeq, options, reason).then(
      (snapshot) => {
        s.inflight = undefined;
        s.failure = undefined;
        return snapshot;
      },
      (err: unknown) => {
        s.inflight = undefined;
        s.edits = [];
        const now = this.clock.now();
        const resetAt = err instanceof GitHubApiError ? err.rateLimitResetAt : undefined;
        s.failure = { error: err, retryAt: Math.max(resetAt ?? 0, now + this.failureHoldMs) };
        this.log.warn({ scope: s.key, err: errorMessage(err) }, 'runner registry: refresh failed');
        throw err;
      },
    );
    s.inflight = { promise, startSeq, startedAt: this.clock.now() };
    return promise;
  }

  private async refresh(
    s: ScopeState,
    startSeq: number,
    options: ListOptions,
    reason: ListingReason,
  ): Promise<RunnerSnapshot> {
    const startedAt = this.clock.now();
    let listing = await this.listAll(s.scope, options, reason);
    // Pages that agree matter only to a caller that must prove an absence (it asked for this
    // listing); everyone else is served a listing that disagreed as well. And listing again helps
    // when one or two runners came or went meanwhile, not when many did (a fleet scaling up, or
    // churning): the next pass would disagree as well.
    const retries =
      reason !== 'requested' || s.churning || listing.drift > SMALL_DRIFT ? 0 : this.inconsistentRetries;
    for (let i = 0; !listing.consistent && i < retries; i++) {
      listing = await this.listAll(s.scope, options, 'pages-disagreed');
    }
    if (listing.consistent) s.churning = false;
    else if (retries > 0) s.churning = true;
    if (!listing.consistent && retries > 0) {
      this.log.warn(
        { scope: s.key },
        'runner registry: pages disagreed while runners changed; the listing is kept but proves no absence',
      );
    }
    let runners = listing.runners;
    // Writes of ours that GitHub's pages may predate.
    for (const edit of s.edits) {
      if (edit.seq < startSeq) continue;
      if (edit.kind === 'removed') runners = runners.filter((r) => r.id !== edit.id);
      else if (edit.runner && !runners.some((r) => r.id === edit.id)) runners = [...runners, edit.runner];
    }
    s.edits = [];
    const snapshot = new RunnerSnapshot(
      s.scope,
      runners,
      startedAt,
      // Served for GitHub's max-age even when its pages disagreed: it shows who is registered, and a
      // caller that must prove an absence asks `fresherThan` for a listing of its own. Served for
      // less, under churn (where nearly every listing disagrees) every lookup listed all pages again.
      listing.maxAgeMs ?? this.defaultMaxAgeMs,
      listing.consistent,
    );
    const previous = s.snapshot;
    s.snapshot = snapshot;
    this.refreshes++;
    this.log.debug(
      { scope: s.key, runners: runners.length, pages: listing.pages, notModified: listing.notModifiedPages },
      'runner registry: refreshed',
    );
    // A runner missing from an incomplete listing has not vanished.
    const base = previous?.runners;
    const seen =
      listing.consistent || !base ? runners : [...runners, ...base.filter((r) => !snapshot.byId(r.id))];
    this.emit(diffRunners(base, seen, s.key));
    return snapshot;
  }

  private async listAll(scope: GitHubScope, options: ListOptions, reason: ListingReason) {
    this.metrics?.registryListings.inc({ credential: this.credentialId, reason });
    const first = await this.lister.listRunnerPage(scope, 1, options);
    const pages = [first];
    if (first.hasNext) {
      // Runners that register or go while the pages are listed make them disagree, the more the
      // longer a listing takes: the pages page 1's total calls for are asked for a few at a time.
      const last = Math.min(
        MAX_PAGES,
        Math.max(2, Math.ceil(first.totalCount / Math.max(1, first.runners.length))),
      );
      // A page that ends the list (it shrank meanwhile) ends the listing.
      for (let from = 2; from <= last && pages.at(-1)!.hasNext; from += PAGES_AT_ONCE) {
        const batch: number[] = [];
        for (let page = from; page <= Math.min(last, from + PAGES_AT_ONCE - 1); page++) batch.push(page);
        pages.push(
          ...(await Promise.all(batch.map((page) => this.lister.listRunnerPage(scope, page, options)))),
        );
      }
      // The list grew meanwhile: followed to its end.
      for (let page = last + 1; pages.at(-1)!.hasNext && page <= MAX_PAGES; page++) {
        pages.push(await this.lister.listRunnerPage(scope, page, options));
      }
    }
    const byId = new Map<number, GitHubRunner>();
    let consistent = true;
    let notModifiedPages = 0;
    // How many runners came or went while the pages were listed, as far as the pages tell.
    let drift = 0;
    for (const p of pages) {
      if (p.notModified) notModifiedPages++;
      if (p.totalCount !== first.totalCount) consistent = false;
      drift = Math.max(drift, Math.abs(p.totalCount - first.totalCount));
      for (const r of p.runners) {
        if (byId.has(r.id)) {
          consistent = false;
          drift++;
        }
        byId.set(r.id, r);
      }
    }
    if (byId.size !== first.totalCount) consistent = false;
    drift = Math.max(drift, Math.abs(byId.size - first.totalCount));
    return {
      runners: [...byId.values()],
      maxAgeMs: first.maxAgeMs,
      consistent,
      drift,
      pages: pages.length,
      notModifiedPages,
    };
  }

  private emit(changes: RunnerChange[]): void {
    for (const change of changes) {
      for (const listener of this.listeners) {
        try {
          listener(change);
        } catch (err) {
          this.log.error({ err: errorMessage(err), change: change.type }, 'runner registry: listener threw');
        }
      }
    }
  }
}

/**
 * How long to hold a scope no resource uses before dropping it (0: now): until its snapshot
 * expires, so a caller that comes back meanwhile is served without a listing. A listing in flight
 * is waited for (it leaves a fresh snapshot).
 */
export function releaseDelayMs(
  snapshot: Pick<RunnerSnapshot, 'fetchedAt' | 'maxAgeMs'> | undefined,
  listing: boolean,
  now: number,
): number {
  if (listing) return 1000;
  if (!snapshot) return 0;
  return Math.max(0, snapshot.fetchedAt + snapshot.maxAgeMs - now);
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
