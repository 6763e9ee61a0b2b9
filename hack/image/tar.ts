/**
 * A small deterministic tar writer (POSIX ustar, with pax extended headers only where ustar cannot
 * hold a value) and a reader for the archives the image build consumes (Debian's data.tar, npm's
 * tarballs) and produces.
 *
 * Determinism: the writer emits exactly the entries it is given, in the order given (use
 * `normalizeEntries` to sort them, add parent directories and normalise modes), with the fixed
 * mtime, uid/gid and no user or group names, no atime/ctime and no device numbers. The same entries
 * therefore always give the same bytes.
 */
import { open } from 'node:fs/promises';

export type TarEntryType = 'file' | 'dir' | 'symlink';

export interface TarEntry {
  /** Relative, '/'-separated, without a leading './' or '/' or a trailing '/'. */
  path: string;
  type: TarEntryType;
  /** Permission bits (with setuid/setgid/sticky). Default: 0o755 for directories, 0o644 for files. */
  mode?: number;
  uid?: number;
  gid?: number;
  /** Seconds since the epoch. Default: the writer's `mtime` (0). */
  mtime?: number;
  /** A file's content, in memory. */
  data?: Uint8Array;
  /** A file's content, read from this path when the entry is written (`size` must be its size). */
  source?: string;
  /** A file's size; required with `source`, implied by `data`. */
  size?: number;
  /** A symlink's target. */
  linkname?: string;
}

export interface TarWriterOptions {
  /** The mtime of entries that have none. Default 0 (1970-01-01). */
  mtime?: number;
}

const BLOCK = 512;
const USTAR_MAX_SIZE = 0o77777777777; // 11 octal digits
const enc = new TextEncoder();

