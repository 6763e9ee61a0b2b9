import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { defaultCacheDir, findBinaries, freePort } from './control-plane.ts';

describe('control-plane binary lookup', () => {
  const saved = { ...process.env };
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'paddock-assets-'));
    for (const k of [
      'KUBEBUILDER_ASSETS',
      'TEST_ASSET_KUBE_APISERVER',
      'TEST_ASSET_ETCD',
      'TEST_ASSET_KUBE_CONTROLLER_MANAGER',
    ]) {
      delete process.env[k];
    }
    process.env.K8S_BIN_DIR = path.join(dir, 'empty-cache');
  });
  afterEach(() => {
    process.env = { ...saved };
    rmSync(dir, { recursive: true, force: true });
  });

  function fakeBinary(file: string): string {
    writeFileSync(file, '#!/bin/sh\n');
    chmodSync(file, 0o755);
    return file;
  }

  test('KUBEBUILDER_ASSETS is honoured when it holds the binaries', () => {
    fakeBinary(path.join(dir, 'kube-apiserver'));
    fakeBinary(path.join(dir, 'etcd'));
    process.env.KUBEBUILDER_ASSETS = dir;
    assert.deepEqual(findBinaries(), {
      kubeApiserver: path.join(dir, 'kube-apiserver'),
      etcd: path.join(dir, 'etcd'),
    });
  });

  test('per-binary TEST_ASSET_* overrides win over KUBEBUILDER_ASSETS', () => {
    fakeBinary(path.join(dir, 'kube-apiserver'));
    fakeBinary(path.join(dir, 'etcd'));
    const custom = fakeBinary(path.join(dir, 'my-etcd'));
    process.env.KUBEBUILDER_ASSETS = dir;
    process.env.TEST_ASSET_ETCD = custom;
    assert.equal(findBinaries().etcd, custom);
  });

  test('the cache directory is used when nothing else is set, and is keyed by version', () => {
    const cache = path.join(dir, 'cache');
    process.env.K8S_BIN_DIR = cache;
    assert.deepEqual(findBinaries(), {});
    for (const b of ['kube-apiserver', 'etcd', 'kube-controller-manager']) {
      fakeBinary(path.join(dir, b)); // not in the cache: must not be picked up
    }
    assert.deepEqual(findBinaries(), {});
    delete process.env.K8S_BIN_DIR;
    assert.match(defaultCacheDir(), /paddock\/k8s\/v1\.36\.3-etcd-v3\.6\.16$/);
  });

  test('free ports are loopback ports that can be bound', async () => {
    const a = await freePort();
    const b = await freePort();
    assert.ok(a > 0 && b > 0);
  });
});
