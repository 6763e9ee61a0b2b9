import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createGzip, gunzipSync, gzipSync } from 'node:zlib';
import {
  imageConfig,
  imageIndex,
  imageManifest,
  jsonBlob,
  MEDIA_TYPES,
  writeLayer,
  writeOciArchive,
} from './oci.ts';
import { readTar, type TarEntry } from './tar.ts';

const sha = (b: Uint8Array) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('OCI layers and archive', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'oci-test-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const entries = async (): Promise<TarEntry[]> => {
    const src = path.join(dir, 'src.bin');
    await writeFile(src, Buffer.alloc(200_000, 7), { mode: 0o700 });
    return [
      { path: 'usr/local/bin/tool', type: 'file', source: src, size: 200_000, mode: 0o700 },
      { path: 'etc/conf', type: 'file', data: new TextEncoder().encode('k=v\n'), mtime: 1234 },
      { path: 'usr/bin/tool', type: 'symlink', linkname: '../local/bin/tool' },
    ];
  };

  test('a layer written twice has the same digest; its digests describe its bytes', async () => {
    const a = await writeLayer(await entries(), dir);
    const b = await writeLayer((await entries()).reverse(), dir);
    assert.equal(a.digest, b.digest);
    assert.equal(a.diffId, b.diffId);
    const gz = await readFile(a.file);
    assert.equal(sha(gz), a.digest);
    assert.equal(gz.length, a.size);
    const tar = gunzipSync(gz);
    assert.equal(sha(tar), a.diffId);
    assert.equal(tar.length, a.uncompressedSize);
    // The entry's own mtime is dropped: every entry has the layer's.
    assert.ok(readTar(tar).every((r) => r.mtime === 0 && r.uid === 0 && r.gid === 0));
    assert.deepEqual(
      readTar(tar).map((r) => r.path),
      [
        'etc',
        'etc/conf',
        'usr',
        'usr/bin',
        'usr/bin/tool',
        'usr/local',
        'usr/local/bin',
        'usr/local/bin/tool',
      ],
    );
  });

  test('gzip: no name, mtime 0, and the same stream however the input is chunked', async () => {
    const data = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7919) % 251));
    const whole = gzipSync(data, { level: 6 });
    assert.equal(whole[3], 0, 'no FNAME/FCOMMENT/FEXTRA flags');
    assert.deepEqual([...whole.subarray(4, 8)], [0, 0, 0, 0], 'mtime 0');
    const chunked = await new Promise<Buffer>((resolve, reject) => {
      const gz = createGzip({ level: 6 });
      const parts: Buffer[] = [];
      gz.on('data', (c: Buffer) => parts.push(c));
      gz.on('end', () => resolve(Buffer.concat(parts)));
      gz.on('error', reject);
      for (let i = 0; i < data.length; i += 4093) gz.write(data.subarray(i, i + 4093));
      gz.end();
    });
    assert.deepEqual(chunked, whole);
  });

  test('the archive is an OCI image layout: oci-layout, index.json and blobs named by digest', async () => {
    const layer = await writeLayer(await entries(), dir);
    const config = jsonBlob(
      imageConfig({
        created: '1970-01-01T00:00:00Z',
        architecture: 'amd64',
        os: 'linux',
        user: '65532:65532',
        env: ['PATH=/usr/bin'],
        entrypoint: ['/usr/bin/tool'],
        cmd: [],
        workingDir: '/',
        exposedPorts: ['8080/tcp'],
        labels: { a: 'b' },
        stopSignal: 'SIGTERM',
        layers: [{ diffId: layer.diffId, createdBy: 'test' }],
      }),
    );
    const manifest = jsonBlob(imageManifest(config, [layer]));
    const index = jsonBlob(imageIndex(manifest, { refName: 'x:1', architecture: 'amd64', os: 'linux' }));
    const out1 = path.join(dir, 'one.tar');
    const out2 = path.join(dir, 'two.tar');
    const size = await writeOciArchive(out1, index, [layer, config, manifest, layer]);
    await writeOciArchive(out2, index, [manifest, config, layer]);
    const bytes = await readFile(out1);
    assert.equal(bytes.length, size);
    assert.deepEqual(bytes, await readFile(out2), 'blob order and duplicates do not matter');
    const records = readTar(bytes);
    assert.deepEqual(
      records.map((r) => r.path),
      [
        'blobs',
        'blobs/sha256',
        ...[layer, config, manifest].map((b) => `blobs/sha256/${b.digest.slice(7)}`).sort(),
        'index.json',
        'oci-layout',
      ],
    );
    for (const r of records.filter((r) => r.path.startsWith('blobs/sha256/'))) {
      assert.equal(sha(r.data), `sha256:${r.path.slice('blobs/sha256/'.length)}`);
    }
    const text = (p: string) => new TextDecoder().decode(records.find((r) => r.path === p)!.data);
    assert.deepEqual(JSON.parse(text('oci-layout')), { imageLayoutVersion: '1.0.0' });
    const idx = JSON.parse(text('index.json'));
    assert.equal(idx.mediaType, MEDIA_TYPES.index);
    assert.equal(idx.manifests[0].digest, manifest.digest);
    assert.equal(idx.manifests[0].annotations['org.opencontainers.image.ref.name'], 'x:1');
    const m = JSON.parse(new TextDecoder().decode(manifest.data));
    assert.equal(m.layers[0].digest, layer.digest);
    assert.equal(m.layers[0].size, layer.size);
    assert.equal(m.config.digest, config.digest);
    const c = JSON.parse(new TextDecoder().decode(config.data));
    assert.deepEqual(c.rootfs, { type: 'layers', diff_ids: [layer.diffId] });
    assert.deepEqual(c.config.ExposedPorts, { '8080/tcp': {} });
  });
});
