import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bundleDist, STUBBED } from './bundle.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('the bundle (npm run build)', () => {
  let dir: string;
  let files: string[];

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'paddock-bundle-'));
    // As in the image: package.json and bin/paddock.js beside dist/.
    await copyFile(path.join(root, 'package.json'), path.join(dir, 'package.json'));
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
