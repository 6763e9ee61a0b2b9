import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import {
  comparePaths,
  entryHeader,
  normalizeEntries,
  readTar,
  splitUstarPath,
  type TarEntry,
  tarBytes,
} from './tar.ts';

const enc = new TextEncoder();
const file = (p: string, text: string, mode?: number): TarEntry => ({
  path: p,
  type: 'file',
  data: enc.encode(text),
  ...(mode === undefined ? {} : { mode }),
});

/** GNU tar's listing of an archive (numeric owners, UTC), or undefined when tar is not installed. */
function gnuTarList(archive: Uint8Array): string[] | undefined {
  const r = spawnSync('tar', ['--numeric-owner', '--full-time', '-tvf', '-'], {
    input: archive,
    env: { ...process.env, TZ: 'UTC', LC_ALL: 'C.UTF-8' },
  });
  if (r.error) return undefined;
  assert.equal(r.status, 0, `GNU tar refused the archive: ${r.stderr}`);
  return r.stdout.toString().trim().split('\n');
}

describe('deterministic tar writer', () => {
  const sample = (): TarEntry[] => [
    file('b/z.txt', 'zzz'),
    { path: 'b/link', type: 'symlink', linkname: 'z.txt' },
    file('a.sh', '#!/bin/sh\n', 0o700),
    file('b/a.txt', 'aaa', 0o600),
    { path: 'tmp', type: 'dir', mode: 0o1777 },
  ];

  test('the same entries in any order give the same bytes', async () => {
    const one = await tarBytes(normalizeEntries(sample()));
    const two = await tarBytes(normalizeEntries(sample().reverse()));
    assert.deepEqual(Buffer.from(one), Buffer.from(two));
    assert.equal(one.length % 512, 0);
    // Ends with two zero blocks.
    assert.ok(one.subarray(one.length - 1024).every((b) => b === 0));
  });

  test('entries sorted by path, parents first and added where missing', () => {
    const paths = normalizeEntries([file('x/y/z', ''), file('x-y', ''), file('a', '')]).map(
      (e) => `${e.type}:${e.path}`,
    );
    assert.deepEqual(paths, ['file:a', 'dir:x', 'file:x-y', 'dir:x/y', 'file:x/y/z']);
  });

  test('fixed mtime, owner 0:0, no user or group names, normalised modes', async () => {
    const records = readTar(await tarBytes(normalizeEntries(sample()), { mtime: 0 }));
    for (const r of records) {
      assert.equal(r.mtime, 0, r.path);
      assert.equal(r.uid, 0, r.path);
      assert.equal(r.gid, 0, r.path);
      assert.equal(r.uname, '', r.path);
      assert.equal(r.gname, '', r.path);
    }
    const mode = (p: string) => records.find((r) => r.path === p)?.mode;
    assert.equal(mode('a.sh'), 0o755);
    assert.equal(mode('b/a.txt'), 0o644);
    assert.equal(mode('b'), 0o755);
    assert.equal(mode('b/link'), 0o777);
    assert.equal(mode('tmp'), 0o1777);
    const at = await tarBytes([file('f', 'x')], { mtime: 1_700_000_000 });
    assert.equal(readTar(at)[0]?.mtime, 1_700_000_000);
  });

  test('the reader gives back what was written; GNU tar reads it the same', async () => {
    const archive = await tarBytes(normalizeEntries(sample()));
    const records = readTar(archive);
    assert.deepEqual(
      records.map((r) => [
        r.path,
        r.type,
        r.type === 'symlink' ? r.linkname : new TextDecoder().decode(r.data),
      ]),
      [
        ['a.sh', 'file', '#!/bin/sh\n'],
        ['b', 'dir', ''],
        ['b/a.txt', 'file', 'aaa'],
        ['b/link', 'symlink', 'z.txt'],
        ['b/z.txt', 'file', 'zzz'],
        ['tmp', 'dir', ''],
      ],
    );
    const listing = gnuTarList(archive);
    if (listing) {
      assert.deepEqual(listing, [
        '-rwxr-xr-x 0/0              10 1970-01-01 00:00:00 a.sh',
        'drwxr-xr-x 0/0               0 1970-01-01 00:00:00 b/',
        '-rw-r--r-- 0/0               3 1970-01-01 00:00:00 b/a.txt',
        'lrwxrwxrwx 0/0               0 1970-01-01 00:00:00 b/link -> z.txt',
        '-rw-r--r-- 0/0               3 1970-01-01 00:00:00 b/z.txt',
        'drwxrwxrwt 0/0               0 1970-01-01 00:00:00 tmp/',
      ]);
    }
  });

  test('long paths: ustar prefix up to 255 bytes, a pax header beyond; long symlink targets', async () => {
    const mid = `${'d'.repeat(120)}/${'f'.repeat(90)}`; // 211 bytes: prefix + name
    const long = `${'p/'.repeat(100)}${'é'.repeat(60)}.js`; // > 256 bytes, non-ASCII
    const target = `/${'t'.repeat(150)}`;
    assert.deepEqual(splitUstarPath(mid), { prefix: 'd'.repeat(120), name: 'f'.repeat(90) });
    assert.equal(splitUstarPath(long), undefined);
    const entries = normalizeEntries([
      file(mid, 'm'),
      file(long, 'l'),
      { path: 'ln', type: 'symlink', linkname: target },
    ]);
    const archive = await tarBytes(entries);
    const records = readTar(archive);
    assert.ok(records.some((r) => r.path === mid && new TextDecoder().decode(r.data) === 'm'));
    assert.ok(records.some((r) => r.path === long && new TextDecoder().decode(r.data) === 'l'));
    assert.equal(records.find((r) => r.path === 'ln')?.linkname, target);
    // Only the entries that need one get a pax header, and its name is fixed (no pid).
    assert.equal(entryHeader(entries.find((e) => e.path === mid)!).length, 512);
    const paxed = entryHeader(entries.find((e) => e.path === long)!);
    assert.ok(paxed.length > 512);
    assert.equal(new TextDecoder().decode(paxed.subarray(0, 11)), 'PaxHeaders/');
    assert.deepEqual(Buffer.from(await tarBytes(entries)), Buffer.from(archive));
    const listing = gnuTarList(archive);
    if (listing) {
      assert.ok(
        listing.some((l) => l.endsWith(` ${mid}`)),
        'GNU tar: the prefix-split path',
      );
      assert.ok(
        listing.some((l) => l.endsWith(` ${long}`)),
        'GNU tar: the pax path',
      );
      assert.ok(
        listing.some((l) => l.endsWith(`ln -> ${target}`)),
        'GNU tar: the pax link path',
      );
    }
  });

  test('files streamed from disk equal files from memory; a wrong size is an error', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'tar-test-'));
    try {
      const content = Buffer.alloc(3 * 1024 * 1024 + 7, 'q');
      const src = path.join(dir, 'big');
      await writeFile(src, content);
      const fromDisk = await tarBytes([{ path: 'big', type: 'file', source: src, size: content.length }]);
      const fromMemory = await tarBytes([{ path: 'big', type: 'file', data: content }]);
      assert.deepEqual(Buffer.from(fromDisk), Buffer.from(fromMemory));
      await assert.rejects(tarBytes([{ path: 'big', type: 'file', source: src, size: 10 }]), /longer/);
      await assert.rejects(
        tarBytes([{ path: 'big', type: 'file', source: src, size: content.length + 1 }]),
        /shorter/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('refuses bad paths, a path twice and a file used as a directory', async () => {
    for (const p of ['/abs', '../up', 'a/../b', 'dir/']) {
      assert.throws(() => entryHeader(file(p, '')), /bad entry path/, p);
    }
    assert.throws(() => normalizeEntries([file('a', '1'), file('a', '2')]), /twice/);
    assert.throws(() => normalizeEntries([file('a', '1'), file('a/b', '2')]), /parent/);
    // The same directory twice is fine (every layer may name its parents).
    assert.equal(
      normalizeEntries([
        { path: 'd', type: 'dir' },
        { path: 'd', type: 'dir' },
      ]).length,
      1,
    );
  });

  test('paths compare by bytes, not by UTF-16 units or locale', () => {
    assert.ok(comparePaths('a/b', 'a-b') > 0);
    assert.ok(comparePaths('Z', 'a') < 0);
    assert.ok(comparePaths('\u{ff}', '\u{1f600}') < 0);
  });
});
