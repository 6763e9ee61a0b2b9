/**
 * Builds paddock's container image as an OCI archive, without a container engine or a base image:
 *
 *   layer 1  Debian: /etc/passwd, /etc/group (user paddock, 65532), /etc/nsswitch.conf, /tmp, the
 *            shared libraries of node with their copyright files and dpkg status entries
 *   layer 2  Node.js: /usr/local/bin/node and its LICENSE
 *   layer 3  /app/node_modules: production dependencies, stripped
 *   layer 4  /app: package.json, bin/paddock.js, dist/, config/crd/ (for `paddock run --install-crds`)
 *
 * The layers go from the one that changes least to the one that changes with every commit, so a
 * registry and a node keep the big ones between versions. Reproducible: every file has mtime 0,
 * owner 0:0 and a normalised mode, entries are sorted, the gzip stream has no name or time, and the
 * JSON documents have a fixed key order; the config's `created` is SOURCE_DATE_EPOCH, by default the
 * time of HEAD's commit. The same inputs give the same bytes, hence the same digests.
 *
 * `stageImage` gathers the inputs (cached outside the repository), `assembleImage` writes the
 * archive from them; `buildImage` does both.
 */
import { spawnSync } from 'node:child_process';
import { copyFile, cp, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PADDOCK_NODE_FLAGS, PADDOCK_PROCESS_ENV } from '../../src/cli/node-flags.ts';
import {
  buildDist,
  type DebPackage,
  ensureNode,
  type ImageLock,
  imageCacheDir,
  type Log,
  loadDebs,
  type NodeDist,
  readLock,
  type StripStats,
  stageNodeModules,
} from './inputs.ts';
import {
  type Blob,
  GZIP_LEVEL,
  imageConfig,
  imageIndex,
  imageManifest,
  jsonBlob,
  type Layer,
  writeLayer,
  writeOciArchive,
} from './oci.ts';
import { type DebianLayer, debianLayer, PADDOCK_GID, PADDOCK_UID, systemFiles } from './rootfs.ts';
import type { TarEntry } from './tar.ts';

export const APP_DIR = '/app';
export const NODE_PATH = '/usr/local/bin/node';
export const IMAGE_ENV = [
  'PATH=/usr/local/bin:/usr/bin:/bin',
  'NODE_ENV=production',
  ...Object.entries(PADDOCK_PROCESS_ENV).map(([k, v]) => `${k}=${v}`),
];
/** Metrics, health probes, admission webhook (the defaults of `paddock run`). */
export const EXPOSED_PORTS = ['8080/tcp', '8081/tcp', '9443/tcp'];

export interface BuildOptions {
  /** The repository. */
  root: string;
  /** Default: SOURCE_DATE_EPOCH, else the commit time of HEAD, else 0. */
  sourceDateEpoch?: number;
  /** org.opencontainers.image.source; default: the URL of the git remote `origin`, if any. */
  source?: string;
  /** Download and staging cache; default imageCacheDir(). */
  cache?: string;
  log?: Log;
}

export interface Stage {
  root: string;
  version: string;
  description: string;
  license: string;
  revision: string;
  /** Files of the image's inputs that differ from HEAD (the revision label does not show them). */
  dirty: string[];
  epoch: number;
  source?: string;
  lock: ImageLock;
  debs: DebPackage[];
  debian: DebianLayer;
  node: NodeDist;
  nodeModules: { dir: string; stats: StripStats; key: string };
  /** Holds dist/, package.json and bin/paddock.js (removed by disposeStage). */
  dir: string;
}

export interface LayerSummary {
  name: string;
  digest: string;
  diffId: string;
  size: number;
  uncompressedSize: number;
  entries: number;
}

export interface ImageResult {
  archive: string;
  archiveSize: number;
  refName: string;
  manifestDigest: string;
  configDigest: string;
  /** Layers, config and manifest as a registry stores them (what a pull transfers). */
  compressedSize: number;
  /** The layers' tars. */
  uncompressedSize: number;
  layers: LayerSummary[];
  version: string;
  revision: string;
  created: string;
}

