import type { RunnerSet } from '../api/index.ts';
import { RUNNER_SETS } from '../api/index.ts';
import { isNotFound } from '../runtime/errors.ts';
import { resourcePath } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import { invalidSubdomainReason } from '../runtime/names.ts';
import { serverSideApply } from '../runtime/objects.ts';
import { SECRETS, STATEFUL_SETS } from '../runtime/resources.ts';
import type { KubeObject, OwnerReference } from '../runtime/store.ts';

/**
 * Which RunnerSet a runner pod under admission belongs to. Nothing in the admission request is
 * taken on trust: the pod only *names* its StatefulSet, so the StatefulSet and its RunnerSet are
 * read from the API server, their UIDs must be the ones the references carry, and the scope and
 * credentials the pod asks for must be the RunnerSet's. Only then does the webhook spend a GitHub
 * credential on the pod.
 */

const RUNNER_SET_GROUP = RUNNER_SETS.group;

/** The objects of the cluster the runner pod webhook reads and writes; tests fake it. */
export interface RunnerPodCluster {
  /** The StatefulSet, or undefined when it does not exist. */
  statefulSet(namespace: string, name: string, signal?: AbortSignal): Promise<KubeObject | undefined>;
  runnerSet(namespace: string, name: string, signal?: AbortSignal): Promise<RunnerSet | undefined>;
  secret(namespace: string, name: string, signal?: AbortSignal): Promise<KubeObject | undefined>;
  /** Server-side apply of a Secret paddock owns (field manager `paddock`), in one request. */
  applySecret(secret: KubeObject): Promise<void>;
}

