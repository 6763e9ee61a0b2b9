import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runnerPodInformer } from '../src/controllers/cache-shapes.ts';
import { RUNNER_POD_SELECTORS } from '../src/controllers/constants.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { silentLogger } from '../src/runtime/log.ts';
import { Manager } from '../src/runtime/manager.ts';
import { RuntimeMetrics } from '../src/runtime/metrics.ts';
import { mergePatch } from '../src/runtime/objects.ts';
import { PODS } from '../src/runtime/resources.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';

/**
 * The runner pod cache against a real API server: its label selectors (`!key` terms included) hold
 * every pod of a runner, whichever ARC version labelled it, once, and no other pod.
 */

describe('runner pod cache', () => {
  const ns = namespaceFixture('t-podcache');
  let http: KubeHttp;
  let manager: Manager;

  before(() => {
    http = new KubeHttp(ns.cluster.kubeConfig);
  });
  after(async () => {
    await manager?.stop();
    http?.close();
  });

  const create = (name: string, labels: Record<string, string>) =>
    http.request<KubeObject>('POST', resourcePath(PODS, ns.name), {
      body: {
        metadata: { name, labels },
        spec: {
          containers: [
            {
              name: 'runner',
              image: 'summerwind/actions-runner:latest',
              env: [{ name: 'RUNNER_ORG', value: 'acme' }],
              volumeMounts: [{ name: 'work', mountPath: '/runner/_work' }],
            },
          ],
          volumes: [{ name: 'work', emptyDir: {} }],
        },
      },
    });

  test('holds the pods of every runner once, shaped, and no other pod; follows changes', async () => {
    await create('paddock', { 'actions-runner': '', 'runnerset-name': 'rs' });
    await create('arc-0-24', { 'runnerset-name': 'rs' });
    await create('arc-0-21', { 'runner-deployment-name': 'rd' });
    await create('web', { app: 'web' });
    await create('job', { 'runner-pod': 'paddock' });

    manager = new Manager({
      kubeConfig: ns.cluster.kubeConfig,
      log: silentLogger(),
      metrics: new RuntimeMetrics({ processMetrics: false }),
    });
    const pods = runnerPodInformer(manager, ns.name);
    assert.equal(pods.parts.length, RUNNER_POD_SELECTORS.length);
    await manager.start();
    await pods.waitForSync();
    const names = () =>
      pods.store
        .list()
        .map((p) => p.metadata.name)
        .sort();
    assert.deepEqual(names(), ['arc-0-21', 'arc-0-24', 'paddock']);
    const paddock = pods.store.getByName(ns.name, 'paddock')!;
    assert.equal(paddock.metadata.managedFields, undefined);
    assert.deepEqual(paddock.spec, {
      containers: [{ name: 'runner', env: [{ name: 'RUNNER_ORG', value: 'acme' }] }],
    });

    // Watched: a runner pod added, another pod added, a runner pod deleted.
    await create('arc-new', { 'runnerset-name': 'rs' });
    await create('db', { app: 'db' });
    await http.request('DELETE', resourcePath(PODS, ns.name, 'arc-0-21'), {
      body: { gracePeriodSeconds: 0 },
    });
    await eventually('the cache follows', async () =>
      JSON.stringify(names()) === JSON.stringify(['arc-0-24', 'arc-new', 'paddock']) ? true : undefined,
    );

    // Labels changed so the pod moves from one selector's informer to another's: still there, once.
    await mergePatch(http, PODS, paddock, { metadata: { labels: { 'actions-runner': null } } });
    await eventually('the relabelled pod is cached by the next selector', async () =>
      pods.parts[1]!.store.getByName(ns.name, 'paddock') &&
      !pods.parts[0]!.store.getByName(ns.name, 'paddock')
        ? true
        : undefined,
    );
    assert.deepEqual(names(), ['arc-0-24', 'arc-new', 'paddock']);

    // No longer a runner pod at all: gone from the cache.
    await mergePatch(http, PODS, paddock, { metadata: { labels: { 'runnerset-name': null } } });
    await eventually('a pod with no runner label leaves the cache', async () =>
      pods.store.getByName(ns.name, 'paddock') ? undefined : true,
    );
    assert.equal(pods.store.size, 2);
  });
});