function git(root: string, args: string[], raw = false): string | undefined {
  // No optional locks: `git status` would otherwise refresh the index of a checkout others work in.
  const r = spawnSync('git', ['--no-optional-locks', ...args], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  return raw ? r.stdout : r.stdout.trim();
}

/** A git remote URL as a browsable https URL (scp-style and ssh:// forms too), without credentials. */
export function sourceUrl(remote: string): string {
  let url = remote.trim();
  const scp = /^[^@/]+@([^:/]+):(.+)$/.exec(url);
  if (scp) url = `https://${scp[1]}/${scp[2]}`;
  url = url.replace(/^ssh:\/\/(?:[^@/]+@)?([^/:]+)(?::\d+)?\//, 'https://$1/');
  url = url.replace(/^(https?:\/\/)[^@/]+@/, '$1');
  return url.replace(/\.git$/, '');
}

/** Gathers and checks every input of the image. */
export async function stageImage(opts: BuildOptions): Promise<Stage> {
  const log = opts.log ?? (() => undefined);
  const root = opts.root;
  const cache = opts.cache ?? imageCacheDir();
  const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as {
    version: string;
    description?: string;
    license?: string;
  };
  const envEpoch = process.env.SOURCE_DATE_EPOCH;
  const epoch =
    opts.sourceDateEpoch ??
    (envEpoch !== undefined && envEpoch !== ''
      ? Number(envEpoch)
      : Number(git(root, ['log', '-1', '--format=%ct', 'HEAD']) ?? 0));
  if (!Number.isInteger(epoch) || epoch < 0) throw new Error(`SOURCE_DATE_EPOCH: not a time: ${envEpoch}`);
  const remote = git(root, ['remote', 'get-url', 'origin']);
  // esbuild reads tsconfig.json too.
  const inputs = [
    'src',
    'bin',
    'config/crd',
    'package.json',
    'package-lock.json',
    'tsconfig.json',
    'hack/bundle.ts',
  ];
  const dirty = (git(root, ['status', '--porcelain', '--', ...inputs], true) ?? '')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.slice(3));

  const lock = await readLock(root);
  const node = await ensureNode(root, lock, cache, log);
  const debs = await loadDebs(lock, cache, log);
  const debian = debianLayer(debs, await readFile(node.binary));
  const nodeModules = await stageNodeModules(root, cache, log);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'paddock-image-stage-'));
  try {
    await buildDist(root, path.join(dir, 'dist'), log);
    // The rest of the app layer, copied now so that the stage does not change under a later assemble.
    await mkdir(path.join(dir, 'bin'));
    await copyFile(path.join(root, 'package.json'), path.join(dir, 'package.json'));
    await copyFile(path.join(root, 'bin', 'paddock.js'), path.join(dir, 'bin', 'paddock.js'));
    await cp(path.join(root, 'config', 'crd'), path.join(dir, 'config', 'crd'), { recursive: true });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const source = opts.source ?? (remote ? sourceUrl(remote) : undefined);
  return {
    root,
    version: pkg.version,
    description: pkg.description ?? '',
    license: pkg.license ?? '',
    revision: git(root, ['rev-parse', 'HEAD']) ?? 'unknown',
    dirty,
    epoch,
    ...(source ? { source } : {}),
    lock,
    debs,
    debian,
    node,
    nodeModules,
    dir,
  };
}

export async function disposeStage(stage: Stage): Promise<void> {
  await rm(stage.dir, { recursive: true, force: true });
}

/** Every file, directory and symlink below `dir`, as entries under `prefix`, read when written. */
async function treeEntries(dir: string, prefix: string): Promise<TarEntry[]> {
  const out: TarEntry[] = [];
  const visit = async (abs: string, rel: string) => {
    for (const name of await readdir(abs)) {
      const a = path.join(abs, name);
      const r = `${rel}/${name}`;
      const st = await lstat(a);
      if (st.isDirectory()) {
        out.push({ path: r, type: 'dir' });
        await visit(a, r);
      } else if (st.isSymbolicLink()) {
        out.push({ path: r, type: 'symlink', linkname: await readlink(a) });
      } else if (st.isFile()) {
        out.push({ path: r, type: 'file', source: a, size: st.size, mode: st.mode });
      } else {
        throw new Error(`${a}: not a file, directory or symlink`);
      }
    }
  };
  await visit(dir, prefix);
  return out;
}

async function sized(abs: string, rel: string, mode = 0o644): Promise<TarEntry> {
  return { path: rel, type: 'file', source: abs, size: (await lstat(abs)).size, mode };
}

