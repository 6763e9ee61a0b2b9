/**
 * Runtime benchmark: a no-op controller over 5,000 ConfigMaps on the test control plane.
 * Measures how fast the informer + queue + workers get through the initial sync's reconciles and
 * the process's memory afterwards.
 *
 *   node bench/runtime.ts [--json] [--objects N] [--concurrency N]
 */
import { parseArgs } from 'node:util';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { silentLogger } from '../src/runtime/log.ts';
import { Manager } from '../src/runtime/manager.ts';
import { startControlPlane } from '../src/testenv/control-plane.ts';

const { values } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    objects: { type: 'string', default: '5000' },
    concurrency: { type: 'string', default: '4' },
  },
});
const objects = Number(values.objects);
const say = (s: string) => {
  if (!values.json) process.stderr.write(`${s}\n`);
};

const plane = await startControlPlane({ controllerManager: false, log: say });
try {
  const http = new KubeHttp(plane.kubeConfig);
  const namespace = 'bench';
  await http.request('POST', '/api/v1/namespaces', { body: { metadata: { name: namespace } } });
  const created = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < objects) {
        const i = next++;
        await http.request('POST', `/api/v1/namespaces/${namespace}/configmaps`, {
          body: {
            metadata: { name: `cm-${i}`, labels: { bench: 'true' } },
            data: { index: String(i), payload: 'x'.repeat(256) },
          },
        });
      }
    }),
  );
  http.close();
  say(`created ${objects} ConfigMaps in ${((Date.now() - created) / 1000).toFixed(1)} s`);

  const rssBefore = process.memoryUsage().rss;
  const manager = new Manager({ kubeConfig: plane.kubeConfig, log: silentLogger() });
  const informer = manager.informer(
    { group: '', version: 'v1', plural: 'configmaps', namespaced: true, kind: 'ConfigMap' },
    {
      namespace,
      labelSelector: 'bench=true',
    },
  );
  let reconciles = 0;
  let done: () => void = () => undefined;
  const allDone = new Promise<void>((r) => {
    done = r;
  });
  manager
    .controller({
      name: 'noop',
      concurrency: Number(values.concurrency),
      reconcile: () => {
        reconciles++;
        if (reconciles === objects) done();
      },
    })
    .watchFor(informer);
  const started = performance.now();
  await manager.start();
  await allDone;
  const seconds = (performance.now() - started) / 1000;
  const rssMiB = process.memoryUsage().rss / 1024 / 1024;
  await manager.stop();
  const result = {
    objects,
    reconcilesPerSecond: Math.round(reconciles / seconds),
    rssMiB: Math.round(rssMiB * 10) / 10,
    listAndReconcileSeconds: Math.round(seconds * 100) / 100,
    rssBeforeManagerMiB: Math.round((rssBefore / 1024 / 1024) * 10) / 10,
  };
  if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
  else console.table(result);
} finally {
  await plane.stop();
}
