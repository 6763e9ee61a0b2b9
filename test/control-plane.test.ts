import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type V1CustomResourceDefinition,
  Watch,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import { startControlPlane } from '../src/testenv/control-plane.ts';
import { eventually, namespaceFixture, type TestCluster } from './support/cluster.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Alive and not a zombie waiting for a reaper (an orphan's zombie has already exited). */
function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

describe('test control plane', () => {
  const fixture = namespaceFixture('t-cp');
  let cluster: TestCluster;
  let ns: string;
  before(() => {
    cluster = fixture.cluster;
    ns = fixture.name;
  });

  test('installs a CRD from YAML, then creates and watches a custom resource', async () => {
    const ext = cluster.kubeConfig.makeApiClient(ApiextensionsV1Api);
    const crd = parse(
      await readFile(path.join(here, 'fixtures/widget-crd.yaml'), 'utf8'),
    ) as V1CustomResourceDefinition;
    await ext.createCustomResourceDefinition({ body: crd }).catch((e: { code?: number }) => {
      if (e.code !== 409) throw e;
    });
    await eventually('CRD Established', async () => {
      const got = await ext.readCustomResourceDefinition({ name: 'widgets.test.paddock.dev' });
      return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    });

    const custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    const gvr = { group: 'test.paddock.dev', version: 'v1', namespace: ns, plural: 'widgets' };
    // Established can precede the REST handler by a moment; wait until the resource is served.
    await eventually(
      'widgets served',
      async () => (await custom.listNamespacedCustomObject(gvr)) !== undefined,
    );

    const events: string[] = [];
    let watchError: unknown;
    const watch = new Watch(cluster.kubeConfig);
    const controller = await watch.watch(
      `/apis/test.paddock.dev/v1/namespaces/${ns}/widgets`,
      {},
      (phase, obj: { metadata?: { name?: string }; status?: { ready?: boolean } }) => {
        events.push(`${phase}:${obj.metadata?.name}:${obj.status?.ready ?? '-'}`);
      },
      (err) => {
        watchError = err;
      },
    );
    try {
      await custom.createNamespacedCustomObject({
        ...gvr,
        body: {
          apiVersion: 'test.paddock.dev/v1',
          kind: 'Widget',
          metadata: { name: 'w1' },
          spec: { size: 3 },
        },
      });
      await custom.patchNamespacedCustomObjectStatus(
        { ...gvr, name: 'w1', body: { status: { ready: true } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await eventually('watch events', async () => events.includes('MODIFIED:w1:true')).catch((e) => {
        throw new Error(`${e.message}; saw ${JSON.stringify(events)}, watch error ${String(watchError)}`);
      });
      assert.equal(events[0], 'ADDED:w1:-');

      // The API server validates against the CRD's schema.
      await assert.rejects(
        custom.createNamespacedCustomObject({
          ...gvr,
          body: {
            apiVersion: 'test.paddock.dev/v1',
            kind: 'Widget',
            metadata: { name: 'w2' },
            spec: { size: 0 },
          },
        }),
        (e: { code?: number; body?: string }) => e.code === 422 && /spec.size/.test(String(e.body)),
      );
    } finally {
      controller.abort();
    }
  });

  test('with kube-controller-manager, a StatefulSet gets its pod and GC removes owned objects', async (t) => {
    if (!cluster.controllerManager) {
      t.skip('kube-controller-manager is not running in this run');
      return;
    }
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const sts = await apps.createNamespacedStatefulSet({
      namespace: ns,
      body: {
        metadata: { name: 'web' },
        spec: {
          replicas: 1,
          serviceName: 'web',
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: { containers: [{ name: 'c', image: 'registry.invalid/none:1' }] },
          },
        },
      },
    });
    const pod = await eventually('pod web-0', async () => {
      const list = await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=web' });
      return list.items.find((p) => p.metadata?.name === 'web-0');
    });
    const owner = pod.metadata?.ownerReferences?.[0];
    assert.equal(owner?.kind, 'StatefulSet');
    assert.equal(owner?.uid, sts.metadata?.uid);

    // An object owned by the StatefulSet goes with it: garbage collection is running.
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: {
          name: 'web-owned',
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'StatefulSet',
              name: 'web',
              uid: sts.metadata!.uid!,
              controller: true,
            },
          ],
        },
        data: { a: 'b' },
      },
    });
    await apps.deleteNamespacedStatefulSet({ name: 'web', namespace: ns, propagationPolicy: 'Background' });
    await eventually(
      'dependents collected',
      async () => {
        const pods = await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=web' });
        const cms = await core.listNamespacedConfigMap({
          namespace: ns,
          fieldSelector: 'metadata.name=web-owned',
        });
        return pods.items.length === 0 && cms.items.length === 0;
      },
      60_000,
    );
  });
});

