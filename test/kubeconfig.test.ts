import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { freePort } from '../src/testenv/control-plane.ts';
import { type ManagedProcess, startManagedProcess } from '../src/testenv/processes.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';

/**
 * `paddock run`, `webhook-server` and `uninstall` load their kubeconfig with src/runtime/kubeconfig.ts,
 * never with @kubernetes/client-node (~87 MiB of resident memory): each runs here under a module hook
 * that makes any load of that package throw, against the test control plane, and must still work,
 * with the harness's kubeconfig (token, CA file) and with an exec credential plugin.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'bin/paddock.js');
const hook = path.join(root, 'test/support/forbid-client-node.ts');

describe('paddock commands without @kubernetes/client-node', () => {
  const ns = namespaceFixture('t-kubeconfig');
  const started: ManagedProcess[] = [];
  let dir: string;
  let kubeconfig: string;
  let execKubeconfig: string;
  let yamlKubeconfig: string;

  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'paddock-kubeconfig-it-'));
    kubeconfig = process.env.PADDOCK_TEST_KUBECONFIG ?? ns.cluster.own?.kubeconfigPath ?? '';
    assert.ok(kubeconfig, 'a kubeconfig file of the test control plane');
    // The same cluster through an exec plugin named relative to its kubeconfig, the CA file relative too.
    const doc = parseYaml(readFileSync(kubeconfig, 'utf8')) as {
      clusters: { cluster: { server: string; 'certificate-authority': string } }[];
      users: { user: { token: string } }[];
    };
    const cluster = doc.clusters[0]!.cluster;
    const execDir = path.join(dir, 'exec');
    mkdirSync(path.join(execDir, 'plugins'), { recursive: true });
    copyFileSync(cluster['certificate-authority'], path.join(execDir, 'ca.crt'));
    const credential = JSON.stringify({
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: {
        token: doc.users[0]!.user.token,
        expirationTimestamp: new Date(Date.now() + 3600_000).toISOString(),
      },
    });
    writeFileSync(path.join(execDir, 'plugins/token.sh'), `#!/bin/sh\nprintf '%s' '${credential}'\n`, {
      mode: 0o700,
    });
    // The harness writes JSON; kubectl writes YAML, which paddock parses too (outside a cluster).
    yamlKubeconfig = path.join(dir, 'kubectl-config.yaml');
    writeFileSync(yamlKubeconfig, stringifyYaml(doc), { mode: 0o600 });
    execKubeconfig = path.join(execDir, 'config');
    writeFileSync(
      execKubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'test', cluster: { server: cluster.server, 'certificate-authority': 'ca.crt' } }],
        users: [
          {
            name: 'plugin',
            user: {
              exec: {
                apiVersion: 'client.authentication.k8s.io/v1',
                command: './plugins/token.sh',
                interactiveMode: 'Never',
              },
            },
          },
        ],
        contexts: [{ name: 'test', context: { cluster: 'test', user: 'plugin' } }],
        'current-context': 'test',
      }),
      { mode: 0o600 },
    );
  });
  after(async () => {
    await Promise.all(started.map((p) => p.stop(5_000)));
    rmSync(dir, { recursive: true, force: true });
  });

  /** `node --import <hook> bin/paddock.js <args>`, with its output in a log file. */
  function paddock(name: string, args: string[], env: Record<string, string>) {
    const logFile = path.join(dir, `${name}.log`);
    const p = startManagedProcess({
      name,
      command: process.execPath,
      args: ['--import', hook, bin, ...args],
      logFile,
      env: { PATH: process.env.PATH, HOME: dir, LOG_LEVEL: 'info', ...env },
    });
    started.push(p);
    return { p, log: () => readFileSync(logFile, 'utf8') };
  }

  async function ready(name: string, proc: ReturnType<typeof paddock>, port: number): Promise<void> {
    await eventually(
      `${name} ready`,
      async () => {
        if (!proc.p.running()) throw new Error(`exited ${await proc.p.exited}: ${proc.log()}`);
        return (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200;
      },
      30_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${proc.log()}`);
    });
    await proc.p.stop();
    assert.equal(await proc.p.exited, 0, proc.log());
    assert.doesNotMatch(proc.log(), /client-node/);
  }

  test('the hook does refuse the package', () => {
    const r = spawnSync(
      process.execPath,
      ['--import', hook, '--input-type=module', '-e', "await import('@kubernetes/client-node')"],
      { encoding: 'utf8' },
    );
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /@kubernetes\/client-node must not be loaded here/);
  });

  for (const [form, config] of [
    ['the harness kubeconfig (token, CA file) in KUBECONFIG', () => ({ env: { KUBECONFIG: kubeconfig } })],
    ['the same as YAML, by --kubeconfig', () => ({ flags: ['--kubeconfig', yamlKubeconfig] })],
    ['an exec credential plugin, by --kubeconfig', () => ({ flags: ['--kubeconfig', execKubeconfig] })],
  ] as const) {
    test(`paddock run becomes ready: ${form}`, async () => {
      const c = config() as { env?: Record<string, string>; flags?: string[] };
      const port = await freePort();
      const proc = paddock(
        `run-${started.length}`,
        [
          'run',
          '--watch-namespace',
          ns.name,
          '--metrics-addr',
          `127.0.0.1:${port}`,
          '--health-probe-addr',
          '0',
          '--webhook-addr',
          '0',
          ...(c.flags ?? []),
        ],
        c.env ?? {},
      );
      await ready('paddock run', proc, port);
    });
  }

  test('paddock webhook-server becomes ready', async () => {
    const port = await freePort();
    const proc = paddock(
      'webhook-server',
      [
        'webhook-server',
        '--watch-namespace',
        ns.name,
        '--metrics-addr',
        `127.0.0.1:${port}`,
        '--webhook-addr',
        '127.0.0.1:0',
      ],
      { KUBECONFIG: kubeconfig },
    );
    await ready('paddock webhook-server', proc, port);
  });

  test('paddock uninstall finishes', async () => {
    const proc = paddock(
      'uninstall',
      ['uninstall', '--watch-namespace', ns.name, '--kubeconfig', execKubeconfig],
      {},
    );
    assert.equal(await proc.p.exited, 0, proc.log());
    assert.match(proc.log(), /removed MutatingWebhookConfiguration/);
  });

  test('a kubeconfig paddock cannot use: exit 2 and one clear line', async () => {
    const bad = path.join(dir, 'bad-config');
    writeFileSync(
      bad,
      JSON.stringify({
        clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
        users: [
          { name: 'u', user: { 'auth-provider': { name: 'oidc', config: { 'id-token': 'oidc-secret' } } } },
        ],
        contexts: [{ name: 'm', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'm',
      }),
    );
    const proc = paddock(
      'bad',
      ['run', '--kubeconfig', bad, '--metrics-addr', '0', '--health-probe-addr', '0'],
      {},
    );
    assert.equal(await proc.p.exited, 2);
    assert.match(
      proc.log(),
      /^paddock run: cannot load the kubeconfig: user "u" \(.*bad-config\) uses the auth-provider "oidc", which paddock does not support: use an exec credential plugin/m,
    );
    assert.doesNotMatch(proc.log(), /oidc-secret/);
  });
});
