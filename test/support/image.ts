/**
 * Running a built OCI image archive the way a container runtime would, without one: unpack it using
 * only what the archive says (index.json → manifest → config → layers, each checked against its
 * digest, the layers applied in order with their whiteouts honoured), then start its entry point
 * with the config's user, working directory and environment in a chroot of the unpacked file system.
 *
 * The process runs in a private mount namespace (util-linux `unshare`), where a small Perl launcher
 * mounts what a runtime provides — /proc, a /dev with the usual device nodes, and a writable /tmp
 * (like an emptyDir) — remounts the root file system read-only (as readOnlyRootFilesystem: true
 * does), chroots, changes to WorkingDir, drops to the config's uid/gid with only that group, and
 * execs the entry point with the given environment only. The mounts exist only in that namespace:
 * they go away with the process, and the host never sees them.
 *
 * GNU tar extracts the layers (an implementation independent of the one that wrote them).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';

export interface ImageConfig {
  architecture: string;
  os: string;
  created?: string;
  config: {
    User?: string;
    Env?: string[];
    Entrypoint?: string[];
    Cmd?: string[];
    WorkingDir?: string;
    Labels?: Record<string, string>;
    ExposedPorts?: Record<string, object>;
  };
  rootfs: { type: string; diff_ids: string[] };
  history?: { created_by?: string }[];
}

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

export interface UnpackedImage {
  rootfs: string;
  refName: string | undefined;
  manifestDigest: string;
  manifest: { config: Descriptor; layers: Descriptor[] };
  config: ImageConfig;
  /** Per layer: the paths it holds (after whiteouts), in order. */
  layerPaths: string[][];
}

const sha256 = (b: Uint8Array) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

function tar(args: string[], input?: Uint8Array): string {
  const r = spawnSync('tar', args, { input, maxBuffer: 1 << 28, env: { ...process.env, LC_ALL: 'C.UTF-8' } });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`tar ${args.join(' ')}: ${r.stderr.toString()}`);
  return r.stdout.toString();
}

/** What the image needs from the host to run it here; undefined when all is there, else why not. */
export function chrootUnavailable(): string | undefined {
  if (process.platform !== 'linux' || process.arch !== 'x64') return 'the image is linux/amd64';
  if (process.getuid?.() !== 0) return 'needs root (chroot, mount namespaces, setuid)';
  for (const cmd of ['unshare', 'mount', 'mknod', 'perl', 'tar', 'apt-get', 'dpkg-deb']) {
    if (spawnSync('sh', ['-c', `command -v ${cmd}`]).status !== 0) return `needs \`${cmd}\``;
  }
  const probe = spawnSync('unshare', ['--mount', '--propagation', 'private', 'true'], { encoding: 'utf8' });
  if (probe.status !== 0) return `cannot create a mount namespace: ${probe.stderr.trim() || probe.error}`;
  return undefined;
}

