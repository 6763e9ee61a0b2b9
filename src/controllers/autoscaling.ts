/**
 * The HorizontalRunnerAutoscaler's arithmetic (spec §7.1–7.4, §3.8), as pure functions of plain data
 * and `now`: which minReplicas a schedule sets, what a busy ratio asks for, how a suggestion, the
 * capacity reservations, the bounds and the scale-down delay make the desired replicas, and what
 * the scale target and the status then need. The reconciler gathers the facts (GitHub runners,
 * workflow runs) and applies the result. Times are epoch milliseconds; calendar arithmetic is UTC,
 * the zone a controller's container runs in.
 */

export const DEFAULT_SCALE_DOWN_DELAY_MS = 10 * 60_000;

const DAY_MS = 86_400_000;

export type Frequency = 'Daily' | 'Weekly' | 'Monthly' | 'Yearly';
const FREQUENCIES: readonly string[] = ['Daily', 'Weekly', 'Monthly', 'Yearly'];

export interface Period {
  start: number;
  end: number;
}

export class AutoscalingError extends Error {
  override readonly name = 'AutoscalingError';
}

/** Go's `time.Duration.String()` for a whole number of milliseconds. */
export function goDuration(ms: number): string {
  if (ms === 0) return '0s';
  const sign = ms < 0 ? '-' : '';
  let rest = Math.abs(ms);
  if (rest < 1000) return `${sign}${rest}ms`;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = rest / 1000;
  const secs = `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, '')}s`;
  if (h > 0) return `${sign}${h}h${m}m${secs}`;
  if (m > 0) return `${sign}${m}m${secs}`;
  return `${sign}${secs}`;
}

/**
 * A Go duration (`30m`, `1h30m`, `1.5h`, `-5s`) in ms, as `time.ParseDuration` reads it;
 * undefined when absent or unreadable.
 */
export function parseGoDuration(v: string | null | undefined): number | undefined {
  if (!v) return undefined;
  const units: Record<string, number> = {
    ns: 1e-6,
    us: 1e-3,
    µs: 1e-3,
    ms: 1,
    s: 1000,
    m: 60_000,
    h: 3_600_000,
  };
  const sign = v.startsWith('-') ? -1 : 1;
  const body = v.replace(/^[-+]/, '');
  if (body === '0') return 0;
  let total = 0;
  let consumed = 0;
  for (const m of body.matchAll(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/g)) {
    if (m.index !== consumed) return undefined;
    total += Number(m[1]) * units[m[2]!]!;
    consumed += m[0].length;
  }
  return consumed === body.length && consumed > 0 ? sign * total : undefined;
}

/** `t` plus `n` steps of `freq` by the calendar (months and years normalise as Go's `time.Date`). */
function addCalendar(t: number, freq: Frequency, n: number): number {
  const d = new Date(t);
  const [y, mo, day] = [d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()];
  const time = t - Date.UTC(y, mo, day);
  switch (freq) {
    case 'Daily':
      return Date.UTC(y, mo, day + n) + time;
    case 'Weekly':
      return Date.UTC(y, mo, day + 7 * n) + time;
    case 'Monthly':
      return Date.UTC(y, mo + n, day) + time;
    case 'Yearly':
      return Date.UTC(y + n, mo, day) + time;
  }
}

/**
 * The n-th occurrence of a recurrence starting at `start` (n = 0 is `start`), or undefined when that
 * month (or year) has no such day: a monthly rule on the 31st skips April, a yearly one on
 * 29 February skips three years in four (RRULE semantics, not Go's normalisation).
 */
function occurrence(start: number, freq: Frequency, n: number): number | undefined {
  const at = addCalendar(start, freq, n);
  if (freq === 'Daily' || freq === 'Weekly') return at;
  return new Date(at).getUTCDate() === new Date(start).getUTCDate() ? at : undefined;
}

/** An upper bound of one step of `freq`, to skip ahead without missing an occurrence. */
const LONGEST_STEP_MS: Record<Frequency, number> = {
  Daily: DAY_MS,
  Weekly: 7 * DAY_MS,
  Monthly: 31 * DAY_MS,
  Yearly: 366 * DAY_MS,
};
const SHORTEST_STEP_MS: Record<Frequency, number> = {
  Daily: DAY_MS,
  Weekly: 7 * DAY_MS,
  Monthly: 28 * DAY_MS,
  Yearly: 365 * DAY_MS,
};

export interface ScheduleMatch {
  active: Period | undefined;
  upcoming: Period | undefined;
}

/**
 * Whether a scheduled override is active at `now`, and its next period (spec §7.4). One-off periods
 * include their start and exclude their end. A recurring one is active when an occurrence started
 * within the last `end - start`; upcoming is the first occurrence after `now` within one step.
 * Throws an AutoscalingError for an unknown frequency or a period longer than its step.
 */
