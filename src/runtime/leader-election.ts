import type { Logger } from 'pino';
import type { Clock, Timer } from './clock.ts';
import { microTime } from './clock.ts';
import { isConflict, isNotFound, KubeError, toKubeError } from './errors.ts';
import { resourcePath } from './informer.ts';
import type { KubeHttp } from './kube-http.ts';
import { LEASES } from './resources.ts';

/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: the lease is judged by
 * when *we* last saw its record change (observed time), never by comparing our clock with the
 * holder's timestamps, so clock skew between replicas cannot cause two leaders.
 */

export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

export interface LeaseObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec?: LeaseSpec;
}

export interface LeaderElectionTimings {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/** A candidate waits its retry period plus up to this share of it (client-go's jitter). */
export const RETRY_JITTER = 0.2;

export const DEFAULT_TIMINGS: LeaderElectionTimings = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};

export type LeaseDecision =
  | { action: 'create' }
  | { action: 'renew' }
  | { action: 'acquire'; takeover: boolean }
  | { action: 'wait'; holder: string; expiresAt: number };

/**
 * What to do with the lease as it stands. `observedAt` is our clock's time when the record last
 * changed (holder or renewTime) as seen by us.
 */
export function leaseDecision(input: {
  lease: LeaseSpec | undefined;
  identity: string;
  observedAt: number;
  now: number;
  leaseDurationMs: number;
}): LeaseDecision {
  const { lease, identity, observedAt, now } = input;
  if (!lease) return { action: 'create' };
  const holder = lease.holderIdentity ?? '';
  if (holder === identity) return { action: 'renew' };
  if (holder === '') return { action: 'acquire', takeover: false };
  const durationMs = (lease.leaseDurationSeconds ?? input.leaseDurationMs / 1000) * 1000;
  const expiresAt = observedAt + durationMs;
  if (now < expiresAt) return { action: 'wait', holder, expiresAt };
  return { action: 'acquire', takeover: true };
}

/**
 * When the attempt starting at `now` must be over. A leader's attempts end by its renew deadline
 * (the moment it gives the lease up anyway); a candidate's attempt gets one renew deadline, so a
 * stalled request costs it one round, not the HTTP timeout.
 */
export function attemptDeadline(input: {
  leading: boolean;
  lastRenew: number;
  now: number;
  renewDeadlineMs: number;
}): number {
  return (input.leading ? input.lastRenew : input.now) + input.renewDeadlineMs;
}

export type AttemptStep =
  | { step: 'started-leading'; lastRenew: number }
  | { step: 'renewed'; lastRenew: number }
  | { step: 'lost' }
  | { step: 'retry' };

/**
 * What an attempt's outcome means. A success counts from when the attempt started: the renewTime we
 * wrote is no older than that, so the others cannot see the lease expire before
 * `startedAt + leaseDuration`, and we stop at `startedAt + renewDeadline`, earlier by the margin
 * between the two. A leader past its deadline has lost, even if a late write went through.
 */
export function afterAttempt(input: {
  leading: boolean;
  ok: boolean;
  startedAt: number;
  lastRenew: number;
  now: number;
  renewDeadlineMs: number;
}): AttemptStep {
  const { leading, ok, startedAt, lastRenew, now, renewDeadlineMs } = input;
  if (leading && now >= lastRenew + renewDeadlineMs) return { step: 'lost' };
  if (!ok) return { step: 'retry' };
  return leading
    ? { step: 'renewed', lastRenew: startedAt }
    : { step: 'started-leading', lastRenew: startedAt };
}

/** The lease spec after a successful create, renew or acquire. */
export function nextLeaseSpec(
  decision: LeaseDecision,
  current: LeaseSpec | undefined,
  identity: string,
  now: number,
  leaseDurationMs: number,
): LeaseSpec {
  const base: LeaseSpec = {
    holderIdentity: identity,
    leaseDurationSeconds: Math.round(leaseDurationMs / 1000),
    renewTime: microTime(now),
  };
  if (decision.action === 'renew' && current) {
    return {
      ...base,
      acquireTime: current.acquireTime ?? microTime(now),
      leaseTransitions: current.leaseTransitions ?? 0,
    };
  }
  const transitions = current ? (current.leaseTransitions ?? 0) + (current.holderIdentity ? 1 : 0) : 0;
  return { ...base, acquireTime: microTime(now), leaseTransitions: transitions };
}

