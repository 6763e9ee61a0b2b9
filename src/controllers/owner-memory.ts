import type { RunnerSnapshot } from '../github/index.ts';
import type { Clock } from '../runtime/clock.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { ResourceRef } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import { mergePatch } from '../runtime/objects.ts';
import { PODS } from '../runtime/resources.ts';
import type { KubeObject, ReadonlyStore } from '../runtime/store.ts';
import { ANNOTATION_UNREGISTRATION_REQUEST, rfc3339 } from './constants.ts';
import { type RunnerPodFacts, runnerPodFacts } from './graceful-stop.ts';
import { classifyPod, type OwnerAction, type PodState } from './owner-sync.ts';
import type { PodObject } from './runner-pod.ts';

/**
 * What an owner controller (RunnerSet → StatefulSets, RunnerReplicaSet → Runners) wrote but its
 * caches may not show yet, per parent object. Planning on a cache without it would create owners
 * twice (controller-runtime's "expectations") or count a runner that is leaving as a member and ask
 * another one to leave in its place. Every entry is bounded in time in case a watch event is lost.
 */

/** How long created owners are waited for, and written requests remembered, at most. */
export const CREATION_EXPECTATION_MS = 30_000;
export const ASKED_MEMORY_MS = 30_000;

interface ParentMemory {
  expected?: { names: Set<string>; until: number };
  /** The desired replicas of the last round that created owners. */
  desiredAtLastCreation?: number;
  /** Owner name → until. */
  askedOwners: Map<string, number>;
  /** Pod UID → until. */
  askedPods: Map<string, number>;
  /** Owner UID → until: deleted, and the cache may not show it yet. */
  deletedOwners: Map<string, number>;
}

const shown = (o: KubeObject | undefined) =>
  o === undefined || Boolean(o.metadata.annotations?.[ANNOTATION_UNREGISTRATION_REQUEST]);

export class OwnerSyncMemory {
  private readonly clock: Clock;
  private readonly parents = new Map<string, ParentMemory>();

  constructor(clock: Clock) {
    this.clock = clock;
  }

  private of(parent: string): ParentMemory {
    let m = this.parents.get(parent);
    if (!m) {
      m = { askedOwners: new Map(), askedPods: new Map(), deletedOwners: new Map() };
      this.parents.set(parent, m);
    }
    return m;
  }

  /** The parent is gone: forget everything about it. */
  forget(parent: string): void {
    this.parents.delete(parent);
  }

  /** Starts a round of creations for `desired` replicas; `add` each created owner's name as it is created. */
  expectCreations(parent: string, desired?: number): { add(name: string): void } {
    if (desired !== undefined) this.of(parent).desiredAtLastCreation = desired;
    const expected = { names: new Set<string>(), until: this.clock.now() + CREATION_EXPECTATION_MS };
    this.of(parent).expected = expected;
    return { add: (name) => expected.names.add(name) };
  }

  /**
   * The desired replicas of the parent's last creating round (undefined: none since start),
   * lowered to `desired` when it fell since: a raise is counted from the lowest point.
   */
  desiredAtLastCreation(parent: string, desired: number): number | undefined {
    const m = this.parents.get(parent);
    if (m?.desiredAtLastCreation !== undefined && desired < m.desiredAtLastCreation) {
      m.desiredAtLastCreation = desired;
    }
    return m?.desiredAtLastCreation;
  }

  /** Created owners the cache does not show yet (empty once all arrived or the wait is over). */
  awaitedCreations(parent: string, inCache: (name: string) => boolean): string[] {
    const m = this.parents.get(parent);
    const expected = m?.expected;
    if (!m || !expected) return [];
    for (const name of expected.names) if (inCache(name)) expected.names.delete(name);
    if (expected.names.size > 0 && this.clock.now() < expected.until) return [...expected.names];
    delete m.expected;
    return [];
  }

  rememberAskedOwner(parent: string, owner: string): void {
    this.of(parent).askedOwners.set(owner, this.clock.now() + ASKED_MEMORY_MS);
  }

  rememberAskedPod(parent: string, podUid: string): void {
    this.of(parent).askedPods.set(podUid, this.clock.now() + ASKED_MEMORY_MS);
  }

  /** A DELETE of this owner went through; until the cache shows it, rounds treat it as being deleted. */
  rememberDeletedOwner(parent: string, ownerUid: string): void {
    this.of(parent).deletedOwners.set(ownerUid, this.clock.now() + ASKED_MEMORY_MS);
  }

  /** Deleted moments ago, and the cached owner does not show its deletion yet (not deleted twice). */
  ownerDeletedRecently(parent: string, owner: KubeObject): boolean {
    const until = this.parents.get(parent)?.deletedOwners.get(owner.metadata.uid ?? '');
    return until !== undefined && this.clock.now() < until && !owner.metadata.deletionTimestamp;
  }

