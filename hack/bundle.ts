/**
 * `npm run build`: bundles paddock into dist/cli/ with esbuild — main.js, one chunk per command
 * (`run`, `sandbox`, …) loaded when that command runs, and the chunks they share.
 *
 *   node hack/bundle.ts [--out DIR] [--no-sourcemap]
 *
 * Why a bundle: Node.js loads an ES module graph file by file. `paddock run` is ~180 modules (zod
 * alone is 95), and reading, compiling and linking them took 190–270 ms of a cold start; the same code
 * as a few chunks takes 115–190 ms (`node bench/cold-start.ts`). Type checking stays with
 * `npm run lint` (tsc --noEmit); esbuild only strips the types.
 *
 * The chunks sit two levels below the repository (dist/cli/) as the sources do (src/cli/), so paths
 * taken relative to a module (package.json, config/crd/) resolve the same from either.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build, type Plugin } from 'esbuild';

/** Loaded from node_modules at run time, not bundled: the sandbox's and uninstall's Kubernetes client. */
const EXTERNAL = ['@kubernetes/client-node'];

/**
 * Bundled CommonJS packages (pino, prom-client) call `require` for Node's built-ins, which an ES
 * module lacks: each chunk gets one made for it.
 */
const REQUIRE_BANNER =
  "import { createRequire as paddockCreateRequire } from 'node:module'; const require = paddockCreateRequire(import.meta.url);";

/**
 * Packages replaced by a stub in hack/bundle-stubs/. `@opentelemetry/api` (51 modules, 67 KB of the
 * run chunk, compiled and initialised at every start) is required by prom-client's CPU counter only
 * for exemplars, which paddock never enables.
 */
export const STUBBED: Readonly<Record<string, string>> = {
  '@opentelemetry/api': 'opentelemetry-api.cjs',
};

/**
 * Files inside a package replaced by a stub, by their path under node_modules/. prom-client's index
 * loads its Pushgateway client at load time, and with it `zlib`; paddock pushes no metrics.
 */
export const STUBBED_FILES: Readonly<Record<string, string>> = {
  'prom-client/lib/pushgateway.js': 'prom-client-pushgateway.cjs',
};

function stubs(root: string): Plugin {
  const names = Object.keys(STUBBED).map((n) => n.replace(/[/.]/g, '\\$&'));
  const stub = (file: string) => path.join(root, 'hack', 'bundle-stubs', file);
  return {
    name: 'paddock-stubs',
    setup(b) {
      b.onResolve({ filter: new RegExp(`^(${names.join('|')})$`) }, (args) => ({
        path: stub(STUBBED[args.path] as string),
      }));
      // Relative requires inside a package: resolved against their importer, then looked up.
      b.onResolve({ filter: /^\.\.?\// }, (args) => {
        if (!args.importer.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
        const resolved = path.resolve(path.dirname(args.importer), args.path).split(path.sep).join('/');
        // After the last node_modules/: node_modules may be a link, or nested.
        const under = resolved.slice(resolved.lastIndexOf('/node_modules/') + '/node_modules/'.length);
        const file = STUBBED_FILES[under] ?? STUBBED_FILES[`${under}.js`];
        return file ? { path: stub(file) } : undefined;
      });
    },
  };
}

export interface BundleOptions {
  /** The repository. */
  root: string;
  /** Where dist/ goes (default `<root>/dist`); the chunks land in its `cli/`. */
  outDir?: string;
  /** Source maps beside the chunks (for `node --enable-source-maps`); the image has none. */
  sourcemap?: boolean;
}

/** Bundles src/cli/main.ts; returns the files written, relative to `outDir`. */
export async function bundleDist(opts: BundleOptions): Promise<string[]> {
  const outDir = opts.outDir ?? path.join(opts.root, 'dist');
  // Chunk names carry a content hash: an earlier build's would linger beside the new ones.
  await rm(path.join(outDir, 'cli'), { recursive: true, force: true });
  const result = await build({
    absWorkingDir: opts.root,
    entryPoints: { main: path.join(opts.root, 'src', 'cli', 'main.ts') },
    outdir: path.join(outDir, 'cli'),
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    external: EXTERNAL,
    banner: { js: REQUIRE_BANNER },
    sourcemap: opts.sourcemap ?? true,
    // Names and contents depend on the sources alone: the image build is reproducible.
    chunkNames: '[name]-[hash]',
    legalComments: 'none',
    logLevel: 'warning',
    metafile: true,
    plugins: [stubs(opts.root)],
  });
  if (result.errors.length > 0) throw new Error(`esbuild: ${result.errors.map((e) => e.text).join('; ')}`);
  return Object.keys(result.metafile.outputs)
    .map((f) => path.relative(outDir, path.resolve(opts.root, f)))
    .sort();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      out: { type: 'string' },
      'no-sourcemap': { type: 'boolean', default: false },
    },
  });
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const files = await bundleDist({
    root,
    ...(values.out ? { outDir: path.resolve(values.out) } : {}),
    sourcemap: !values['no-sourcemap'],
  });
  process.stderr.write(`[build] ${files.filter((f) => f.endsWith('.js')).length} chunks in dist/cli/\n`);
}