export interface LeaderElectorOptions {
  http: Pick<KubeHttp, 'request'>;
  clock: Clock;
  log: Logger;
  namespace: string;
  name: string;
  identity: string;
  timings?: LeaderElectionTimings;
  onStartedLeading: () => void;
  /**
   * Called once, on a timer at `lastRenew + renewDeadline`, when a held lease could not be renewed
   * in time, even while a renew request is still hanging. Campaigning ends with it.
   */
  onStoppedLeading: () => void;
  onNewLeader?: (identity: string) => void;
}

export class LeaderElector {
  private readonly opts: LeaderElectorOptions;
  private readonly timings: LeaderElectionTimings;
  private readonly log: Logger;
  private observed: { key: string; at: number } | undefined;
  private lease: LeaseObject | undefined;
  private leading = false;
  private lastRenew = 0;
  /** Gives the lease up at `lastRenew + renewDeadline` unless a renewal re-arms it first. */
  private deadlineTimer: Timer | undefined;
  /** Aborted by shutdown, abandon or loss: ends the loop and any attempt in flight. */
  private readonly campaign = new AbortController();
  private loop: Promise<void> | undefined;
  private lastLeader = '';

  constructor(opts: LeaderElectorOptions) {
    this.opts = opts;
    this.timings = opts.timings ?? DEFAULT_TIMINGS;
    this.log = opts.log.child({ lease: `${opts.namespace}/${opts.name}`, identity: opts.identity });
  }

  get isLeader(): boolean {
    return this.leading;
  }

