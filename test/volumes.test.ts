import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  LABEL_PENDING_CLEANUP,
  pvcStep,
  pvStep,
  VolumeRetentionReconcilers,
} from '../src/controllers/volumes.ts';
import { silentLogger } from '../src/runtime/log.ts';
import { Manager } from '../src/runtime/manager.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';

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
    assert.deepEqual(pvStep(pv({ [LABEL_PENDING_CLEANUP]: 's' }, 'Released', false)), { kind: 'ignore' });
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
    const pv = await eventually(
      'volume Available without claim or cleanup label',
      async () => {
        const v = await core.readPersistentVolume({ name: pvName });
        const done =
          v.status?.phase === 'Available' &&
          !v.spec?.claimRef &&
          !v.metadata?.labels?.[LABEL_PENDING_CLEANUP];
        return done ? v : undefined;
      },
      60_000,
    );
    assert.equal(pv.status?.phase, 'Available');
  });
});
