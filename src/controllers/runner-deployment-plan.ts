import type { V1LabelSelector } from '@kubernetes/client-node';
import type { RunnerDeployment, RunnerReplicaSet, RunnerTemplate } from '../api/index.ts';
import { LABEL_RUNNER_DEPLOYMENT_NAME, LABEL_RUNNER_TEMPLATE_HASH } from './constants.ts';
import { computeHash } from './runner-pod-spec.ts';

/**
 * The RunnerDeployment controller's decisions (spec §3.6) as a pure plan over the deployment and
 * the replica sets it controls. Deliberate changes from ARC:
 *
 * - The newest set is the current one when its template has the same content as the desired one,
 *   whatever its hash says: ARC computes its hash from a Go dump paddock cannot reproduce, so a set
 *   ARC created is adopted as it is instead of being rolled out anew (which would re-register every
 *   runner).
 * - Status is written on every round, also while a rollout waits for the new set.
 * Old sets are retired as ARC does: scaled to zero once the newest set is fully ready, so their
 * runners unregister (a busy one finishes its job first) before the empty set is deleted.
 */

export const ROLLOUT_REQUEUE_MS = 5_000;

export interface DesiredReplicaSet {
  hash: string;
  template: RunnerTemplate;
  selector: V1LabelSelector;
  replicas: number;
  effectiveTime: string | null;
}

/** The set the deployment wants now (spec §3.6 `newRunnerReplicaSet`), with `hash` as its hash. */
export function desiredReplicaSet(
  rd: RunnerDeployment,
  commonRunnerLabels: readonly string[],
  hash?: string,
): DesiredReplicaSet {
  const tpl: RunnerTemplate = structuredClone(rd.spec.template);
  tpl.spec ??= {};
  if (commonRunnerLabels.length > 0) tpl.spec.labels = [...(tpl.spec.labels ?? []), ...commonRunnerLabels];
  const h = hash ?? computeHash(tpl);
  const name = rd.metadata.name ?? '';
  tpl.metadata = {
    ...tpl.metadata,
    labels: {
      ...tpl.metadata?.labels,
      [LABEL_RUNNER_TEMPLATE_HASH]: h,
      [LABEL_RUNNER_DEPLOYMENT_NAME]: name,
    },
  };
  const base: V1LabelSelector = rd.spec.selector
    ? structuredClone(rd.spec.selector)
    : { matchLabels: { [LABEL_RUNNER_DEPLOYMENT_NAME]: name } };
  const selector: V1LabelSelector = {
    ...base,
    matchLabels: { ...base.matchLabels, [LABEL_RUNNER_TEMPLATE_HASH]: h },
  };
  return {
    hash: h,
    template: tpl,
    selector,
    replicas: rd.spec.replicas ?? 1,
    effectiveTime: rd.spec.effectiveTime ?? null,
  };
}

/** Drops what serialisations differ in (nulls, empty strings, empty objects and lists). */
function normalized(value: unknown): unknown {
  if (value === null || value === undefined || value === '') return undefined;
  if (Array.isArray(value)) {
    const items = value.map(normalized).filter((v) => v !== undefined);
    return items.length > 0 ? items : undefined;
  }
  if (typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const n = normalized(v);
      if (n !== undefined) out[k] = n;
    }
    return Object.keys(out).length > 0 ? out : undefined;
  }
  return value;
}

/** Whether two templates say the same thing, apart from their template-hash label. */
export function sameTemplate(a: RunnerTemplate | undefined, b: RunnerTemplate | undefined): boolean {
  const strip = (t: RunnerTemplate | undefined) => {
    const c = structuredClone(t ?? { spec: {} });
    if (c.metadata?.labels) delete c.metadata.labels[LABEL_RUNNER_TEMPLATE_HASH];
    return computeHash(normalized(c) ?? {});
  };
  return strip(a) === strip(b);
}