  private get path(): string {
    return resourcePath(LEASES, this.opts.namespace);
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops campaigning; a leader releases the lease so another replica takes over at once. */
  async shutdown(): Promise<void> {
    this.deadlineTimer?.cancel();
    this.campaign.abort(new Error('leader election stopped'));
    await this.loop;
    if (this.leading) await this.release();
  }

  /** Stops campaigning without releasing the lease: what a crashed replica looks like to the others. */
  async abandon(): Promise<void> {
    this.deadlineTimer?.cancel();
    this.campaign.abort(new Error('leader election abandoned'));
    await this.loop;
    this.leading = false;
  }

  private async run(): Promise<void> {
    const { clock } = this.opts;
    const { renewDeadlineMs, retryPeriodMs } = this.timings;
    while (!this.campaign.signal.aborted) {
      const startedAt = clock.now();
      const deadline = attemptDeadline({
        leading: this.leading,
        lastRenew: this.lastRenew,
        now: startedAt,
        renewDeadlineMs,
      });
      const attempt = new AbortController();
      const onStop = () => attempt.abort(this.campaign.signal.reason);
      this.campaign.signal.addEventListener('abort', onStop, { once: true });
      const timer = clock.setTimer(deadline - startedAt, () =>
        attempt.abort(new Error(`attempt not done within the renew deadline (${renewDeadlineMs} ms)`)),
      );
      const ok = await untilAborted(this.tryAcquireOrRenew(attempt.signal), attempt.signal)
        .catch((err: unknown) => {
          if (!this.campaign.signal.aborted) {
            this.log.warn({ err: toKubeError(err).message }, 'lease update failed');
          }
          return false;
        })
        .finally(() => {
          timer.cancel();
          this.campaign.signal.removeEventListener('abort', onStop);
        });
      if (this.campaign.signal.aborted) return;
      const step = afterAttempt({
        leading: this.leading,
        ok,
        startedAt,
        lastRenew: this.lastRenew,
        now: clock.now(),
        renewDeadlineMs,
      });
      switch (step.step) {
        case 'lost':
          this.lose();
          return;
        case 'started-leading':
          this.renewed(step.lastRenew);
          this.leading = true;
          this.log.info('became leader');
          this.opts.onStartedLeading();
          break;
        case 'renewed':
          this.renewed(step.lastRenew);
          break;
        case 'retry':
          break;
      }
      // Jittered only while not leading, as client-go does.
      const jitter = this.leading ? 0 : Math.random() * RETRY_JITTER * retryPeriodMs;
      await clock.sleep(retryPeriodMs + jitter, this.campaign.signal).catch(() => undefined);
    }
  }

  private renewed(at: number): void {
    this.lastRenew = at;
    this.deadlineTimer?.cancel();
    this.deadlineTimer = this.opts.clock.setTimer(
      at + this.timings.renewDeadlineMs - this.opts.clock.now(),
      () => this.lose(),
    );
  }

  /**
   * The renew deadline passed: stop leading now, whatever request may still be hanging, so we have
   * stopped acting before the others can see the lease expire. Campaigning ends too (the process is
   * expected to exit, as client-go's users do).
   */
  private lose(): void {
    if (!this.leading) return;
    this.leading = false;
    this.deadlineTimer?.cancel();
    this.campaign.abort(new Error('lost the lease'));
    this.log.error(
      { renewDeadlineMs: this.timings.renewDeadlineMs },
      'lost the lease: could not renew within the renew deadline',
    );
    this.opts.onStoppedLeading();
  }

  /**
   * One round: read the lease, decide, write. Returns whether we hold the lease afterwards. Both
   * requests end when `signal` aborts.
   */
  async tryAcquireOrRenew(signal?: AbortSignal): Promise<boolean> {
    const { http, clock, identity, name, namespace } = this.opts;
    const bounded = signal ? { signal } : {};
    let current: LeaseObject | undefined;
    try {
      current = await http.request<LeaseObject>(
        'GET',
        resourcePath(LEASES, this.opts.namespace, name),
        bounded,
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    // A read that returned after the attempt was given up must not lead to a write.
    signal?.throwIfAborted();
    const now = clock.now();
    const spec = current?.spec;
    const key = JSON.stringify([
      spec?.holderIdentity ?? '',
      spec?.renewTime ?? '',
      current?.metadata.resourceVersion,
    ]);
    if (!this.observed || this.observed.key !== key) this.observed = { key, at: now };
    if (spec?.holderIdentity && spec.holderIdentity !== this.lastLeader) {
      this.lastLeader = spec.holderIdentity;
      this.opts.onNewLeader?.(spec.holderIdentity);
    }
    const decision = leaseDecision({
      lease: current ? (spec ?? {}) : undefined,
      identity,
      observedAt: this.observed.at,
      now,
      leaseDurationMs: this.timings.leaseDurationMs,
    });
    if (decision.action === 'wait') return false;
    const nextSpec = nextLeaseSpec(decision, spec, identity, now, this.timings.leaseDurationMs);
    try {
      if (decision.action === 'create') {
        this.lease = await http.request<LeaseObject>('POST', this.path, {
          ...bounded,
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name, namespace },
            spec: nextSpec,
          },
        });
      } else {
        this.lease = await http.request<LeaseObject>('PUT', resourcePath(LEASES, this.opts.namespace, name), {
          ...bounded,
          body: { ...current, spec: nextSpec },
        });
      }
    } catch (err) {
      // Someone else wrote first: not an error, just not us this round.
      if (isConflict(err) || toKubeError(err).reason === 'AlreadyExists') return false;
      throw err;
    }
    if (decision.action === 'acquire') this.log.info({ takeover: decision.takeover }, 'acquired the lease');
    return true;
  }

  private async release(): Promise<void> {
    const { http, clock, name } = this.opts;
    if (!this.lease) return;
    // Bounded like a renewal: shutting down must not hang on an unresponsive API server.
    const timeoutMs = this.timings.renewDeadlineMs;
    try {
      const current = await http.request<LeaseObject>(
        'GET',
        resourcePath(LEASES, this.opts.namespace, name),
        { timeoutMs },
      );
      if (current.spec?.holderIdentity !== this.opts.identity) return;
      await http.request('PUT', resourcePath(LEASES, this.opts.namespace, name), {
        timeoutMs,
        body: {
          ...current,
          spec: {
            ...current.spec,
            holderIdentity: '',
            leaseDurationSeconds: 1,
            renewTime: microTime(clock.now()),
          },
        },
      });
      this.log.info('released the lease');
    } catch (err) {
      this.log.warn(
        { err: err instanceof KubeError ? err.message : String(err) },
        'could not release the lease',
      );
    } finally {
      this.leading = false;
    }
  }
}

/**
 * Settles with `p`, or rejects as soon as `signal` aborts, whichever comes first: the attempt ends
 * on time even if a request ignores its signal. A late rejection of `p` is absorbed.
 */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
