/**
 * OCI image pieces: gzip-compressed layers written reproducibly from tar entries, the image config,
 * the manifest and index, and the OCI image layout packed into one tar (an "oci-archive", as
 * `skopeo copy oci-archive:…` and `podman load` read it).
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { normalizeEntries, type TarEntry, tarChunks } from './tar.ts';

export const MEDIA_TYPES = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

/** zlib's default: the best level costs 2.5 times the time for 0.3 % less. */
export const GZIP_LEVEL = 6;

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
  platform?: { architecture: string; os: string };
}

export interface Blob {
  digest: string;
  size: number;
  /** On disk, or in memory. */
  file?: string;
  data?: Uint8Array;
}

export interface Layer extends Blob {
  /** sha256 of the uncompressed tar (the config's rootfs.diff_ids). */
  diffId: string;
  uncompressedSize: number;
  entries: number;
  file: string;
}

class Measure extends Transform {
  readonly hash = createHash('sha256');
  bytes = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    done(null, chunk);
  }
}

/**
 * Writes the entries (normalised: sorted, parents added, modes and owners fixed, mtime `mtime`) as a
 * gzip-compressed tar into `dir`, named after its digest.
 */
export async function writeLayer(
  entries: Iterable<TarEntry>,
  dir: string,
  opts: { mtime?: number; gzipLevel?: number } = {},
): Promise<Layer> {
  const normalized = normalizeEntries(entries);
  const tmp = path.join(dir, `.layer-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const raw = new Measure();
  const gz = new Measure();
  try {
    await pipeline(
      Readable.from(tarChunks(normalized, { mtime: opts.mtime ?? 0 })),
      raw,
      // No file name and mtime 0 in the gzip header: zlib writes neither for a stream.
      createGzip({ level: opts.gzipLevel ?? GZIP_LEVEL }),
      gz,
      createWriteStream(tmp),
    );
    const digest = `sha256:${gz.hash.digest('hex')}`;
    const file = path.join(dir, digest.replace(':', '-'));
    await rename(tmp, file);
    return {
      digest,
      size: gz.bytes,
      diffId: `sha256:${raw.hash.digest('hex')}`,
      uncompressedSize: raw.bytes,
      entries: normalized.length,
      file,
    };
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** A JSON document as a blob: compact, keys in the order the object has them. */
export function jsonBlob(value: unknown): Blob & { data: Uint8Array } {
  const data = new TextEncoder().encode(JSON.stringify(value));
  return { digest: `sha256:${createHash('sha256').update(data).digest('hex')}`, size: data.length, data };
}

export interface ImageConfigInput {
  created: string;
  architecture: string;
  os: string;
  user: string;
  env: string[];
  entrypoint: string[];
  cmd: string[];
  workingDir: string;
  exposedPorts: string[];
  labels: Record<string, string>;
  stopSignal: string;
  layers: { diffId: string; createdBy: string; comment?: string }[];
}

export function imageConfig(c: ImageConfigInput): Record<string, unknown> {
  return {
    created: c.created,
    architecture: c.architecture,
    os: c.os,
    config: {
      User: c.user,
      ExposedPorts: Object.fromEntries(c.exposedPorts.map((p) => [p, {}])),
      Env: c.env,
      Entrypoint: c.entrypoint,
      Cmd: c.cmd,
      WorkingDir: c.workingDir,
      Labels: c.labels,
      StopSignal: c.stopSignal,
    },
    rootfs: { type: 'layers', diff_ids: c.layers.map((l) => l.diffId) },
    history: c.layers.map((l) => ({
      created: c.created,
      created_by: l.createdBy,
      ...(l.comment ? { comment: l.comment } : {}),
    })),
  };
}

export function imageManifest(config: Blob, layers: readonly Blob[]): Record<string, unknown> {
  return {
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.manifest,
    config: { mediaType: MEDIA_TYPES.config, digest: config.digest, size: config.size },
    layers: layers.map((l) => ({ mediaType: MEDIA_TYPES.layerGzip, digest: l.digest, size: l.size })),
  };
}

export function imageIndex(
  manifest: Blob,
  opts: { refName: string; architecture: string; os: string },
): Record<string, unknown> {
  return {
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.index,
    manifests: [
      {
        mediaType: MEDIA_TYPES.manifest,
        digest: manifest.digest,
        size: manifest.size,
        platform: { architecture: opts.architecture, os: opts.os },
        annotations: { 'org.opencontainers.image.ref.name': opts.refName },
      },
    ],
  };
}

/**
 * The OCI image layout (oci-layout, index.json, blobs/sha256/<hex>) as one tar at `out`, written
 * to a temporary file first and renamed, so a reader never sees half an archive.
 */
export async function writeOciArchive(
  out: string,
  index: Blob & { data: Uint8Array },
  blobs: readonly Blob[],
): Promise<number> {
  const entries: TarEntry[] = [
    {
      path: 'oci-layout',
      type: 'file',
      data: new TextEncoder().encode(JSON.stringify({ imageLayoutVersion: '1.0.0' })),
    },
    { path: 'index.json', type: 'file', data: index.data },
  ];
  const seen = new Set<string>();
  for (const b of blobs) {
    if (seen.has(b.digest)) continue;
    seen.add(b.digest);
    const [alg, hex] = b.digest.split(':');
    entries.push(
      b.data
        ? { path: `blobs/${alg}/${hex}`, type: 'file', data: b.data }
        : { path: `blobs/${alg}/${hex}`, type: 'file', source: b.file!, size: b.size },
    );
  }
  const tmp = `${out}.partial-${process.pid}`;
  const counter = new Measure();
  try {
    await pipeline(Readable.from(tarChunks(normalizeEntries(entries))), counter, createWriteStream(tmp));
    await rename(tmp, out);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  return counter.bytes;
}
