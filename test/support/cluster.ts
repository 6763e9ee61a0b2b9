import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { installCrds } from '../../src/cli/run.ts';
import { KubeHttp } from '../../src/runtime/kube-http.ts';
import { type ControlPlane, startControlPlane } from '../../src/testenv/control-plane.ts';

/**
 * The control plane an integration test file talks to: the one `test/run.ts` started for the whole
 * run (PADDOCK_TEST_KUBECONFIG), or, when a file runs on its own, a private one stopped after it.
 */
export interface TestCluster {
  kubeConfig: KubeConfig;
  /** kube-controller-manager is running (workload controllers, GC, namespace deletion). */
  controllerManager: boolean;
  /** The private control plane when this file started one itself. */
  own?: ControlPlane;
  /** Where the components write their logs, when known. */
  dataDir?: string;
}

let shared: Promise<TestCluster> | undefined;

export function useCluster(): Promise<TestCluster> {
  shared ??= (async () => {
    const path = process.env.PADDOCK_TEST_KUBECONFIG;
    if (path) {
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromFile(path);
      return {
        kubeConfig,
        controllerManager: process.env.PADDOCK_TEST_CONTROLLER_MANAGER === '1',
        dataDir: process.env.PADDOCK_TEST_DATA_DIR,
      };
    }
    // Stopped by the process exit handlers of the harness when this file's process ends.
    const own = await startControlPlane({ controllerManager: true });
    await installCrdsEarly(own.kubeConfig);
    return { kubeConfig: own.kubeConfig, controllerManager: true, own, dataDir: own.dataDir };
  })();
  return shared;
}

/**
 * Installs paddock's CRDs as soon as the control plane is up: the garbage collector discovers new
 * resource types only every 30 s, and cascading deletion of RunnerDeployments needs it to know them.
 */
export async function installCrdsEarly(kubeConfig: KubeConfig): Promise<void> {
  const http = new KubeHttp(kubeConfig);
  try {
    await installCrds(http);
  } finally {
    http.close();
  }
}

/** The lines of a component's log (e.g. `kube-controller-manager`) that mention `needle`, for failure messages. */
export async function componentLogLines(
  cluster: TestCluster,
  component: string,
  needle: string,
  max = 40,
): Promise<string> {
  if (!cluster.dataDir) return `(no ${component} log: data directory unknown)`;
  try {
    const text = await readFile(join(cluster.dataDir, `${component}.log`), 'utf8');
    return text
      .split('\n')
      .filter((l) => l.includes(needle))
      .slice(-max)
      .join('\n');
  } catch (err) {
    return `(no ${component} log: ${String(err)})`;
  }
}

/**
 * Call at describe level: a fresh namespace (never reused) for the tests in that block, created
 * before them and deleted after them.
 */
export function namespaceFixture(prefix: string): { readonly cluster: TestCluster; readonly name: string } {
  let cluster: TestCluster | undefined;
  let name: string | undefined;
  before(async () => {
    cluster = await useCluster();
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const ns = await core.createNamespace({
      body: { metadata: { generateName: `${prefix}-`, labels: { 'paddock.dev/test': 'true' } } },
    });
    name = ns.metadata!.name!;
  });
  after(async () => {
    if (!cluster || !name) return;
    await cluster.kubeConfig
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name })
      .catch(() => undefined);
  });
  return {
    get cluster() {
      if (!cluster) throw new Error('namespaceFixture used outside its tests');
      return cluster;
    },
    get name() {
      if (!name) throw new Error('namespaceFixture used outside its tests');
      return name;
    },
  };
}

export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  timeoutMs = 30_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`,
  );
}
