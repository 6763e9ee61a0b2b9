import assert from 'node:assert/strict';
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { describe, test } from 'node:test';
import { sourceUrl } from './build.ts';
import { elfDeps } from './elf.ts';
import { type DebPackage, stripRule } from './inputs.ts';
import { debianLayer, systemFiles } from './rootfs.ts';
import type { TarRecord } from './tar.ts';

const record = (p: string, type: TarRecord['type'], data = new Uint8Array(), linkname = ''): TarRecord => ({
  path: p,
  type,
  mode: 0o644,
  uid: 0,
  gid: 0,
  mtime: 0,
  size: data.length,
  linkname,
  uname: '',
  gname: '',
  data,
});

const deb = (name: string, files: TarRecord[]): DebPackage => ({
  name,
  version: '1',
  architecture: 'amd64',
  control: `Package: ${name}\nVersion: 1\n`,
  files: new Map(files.map((f) => [f.path, f])),
});

/** The host's own glibc and libstdc++ files (a Debian or Ubuntu x86-64 host), as fake packages. */
function hostPackages(): DebPackage[] | undefined {
  const dir = '/lib/x86_64-linux-gnu';
  const names = ['ld-linux-x86-64.so.2', 'libc.so.6', 'libm.so.6', 'libdl.so.2', 'libpthread.so.0'];
  const cxx = ['libstdc++.so.6', 'libgcc_s.so.1'];
  if (![...names, ...cxx].every((n) => existsSync(`${dir}/${n}`))) return undefined;
  if (!existsSync('/lib64/ld-linux-x86-64.so.2')) return undefined;
  const copyright = (n: string) => record(`usr/share/doc/${n}/copyright`, 'file', new Uint8Array([1]));
  const real = (n: string) => record(`lib/x86_64-linux-gnu/${n}`, 'file', readFileSync(`${dir}/${n}`));
  const stdcxxTarget = readlinkSync(`${dir}/libstdc++.so.6`);
  return [
    deb('libc6', [
      ...names.map(real),
      record(
        'lib64/ld-linux-x86-64.so.2',
        'symlink',
        undefined,
        '/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2',
      ),
      record('lib/x86_64-linux-gnu/libnss_files.so.2', 'file', new Uint8Array([0])),
      copyright('libc6'),
    ]),
    deb('libstdc++6', [
      record('usr/lib/x86_64-linux-gnu/libstdc++.so.6', 'symlink', undefined, stdcxxTarget),
      record(`usr/lib/x86_64-linux-gnu/${stdcxxTarget}`, 'file', readFileSync(`${dir}/libstdc++.so.6`)),
      record('usr/share/doc/libstdc++6', 'symlink', undefined, 'gcc-base'),
    ]),
    deb('libgcc-s1', [
      real('libgcc_s.so.1'),
      record('usr/share/doc/libgcc-s1', 'symlink', undefined, 'gcc-base'),
    ]),
    deb('gcc-base', [copyright('gcc-base')]),
  ];
}