  /** Asked moments ago, and the cached object does not show the request yet. */
  ownerAskedRecently(parent: string, owner: KubeObject): boolean {
    return this.pending(this.parents.get(parent)?.askedOwners, owner.metadata.name ?? '', owner);
  }

  podAskedRecently(parent: string, pod: KubeObject): boolean {
    return this.pending(this.parents.get(parent)?.askedPods, pod.metadata.uid ?? '', pod);
  }

  private pending(m: Map<string, number> | undefined, id: string, obj: KubeObject): boolean {
    const until = m?.get(id);
    return until !== undefined && this.clock.now() < until && !shown(obj);
  }

  /** Forgets requests that the caches now show, whose objects are gone, or that timed out. */
  forgetSettled(parent: string, owners: KubeObject[], pods: KubeObject[]): void {
    const m = this.parents.get(parent);
    if (!m) return;
    const now = this.clock.now();
    const ownerByName = new Map(owners.map((o) => [o.metadata.name ?? '', o]));
    const podByUid = new Map(pods.map((p) => [p.metadata.uid ?? '', p]));
    for (const [name, until] of m.askedOwners) {
      if (now >= until || shown(ownerByName.get(name))) m.askedOwners.delete(name);
    }
    for (const [uid, until] of m.askedPods) {
      if (now >= until || shown(podByUid.get(uid))) m.askedPods.delete(uid);
    }
    const ownerByUid = new Map(owners.map((o) => [o.metadata.uid ?? '', o]));
    for (const [uid, until] of m.deletedOwners) {
      const o = ownerByUid.get(uid);
      if (now >= until || !o || o.metadata.deletionTimestamp) m.deletedOwners.delete(uid);
    }
  }
}

/** A runner pod as owner synchronisation sees it. */
/**
 * A cached pod's facts, computed once per version: an owner round looks at every pod of its owner
 * (a thousand at a time) many times a second. Informer caches replace an object on every change and
 * never modify one in place, so the object itself is the version.
 */
const factsOfCachedPod = new WeakMap<object, RunnerPodFacts>();

export function podStateOf(
  pod: PodObject,
  opts: {
    now: number;
    registrationTimeoutMs: number;
    snapshot: RunnerSnapshot | undefined;
    askedRecently: boolean;
  },
): PodState {
  const runner = opts.snapshot?.byName(pod.metadata.name ?? '');
  let facts = factsOfCachedPod.get(pod);
  if (!facts) {
    facts = runnerPodFacts(pod);
    factsOfCachedPod.set(pod, facts);
  }
  return {
    name: pod.metadata.name ?? '',
    bucket: classifyPod(pod, opts.now, opts.registrationTimeoutMs, facts),
    annotations: pod.metadata.annotations ?? {},
    deleting: Boolean(pod.metadata.deletionTimestamp),
    busy: runner ? runner.busy : undefined,
    askedRecently: opts.askedRecently,
  };
}

/**
 * Performs a `request-unregistration` action: the pods first, then the owner (as ARC: a pod is the
 * one whose runner the request stops), remembering each write until the caches show it.
 */
export async function requestUnregistration(
  deps: { http: KubeHttp; clock: Clock; memory: OwnerSyncMemory; pods: ReadonlyStore<PodObject> },
  where: { parent: string; namespace: string; owners: ResourceRef },
  action: Extract<OwnerAction, { kind: 'request-unregistration' }>,
): Promise<void> {
  const { http, memory } = deps;
  const { parent, namespace } = where;
  const annotate = {
    metadata: { annotations: { [ANNOTATION_UNREGISTRATION_REQUEST]: rfc3339(deps.clock.now()) } },
  };
  const ignoreNotFound = (err: unknown) => {
    if (!isNotFound(err)) throw err;
    return undefined;
  };
  for (const pod of action.pods) {
    const cached = deps.pods.getByName(namespace, pod);
    if (cached?.metadata.annotations?.[ANNOTATION_UNREGISTRATION_REQUEST]) continue;
    const patched = await mergePatch(http, PODS, { metadata: { name: pod, namespace } }, annotate).catch(
      ignoreNotFound,
    );
    if (patched?.metadata.uid) memory.rememberAskedPod(parent, patched.metadata.uid);
  }
  if (action.annotateOwner) {
    const patched = await mergePatch(
      http,
      where.owners,
      { metadata: { name: action.owner, namespace } },
      annotate,
    ).catch(ignoreNotFound);
    if (patched) memory.rememberAskedOwner(parent, action.owner);
  }
}
