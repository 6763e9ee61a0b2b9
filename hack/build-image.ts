/**
 * `make image`: builds paddock's container image as an OCI archive (see hack/image/build.ts).
 *
 *   node hack/build-image.ts [--out FILE] [--name NAME:TAG] [--source URL] [--json]
 *   node hack/build-image.ts --update-lock     pin apt's current Debian packages and ensure-node.sh's Node.js
 *
 * Progress goes to stderr; the last lines on stdout are the archive, the manifest digest and the
 * compressed and uncompressed sizes (with --json: one JSON line instead).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildImage, mib } from './image/build.ts';
import { imageCacheDir, LOCK_FILE, updateLock } from './image/inputs.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    name: { type: 'string' },
    source: { type: 'string' },
    json: { type: 'boolean', default: false },
    'update-lock': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help) {
  process.stdout.write(
    [
      'Usage: node hack/build-image.ts [--out FILE] [--name NAME:TAG] [--source URL] [--json]',
      '       node hack/build-image.ts --update-lock',
      '',
      '  --out FILE      the OCI archive (default out/paddock-<version>.oci.tar)',
      '  --name NAME     org.opencontainers.image.ref.name of the image (default paddock:<version>)',
      '  --source URL    org.opencontainers.image.source (default: the git remote origin, if any)',
      '  --json          print one JSON line with the figures instead of the summary',
      `  --update-lock   pin apt's candidate version of each Debian package and the Node.js of`,
      `                  hack/ensure-node.sh in ${LOCK_FILE} (with their SHA-256), then exit`,
      '',
      'SOURCE_DATE_EPOCH sets the image creation time (default: the commit time of HEAD).',
      `Downloads and staged inputs are cached in ${imageCacheDir()} (PADDOCK_IMAGE_CACHE).`,
      '',
    ].join('\n'),
  );
  process.exit(0);
}

const log = (line: string) => process.stderr.write(`${line}\n`);

try {
  if (values['update-lock']) {
    const lock = await updateLock(root, imageCacheDir(), log);
    log(`[image] ${LOCK_FILE}: node ${lock.node.version}`);
    for (const p of lock.debian.packages) log(`[image] ${LOCK_FILE}: ${p.name} ${p.version} ${p.sha256}`);
    process.exit(0);
  }
  const started = Date.now();
  const r = await buildImage({
    root,
    log,
    ...(values.out ? { outFile: path.resolve(values.out) } : {}),
    ...(values.name ? { refName: values.name } : {}),
    ...(values.source ? { source: values.source } : {}),
  });
  const seconds = (Date.now() - started) / 1000;
  if (r.dirty.length) {
    log(
      `[image] note: the working tree differs from HEAD (${r.revision.slice(0, 12)}) in ${r.dirty.join(', ')}`,
    );
  }
  const archive = path.relative(process.cwd(), r.archive) || r.archive;
  if (values.json) {
    process.stdout.write(
      `${JSON.stringify({
        archive,
        refName: r.refName,
        manifestDigest: r.manifestDigest,
        configDigest: r.configDigest,
        compressedBytes: r.compressedSize,
        uncompressedBytes: r.uncompressedSize,
        archiveBytes: r.archiveSize,
        layers: r.layers,
        version: r.version,
        revision: r.revision,
        created: r.created,
        node: r.nodeVersion,
        debian: r.debianPackages,
        seconds,
      })}\n`,
    );
  } else {
    for (const l of r.libraries) log(`[image] ${l.soname} -> ${l.file} (${l.package})`);
    process.stdout.write(
      [
        `image        ${r.refName} (node ${r.nodeVersion}; built in ${seconds.toFixed(1)} s)`,
        `archive      ${archive} (${r.archiveSize} bytes)`,
        `digest       ${r.manifestDigest}`,
        `compressed   ${mib(r.compressedSize)} (${r.compressedSize} bytes: layers, config and manifest)`,
        `uncompressed ${mib(r.uncompressedSize)} (${r.uncompressedSize} bytes: the layers' tars)`,
        '',
      ].join('\n'),
    );
  }
} catch (err) {
  log(`[image] ${(err as Error).message}`);
  process.exit(1);
}