/** Writes the OCI archive `outFile` from a stage. */
export async function assembleImage(
  stage: Stage,
  opts: { outFile: string; refName?: string; gzipLevel?: number; log?: Log },
): Promise<ImageResult> {
  const log = opts.log ?? (() => undefined);
  const app = APP_DIR.slice(1);
  const created = new Date(stage.epoch * 1000).toISOString().replace(/\.000Z$/, 'Z');
  const refName = opts.refName ?? `paddock:${stage.version}`;
  const debNames = stage.debs.map((d) => `${d.name} ${d.version}`).join(', ');
  const nm = stage.nodeModules.stats;
  const layerSpecs: { name: string; createdBy: string; entries: () => Promise<TarEntry[]> }[] = [
    {
      name: 'debian',
      createdBy:
        `paddock image: /etc/passwd, /etc/group (${PADDOCK_UID}:${PADDOCK_GID} paddock), /tmp; ` +
        `shared libraries of node from Debian ${stage.lock.debian.release}: ${debNames}`,
      entries: async () => [...systemFiles(), ...stage.debian.entries],
    },
    {
      name: 'node',
      createdBy: `paddock image: Node.js ${stage.node.version} (${stage.lock.node.package}: bin/node, LICENSE)`,
      entries: async () => [
        await sized(stage.node.binary, NODE_PATH.slice(1), 0o755),
        await sized(stage.node.license, 'usr/local/share/doc/node/LICENSE'),
      ],
    },
    {
      name: 'node_modules',
      createdBy:
        'paddock image: npm ci --omit=dev --ignore-scripts; stripped of ' +
        `${Object.keys(nm.removed).join(', ')} (${nm.before.files - nm.after.files} files)`,
      entries: () => treeEntries(path.join(stage.nodeModules.dir, 'node_modules'), `${app}/node_modules`),
    },
    {
      name: 'app',
      createdBy: 'paddock image: package.json, bin/paddock.js, dist/ (esbuild, hack/bundle.ts), config/crd/',
      entries: async () => [
        await sized(path.join(stage.dir, 'package.json'), `${app}/package.json`),
        await sized(path.join(stage.dir, 'bin', 'paddock.js'), `${app}/bin/paddock.js`),
        ...(await treeEntries(path.join(stage.dir, 'dist'), `${app}/dist`)),
        ...(await treeEntries(path.join(stage.dir, 'config', 'crd'), `${app}/config/crd`)),
      ],
    },
  ];

  await mkdir(path.dirname(path.resolve(opts.outFile)), { recursive: true });
  const blobDir = await mkdtemp(path.join(os.tmpdir(), 'paddock-image-blobs-'));
  try {
    const layers: (Layer & { name: string; createdBy: string })[] = [];
    for (const spec of layerSpecs) {
      const started = Date.now();
      const layer = await writeLayer(await spec.entries(), blobDir, {
        mtime: 0,
        gzipLevel: opts.gzipLevel ?? GZIP_LEVEL,
      });
      log(
        `[image] layer ${spec.name}: ${mib(layer.size)} compressed, ${mib(layer.uncompressedSize)} ` +
          `uncompressed, ${layer.entries} entries (${Date.now() - started} ms)`,
      );
      layers.push({ ...layer, name: spec.name, createdBy: spec.createdBy });
    }
    const labels: Record<string, string> = {
      'org.opencontainers.image.title': 'paddock',
      'org.opencontainers.image.description': stage.description,
      'org.opencontainers.image.version': stage.version,
      'org.opencontainers.image.revision': stage.revision,
      ...(stage.source ? { 'org.opencontainers.image.source': stage.source } : {}),
      'org.opencontainers.image.licenses': stage.license,
      'org.opencontainers.image.created': created,
    };
    const config = jsonBlob(
      imageConfig({
        created,
        architecture: 'amd64',
        os: 'linux',
        user: `${PADDOCK_UID}:${PADDOCK_GID}`,
        env: IMAGE_ENV,
        entrypoint: [NODE_PATH, ...PADDOCK_NODE_FLAGS, `${APP_DIR}/bin/paddock.js`],
        cmd: ['run'],
        workingDir: APP_DIR,
        exposedPorts: EXPOSED_PORTS,
        labels,
        stopSignal: 'SIGTERM',
        layers: layers.map((l) => ({ diffId: l.diffId, createdBy: l.createdBy })),
      }),
    );
    const manifest = jsonBlob(imageManifest(config, layers));
    const index = jsonBlob(imageIndex(manifest, { refName, architecture: 'amd64', os: 'linux' }));
    const blobs: Blob[] = [...layers, config, manifest];
    const archiveSize = await writeOciArchive(opts.outFile, index, blobs);
    return {
      archive: opts.outFile,
      archiveSize,
      refName,
      manifestDigest: manifest.digest,
      configDigest: config.digest,
      compressedSize: blobs.reduce((n, b) => n + b.size, 0),
      uncompressedSize: layers.reduce((n, l) => n + l.uncompressedSize, 0),
      layers: layers.map((l) => ({
        name: l.name,
        digest: l.digest,
        diffId: l.diffId,
        size: l.size,
        uncompressedSize: l.uncompressedSize,
        entries: l.entries,
      })),
      version: stage.version,
      revision: stage.revision,
      created,
    };
  } finally {
    await rm(blobDir, { recursive: true, force: true });
  }
}

export function defaultArchivePath(root: string, version: string): string {
  return path.join(root, 'out', `paddock-${version}.oci.tar`);
}

export interface BuildReport extends ImageResult {
  nodeVersion: string;
  debianPackages: string[];
  libraries: DebianLayer['libraries'];
  strip: StripStats;
  dirty: string[];
}

/** stageImage + assembleImage (into `outFile`, default out/paddock-<version>.oci.tar). */
export async function buildImage(
  opts: BuildOptions & { outFile?: string; refName?: string },
): Promise<BuildReport> {
  const stage = await stageImage(opts);
  try {
    const result = await assembleImage(stage, {
      outFile: opts.outFile ?? defaultArchivePath(opts.root, stage.version),
      ...(opts.refName ? { refName: opts.refName } : {}),
      ...(opts.log ? { log: opts.log } : {}),
    });
    return {
      ...result,
      nodeVersion: stage.node.version,
      debianPackages: stage.debs.map((d) => `${d.name}=${d.version}`),
      libraries: stage.debian.libraries,
      strip: stage.nodeModules.stats,
      dirty: stage.dirty,
    };
  } finally {
    await disposeStage(stage);
  }
}

export function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}
