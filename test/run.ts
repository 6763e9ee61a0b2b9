/**
 * The test entry point behind `make test`: builds (or reuses) the control-plane binaries, starts one
 * etcd + kube-apiserver + kube-controller-manager for the whole run, runs every unit and
 * integration test file with node:test against it, and always stops it again.
 *
 *   node test/run.ts            all tests
 *   node test/run.ts --unit     unit tests only (no control plane)
 *   node test/run.ts [--unit] -- <extra node --test arguments or file patterns>
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ControlPlane, startControlPlane } from '../src/testenv/control-plane.ts';
import { ensureHelm } from '../src/testenv/helm.ts';
import { installCrdsEarly } from './support/cluster.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const unitOnly = args.includes('--unit');
const sep = args.indexOf('--');
const extra = sep >= 0 ? args.slice(sep + 1) : args.filter((a) => a !== '--unit');
const hasPatterns = extra.some((a) => !a.startsWith('-'));
const patterns = hasPatterns
  ? []
  : unitOnly
    ? ['src/**/*.test.ts', 'hack/**/*.test.ts', 'bench/**/*.test.ts']
    : ['src/**/*.test.ts', 'hack/**/*.test.ts', 'bench/**/*.test.ts', 'test/**/*.test.ts'];

let plane: ControlPlane | undefined;
const env: NodeJS.ProcessEnv = { ...process.env };
if (!unitOnly && (!hasPatterns || extra.some((a) => /chart|helm|sandbox/.test(a)))) {
  // The chart tests' Helm, built once like the control plane (the tests would build it too, but
  // inside their time limit); a failure is theirs to report.
  await ensureHelm().catch((err: Error) => process.stderr.write(`[test] no Helm: ${err.message}\n`));
}
if (!unitOnly) {
  const started = Date.now();
  plane = await startControlPlane({ controllerManager: true });
  env.PADDOCK_TEST_KUBECONFIG = plane.kubeconfigPath;
  env.PADDOCK_TEST_CONTROLLER_MANAGER = '1';
  await installCrdsEarly(plane.kubeConfig);
  // Lets a failing test quote the components' logs.
  env.PADDOCK_TEST_DATA_DIR = plane.dataDir;
  process.stderr.write(`[test] control plane up in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

const code = await new Promise<number>((resolve) => {
  const child = spawn(
    process.execPath,
    [
      '--test',
      '--test-concurrency=2',
      '--test-timeout=600000',
      ...(process.env.CI ? ['--test-reporter=spec'] : []),
      ...extra,
      ...patterns,
    ],
    { cwd: root, env, stdio: 'inherit' },
  );
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('exit', (c, s) => resolve(c ?? (s ? 1 : 0)));
});

await plane?.stop();
process.exit(code);