export function matchSchedule(
  now: number,
  start: number,
  end: number,
  recurrence: { frequency?: string | undefined; untilTime?: number | undefined } = {},
): ScheduleMatch {
  const freq = recurrence.frequency ?? '';
  if (freq === '') {
    if (now < start) return { active: undefined, upcoming: { start, end } };
    if (now < end) return { active: { start, end }, upcoming: undefined };
    return { active: undefined, upcoming: undefined };
  }
  if (!FREQUENCIES.includes(freq)) {
    throw new AutoscalingError(
      `invalid freq ${JSON.stringify(freq)}: It must be one of "Daily", "Weekly", "Monthly", and "Yearly"`,
    );
  }
  const frequency = freq as Frequency;
  const freqLater = addCalendar(now, frequency, 1);
  const duration = end - start;
  if (duration > freqLater - now) {
    throw new AutoscalingError(
      `override's duration ${goDuration(duration)} must be equal to sor shorter than the duration implied by freq ${JSON.stringify(freq)} (${goDuration(freqLater - now)})`,
    );
  }
  const first = Math.floor(start / 1000) * 1000;
  const until = recurrence.untilTime || undefined;
  let active: number[] = [];
  let upcoming: number | undefined;
  // Skip the occurrences that ended long before `now` without walking through them one by one.
  let n = Math.max(0, Math.floor((now - duration - first) / LONGEST_STEP_MS[frequency]) - 1);
  const last = Math.ceil((freqLater - first) / SHORTEST_STEP_MS[frequency]) + 1;
  for (; n <= last; n++) {
    const s = occurrence(first, frequency, n);
    if (s === undefined) continue;
    if (until !== undefined && s > until) break;
    if (s > freqLater) break;
    if (s > now - duration && s <= now) active = [...active, s];
    else if (s > now && upcoming === undefined) upcoming = s;
  }
  if (active.length > 1) {
    throw new AutoscalingError(
      `[bug] unexpted number of active overrides found: ${active.map((s) => new Date(s).toISOString()).join(', ')}`,
    );
  }
  const a = active[0];
  return {
    active: a === undefined ? undefined : { start: a, end: a + duration },
    upcoming: upcoming === undefined ? undefined : { start: upcoming, end: upcoming + duration },
  };
}

export interface ScheduledOverride {
  startTime: number;
  endTime: number;
  minReplicas?: number | null | undefined;
  frequency?: string | undefined;
  untilTime?: number | undefined;
}

export interface ScheduledPeriod extends Period {
  minReplicas: number | undefined;
}

/**
 * The minReplicas at `now` (spec §7.3 `getMinReplicas`): `spec.minReplicas` (1 when unset or
 * negative), replaced by the first active override's when that one sets it; later active overrides
 * are ignored. `upcoming`: the override whose next period starts first.
 */
export function minReplicasAt(
  specMinReplicas: number | undefined,
  overrides: readonly ScheduledOverride[],
  now: number,
): { minReplicas: number; active: ScheduledPeriod | undefined; upcoming: ScheduledPeriod | undefined } {
  let minReplicas = specMinReplicas !== undefined && specMinReplicas >= 0 ? specMinReplicas : 1;
  let active: ScheduledPeriod | undefined;
  let upcoming: ScheduledPeriod | undefined;
  for (const o of overrides) {
    const m = matchSchedule(now, o.startTime, o.endTime, { frequency: o.frequency, untilTime: o.untilTime });
    const min = o.minReplicas ?? undefined;
    if (m.active && !active) {
      active = { ...m.active, minReplicas: min };
      if (min !== undefined) minReplicas = min;
    }
    if (m.upcoming && (!upcoming || m.upcoming.start < upcoming.start)) {
      upcoming = { ...m.upcoming, minReplicas: min };
    }
  }
  return { minReplicas, active, upcoming };
}

/** The `kubectl get` summary of the active or next override, or undefined (spec §3.8 step 4.5). */
export function scheduledOverridesSummary(
  specMinReplicas: number | undefined,
  active: ScheduledPeriod | undefined,
  upcoming: ScheduledPeriod | undefined,
): string | undefined {
  if (active && (!upcoming || active.end < upcoming.start)) {
    const after = specMinReplicas !== undefined && specMinReplicas >= 0 ? specMinReplicas : 1;
    return `min=${after} time=${new Date(active.end).toISOString()}`;
  }
  if ((!active && upcoming) || (active && upcoming && active.end > upcoming.start)) {
    if (upcoming.minReplicas !== undefined) {
      return `min=${upcoming.minReplicas} time=${new Date(upcoming.start).toISOString()}`;
    }
  }
  return undefined;
}