describe('control plane harness', () => {
  test('stop() ends every process it started', async () => {
    const plane = await startControlPlane({ controllerManager: false, log: () => undefined });
    const core = plane.kubeConfig.makeApiClient(CoreV1Api);
    const ns = await core.readNamespace({ name: 'default' });
    assert.equal(ns.metadata?.name, 'default');
    const pids = plane.pids();
    assert.equal(pids.length, 2);
    assert.ok(pids.every(processAlive));
    await plane.stop();
    assert.deepEqual(pids.filter(processAlive), []);
  });

  test('restarts: etcd and kube-apiserver serve again; a failed restart says why and leaves nothing behind', async () => {
    const plane = await startControlPlane({ controllerManager: false, log: () => undefined });
    const seen = new Set(plane.pids());
    const note = () => {
      for (const p of plane.pids()) seen.add(p);
    };
    try {
      const core = plane.kubeConfig.makeApiClient(CoreV1Api);
      await core.createNamespacedConfigMap({
        namespace: 'default',
        body: { metadata: { name: 'survives' }, data: { a: 'b' } },
      });
      const read = async () =>
        (await core.readNamespacedConfigMap({ name: 'survives', namespace: 'default' })).data?.a;

      // Same ports and data: kube-apiserver reconnects to the new etcd and the data is still there.
      await plane.restartEtcd({ kill: true });
      note();
      assert.equal(await read(), 'b');
      await plane.restartApiServer();
      note();
      assert.equal(await read(), 'b');
      assert.equal(plane.pids().length, 2);

      // A start that fails quotes this start's log lines (not the previous run's) and leaves the
      // component stopped; etcd alone stays.
      const etcdOnly = plane.pids()[0];
      await assert.rejects(plane.restartApiServer({ extraArgs: ['--no-such-flag'] }), (e: Error) => {
        assert.match(
          e.message,
          /^kube-apiserver exited \(1\) before it was ready; last lines of \S+kube-apiserver\.log:\n/,
        );
        assert.match(e.message, /unknown flag: --no-such-flag/);
        assert.doesNotMatch(e.message, /Shutting down/, 'only the failed start’s lines');
        return true;
      });
      note();
      assert.deepEqual(plane.pids(), [etcdOnly]);
      // A start that is not ready in time is stopped, and says so with its log.
      await assert.rejects(
        plane.restartEtcd({ timeoutMs: 1 }),
        /^Error: etcd not ready after 1 ms; last lines of /,
      );
      note();
      assert.deepEqual(plane.pids(), []);
      // Another restart brings each back.
      await plane.restartEtcd();
      await plane.restartApiServer();
      note();
      assert.equal(await read(), 'b');

      // stop() in the middle of a restart: the half-started process goes too, and the restart fails.
      const running = new Set(plane.pids());
      const restart = plane.restartApiServer().then(
        () => undefined,
        (e: Error) => e,
      );
      await eventually(
        'the new kube-apiserver spawned',
        async () => plane.pids().some((p) => !running.has(p)),
        30_000,
        5,
      );
      note();
      await plane.stop();
      const outcome = await restart;
      assert.match(
        String(outcome),
        /^Error: kube-apiserver: the control plane was stopped while waiting for it$/,
      );
    } finally {
      note();
      await plane.stop();
    }
    assert.ok(seen.size >= 7, `processes seen: ${[...seen].join(', ')}`);
    assert.deepEqual([...seen].filter(processAlive), []);
  });

  test('a killed test process leaves no control-plane process behind', async () => {
    const child = spawn(process.execPath, [path.join(here, 'support/start-and-wait.ts')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const lineOf = (prefix: string) =>
      out
        .split('\n')
        .find((l) => l.startsWith(prefix))
        ?.slice(prefix.length);
    try {
      const pids = await eventually(
        'child control plane',
        async () => {
          const line = lineOf('PIDS ');
          return line ? (JSON.parse(line) as number[]) : undefined;
        },
        90_000,
      );
      assert.ok(pids.length >= 2);
      assert.ok(pids.every(processAlive));
      child.kill('SIGKILL');
      await eventually('orphans gone', async () => pids.every((p) => !processAlive(p)), 15_000);
    } finally {
      child.kill('SIGKILL');
      // The killed process could not remove its data directory (its exit hook never ran).
      const dir = lineOf('DIR ');
      if (dir?.includes('paddock-cp-')) rmSync(dir, { recursive: true, force: true });
    }
  });
});
