import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';

/**
 * What `paddock run` loads with its modules is paid at every start. Two things it must not load:
 * undici (the global fetch and an ESM import of node:http pull it in: 30–50 ms) and the YAML
 * parser (only for a YAML kubeconfig). test/kubeconfig.test.ts keeps @kubernetes/client-node out.
 */
test('importing the run command loads neither undici nor the YAML parser', async () => {
  const script = `
    import { createRequire } from 'node:module';
    await import(${JSON.stringify(new URL('./run.ts', import.meta.url).href)});
    const cjs = Object.keys(createRequire(import.meta.url).cache);
    process.stdout.write(JSON.stringify({
      undici: process.moduleLoadList.filter((m) => m.includes('undici')),
      yaml: cjs.filter((k) => k.includes('/node_modules/yaml/')).length,
    }));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
    cwd: new URL('.', import.meta.url),
  });
  assert.deepEqual(JSON.parse(stdout), { undici: [], yaml: 0 });
});