export interface BusyMetricSpec {
  scaleUpThreshold?: string | undefined;
  scaleDownThreshold?: string | undefined;
  scaleUpFactor?: string | undefined;
  scaleDownFactor?: string | undefined;
  scaleUpAdjustment?: number | undefined;
  scaleDownAdjustment?: number | undefined;
}

const PREFIX = 'validating autoscaling metrics: spec.autoscaling.metrics[]';
const FLOAT = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

function parseFloat64(value: string | undefined, field: string, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  if (!FLOAT.test(value)) throw new AutoscalingError(`${PREFIX}.${field} cannot be parsed into a float64`);
  return Number(value);
}

/** One direction's step: a fixed adjustment, or a factor (never both). */
function step(
  spec: BusyMetricSpec,
  dir: 'Up' | 'Down',
  defaultFactor: number,
): { adjustment: number } | { factor: number } {
  const adjustment = spec[`scale${dir}Adjustment`] ?? 0;
  const factor = spec[`scale${dir}Factor`];
  if (adjustment !== 0) {
    if (adjustment < 0) throw new AutoscalingError(`${PREFIX}.scale${dir}Adjustment cannot be lower than 0`);
    if (factor !== undefined && factor !== '') {
      throw new AutoscalingError(
        `${PREFIX}: scale${dir}Adjustment and scale${dir}Factor cannot be specified together`,
      );
    }
    return { adjustment };
  }
  return { factor: parseFloat64(factor, `scale${dir}Factor`, defaultFactor) };
}

/**
 * PercentageRunnersBusy (spec §7.2.2): the replicas the busy ratio asks for. `busy` counts the
 * target's registered busy runners plus those whose pods are terminating while busy; `before` is the
 * target's replicas (1 when unset). Throws an AutoscalingError for a malformed spec.
 */
export function busyRatioReplicas(spec: BusyMetricSpec, busy: number, before: number): number {
  const up = parseFloat64(spec.scaleUpThreshold, 'scaleUpThreshold', 0.8);
  const down = parseFloat64(spec.scaleDownThreshold, 'scaleDownThreshold', 0.3);
  const upStep = step(spec, 'Up', 1.3);
  const downStep = step(spec, 'Down', 0.7);
  const fraction = busy / before; // 0/0 is NaN (no change), x/0 is Infinity (scale up), as in Go
  if (fraction >= up) {
    return 'adjustment' in upStep ? before + upStep.adjustment : Math.ceil(before * upStep.factor);
  }
  if (fraction < down) {
    return 'adjustment' in downStep ? before - downStep.adjustment : Math.trunc(before * downStep.factor);
  }
  return before;
}

export const QUEUED_AND_IN_PROGRESS = 'TotalNumberOfQueuedAndInProgressWorkflowRuns';
export const PERCENTAGE_RUNNERS_BUSY = 'PercentageRunnersBusy';

/**
 * The pull metrics an HRA lists, in order (spec §7.1): checked before anything else, so an HRA
 * without bounds or with too many metrics fails before any request is made.
 */
export function metricTypes(spec: {
  name: string;
  namespace: string;
  minReplicas?: number | undefined;
  maxReplicas?: number | undefined;
  metrics?: readonly { type?: string | undefined }[] | undefined;
}): string[] {
  const id = `horizontalrunnerautoscaler ${spec.namespace}/${spec.name}`;
  if (spec.minReplicas === undefined) throw new AutoscalingError(`${id} is missing minReplicas`);
  if (spec.maxReplicas === undefined) throw new AutoscalingError(`${id} is missing maxReplicas`);
  const metrics = spec.metrics ?? [];
  if (metrics.length > 2) {
    throw new AutoscalingError(
      `too many autoscaling metrics configured: It must be 0 to 2, but got ${metrics.length}`,
    );
  }
  return metrics.map((m) => m.type ?? '');
}

/** A metric type paddock can compute, or an AutoscalingError naming it. */
export function supportedMetric(
  type: string,
): typeof QUEUED_AND_IN_PROGRESS | typeof PERCENTAGE_RUNNERS_BUSY {
  if (type === QUEUED_AND_IN_PROGRESS || type === PERCENTAGE_RUNNERS_BUSY) return type;
  throw new AutoscalingError(
    `validating autoscaling metrics: unsupported metric type ${JSON.stringify(type)}`,
  );
}

/**
 * What the primary metric's suggestion leads to (spec §7.1 steps 5–6): itself when above 0;
 * otherwise minReplicas (one metric) or the secondary metric, which may follow only
 * PercentageRunnersBusy (checked here, as ARC checks it: only when the secondary is needed).
 */