/** Unpacks an OCI archive into `dir` (`dir/layout`, `dir/rootfs`), checking every digest on the way. */
export async function unpackOciArchive(archive: string, dir: string): Promise<UnpackedImage> {
  const layout = path.join(dir, 'layout');
  const rootfs = path.join(dir, 'rootfs');
  await mkdir(layout, { recursive: true });
  await mkdir(rootfs, { recursive: true });
  tar(['-xf', archive, '-C', layout]);
  const ociLayout = JSON.parse(await readFile(path.join(layout, 'oci-layout'), 'utf8'));
  if (ociLayout.imageLayoutVersion !== '1.0.0') throw new Error(`oci-layout: ${JSON.stringify(ociLayout)}`);
  const blob = async (d: Descriptor): Promise<Buffer> => {
    const [alg, hex] = d.digest.split(':');
    if (alg !== 'sha256' || !/^[0-9a-f]{64}$/.test(hex ?? '')) throw new Error(`bad digest ${d.digest}`);
    const data = await readFile(path.join(layout, 'blobs', alg, hex!));
    if (data.length !== d.size)
      throw new Error(`${d.digest}: ${data.length} bytes, descriptor says ${d.size}`);
    if (sha256(data) !== d.digest) throw new Error(`${d.digest}: content does not match its digest`);
    return data;
  };
  const index = JSON.parse(await readFile(path.join(layout, 'index.json'), 'utf8')) as {
    manifests: Descriptor[];
  };
  const entry = index.manifests.find((m) => m.mediaType === 'application/vnd.oci.image.manifest.v1+json');
  if (!entry) throw new Error('index.json: no image manifest');
  const manifest = JSON.parse((await blob(entry)).toString('utf8')) as UnpackedImage['manifest'];
  const config = JSON.parse((await blob(manifest.config)).toString('utf8')) as ImageConfig;
  if (config.rootfs.diff_ids.length !== manifest.layers.length) {
    throw new Error('config and manifest disagree on the number of layers');
  }
  const layerPaths: string[][] = [];
  for (const [i, layer] of manifest.layers.entries()) {
    if (layer.mediaType !== 'application/vnd.oci.image.layer.v1.tar+gzip') {
      throw new Error(`layer ${i}: unsupported media type ${layer.mediaType}`);
    }
    const raw = gunzipSync(await blob(layer));
    if (sha256(raw) !== config.rootfs.diff_ids[i]) throw new Error(`layer ${i}: diff_id does not match`);
    const names = tar(['-tf', '-'], raw)
      .split('\n')
      .filter(Boolean)
      .map((n) => n.replace(/^\.?\//, '').replace(/\/$/, ''));
    // Whiteouts remove what lower layers put there, before this layer's own files land.
    for (const name of names) {
      const base = path.posix.basename(name);
      const parent = path.posix.dirname(name);
      if (base === '.wh..wh..opq') {
        const target = path.join(rootfs, parent);
        if (existsSync(target)) {
          for (const child of readdirSync(target)) await rm(path.join(target, child), { recursive: true });
        }
      } else if (base.startsWith('.wh.')) {
        await rm(path.join(rootfs, parent, base.slice(4)), { recursive: true, force: true });
      }
    }
    tar(['-xpf', '-', '--numeric-owner', '--exclude=.wh.*', '-C', rootfs], raw);
    layerPaths.push(names.filter((n) => !path.posix.basename(n).startsWith('.wh.')));
  }
  return {
    rootfs,
    refName: entry.annotations?.['org.opencontainers.image.ref.name'],
    manifestDigest: entry.digest,
    manifest,
    config,
    layerPaths,
  };
}

const LAUNCHER = String.raw`
use strict;
use warnings;
use POSIX ();

# launcher ROOTFS HOST_TMP UID GID WORKDIR [--env K=V]... -- COMMAND [ARGS...]
my ($root, $tmp, $uid, $gid, $wd) = splice(@ARGV, 0, 5);
my %env;
while (@ARGV && $ARGV[0] ne '--') {
  my $flag = shift @ARGV;
  die "launcher: unexpected $flag\n" unless $flag eq '--env';
  my ($k, $v) = split(/=/, shift @ARGV, 2);
  $env{$k} = $v;
}
shift @ARGV;
die "launcher: no command\n" unless @ARGV;

# SIGKILL when the test process goes (PR_SET_PDEATHSIG); again after the credentials change.
syscall(157, 1, 9) == 0 or die "launcher: prctl: $!\n";
sub run { system(@_) == 0 or die "launcher: @_ failed\n" }
# The root gets a mount of its own so that it can be made read-only after the other mounts.
run('/usr/bin/mount', '--bind', $root, $root);
run('/usr/bin/mount', '-t', 'proc', '-o', 'nosuid,nodev,noexec', 'proc', "$root/proc");
run('/usr/bin/mount', '-t', 'tmpfs', '-o', 'nosuid,mode=755,size=64k', 'tmpfs', "$root/dev");
for my $d (['null', 1, 3], ['zero', 1, 5], ['full', 1, 7], ['random', 1, 8], ['urandom', 1, 9], ['tty', 5, 0]) {
  run('/usr/bin/mknod', '-m', '666', "$root/dev/$d->[0]", 'c', $d->[1], $d->[2]);
}
symlink('/proc/self/fd', "$root/dev/fd");
symlink("/proc/self/fd/$_->[1]", "$root/dev/$_->[0]") for (['stdin', 0], ['stdout', 1], ['stderr', 2]);
run('/usr/bin/mount', '--bind', $tmp, "$root/tmp");
run('/usr/bin/mount', '-o', 'remount,bind,ro', $root);

chroot($root) or die "launcher: chroot $root: $!\n";
chdir($wd) or die "launcher: chdir $wd: $!\n";
$) = "$gid $gid";    # setgroups([gid]) and the effective gid
POSIX::setgid($gid) or die "launcher: setgid: $!\n";
POSIX::setuid($uid) or die "launcher: setuid: $!\n";
die "launcher: still privileged\n" if $< != $uid || $> != $uid || $( + 0 != $gid;
syscall(157, 1, 9) == 0 or die "launcher: prctl: $!\n";
%ENV = %env;
exec { $ARGV[0] } @ARGV or die "launcher: exec $ARGV[0]: $!\n";
`;

export interface ImageProcess {
  child: ChildProcess;
  pid: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  out(): string;
  err(): string;
}

/** uid and gid of the config's User ("uid:gid", "name" or "name:group"), looked up in the image. */
export function imageUser(rootfs: string, user: string | undefined): { uid: number; gid: number } {
  const [u = '0', g] = (user || '0').split(':');
  const lookup = (file: string, name: string) => {
    const line = readFileSync(path.join(rootfs, 'etc', file), 'utf8')
      .split('\n')
      .find((l) => l.split(':')[0] === name);
    if (!line) throw new Error(`no ${name} in the image's /etc/${file}`);
    return line.split(':');
  };
  const uid = /^\d+$/.test(u) ? Number(u) : Number(lookup('passwd', u)[2]);
  let gid: number;
  if (g !== undefined) gid = /^\d+$/.test(g) ? Number(g) : Number(lookup('group', g)[2]);
  else {
    const entry = readFileSync(path.join(rootfs, 'etc', 'passwd'), 'utf8')
      .split('\n')
      .map((l) => l.split(':'))
      .find((f) => Number(f[2]) === uid);
    gid = entry ? Number(entry[3]) : uid;
  }
  return { uid, gid };
}

/**
 * Starts the image's entry point (or `entrypoint`) with `args` (default: the config's Cmd) and the
 * config's environment plus `env` (as `podman run -e` adds to it). `hostTmp` becomes /tmp.
 */
export async function runImage(
  image: UnpackedImage,
  opts: {
    hostTmp: string;
    launcherDir: string;
    args?: string[];
    entrypoint?: string[];
    env?: Record<string, string>;
  },
): Promise<ImageProcess> {
  const cfg = image.config.config;
  const { uid, gid } = imageUser(image.rootfs, cfg.User);
  // What a runtime prepares: mount points, a root that others can enter, a writable /tmp.
  for (const d of ['proc', 'dev', 'tmp']) await mkdir(path.join(image.rootfs, d), { recursive: true });
  await chmod(image.rootfs, 0o755);
  await chmod(opts.hostTmp, 0o1777);
  const launcher = path.join(opts.launcherDir, 'launcher.pl');
  if (!existsSync(launcher)) await writeFile(launcher, LAUNCHER);
  const env = [...(cfg.Env ?? []), ...Object.entries(opts.env ?? {}).map(([k, v]) => `${k}=${v}`)];
  const command = [...(opts.entrypoint ?? cfg.Entrypoint ?? []), ...(opts.args ?? cfg.Cmd ?? [])];
  const args = [
    '--mount',
    '--propagation',
    'private',
    '--',
    '/usr/bin/perl',
    launcher,
    image.rootfs,
    opts.hostTmp,
    String(uid),
    String(gid),
    cfg.WorkingDir || '/',
    ...env.flatMap((e) => ['--env', e]),
    '--',
    ...command,
  ];
  const child = spawn('unshare', args, { stdio: ['ignore', 'pipe', 'pipe'], env: {} });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    // 'close': after the output, which may arrive after 'exit'.
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  if (child.pid === undefined) throw new Error('unshare did not start');
  return { child, pid: child.pid, exited, out: () => stdout, err: () => stderr };
}

/** Runs to completion; exit code and output. */
export async function runImageToEnd(
  image: UnpackedImage,
  opts: Parameters<typeof runImage>[1],
  timeoutMs = 60_000,
): Promise<{ code: number | null; out: string; err: string }> {
  const p = await runImage(image, opts);
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const { code } = await p.exited;
  clearTimeout(timer);
  return { code, out: p.out(), err: p.err() };
}

/** Processes whose root directory is `rootfs` or below, and mount tables that mention it. */
export function leftovers(rootfs: string): { processes: number[]; mounts: number[] } {
  const processes: number[] = [];
  const mounts: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const root = readlinkSync(`/proc/${name}/root`);
      if (root === rootfs || root.startsWith(`${rootfs}/`)) processes.push(Number(name));
    } catch {
      // gone, or not ours to read
    }
    try {
      if (readFileSync(`/proc/${name}/mountinfo`, 'utf8').includes(rootfs)) mounts.push(Number(name));
    } catch {
      // gone
    }
  }
  return { processes, mounts };
}
