/**
 * The image's base: the few system files a Node.js process needs and the shared libraries of the
 * `node` binary, taken from Debian packages. The libraries are found the way the dynamic loader
 * finds them (PT_INTERP and DT_NEEDED, transitively, in the loader's default directories), so the
 * layer holds exactly what `node` loads, and the build fails when a pinned package stops providing it.
 */
import { EM_X86_64, elfDeps } from './elf.ts';
import type { DebPackage } from './inputs.ts';
import type { TarEntry, TarRecord } from './tar.ts';

export const PADDOCK_USER = 'paddock';
export const PADDOCK_UID = 65532;
export const PADDOCK_GID = 65532;

/** Without /etc/ld.so.cache the loader searches these (Debian's glibc, x86-64). */
export const LIBRARY_DIRS = ['lib/x86_64-linux-gnu', 'usr/lib/x86_64-linux-gnu', 'lib', 'usr/lib'];

const enc = new TextEncoder();

/** /etc/passwd, /etc/group, /etc/nsswitch.conf and /tmp. */
export function systemFiles(): TarEntry[] {
  const passwd = [
    'root:x:0:0:root:/root:/usr/sbin/nologin',
    `${PADDOCK_USER}:x:${PADDOCK_UID}:${PADDOCK_GID}:paddock:/nonexistent:/usr/sbin/nologin`,
    'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin',
    '',
  ].join('\n');
  const group = ['root:x:0:', `${PADDOCK_USER}:x:${PADDOCK_GID}:`, 'nogroup:x:65534:', ''].join('\n');
  // glibc's default without this file asks DNS before /etc/hosts (which the runtime mounts).
  const nsswitch = ['passwd: files', 'group: files', 'hosts: files dns', ''].join('\n');
  return [
    { path: 'etc/passwd', type: 'file', data: enc.encode(passwd) },
    { path: 'etc/group', type: 'file', data: enc.encode(group) },
    { path: 'etc/nsswitch.conf', type: 'file', data: enc.encode(nsswitch) },
    { path: 'tmp', type: 'dir', mode: 0o1777 },
  ];
}

export interface SharedLibrary {
  soname: string;
  /** Where the loader finds it (may be a symlink). */
  path: string;
  /** The file itself. */
  file: string;
  package: string;
}

export interface DebianLayer {
  entries: TarEntry[];
  libraries: SharedLibrary[];
  interpreter: string;
}

interface Owned {
  deb: DebPackage;
  rec: TarRecord;
}

function normalizeParts(parts: string[]): string[] {
  const out: string[] = [];
  for (const p of parts) {
    if (p === '' || p === '.') continue;
    if (p === '..') out.pop();
    else out.push(p);
  }
  return out;
}

/**
 * The libraries `binary` loads, their symlinks, the copyright file of every package and a
 * /var/lib/dpkg/status.d entry per package (so image scanners see the Debian versions).
 * Every package must contribute something.
 */
export function debianLayer(debs: readonly DebPackage[], binary: Uint8Array): DebianLayer {
  const union = new Map<string, Owned>();
  for (const deb of debs) {
    for (const [p, rec] of deb.files) {
      if (rec.type === 'dir') continue;
      const prev = union.get(p);
      if (prev && (prev.rec.type !== rec.type || prev.rec.linkname !== rec.linkname)) {
        throw new Error(`${p} is in both ${prev.deb.name} and ${deb.name}, differently`);
      }
      if (!prev) union.set(p, { deb, rec });
    }
  }
  const take = new Map<string, Owned>();

  /** The path with every symlink on the way followed (each of them taken into the layer). */
  const resolve = (start: string): string => {
    let parts = normalizeParts(start.split('/'));
    for (let hops = 0; hops < 40; hops++) {
      let followed = false;
      for (let i = 1; i <= parts.length; i++) {
        const prefix = parts.slice(0, i).join('/');
        const hit = union.get(prefix);
        if (hit?.rec.type !== 'symlink') continue;
        take.set(prefix, hit);
        const target = hit.rec.linkname;
        const base = target.startsWith('/') ? [] : parts.slice(0, i - 1);
        parts = normalizeParts([...base, ...target.split('/'), ...parts.slice(i)]);
        followed = true;
        break;
      }
      if (!followed) return parts.join('/');
    }
    throw new Error(`${start}: too many levels of symbolic links`);
  };

  const takeFile = (p: string, what: string): Owned => {
    const final = resolve(p);
    let hit = union.get(final);
    if (hit?.rec.type === 'hardlink') hit = union.get(normalizeParts(hit.rec.linkname.split('/')).join('/'));
    if (hit?.rec.type !== 'file') throw new Error(`${what}: ${p} is not a file in the pinned packages`);
    take.set(final, hit);
    return hit;
  };

  const root = elfDeps(binary);
  if (root.machine !== EM_X86_64) throw new Error('the node binary is not x86-64');
  if (!root.interpreter) throw new Error('the node binary has no program interpreter');
  const interpreter = root.interpreter;
  takeFile(interpreter.replace(/^\/+/, ''), 'program interpreter');

  const libraries: SharedLibrary[] = [];
  const seen = new Set<string>();
  const queue = root.needed.map((soname) => ({ soname, by: 'node' }));
  while (queue.length) {
    const { soname, by } = queue.shift()!;
    if (seen.has(soname)) continue;
    seen.add(soname);
    const dir = LIBRARY_DIRS.find((d) => union.has(`${d}/${soname}`));
    if (!dir) {
      throw new Error(
        `no pinned Debian package provides ${soname} (needed by ${by}); add the one that does ` +
          `(\`dpkg -S ${soname}\`) to hack/image/lock.json`,
      );
    }
    const where = `${dir}/${soname}`;
    const owned = takeFile(where, soname);
    const file = resolve(where);
    libraries.push({ soname, path: `/${where}`, file: `/${file}`, package: owned.deb.name });
    const deps = elfDeps(owned.rec.data);
    if (deps.machine !== EM_X86_64) throw new Error(`${where} is not x86-64`);
    for (const n of deps.needed) queue.push({ soname: n, by: soname });
  }

  // The copyright file of each package a library comes from (it may live in another package:
  // libstdc++6's doc directory is a symlink into gcc-12-base's).
  const providers = new Set([...take.values()].map((o) => o.deb.name));
  for (const deb of debs) {
    if (providers.has(deb.name)) takeFile(`usr/share/doc/${deb.name}/copyright`, `${deb.name}'s copyright`);
  }
  const used = new Set([...take.values()].map((o) => o.deb.name));
  const entries: TarEntry[] = [];
  for (const deb of debs) {
    if (!used.has(deb.name)) throw new Error(`${deb.name} is pinned but the image takes nothing from it`);
    entries.push({ path: `var/lib/dpkg/status.d/${deb.name}`, type: 'file', data: enc.encode(deb.control) });
  }
  for (const [p, { rec }] of take) {
    entries.push(
      rec.type === 'symlink'
        ? { path: p, type: 'symlink', linkname: rec.linkname }
        : { path: p, type: 'file', data: rec.data, mode: rec.mode },
    );
  }
  return { entries, libraries, interpreter };
}
