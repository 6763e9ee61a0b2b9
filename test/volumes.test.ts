import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CoreV1Api, type V1PersistentVolume } from '@kubernetes/client-node';
import {
  boundToClaim,
  LABEL_PENDING_CLEANUP,
  pvcStep,
  pvStep,
  VolumeRetentionReconcilers,
} from '../src/controllers/volumes.ts';
import { silentLogger } from '../src/runtime/log.ts';
import { Manager } from '../src/runtime/manager.ts';
import { componentLogLines, eventually, namespaceFixture } from './support/cluster.ts';

describe('volume retention decisions', () => {
  test('PVC: only ours, only once the StatefulSet is gone', () => {
    const pvc = (labels: Record<string, string>, volumeName?: string) => ({
      metadata: { labels },
      spec: { volumeName },
    });
    assert.deepEqual(pvcStep(pvc({}), false), { kind: 'ignore' });
    assert.deepEqual(pvcStep(pvc({ 'runner-statefulset-name': 's' }), true), { kind: 'wait' });
    assert.deepEqual(pvcStep(pvc({ 'runner-statefulset-name': 's' }, 'pv1'), false), {
      kind: 'release',
      volume: 'pv1',
    });
    assert.deepEqual(
      pvcStep(pvc({ 'runner-statefulset-name': 's' }), false),
      { kind: 'wait' },
      'not bound yet',
    );
  });
  test('PV: made Available once Released', () => {
    const pv = (labels: Record<string, string>, phase: string, claimed = true) => ({
      metadata: { labels },
      spec: { claimRef: claimed ? { name: 'c' } : null },
      status: { phase },
    });
    assert.deepEqual(
      pvStep(pv({}, 'Bound')),
      { kind: 'ignore' },
      'not ours: never requeued (ARC requeued every PV)',
    );
    assert.deepEqual(pvStep(pv({ [LABEL_PENDING_CLEANUP]: 's' }, 'Bound')), { kind: 'wait' });
    assert.deepEqual(pvStep(pv({ [LABEL_PENDING_CLEANUP]: 's' }, 'Released')), { kind: 'make-available' });
    assert.deepEqual(
      pvStep(pv({ [LABEL_PENDING_CLEANUP]: 's' }, 'Available')),
      { kind: 'make-available' },
      'pre-bound to a deleted claim',
    );
    assert.deepEqual(
      pvStep(pv({ [LABEL_PENDING_CLEANUP]: 's' }, 'Available', false)),
      { kind: 'unlabel' },
      'freed already, then labelled again by a late writer: only the label goes',
    );
    assert.deepEqual(pvStep(pv({}, 'Available', false)), { kind: 'ignore' });
  });
  test('a volume is marked for cleanup only while bound to the claim being released', () => {
    const pvc = { metadata: { name: 'c', namespace: 'n', uid: 'u1' } };
    const pv = (claimRef: { name?: string; namespace?: string; uid?: string } | null) => ({
      metadata: {},
      spec: { claimRef },
    });
    assert.equal(boundToClaim(pv({ name: 'c', namespace: 'n', uid: 'u1' }), pvc), true);
    assert.equal(boundToClaim(pv(null), pvc), false, 'freed since');
    assert.equal(
      boundToClaim(pv({ name: 'c', namespace: 'n', uid: 'u2' }), pvc),
      false,
      'a new claim of the same name',
    );
    assert.equal(boundToClaim(pv({ name: 'd', namespace: 'n', uid: 'u3' }), pvc), false, 'another claim');
    assert.equal(boundToClaim(pv({ name: 'c', namespace: 'm', uid: 'u1' }), pvc), false);
  });
});

describe('volume retention against the API server', () => {
  const ns = namespaceFixture('t-volumes');
  let manager: Manager;
  let core: CoreV1Api;
  const pvName = `t-vol-${process.pid}-${Date.now()}`;
  before(async () => {
    core = ns.cluster.kubeConfig.makeApiClient(CoreV1Api);
    manager = new Manager({ kubeConfig: ns.cluster.kubeConfig, log: silentLogger() });
    new VolumeRetentionReconcilers({ manager, namespace: ns.name });
    await manager.start();
  });
  after(async () => {
    await manager?.stop();
    await core?.deletePersistentVolume({ name: pvName }).catch(() => undefined);
  });

  test('a claim of a vanished runner StatefulSet is deleted and its volume made Available', async (t) => {
    if (!ns.cluster.controllerManager) return t.skip('needs the PV binder of kube-controller-manager');
    await core.createPersistentVolume({
      body: {
        metadata: { name: pvName },
        spec: {
          capacity: { storage: '1Gi' },
          accessModes: ['ReadWriteOnce'],
          persistentVolumeReclaimPolicy: 'Retain',
          storageClassName: pvName,
          hostPath: { path: '/tmp/paddock-test' },
        },
      },
    });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: ns.name,
      body: {
        metadata: {
          name: 'var-lib-docker-runner-abcde-0',
          labels: { 'runner-statefulset-name': 'runner-abcde' },
        },
        spec: {
          accessModes: ['ReadWriteOnce'],
          storageClassName: pvName,
          resources: { requests: { storage: '1Gi' } },
        },
      },
    });
    // No StatefulSet "runner-abcde" exists: once bound, the claim goes and the volume comes back.
    await eventually(
      'claim deleted',
      async () => {
        try {
          await core.readNamespacedPersistentVolumeClaim({
            name: 'var-lib-docker-runner-abcde-0',
            namespace: ns.name,
          });
          return false;
        } catch (e) {
          return (e as { code?: number }).code === 404;
        }
      },
      60_000,
    );
    // The end state: Available, no claim, no cleanup label (the binder and we both write the PV).
    let last: V1PersistentVolume | undefined;
    const pv = await eventually(
      'volume Available without claim or cleanup label',
      async () => {
        const v = await core.readPersistentVolume({ name: pvName });
        last = v;
        const done =
          v.status?.phase === 'Available' &&
          !v.spec?.claimRef &&
          !v.metadata?.labels?.[LABEL_PENDING_CLEANUP];
        return done ? v : undefined;
      },
      60_000,
    ).catch(async (err: Error) => {
      const binder = await componentLogLines(ns.cluster, 'kube-controller-manager', pvName);
      throw new Error(
        `${err.message}\nlast seen: ${JSON.stringify({ labels: last?.metadata?.labels, claimRef: last?.spec?.claimRef, status: last?.status })}\nkube-controller-manager on ${pvName}:\n${binder}`,
      );
    });
    assert.equal(pv.status?.phase, 'Available');
  });

  test('a free volume left marked for cleanup by a late writer loses the mark', async () => {
    const name = `${pvName}-late`;
    await core.createPersistentVolume({
      body: {
        metadata: { name, labels: { [LABEL_PENDING_CLEANUP]: 'runner-gone', keep: 'me' } },
        spec: {
          capacity: { storage: '1Gi' },
          accessModes: ['ReadWriteOnce'],
          persistentVolumeReclaimPolicy: 'Retain',
          storageClassName: name,
          hostPath: { path: '/tmp/paddock-test' },
        },
      },
    });
    try {
      const v = await eventually('cleanup label dropped', async () => {
        const v = await core.readPersistentVolume({ name });
        return v.metadata?.labels?.[LABEL_PENDING_CLEANUP] ? undefined : v;
      });
      assert.deepEqual(v.metadata?.labels, { keep: 'me' }, 'other labels stay');
    } finally {
      await core.deletePersistentVolume({ name }).catch(() => undefined);
    }
  });
});