export function afterPrimary(types: readonly string[], primary: number): 'primary' | 'minimum' | 'secondary' {
  if (primary > 0) return 'primary';
  if (types.length < 2) return 'minimum';
  if (types[0] !== PERCENTAGE_RUNNERS_BUSY || types[1] !== QUEUED_AND_IN_PROGRESS) {
    throw new AutoscalingError(
      `invalid HRA Spec: Metrics[0] of ${types[0]} cannot be combined with Metrics[1] of ${types[1]}: The only allowed combination is 0=PercentageRunnersBusy and 1=TotalNumberOfQueuedAndInProgressWorkflowRuns`,
    );
  }
  return 'secondary';
}

export interface CapacityReservation {
  expirationTime?: number | undefined;
  effectiveTime?: number | undefined;
  replicas?: number | undefined;
}

/**
 * The desired replicas (spec §7.3): the suggestion (minReplicas when there is none) plus the
 * replicas of unexpired reservations, within [min, max] (checked in that order: min wins over a crossed max only below it), held at the
 * last desired count while a scale-down would come within the delay after a scale-out.
 */
export function desiredReplicas(input: {
  suggested: number | undefined;
  minReplicas: number;
  maxReplicas: number | undefined;
  reservations: readonly CapacityReservation[];
  status: { desiredReplicas?: number | undefined; lastSuccessfulScaleOutTime?: number | undefined };
  scaleDownDelayMs: number;
  now: number;
}): number {
  const reserved = input.reservations
    .filter((r) => r.expirationTime !== undefined && r.expirationTime > input.now)
    .reduce((n, r) => n + (r.replicas ?? 0), 0);
  let desired = (input.suggested ?? input.minReplicas) + reserved;
  if (desired < input.minReplicas) desired = input.minReplicas;
  else if (input.maxReplicas !== undefined && desired > input.maxReplicas) desired = input.maxReplicas;
  const { desiredReplicas: last, lastSuccessfulScaleOutTime: scaledOutAt } = input.status;
  if (
    last !== undefined &&
    last >= desired &&
    scaledOutAt !== undefined &&
    scaledOutAt + input.scaleDownDelayMs > input.now
  ) {
    desired = last;
  }
  return desired;
}

/**
 * The merge patch of the scale target (spec §3.8 step 4.4), or undefined when it needs none:
 * `replicas` when it changes, and for ephemeral runners the latest `effectiveTime` of all the
 * reservations listed (expired ones too), which lets a set scale up from zero without waiting.
 */
export function targetPatch(input: {
  currentReplicas: number | undefined;
  desired: number;
  ephemeral: boolean | undefined;
  currentEffectiveTime: number | undefined;
  reservations: readonly CapacityReservation[];
}): { replicas?: number; effectiveTime?: string } | undefined {
  const times = input.reservations.map((r) => r.effectiveTime).filter((t): t is number => t !== undefined);
  const effectiveTime = times.length > 0 ? Math.max(...times) : undefined;
  const withTime = (input.ephemeral ?? true) && effectiveTime !== undefined;
  const patch: { replicas?: number; effectiveTime?: string } = {};
  if ((input.currentReplicas ?? 1) !== input.desired) patch.replicas = input.desired;
  // Writing an unchanged time would be a no-op patch: ARC sends it; nothing is gained.
  if (withTime && effectiveTime !== input.currentEffectiveTime) {
    patch.effectiveTime = new Date(effectiveTime).toISOString().replace('.000Z', 'Z');
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}

/** The status fields that change (spec §3.8 step 4.5), or undefined when none does. */
export function statusUpdate(input: {
  status: {
    desiredReplicas?: number | undefined;
    lastSuccessfulScaleOutTime?: number | undefined;
    scheduledOverridesSummary?: string | undefined;
  };
  desired: number;
  summary: string | undefined;
  now: number;
}):
  | {
      desiredReplicas?: number;
      lastSuccessfulScaleOutTime?: number;
      scheduledOverridesSummary?: string | null;
    }
  | undefined {
  const old = input.status;
  const update: {
    desiredReplicas?: number;
    lastSuccessfulScaleOutTime?: number;
    scheduledOverridesSummary?: string | null;
  } = {};
  if (old.desiredReplicas !== input.desired) {
    const scaledOut =
      old.desiredReplicas === undefined ? input.desired > 1 : input.desired > old.desiredReplicas;
    if (scaledOut) update.lastSuccessfulScaleOutTime = input.now;
    update.desiredReplicas = input.desired;
  }
  if ((old.scheduledOverridesSummary ?? undefined) !== input.summary) {
    update.scheduledOverridesSummary = input.summary ?? null;
  }
  return Object.keys(update).length > 0 ? update : undefined;
}