function octal(value: number, width: number): string {
  // width includes the terminating NUL
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function putString(buf: Uint8Array, offset: number, width: number, value: string | Uint8Array): void {
  const bytes = typeof value === 'string' ? enc.encode(value) : value;
  if (bytes.length > width) throw new Error(`tar: field too long (${bytes.length} > ${width})`);
  buf.set(bytes, offset);
}

/** Splits a path into ustar's prefix (≤ 155 bytes) and name (≤ 100 bytes) at a '/', if it can. */
export function splitUstarPath(path: string): { prefix: string; name: string } | undefined {
  const bytes = enc.encode(path);
  if (bytes.length <= 100) return { prefix: '', name: path };
  if (bytes.length > 256) return undefined;
  // The longest prefix that fits, so the name part stays as short as possible.
  for (let i = Math.min(155, bytes.length - 2); i > 0; i--) {
    if (bytes[i] !== 0x2f) continue;
    const name = bytes.subarray(i + 1);
    if (name.length === 0 || name.length > 100) return undefined;
    const dec = new TextDecoder();
    return { prefix: dec.decode(bytes.subarray(0, i)), name: dec.decode(name) };
  }
  return undefined;
}

function paxRecord(key: string, value: string): Uint8Array {
  // "<length> <key>=<value>\n", where <length> counts the whole record including its own digits.
  const body = ` ${key}=${value}\n`;
  const bodyLen = enc.encode(body).length;
  let len = bodyLen + String(bodyLen).length;
  while (bodyLen + String(len).length !== len) len = bodyLen + String(len).length;
  return enc.encode(`${len}${body}`);
}

interface RawHeader {
  name: string;
  prefix: string;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number;
  typeflag: string;
  linkname: string;
}

function rawHeader(h: RawHeader): Uint8Array {
  const buf = new Uint8Array(BLOCK);
  putString(buf, 0, 100, h.name);
  putString(buf, 100, 8, octal(h.mode, 8));
  putString(buf, 108, 8, octal(h.uid, 8));
  putString(buf, 116, 8, octal(h.gid, 8));
  putString(buf, 124, 12, octal(h.size, 12));
  putString(buf, 136, 12, octal(h.mtime, 12));
  putString(buf, 148, 8, '        '); // checksum placeholder: eight spaces
  putString(buf, 156, 1, h.typeflag);
  putString(buf, 157, 100, h.linkname);
  putString(buf, 257, 6, 'ustar\0');
  putString(buf, 263, 2, '00');
  // uname, gname: empty; devmajor, devminor: zero
  putString(buf, 329, 8, octal(0, 8));
  putString(buf, 337, 8, octal(0, 8));
  putString(buf, 345, 155, h.prefix);
  let sum = 0;
  for (const b of buf) sum += b;
  putString(buf, 148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return buf;
}

function padding(size: number): Uint8Array {
  const rest = size % BLOCK;
  return new Uint8Array(rest === 0 ? 0 : BLOCK - rest);
}

function entrySize(e: TarEntry): number {
  if (e.type !== 'file') return 0;
  if (e.data) return e.data.length;
  if (e.source === undefined || e.size === undefined) {
    throw new Error(`tar: ${e.path}: a file needs data, or source and size`);
  }
  return e.size;
}

function defaultMode(type: TarEntryType): number {
  return type === 'dir' ? 0o755 : type === 'symlink' ? 0o777 : 0o644;
}

/** The header block(s) of one entry: a pax extended header first when ustar cannot hold a value. */
export function entryHeader(e: TarEntry, opts: TarWriterOptions = {}): Uint8Array {
  if (!e.path || e.path.startsWith('/') || e.path.endsWith('/') || e.path.split('/').includes('..')) {
    throw new Error(`tar: bad entry path ${JSON.stringify(e.path)}`);
  }
  const size = entrySize(e);
  const path = e.type === 'dir' ? `${e.path}/` : e.path;
  const linkname = e.type === 'symlink' ? (e.linkname ?? '') : '';
  if (e.type === 'symlink' && !linkname) throw new Error(`tar: symlink ${e.path} has no target`);
  const pax: Uint8Array[] = [];
  let split = splitUstarPath(path);
  if (!split) {
    pax.push(paxRecord('path', path));
    split = { prefix: '', name: truncateUtf8(path, 100) };
  }
  let link = linkname;
  if (enc.encode(linkname).length > 100) {
    pax.push(paxRecord('linkpath', linkname));
    link = truncateUtf8(linkname, 100);
  }
  let ustarSize = size;
  if (size > USTAR_MAX_SIZE) {
    pax.push(paxRecord('size', String(size)));
    ustarSize = 0;
  }
  const mtime = e.mtime ?? opts.mtime ?? 0;
  const header = rawHeader({
    name: split.name,
    prefix: split.prefix,
    mode: (e.mode ?? defaultMode(e.type)) & 0o7777,
    uid: e.uid ?? 0,
    gid: e.gid ?? 0,
    size: ustarSize,
    mtime,
    typeflag: e.type === 'dir' ? '5' : e.type === 'symlink' ? '2' : '0',
    linkname: link,
  });
  if (pax.length === 0) return header;
  const paxData = concat(pax);
  // A fixed, deterministic name for the extended header (GNU tar puts its pid in it).
  const base = path.replace(/\/$/, '').split('/').pop() ?? 'entry';
  const paxHeader = rawHeader({
    name: truncateUtf8(`PaxHeaders/${base}`, 100),
    prefix: '',
    mode: 0o644,
    uid: 0,
    gid: 0,
    size: paxData.length,
    mtime,
    typeflag: 'x',
    linkname: '',
  });
  return concat([paxHeader, paxData, padding(paxData.length), header]);
}

function truncateUtf8(s: string, max: number): string {
  const bytes = enc.encode(s);
  if (bytes.length <= max) return s;
  // Cut at a character boundary (continuation bytes are 10xxxxxx).
  let end = max;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return new TextDecoder().decode(bytes.subarray(0, end));
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  let len = 0;
  for (const p of parts) len += p.length;
  const out = new Uint8Array(len);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/**
 * The archive as a sequence of chunks: each entry's header(s), its content (read from `source`
 * in pieces when it is on disk) and padding, then the two zero blocks that end an archive.
 */
export async function* tarChunks(
  entries: Iterable<TarEntry>,
  opts: TarWriterOptions = {},
): AsyncGenerator<Uint8Array> {
  for (const e of entries) {
    yield entryHeader(e, opts);
    if (e.type !== 'file') continue;
    const size = entrySize(e);
    if (e.data) {
      yield e.data;
    } else if (e.source !== undefined) {
      const fh = await open(e.source, 'r');
      try {
        let read = 0;
        const chunk = 1 << 20;
        while (read < size) {
          const buf = new Uint8Array(Math.min(chunk, size - read));
          const { bytesRead } = await fh.read(buf, 0, buf.length, read);
          if (bytesRead === 0) throw new Error(`tar: ${e.source} is shorter than ${size} bytes`);
          read += bytesRead;
          yield bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
        }
        const extra = await fh.read(new Uint8Array(1), 0, 1, size);
        if (extra.bytesRead !== 0) throw new Error(`tar: ${e.source} is longer than ${size} bytes`);
      } finally {
        await fh.close();
      }
    }
    const pad = padding(size);
    if (pad.length) yield pad;
  }
  yield new Uint8Array(2 * BLOCK);
}

/** The whole archive in memory (for small archives and tests). */
export async function tarBytes(
  entries: Iterable<TarEntry>,
  opts: TarWriterOptions = {},
): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of tarChunks(entries, opts)) parts.push(c);
  return concat(parts);
}

/** Byte-wise comparison of UTF-8 paths (not locale or UTF-16 order). */
export function comparePaths(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/**
 * Entries ready for a reproducible layer: parent directories added where missing (mode 0755),
 * every file 0644 or, when any execute bit is set, 0755, symlinks 0777, owner 0:0 unless given,
 * the mtime dropped (the writer's fixed one applies), sorted by path. Two entries for one path are an
 * error, except identical directories.
 */
export function normalizeEntries(entries: Iterable<TarEntry>): TarEntry[] {
  const byPath = new Map<string, TarEntry>();
  const add = (e: TarEntry) => {
    const prev = byPath.get(e.path);
    if (prev) {
      if (prev.type === 'dir' && e.type === 'dir' && (prev.mode ?? 0o755) === (e.mode ?? 0o755)) return;
      throw new Error(`tar: ${e.path} is in the layer twice`);
    }
    byPath.set(e.path, e);
  };
  for (const e of entries) {
    const path = e.path.replace(/^\.?\/+/, '').replace(/\/+$/, '');
    let mode: number;
    if (e.type === 'dir') mode = (e.mode ?? 0o755) & 0o7777;
    else if (e.type === 'symlink') mode = 0o777;
    else mode = (e.mode ?? 0o644) & 0o111 ? 0o755 : 0o644;
    add({ ...e, path, mode, uid: e.uid ?? 0, gid: e.gid ?? 0, mtime: undefined });
  }
  for (const path of [...byPath.keys()]) {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      const have = byPath.get(dir);
      if (!have) byPath.set(dir, { path: dir, type: 'dir', mode: 0o755, uid: 0, gid: 0 });
      else if (have.type !== 'dir') throw new Error(`tar: ${dir} is a ${have.type} and a parent of ${path}`);
    }
  }
  return [...byPath.values()].sort((a, b) => comparePaths(a.path, b.path));
}

// ------------------------------------------------------------------------------------------ reader

export interface TarRecord {
  /** As in the archive, without a leading './' and without a trailing '/'. */
  path: string;
  type: 'file' | 'dir' | 'symlink' | 'hardlink' | 'other';
  mode: number;
  uid: number;
  gid: number;
  mtime: number;
  size: number;
  linkname: string;
  uname: string;
  gname: string;
  /** A file's content (a view into the archive buffer). */
  data: Uint8Array;
}

function field(buf: Uint8Array, offset: number, width: number): string {
  const slice = buf.subarray(offset, offset + width);
  const nul = slice.indexOf(0);
  return new TextDecoder().decode(nul >= 0 ? slice.subarray(0, nul) : slice);
}

function number(buf: Uint8Array, offset: number, width: number): number {
  const first = buf[offset] ?? 0;
  if (first & 0x80) {
    // GNU base-256: big-endian binary in the remaining bytes.
    let v = 0;
    for (let i = 1; i < width; i++) v = v * 256 + (buf[offset + i] ?? 0);
    return v;
  }
  const s = field(buf, offset, width).trim();
  return s ? Number.parseInt(s, 8) : 0;
}

function parsePax(data: Uint8Array): Map<string, string> {
  // Records are "<length> <key>=<value>\n"; <length> counts bytes and includes itself.
  const out = new Map<string, string>();
  const dec = new TextDecoder();
  let i = 0;
  while (i < data.length) {
    const space = data.indexOf(0x20, i);
    if (space < 0) break;
    const len = Number.parseInt(dec.decode(data.subarray(i, space)), 10);
    if (!Number.isFinite(len) || len <= space - i || i + len > data.length) {
      throw new Error('tar: bad pax record');
    }
    const kv = dec.decode(data.subarray(space + 1, i + len - 1));
    const eq = kv.indexOf('=');
    if (eq > 0) out.set(kv.slice(0, eq), kv.slice(eq + 1));
    i += len;
  }
  return out;
}

/** Every entry of an uncompressed tar archive (ustar, pax and GNU long names). */
export function readTar(archive: Uint8Array): TarRecord[] {
  const out: TarRecord[] = [];
  let off = 0;
  let pax = new Map<string, string>();
  let longName: string | undefined;
  let longLink: string | undefined;
  while (off + BLOCK <= archive.length) {
    const h = archive.subarray(off, off + BLOCK);
    if (h.every((b) => b === 0)) break;
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (h[i] ?? 0);
    const want = number(h, 148, 8);
    if (sum !== want) throw new Error(`tar: bad header checksum at offset ${off}`);
    const typeflag = String.fromCharCode(h[156] ?? 0);
    let size = number(h, 124, 12);
    if (pax.has('size')) size = Number(pax.get('size'));
    const dataStart = off + BLOCK;
    const data = archive.subarray(dataStart, dataStart + size);
    if (data.length !== size) throw new Error(`tar: truncated entry at offset ${off}`);
    off = dataStart + Math.ceil(size / BLOCK) * BLOCK;
    if (typeflag === 'x') {
      pax = parsePax(data);
      continue;
    }
    if (typeflag === 'g') continue;
    if (typeflag === 'L') {
      longName = field(data, 0, data.length);
      continue;
    }
    if (typeflag === 'K') {
      longLink = field(data, 0, data.length);
      continue;
    }
    const magic = field(h, 257, 6);
    const prefix = magic.startsWith('ustar') ? field(h, 345, 155) : '';
    let path = pax.get('path') ?? longName ?? (prefix ? `${prefix}/${field(h, 0, 100)}` : field(h, 0, 100));
    const linkname = pax.get('linkpath') ?? longLink ?? field(h, 157, 100);
    path = path.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
    const type =
      typeflag === '0' || typeflag === '\0' || typeflag === '7'
        ? 'file'
        : typeflag === '5'
          ? 'dir'
          : typeflag === '2'
            ? 'symlink'
            : typeflag === '1'
              ? 'hardlink'
              : 'other';
    out.push({
      path,
      type,
      mode: number(h, 100, 8),
      uid: number(h, 108, 8),
      gid: number(h, 116, 8),
      mtime: pax.has('mtime') ? Math.floor(Number(pax.get('mtime'))) : number(h, 136, 12),
      size,
      linkname,
      uname: field(h, 265, 32),
      gname: field(h, 297, 32),
      data,
    });
    pax = new Map();
    longName = undefined;
    longLink = undefined;
  }
  return out;
}
