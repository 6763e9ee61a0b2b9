import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { copyFile, cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bundleDist, STUBBED, STUBBED_FILES } from './bundle.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('the bundle (npm run build)', () => {
  let dir: string;
  let files: string[];

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'paddock-bundle-'));
    // As in the image: package.json, bin/paddock.js, node_modules and config/crd beside dist/.
    await copyFile(path.join(root, 'package.json'), path.join(dir, 'package.json'));
    await symlink(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
    await cp(path.join(root, 'config', 'crd'), path.join(dir, 'config', 'crd'), { recursive: true });
    await mkdir(path.join(dir, 'bin'));
    await copyFile(path.join(root, 'bin', 'paddock.js'), path.join(dir, 'bin', 'paddock.js'));
    files = await bundleDist({ root, outDir: path.join(dir, 'dist'), sourcemap: false });
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const paddock = (...args: string[]) =>
    execFileSync(process.execPath, [path.join(dir, 'bin', 'paddock.js'), ...args], {
      encoding: 'utf8',
      cwd: dir,
    });

  test('runs: --version reads package.json relative to the chunk, run --help loads the run chunk', async () => {
    const { version } = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as {
      version: string;
    };
    assert.equal(paddock('--version').trim(), `paddock ${version}`);
    assert.match(paddock('run', '--help'), /^Usage: paddock run \[flags\]/);
  });

  test('run --install-crds parses the CRD manifests (the YAML parser is loaded on demand)', async () => {
    // An API server that answers /version and refuses the CRD writes: paddock exits 2 once it has
    // parsed and sent the first manifest.
    const seen: { method: string; url: string; kind?: string }[] = [];
    const api = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => {
        body += d.toString();
      });
      req.on('end', () => {
        const kind = body ? (JSON.parse(body) as { kind?: string }).kind : undefined;
        seen.push({ method: req.method ?? '', url: req.url ?? '', ...(kind ? { kind } : {}) });
        res.setHeader('content-type', 'application/json');
        if (req.url === '/version') return res.end(JSON.stringify({ major: '1', minor: '36' }));
        res.statusCode = 403;
        res.end(
          JSON.stringify({
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            reason: 'Forbidden',
            code: 403,
          }),
        );
      });
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    try {
      const server = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
      const kubeconfig = path.join(dir, 'kubeconfig.json');
      await writeFile(
        kubeconfig,
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [{ name: 'c', cluster: { server } }],
          users: [{ name: 'u', user: { token: 'test' } }],
          contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
          'current-context': 'x',
        }),
      );
      // The built-ins the process loaded, written as it exits.
      const loaded = path.join(dir, 'loaded-builtins.json');
      const record = `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(loaded)}, JSON.stringify(process.moduleLoadList)));`;
      await writeFile(path.join(dir, 'record-builtins.cjs'), record);
      const child = spawn(
        process.execPath,
        [
          '--require',
          path.join(dir, 'record-builtins.cjs'),
          path.join(dir, 'bin', 'paddock.js'),
          'run',
          '--install-crds',
          '--kubeconfig',
          kubeconfig,
          ...['--metrics-addr', '0', '--health-probe-addr', '0', '--webhook-addr', '0'],
        ],
        { cwd: dir, env: { PATH: process.env.PATH }, stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      clearTimeout(timer);
      assert.equal(code, 2, stderr);
      assert.match(stderr, /refused a request paddock needs at start-up/);
      assert.ok(
        seen.some(
          (r) =>
            r.method === 'PATCH' &&
            r.url.startsWith('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/') &&
            r.kind === 'CustomResourceDefinition',
        ),
        JSON.stringify(seen),
      );
      // prom-client's Pushgateway is stubbed, exec plugins load child_process on demand: a start with
      // a token pays for neither.
      const builtins = (JSON.parse(await readFile(loaded, 'utf8')) as string[])
        .filter((m) => m.startsWith('NativeModule '))
        .map((m) => m.slice('NativeModule '.length));
      assert.ok(builtins.includes('https'), 'the recorded list is the process’s');
      for (const unused of ['zlib', 'child_process'])
        assert.ok(!builtins.includes(unused), `${unused} is loaded`);
    } finally {
      api.closeAllConnections();
      await new Promise((resolve) => api.close(resolve));
    }
  });

  test('each command is a chunk of its own, loaded only when it runs', () => {
    assert.ok(files.includes(path.join('cli', 'main.js')));
    for (const command of ['run', 'sandbox', 'uninstall', 'webhook-server']) {
      assert.ok(
        files.some((f) => new RegExp(`^cli/${command}-[A-Z0-9]+\\.js$`).test(f)),
        `${command}: ${files.join(', ')}`,
      );
    }
  });

  test("zod's classic API stays out: only the schemas paddock uses are bundled", async () => {
    // The classic API's methods (`.optional()`) come with every schema; the mini API has none.
    let text = '';
    for (const f of files.filter((f) => f.endsWith('.js')))
      text += await readFile(path.join(dir, 'dist', f), 'utf8');
    assert.match(text, /\bvar ZodMiniObject\b/, 'the mini API is there');
    assert.doesNotMatch(text, /\bvar Zod(Object|String|Type)\b/, 'the classic API is not');
  });

  test('stubbed packages stay out, and each stub answers as the package does for paddock', async () => {
    let text = '';
    for (const f of files.filter((f) => f.endsWith('.js')))
      text += await readFile(path.join(dir, 'dist', f), 'utf8');
    for (const name of Object.keys(STUBBED)) {
      assert.doesNotMatch(text, new RegExp(`^// node_modules/${name}/`, 'm'), `${name} is bundled`);
    }
    for (const file of Object.keys(STUBBED_FILES)) {
      assert.doesNotMatch(
        text,
        new RegExp(`^// node_modules/${file.replace(/[/.]/g, '\\$&')}$`, 'm'),
        `${file} is bundled`,
      );
    }
    assert.match(
      text,
      /^\/\/ hack\/bundle-stubs\/prom-client-pushgateway\.cjs$/m,
      'the file stub is bundled in its place',
    );
    const Pushgateway = createRequire(import.meta.url)(
      './bundle-stubs/prom-client-pushgateway.cjs',
    ) as new () => unknown;
    assert.throws(() => new Pushgateway(), /not bundled with paddock/);
    assert.match(
      text,
      /^\/\/ hack\/bundle-stubs\/opentelemetry-api\.cjs$/m,
      'the stub is bundled in its place',
    );
    // prom-client's only use: the active span for an exemplar; with no tracing SDK there is none.
    const require = createRequire(import.meta.url);
    const real = require('@opentelemetry/api') as typeof import('@opentelemetry/api');
    const stub = require('./bundle-stubs/opentelemetry-api.cjs') as typeof import('@opentelemetry/api');
    assert.equal(stub.trace.getSpan(stub.context.active()), real.trace.getSpan(real.context.active()));
    assert.equal(stub.trace.getSpan(stub.context.active()), undefined);
  });

  test('the same sources give the same files, byte for byte (the image build is reproducible)', async () => {
    const again = await mkdtemp(path.join(os.tmpdir(), 'paddock-bundle-'));
    try {
      const files2 = await bundleDist({ root, outDir: path.join(again, 'dist'), sourcemap: false });
      assert.deepEqual(files2, files);
      for (const f of files) {
        assert.ok(
          (await readFile(path.join(again, 'dist', f))).equals(await readFile(path.join(dir, 'dist', f))),
          f,
        );
      }
    } finally {
      await rm(again, { recursive: true, force: true });
    }
  });
});