export type DeploymentAction =
  | { kind: 'create-set'; desired: DesiredReplicaSet }
  /** Replace the set's spec (a selector from before ARC 0.18, or none). */
  | { kind: 'replace-spec'; set: string; desired: DesiredReplicaSet }
  /** `effectiveTime` absent: left as it is. */
  | { kind: 'scale-set'; set: string; replicas: number; effectiveTime?: string | null }
  | { kind: 'delete-set'; set: string };

export interface DeploymentStatus {
  replicas: number;
  availableReplicas: number;
  readyReplicas: number;
  updatedReplicas: number;
  desiredReplicas: number;
}

export interface DeploymentPlan {
  actions: DeploymentAction[];
  status?: DeploymentStatus;
  requeueAfterMs?: number;
  note?: string;
}

const created = (s: RunnerReplicaSet) => Date.parse(s.metadata.creationTimestamp ?? '') || 0;
const same = (a: unknown, b: unknown) =>
  computeHash(normalized(a) ?? {}) === computeHash(normalized(b) ?? {});

export function planRunnerDeployment(input: {
  rd: RunnerDeployment;
  /** The sets the deployment controls. */
  sets: RunnerReplicaSet[];
  commonRunnerLabels: readonly string[];
}): DeploymentPlan {
  const { rd } = input;
  const sets = [...input.sets].sort((a, b) => created(b) - created(a)); // newest first
  let desired = desiredReplicaSet(rd, input.commonRunnerLabels);
  const newest = sets[0];
  if (!newest) return { actions: [{ kind: 'create-set', desired }] };
  const newestHash = newest.metadata.labels?.[LABEL_RUNNER_TEMPLATE_HASH];
  if (!newestHash) {
    return { actions: [], note: `runner replica set ${newest.metadata.name} has no template hash label` };
  }
  if (newestHash !== desired.hash) {
    if (!sameTemplate(newest.spec.template, desired.template)) {
      return {
        actions: [{ kind: 'create-set', desired }],
        requeueAfterMs: ROLLOUT_REQUEUE_MS,
        note: 'template changed: rolling out a new runner replica set',
      };
    }
    // Same template under another hash (ARC's): it is the current set.
    desired = desiredReplicaSet(rd, input.commonRunnerLabels, newestHash);
  }
  const actions: DeploymentAction[] = [];
  const name = newest.metadata.name ?? '';
  if (!same(newest.spec.selector, desired.selector)) {
    return {
      actions: [{ kind: 'replace-spec', set: name, desired }],
      requeueAfterMs: ROLLOUT_REQUEUE_MS,
      note: 'repairing the selector of the newest runner replica set',
    };
  }
  const current = newest.spec.replicas ?? 1;
  const time = (t: string | null | undefined) => (t ? Date.parse(t) || 0 : 0);
  if (current !== desired.replicas || time(newest.spec.effectiveTime) !== time(desired.effectiveTime)) {
    actions.push({
      kind: 'scale-set',
      set: name,
      replicas: desired.replicas,
      effectiveTime: desired.effectiveTime,
    });
  }
  let note: string | undefined;
  const old = sets.slice(1);
  if (old.length > 0) {
    if ((newest.status?.readyReplicas ?? 0) < current) {
      note = `waiting for runner replica set ${name} to be fully ready before retiring older ones`;
    } else {
      for (const set of old) {
        const setName = set.metadata.name ?? '';
        if ((set.status?.replicas ?? 0) > 0) {
          if ((set.spec.replicas ?? 1) !== 0) {
            actions.push({ kind: 'scale-set', set: setName, replicas: 0 });
          }
        } else {
          actions.push({ kind: 'delete-set', set: setName });
        }
      }
    }
  }
  const sum = (f: (s: RunnerReplicaSet) => number | undefined) => sets.reduce((n, s) => n + (f(s) ?? 0), 0);
  const status: DeploymentStatus = {
    replicas: sum((s) => s.status?.replicas),
    availableReplicas: sum((s) => s.status?.availableReplicas),
    readyReplicas: sum((s) => s.status?.availableReplicas),
    updatedReplicas: newest.status?.replicas ?? 0,
    desiredReplicas: desired.replicas,
  };
  return { actions, status, ...(note ? { note } : {}) };
}
