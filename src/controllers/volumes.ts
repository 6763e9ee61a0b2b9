import type { Controller, ReconcileResult } from '../runtime/controller.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { Informer } from '../runtime/informer.ts';
import { resourcePath } from '../runtime/informer.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import type { Manager } from '../runtime/manager.ts';
import { jsonPatch, mergePatch } from '../runtime/objects.ts';
import { PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES } from '../runtime/resources.ts';
import type { KubeObject } from '../runtime/store.ts';
import {
  type PvcObject,
  runnerVolumeClaimInformer,
  type StatefulSetObject,
  statefulSetInformer,
} from './cache-shapes.ts';
import { LABEL_RUNNER_STATEFULSET_NAME } from './constants.ts';

/**
 * PVC and PV retention (spec §3.9): when a runner's StatefulSet is gone, its volume claims are
 * deleted and their volumes made Available again, so the next runner can reuse a warm cache.
 * Unlike ARC, PVs without our label are left alone instead of being requeued every 10 s forever.
 */

export const LABEL_PENDING_CLEANUP = 'pending-cleanup';

type Pvc = PvcObject;
interface Pv extends KubeObject {
  spec?: { claimRef?: { name?: string; namespace?: string; uid?: string } | null };
  status?: { phase?: string };
}

export type PvcStep = { kind: 'ignore' } | { kind: 'wait' } | { kind: 'release'; volume: string };

export function pvcStep(pvc: Pvc, statefulSetExists: boolean): PvcStep {
  if (!pvc.metadata.labels?.[LABEL_RUNNER_STATEFULSET_NAME]) return { kind: 'ignore' };
  // Unbound claims wait: deleting one the binder is about to bind would strand its volume.
  if (statefulSetExists || !pvc.spec?.volumeName) return { kind: 'wait' };
  return { kind: 'release', volume: pvc.spec.volumeName };
}

export type PvStep = { kind: 'ignore' } | { kind: 'wait' } | { kind: 'make-available' } | { kind: 'unlabel' };

export function pvStep(pv: Pv): PvStep {
  if (!pv.metadata.labels?.[LABEL_PENDING_CLEANUP]) return { kind: 'ignore' };
  // Already free (a late writer labelled it again): only the label is left to drop, or it would
  // stay marked forever.
  if (!pv.spec?.claimRef) return { kind: 'unlabel' };
  // Our label means we deleted the claim. Released is the usual way on; Available with a claimRef
  // happens when the claim went before the binder finished (the PV stays pre-bound to a claim
  // that will never come): both are freed.
  const phase = pv.status?.phase;
  return phase === 'Released' || phase === 'Available' ? { kind: 'make-available' } : { kind: 'wait' };
}

/** Whether a volume is still held by this claim, so marking it for cleanup cannot hit a volume already freed or reused. */
export function boundToClaim(pv: Pv, pvc: Pvc): boolean {
  const ref = pv.spec?.claimRef;
  return (
    !!ref &&
    ref.namespace === pvc.metadata.namespace &&
    ref.name === pvc.metadata.name &&
    (ref.uid === undefined || ref.uid === pvc.metadata.uid)
  );
}

const jsonPointerToken = (k: string) => k.replaceAll('~', '~0').replaceAll('/', '~1');

export class VolumeRetentionReconcilers {
  readonly pvcController: Controller;
  readonly pvController: Controller;
  private readonly http: KubeHttp;
  private readonly pvcs: Informer<Pvc>;
  private readonly pvs: Informer<Pv>;
  private readonly statefulSets: Informer<StatefulSetObject>;

  constructor(opts: { manager: Manager; namespace?: string }) {
    const m = opts.manager;
    this.http = m.http;
    this.pvcs = runnerVolumeClaimInformer(m, opts.namespace);
    this.pvs = m.informer<Pv>(PERSISTENT_VOLUMES, { labelSelector: LABEL_PENDING_CLEANUP });
    this.statefulSets = statefulSetInformer(m, opts.namespace);
    this.pvcController = m
      .controller({
        name: 'runnerpersistentvolumeclaim-controller',
        reconcile: ({ key }) => this.reconcilePvc(key),
      })
      .watchFor(this.pvcs)
      .watchMapped(this.statefulSets, (sts) =>
        this.pvcs.store
          .byLabel(LABEL_RUNNER_STATEFULSET_NAME, sts.metadata.name ?? '')
          .filter((p) => p.metadata.namespace === sts.metadata.namespace)
          .map((p) => `${p.metadata.namespace}/${p.metadata.name}`),
      );
    this.pvController = m
      .controller({
        name: 'runnerpersistentvolume-controller',
        reconcile: ({ key }) => this.reconcilePv(key),
      })
      .watchFor(this.pvs);
  }

  private async reconcilePvc(key: string): Promise<ReconcileResult | undefined> {
    const pvc = this.pvcs.store.get(key);
    if (!pvc || pvc.metadata.deletionTimestamp) return undefined;
    const stsName = pvc.metadata.labels?.[LABEL_RUNNER_STATEFULSET_NAME] ?? '';
    const exists = this.statefulSets.store.getByName(pvc.metadata.namespace, stsName) !== undefined;
    const step = pvcStep(pvc, exists);
    if (step.kind !== 'release') return undefined; // the StatefulSet's deletion requeues us
    // A live read, not a cache: a late second pass over a claim we already deleted must not mark a
    // volume that was freed (or bound to another claim) since.
    let pv: Pv | undefined;
    try {
      pv = await this.http.request<Pv>('GET', resourcePath(PERSISTENT_VOLUMES, undefined, step.volume));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (pv && boundToClaim(pv, pvc) && !pv.metadata.labels?.[LABEL_PENDING_CLEANUP]) {
      // resourceVersion makes the merge patch conditional: a conflict retries with a fresh read.
      await mergePatch(this.http, PERSISTENT_VOLUMES, pv, {
        metadata: {
          resourceVersion: pv.metadata.resourceVersion,
          labels: { [LABEL_PENDING_CLEANUP]: stsName },
        },
      });
    }
    try {
      await this.http.request(
        'DELETE',
        resourcePath(PERSISTENT_VOLUME_CLAIMS, pvc.metadata.namespace, pvc.metadata.name),
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    return undefined;
  }

  private async reconcilePv(key: string): Promise<ReconcileResult | undefined> {
    const pv = this.pvs.store.get(key);
    if (!pv) return undefined;
    const step = pvStep(pv);
    if (step.kind === 'ignore') return undefined;
    if (step.kind === 'wait') return { requeueAfterMs: 10_000 };
    try {
      await jsonPatch(this.http, PERSISTENT_VOLUMES, pv, [
        { op: 'test', path: '/metadata/resourceVersion', value: pv.metadata.resourceVersion },
        { op: 'remove', path: `/metadata/labels/${jsonPointerToken(LABEL_PENDING_CLEANUP)}` },
        ...(step.kind === 'make-available' ? [{ op: 'remove' as const, path: '/spec/claimRef' }] : []),
      ]);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    return undefined;
  }
}