/** The RunnerPodCluster of a real API server. */
export function kubeRunnerPodCluster(http: KubeHttp): RunnerPodCluster {
  const get = async <T>(path: string, signal: AbortSignal | undefined): Promise<T | undefined> => {
    try {
      return await http.request<T>('GET', path, signal ? { signal } : {});
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  return {
    statefulSet: (ns, name, signal) => get(resourcePath(STATEFUL_SETS, ns, name), signal),
    runnerSet: (ns, name, signal) => get(resourcePath(RUNNER_SETS, ns, name), signal),
    secret: (ns, name, signal) => get(resourcePath(SECRETS, ns, name), signal),
    // Not forced: should anyone else own these fields, the write fails instead of taking them over.
    applySecret: async (secret) => {
      await serverSideApply(http, SECRETS, secret);
    },
  };
}

/** A store of objects as an informer keeps them (the runtime's Store fits). */
export interface ObjectCache<T> {
  getByName(namespace: string | undefined, name: string): T | undefined;
}

/**
 * Reads StatefulSets and RunnerSets from the controllers' informer caches first (they come from
 * the API server's own list and watch, so they are as trustworthy as a GET), and from the API
 * server only when the cache has not seen the object yet, e.g. a StatefulSet created a moment ago.
 * The webhook sits in the path of every runner pod creation: two GETs fewer per pod matter at a
 * thousand runners.
 */
export function cachedRunnerPodCluster(
  live: RunnerPodCluster,
  caches: { statefulSets: ObjectCache<KubeObject>; runnerSets: ObjectCache<RunnerSet> },
): RunnerPodCluster {
  return {
    ...live,
    statefulSet: async (ns, name, signal) =>
      caches.statefulSets.getByName(ns, name) ?? (await live.statefulSet(ns, name, signal)),
    runnerSet: async (ns, name, signal) =>
      caches.runnerSets.getByName(ns, name) ?? (await live.runnerSet(ns, name, signal)),
  };
}

/** What the pod says about itself, as far as the check needs it. */
export interface RunnerPodClaims {
  ownerReferences: readonly OwnerReference[];
  /**
   * `RUNNER_ENTERPRISE`, `RUNNER_ORG`, `RUNNER_REPO` of the runner container: the literal value
   * (absent counts as empty), or `null` when it comes from elsewhere (`valueFrom`).
   */
  scope: { enterprise: string | null; organization: string | null; repository: string | null };
  /** The `actions-runner/github-api-creds-secret` annotation, empty meaning none. */
  credentialsSecret: string | undefined;
}

export interface VerifiedOwner {
  statefulSet: { name: string; uid: string };
  runnerSet: RunnerSet;
}

export type OwnerVerdict = { ok: true; owner: VerifiedOwner } | { ok: false; reason: string };

const SCOPE_FIELDS = [
  ['enterprise', 'RUNNER_ENTERPRISE'],
  ['organization', 'RUNNER_ORG'],
  ['repository', 'RUNNER_REPO'],
] as const;

function controllerOf(refs: readonly OwnerReference[] | undefined): OwnerReference | undefined {
  return (refs ?? []).find((r) => r.controller === true);
}

/** Step 1: the StatefulSet the pod names as its controller. */
export function claimedStatefulSet(
  claims: RunnerPodClaims,
): { ok: true; ref: OwnerReference } | { ok: false; reason: string } {
  const ref = controllerOf(claims.ownerReferences);
  if (!ref)
    return {
      ok: false,
      reason: 'it has no controller owner (a RunnerSet pod is controlled by a StatefulSet)',
    };
  if (ref.kind !== 'StatefulSet' || !ref.apiVersion.startsWith('apps/')) {
    return { ok: false, reason: `its controller is a ${ref.kind} (${ref.apiVersion}), not a StatefulSet` };
  }
  if (!ref.name || !ref.uid)
    return { ok: false, reason: 'its StatefulSet owner reference has no name or UID' };
  // The name goes into a URL path; the API server never stores an owner reference like this.
  const invalid = invalidSubdomainReason('its StatefulSet owner reference', ref.name);
  if (invalid) return { ok: false, reason: invalid };
  return { ok: true, ref };
}

/** Step 2: the StatefulSet as the API server has it, and the RunnerSet it names as its controller. */
export function claimedRunnerSet(
  namespace: string,
  ref: OwnerReference,
  statefulSet: KubeObject | undefined,
): { ok: true; ref: OwnerReference } | { ok: false; reason: string } {
  const where = `StatefulSet ${namespace}/${ref.name}`;
  if (!statefulSet) return { ok: false, reason: `its owner ${where} does not exist` };
  if (statefulSet.metadata.uid !== ref.uid) {
    return {
      ok: false,
      reason: `its owner reference names ${where} with UID ${ref.uid}, but that StatefulSet has UID ${statefulSet.metadata.uid ?? '(none)'}`,
    };
  }
  const owner = controllerOf(statefulSet.metadata.ownerReferences);
  if (owner?.kind !== 'RunnerSet' || owner.apiVersion.split('/')[0] !== RUNNER_SET_GROUP) {
    return { ok: false, reason: `${where} is not controlled by a RunnerSet (${RUNNER_SET_GROUP})` };
  }
  if (!owner.name || !owner.uid)
    return { ok: false, reason: `${where} names its RunnerSet without a name or UID` };
  return { ok: true, ref: owner };
}

/** Step 3: the RunnerSet as the API server has it, and whether the pod asks for what it configures. */
export function runnerSetMismatch(
  namespace: string,
  ref: OwnerReference,
  runnerSet: RunnerSet | undefined,
  claims: RunnerPodClaims,
): string | undefined {
  const where = `RunnerSet ${namespace}/${ref.name}`;
  if (!runnerSet) return `its ${where} does not exist`;
  if (runnerSet.metadata.uid !== ref.uid) {
    return `its StatefulSet names ${where} with UID ${ref.uid}, but that RunnerSet has UID ${runnerSet.metadata.uid ?? '(none)'}`;
  }
  for (const [field, env] of SCOPE_FIELDS) {
    const claimed = claims.scope[field];
    if (claimed === null) return `its ${env} is not a literal value`;
    const configured = runnerSet.spec?.[field] ?? '';
    if (claimed !== configured) {
      return `its ${env} ${JSON.stringify(claimed)} is not ${where}'s ${field} ${JSON.stringify(configured)}`;
    }
  }
  const configuredSecret = runnerSet.spec?.githubAPICredentialsFrom?.secretRef?.name || undefined;
  if ((claims.credentialsSecret || undefined) !== configuredSecret) {
    const show = (v: string | undefined) => (v === undefined ? '(none)' : JSON.stringify(v));
    return `its credentials Secret ${show(claims.credentialsSecret || undefined)} is not ${where}'s githubAPICredentialsFrom Secret ${show(configuredSecret)}`;
  }
  return undefined;
}

/**
 * Establishes the pod's RunnerSet from the API server: the verdict names the first problem in
 * words. Lookup failures other than "not found" are thrown (the caller cannot decide on them).
 */
export async function verifyRunnerSetPod(
  namespace: string,
  claims: RunnerPodClaims,
  cluster: Pick<RunnerPodCluster, 'statefulSet' | 'runnerSet'>,
  signal?: AbortSignal,
): Promise<OwnerVerdict> {
  const sts = claimedStatefulSet(claims);
  if (!sts.ok) return sts;
  const statefulSet = await cluster.statefulSet(namespace, sts.ref.name, signal);
  const rs = claimedRunnerSet(namespace, sts.ref, statefulSet);
  if (!rs.ok) return rs;
  const runnerSet = await cluster.runnerSet(namespace, rs.ref.name, signal);
  const mismatch = runnerSetMismatch(namespace, rs.ref, runnerSet, claims);
  if (mismatch !== undefined) return { ok: false, reason: mismatch };
  return {
    ok: true,
    owner: { statefulSet: { name: sts.ref.name, uid: sts.ref.uid }, runnerSet: runnerSet! },
  };
}
