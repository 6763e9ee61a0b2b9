import type { Logger } from 'pino';
import type { Clock } from './clock.ts';
import { microTime } from './clock.ts';
import { isConflict, isNotFound, KubeError, toKubeError } from './errors.ts';
import type { KubeHttp } from './kube-http.ts';

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
  http: KubeHttp;
  clock: Clock;
  log: Logger;
  namespace: string;
  name: string;
  identity: string;
  timings?: LeaderElectionTimings;
  onStartedLeading: () => void;
  /** Called once when a held lease could not be renewed within the renew deadline. */
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
  private readonly stop = new AbortController();
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
    return `/apis/coordination.k8s.io/v1/namespaces/${this.opts.namespace}/leases`;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops campaigning; a leader releases the lease so another replica takes over at once. */
  async shutdown(): Promise<void> {
    this.stop.abort(new Error('leader election stopped'));
    await this.loop;
    if (this.leading) await this.release();
  }

  /** Stops campaigning without releasing the lease: what a crashed replica looks like to the others. */
  async abandon(): Promise<void> {
    this.stop.abort(new Error('leader election abandoned'));
    await this.loop;
    this.leading = false;
  }

  private async run(): Promise<void> {
    const { clock } = this.opts;
    while (!this.stop.signal.aborted) {
      const ok = await this.tryAcquireOrRenew().catch((err: unknown) => {
        this.log.warn({ err: toKubeError(err).message }, 'lease update failed');
        return false;
      });
      const now = clock.now();
      if (ok) {
        this.lastRenew = now;
        if (!this.leading) {
          this.leading = true;
          this.log.info('became leader');
          this.opts.onStartedLeading();
        }
      } else if (this.leading && now - this.lastRenew >= this.timings.renewDeadlineMs) {
        this.leading = false;
        this.log.error('lost the lease: could not renew within the renew deadline');
        this.opts.onStoppedLeading();
        return;
      }
      // client-go jitters the retry period by up to 20 % while not leading.
      const jitter = this.leading ? 0 : Math.random() * 0.2 * this.timings.retryPeriodMs;
      await clock.sleep(this.timings.retryPeriodMs + jitter, this.stop.signal).catch(() => undefined);
    }
  }

  /** One round: read the lease, decide, write. Returns whether we hold the lease afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const { http, clock, identity, name, namespace } = this.opts;
    let current: LeaseObject | undefined;
    try {
      current = await http.request<LeaseObject>('GET', `${this.path}/${name}`);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
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
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name, namespace },
            spec: nextSpec,
          },
        });
      } else {
        this.lease = await http.request<LeaseObject>('PUT', `${this.path}/${name}`, {
          body: { ...current, spec: nextSpec },
          timeoutMs: this.timings.renewDeadlineMs,
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
    try {
      const current = await http.request<LeaseObject>('GET', `${this.path}/${name}`);
      if (current.spec?.holderIdentity !== this.opts.identity) return;
      await http.request('PUT', `${this.path}/${name}`, {
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