describe('root file system', () => {
  test('ELF: the interpreter and DT_NEEDED of this node', () => {
    const deps = elfDeps(readFileSync(process.execPath));
    if (process.arch === 'x64') assert.match(deps.interpreter ?? '', /ld-linux-x86-64\.so\.2$/);
    assert.ok(deps.needed.includes('libc.so.6'), deps.needed.join(' '));
    assert.throws(() => elfDeps(new TextEncoder().encode('#!/bin/sh\n'.padEnd(80))), /not an ELF/);
  });

  test("node's libraries, their symlinks and copyright files, and nothing else", (t) => {
    const debs = hostPackages();
    if (!debs || process.arch !== 'x64')
      return t.skip('needs an x86-64 host with glibc in /lib/x86_64-linux-gnu');
    const layer = debianLayer(debs, readFileSync(process.execPath));
    const paths = layer.entries.map((e) => e.path).sort();
    for (const p of [
      'lib64/ld-linux-x86-64.so.2',
      'lib/x86_64-linux-gnu/ld-linux-x86-64.so.2',
      'lib/x86_64-linux-gnu/libc.so.6',
      'usr/lib/x86_64-linux-gnu/libstdc++.so.6',
      'usr/share/doc/libstdc++6',
      'usr/share/doc/gcc-base/copyright',
      'usr/share/doc/libc6/copyright',
      'var/lib/dpkg/status.d/libc6',
      'var/lib/dpkg/status.d/gcc-base',
    ]) {
      assert.ok(paths.includes(p), `${p} in ${paths.join(' ')}`);
    }
    assert.ok(!paths.includes('lib/x86_64-linux-gnu/libnss_files.so.2'), 'only what node loads');
    assert.equal(layer.libraries.find((l) => l.soname === 'libgcc_s.so.1')?.package, 'libgcc-s1');
  });

  test('a library no pinned package provides, or a package the image does not use, is an error', (t) => {
    const debs = hostPackages();
    if (!debs || process.arch !== 'x64')
      return t.skip('needs an x86-64 host with glibc in /lib/x86_64-linux-gnu');
    const withoutGcc = debs.filter((d) => d.name !== 'libgcc-s1');
    assert.throws(() => debianLayer(withoutGcc, readFileSync(process.execPath)), /provides libgcc_s\.so\.1/);
    const extra = [...debs, deb('unused', [record('usr/share/doc/unused/copyright', 'file')])];
    assert.throws(() => debianLayer(extra, readFileSync(process.execPath)), /unused is pinned/);
  });

  test('/etc/passwd and /etc/group name the user paddock (65532); /tmp is 1777', () => {
    const files = systemFiles();
    const text = (p: string) => new TextDecoder().decode(files.find((f) => f.path === p)?.data);
    assert.match(text('etc/passwd'), /^paddock:x:65532:65532:/m);
    assert.match(text('etc/group'), /^paddock:x:65532:$/m);
    assert.equal(files.find((f) => f.path === 'tmp')?.mode, 0o1777);
  });
});

describe('node_modules stripping rules', () => {
  const cases: [string, boolean, string | undefined][] = [
    ['node_modules/a/index.d.ts', false, 'type declarations (*.d.ts)'],
    ['node_modules/a/index.d.mts', false, 'type declarations (*.d.ts)'],
    ['node_modules/a/index.js.map', false, 'source maps'],
    ['node_modules/a/src/x.ts', false, 'TypeScript sources (Node does not run them from node_modules)'],
    ['node_modules/a/README.md', false, 'READMEs, changelogs and other Markdown'],
    ['node_modules/a/CHANGELOG', false, 'READMEs, changelogs and other Markdown'],
    ['node_modules/a/LICENSE.md', false, undefined],
    ['node_modules/a/index.js', false, undefined],
    ['node_modules/a/data.json', false, undefined],
    ['node_modules/a/test', true, 'test directories'],
    ['node_modules/@s/a/lib/__tests__', true, 'test directories'],
    ['node_modules/test', true, undefined], // a package called "test"
    ['node_modules/@s/tests', true, undefined],
    ['node_modules/.bin', true, '.bin links'],
    ['node_modules/a/prebuilds/darwin-arm64', true, 'prebuilds for other platforms'],
    ['node_modules/a/prebuilds/linux-x64', true, undefined],
    ['node_modules/.package-lock.json', false, "npm's hidden lockfile"],
  ];
  for (const [rel, isDir, want] of cases) {
    test(`${rel}${isDir ? '/' : ''}: ${want ?? 'kept'}`, () => {
      assert.equal(stripRule(rel, isDir), want);
    });
  }
});

describe('image source label', () => {
  for (const [remote, want] of [
    ['git@github.com:acme/paddock.git', 'https://github.com/acme/paddock'],
    ['ssh://git@github.com:22/acme/paddock.git', 'https://github.com/acme/paddock'],
    ['https://user:secret@github.com/acme/paddock.git', 'https://github.com/acme/paddock'],
    ['https://github.com/acme/paddock', 'https://github.com/acme/paddock'],
  ] as const) {
    test(remote, () => assert.equal(sourceUrl(remote), want));
  }
});
