import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import tls, { type TLSSocket } from 'node:tls';
import {
  generateCertificateAuthority,
  issueClientCertificate,
  issueServingCertificate,
  type KeyPairPem,
} from '../webhooks/certs.ts';
import { type ClusterAccess, KubeHttp } from './kube-http.ts';
import {
  inClusterKubeconfig,
  type Kubeconfig,
  KubeconfigError,
  type KubeconfigOptions,
  loadKubeconfig,
  loadKubeconfigFiles,
} from './kubeconfig.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'paddock-kubeconfig-'));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
/** A fresh directory under the test's temp dir. */
function tempDir(): string {
  const d = path.join(root, `d${++dirs}`);
  mkdirSync(d, { recursive: true });
  return d;
}
function write(dir: string, name: string, content: string | object, mode = 0o600): string {
  const file = path.join(dir, name);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content), { mode });
  return file;
}
const b64 = (s: string) => Buffer.from(s).toString('base64');
/** No KUBECONFIG, an empty home and no service account: only what a test names is found. */
function isolated(extra: KubeconfigOptions = {}): KubeconfigOptions {
  return {
    env: { PATH: process.env.PATH },
    home: tempDir(),
    serviceAccountDir: path.join(root, 'no-service-account'),
    ...extra,
  };
}

/** A kubeconfig of one context `main` over cluster `c` and (optionally) user `u`. */
function simpleConfig(cluster: object, user?: object, namespace?: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster }],
    ...(user ? { users: [{ name: 'u', user }] } : {}),
    contexts: [{ name: 'main', context: { cluster: 'c', ...(user ? { user: 'u' } : {}), namespace } }],
    'current-context': 'main',
  };
}

async function headersOf(kc: Kubeconfig): Promise<Record<string, unknown>> {
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  return opts.headers as Record<string, unknown>;
}

const ca = generateCertificateAuthority({ commonName: 'test-cluster-ca' });
const ipServing = issueServingCertificate(ca, { ipAddresses: ['127.0.0.1'] });
const nameServing = issueServingCertificate(ca, { dnsNames: ['kube.internal'] });
const client = issueClientCertificate(ca, { commonName: 'client-of-test' });

interface Seen {
  authorization: string | undefined;
  impersonateUser: string | undefined;
  impersonateGroup: string | string[] | undefined;
  clientCN: string | undefined;
}

/** An HTTPS "API server" on 127.0.0.1 that records what each request authenticated with. */
async function apiServer(serving: KeyPairPem, opts: { clientCa?: string } = {}) {
  const seen: Seen[] = [];
  const server = https.createServer(
    {
      cert: serving.cert,
      key: serving.key,
      ...(opts.clientCa ? { ca: opts.clientCa, requestCert: true, rejectUnauthorized: true } : {}),
    },
    (req, res) => {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      seen.push({
        authorization: req.headers.authorization,
        impersonateUser: req.headers['impersonate-user'] as string | undefined,
        impersonateGroup: req.headers['impersonate-group'],
        clientCN: peer?.subject?.CN as string | undefined,
      });
      res.setHeader('content-type', 'application/json');
      res.end('{"ok":true}');
    },
  );
  let connections = 0;
  server.on('secureConnection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    connections: () => connections,
    url: `https://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** One GET through KubeHttp, as paddock makes them. */
async function get(kc: Kubeconfig): Promise<void> {
  const http = new KubeHttp(kc);
  try {
    assert.deepEqual(await http.request('GET', '/version'), { ok: true });
  } finally {
    http.close();
  }
}

describe('kubeconfig files', () => {
  test('token, a CA file relative to the kubeconfig, the context namespace (YAML as kubectl writes it)', async () => {
    const server = await apiServer(ipServing);
    try {
      const dir = tempDir();
      write(dir, 'pki/ca.crt', ca.cert);
      const file = write(
        dir,
        'config',
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters:',
          '- name: test',
          '  cluster:',
          `    server: ${server.url}`,
          '    certificate-authority: pki/ca.crt',
          'users:',
          '- name: admin',
          '  user:',
          '    token: abc.def-123',
          'contexts:',
          '- name: test',
          '  context: {cluster: test, user: admin, namespace: team-a}',
          'current-context: test',
          '',
        ].join('\n'),
      );
      const kc = loadKubeconfig(isolated({ path: file }));
      assert.deepEqual(kc.getCurrentCluster(), { name: 'test', server: server.url, skipTLSVerify: false });
      assert.equal(kc.namespace, 'team-a');
      assert.equal(kc.currentContext, 'test');
      await get(kc);
      assert.equal(server.seen[0]?.authorization, 'Bearer abc.def-123');
    } finally {
      await server.close();
    }
  });

  test('without the CA the server certificate is refused; insecure-skip-tls-verify accepts it', async () => {
    const server = await apiServer(ipServing);
    try {
      const dir = tempDir();
      const plain = loadKubeconfig(
        isolated({ path: write(dir, 'plain', simpleConfig({ server: server.url })) }),
      );
      await assert.rejects(get(plain), /self-signed|unable to verify|certificate/);
      const insecure = loadKubeconfig(
        isolated({
          path: write(
            dir,
            'insecure',
            simpleConfig({ server: server.url, 'insecure-skip-tls-verify': true }),
          ),
        }),
      );
      await get(insecure);
      assert.equal(server.seen.length, 1);
    } finally {
      await server.close();
    }
  });

  test('certificate-authority-data and client-certificate-data/client-key-data (mutual TLS)', async () => {
    const server = await apiServer(ipServing, { clientCa: ca.cert });
    try {
      const file = write(
        tempDir(),
        'config',
        simpleConfig(
          { server: server.url, 'certificate-authority-data': b64(ca.cert) },
          { 'client-certificate-data': b64(client.cert), 'client-key-data': b64(client.key) },
        ),
      );
      await get(loadKubeconfig(isolated({ path: file })));
      assert.equal(server.seen[0]?.clientCN, 'client-of-test');
      assert.equal(server.seen[0]?.authorization, undefined);
    } finally {
      await server.close();
    }
  });

  test('client-certificate and client-key files, relative to the kubeconfig', async () => {
    const server = await apiServer(ipServing, { clientCa: ca.cert });
    try {
      const dir = tempDir();
      write(dir, 'certs/ca.pem', ca.cert);
      write(dir, 'certs/me.crt', client.cert);
      write(dir, 'certs/me.key', client.key);
      const file = write(
        dir,
        'config',
        simpleConfig(
          { server: server.url, 'certificate-authority': 'certs/ca.pem' },
          { 'client-certificate': 'certs/me.crt', 'client-key': './certs/me.key' },
        ),
      );
      // Loaded from another working directory: the paths follow the file, not the process.
      await get(loadKubeconfig(isolated({ path: path.relative(process.cwd(), file) })));
      assert.equal(server.seen[0]?.clientCN, 'client-of-test');
    } finally {
      await server.close();
    }
  });

  test('tls-server-name: the certificate is checked against that name, not the address', async () => {
    const server = await apiServer(nameServing);
    try {
      const dir = tempDir();
      const cluster = { server: server.url, 'certificate-authority-data': b64(ca.cert) };
      const wrong = loadKubeconfig(
        isolated({ path: write(dir, 'wrong', simpleConfig(cluster, { token: 't' })) }),
      );
      await assert.rejects(get(wrong), /127\.0\.0\.1|altnames|IP/);
      const named = loadKubeconfig(
        isolated({
          path: write(
            dir,
            'named',
            simpleConfig({ ...cluster, 'tls-server-name': 'kube.internal' }, { token: 't' }),
          ),
        }),
      );
      assert.equal(named.getCurrentCluster().tlsServerName, 'kube.internal');
      await get(named);
      assert.equal(server.seen[0]?.authorization, 'Bearer t');
    } finally {
      await server.close();
    }
  });

  test('username and password: basic authentication', async () => {
    const file = write(
      tempDir(),
      'config',
      simpleConfig({ server: 'https://127.0.0.1:1' }, { username: 'admin', password: 'p4ss:word' }),
    );
    const headers = await headersOf(loadKubeconfig(isolated({ path: file })));
    assert.equal(headers.authorization, `Basic ${b64('admin:p4ss:word')}`);
  });

  test('impersonation: as, as-groups, as-uid, as-user-extra', async () => {
    const server = await apiServer(ipServing);
    try {
      const file = write(
        tempDir(),
        'config',
        simpleConfig(
          { server: server.url, 'certificate-authority-data': b64(ca.cert) },
          {
            token: 't',
            as: 'jane',
            'as-groups': ['dev', 'ops'],
            'as-uid': '42',
            'as-user-extra': { 'example.com/team': ['a'] },
          },
        ),
      );
      const kc = loadKubeconfig(isolated({ path: file }));
      const headers = await headersOf(kc);
      assert.equal(headers['impersonate-uid'], '42');
      assert.deepEqual(headers['impersonate-extra-example.com%2Fteam'], ['a']);
      await get(kc);
      assert.equal(server.seen[0]?.impersonateUser, 'jane');
      assert.equal(server.seen[0]?.impersonateGroup, 'dev, ops');
    } finally {
      await server.close();
    }
  });

  test('tokenFile (relative) is read again whenever it changes', async () => {
    const dir = tempDir();
    const tokenFile = write(dir, 'secrets/token', 'first-token\n');
    const file = write(
      dir,
      'config',
      simpleConfig({ server: 'https://127.0.0.1:1' }, { tokenFile: 'secrets/token' }),
    );
    const kc = loadKubeconfig(isolated({ path: file }));
    assert.equal((await headersOf(kc)).authorization, 'Bearer first-token');
    assert.equal((await headersOf(kc)).authorization, 'Bearer first-token');
    // Rewritten in place, then replaced by a rename, as rotating writers do.
    writeFileSync(tokenFile, 'second-token-longer');
    assert.equal((await headersOf(kc)).authorization, 'Bearer second-token-longer');
    writeFileSync(`${tokenFile}.new`, 'third');
    renameSync(`${tokenFile}.new`, tokenFile);
    assert.equal((await headersOf(kc)).authorization, 'Bearer third');
  });

  test('a missing tokenFile, CA or client key file is a clear error naming the file', () => {
    const dir = tempDir();
    const cases: [object, object | undefined, RegExp][] = [
      [{ server: 'https://x' }, { tokenFile: 'nope' }, /token file .*nope: ENOENT/],
      [
        { server: 'https://x', 'certificate-authority': 'ca.crt' },
        undefined,
        /certificate authority .*ca\.crt: ENOENT/,
      ],
      [
        { server: 'https://x' },
        { 'client-certificate-data': b64(client.cert), 'client-key': 'k.pem' },
        /client key .*k\.pem: ENOENT/,
      ],
    ];
    cases.forEach(([cluster, user, want], i) => {
      const file = write(dir, `c${i}`, simpleConfig(cluster, user));
      assert.throws(() => loadKubeconfig(isolated({ path: file })), want);
    });
  });
});

describe('KubeHttp TLS', () => {
  test('one TLS context for many connections while the credentials stay the same; a rotated client certificate gets its own', async () => {
    const server = await apiServer(ipServing, { clientCa: ca.cert });
    const rotated = issueClientCertificate(ca, { commonName: 'rotated-client' });
    let current = client;
    // As client-node's KubeConfig does: fresh buffers of the same files on every call.
    const access: ClusterAccess = {
      getCurrentCluster: () => ({ name: 'c', server: server.url }),
      applyToHTTPSOptions: async (opts) => {
        opts.ca = Buffer.from(ca.cert);
        opts.cert = Buffer.from(current.cert);
        opts.key = Buffer.from(current.key);
      },
    };
    const created = { count: 0 };
    const original = tls.createSecureContext;
    tls.createSecureContext = (options) => {
      created.count++;
      return original(options);
    };
    const http = new KubeHttp(access);
    try {
      // In parallel, so that each opens its own connection.
      await Promise.all(Array.from({ length: 5 }, () => http.request('GET', '/version')));
      assert.equal(server.connections(), 5);
      assert.equal(created.count, 1);
      assert.deepEqual(new Set(server.seen.map((s) => s.clientCN)), new Set(['client-of-test']));
      current = rotated;
      await http.request('GET', '/version');
      assert.equal(created.count, 2);
      assert.equal(server.seen.at(-1)?.clientCN, 'rotated-client');
    } finally {
      tls.createSecureContext = original;
      http.close();
      await server.close();
    }
  });
});

describe('KUBECONFIG', () => {
  test('several files merge as kubectl merges them: the first definition of a name wins, missing files are skipped', async () => {
    const dir = tempDir();
    const first = write(dir, 'a/config', {
      clusters: [
        { name: 'shared', cluster: { server: 'https://first.example', 'certificate-authority': 'ca.crt' } },
      ],
      users: [{ name: 'me', user: { tokenFile: 'token' } }],
      contexts: [{ name: 'work', context: { cluster: 'shared', user: 'me', namespace: 'from-first' } }],
      'current-context': 'work',
    });
    write(dir, 'a/ca.crt', ca.cert);
    write(dir, 'a/token', 'token-of-a');
    const second = write(dir, 'b/config', {
      clusters: [
        { name: 'shared', cluster: { server: 'https://second.example' } },
        { name: 'other', cluster: { server: 'https://other.example' } },
      ],
      users: [{ name: 'me', user: { token: 'token-of-b' } }],
      contexts: [
        { name: 'work', context: { cluster: 'other', user: 'me', namespace: 'from-second' } },
        { name: 'play', context: { cluster: 'other', user: 'me' } },
      ],
      'current-context': 'play',
    });
    const missing = path.join(dir, 'missing/config');
    const kc = loadKubeconfig(isolated({ env: { KUBECONFIG: [missing, first, '', second].join(':') } }));
    assert.equal(kc.currentContext, 'work');
    assert.equal(kc.namespace, 'from-first');
    assert.equal(kc.getCurrentCluster().server, 'https://first.example');
    // The first file's relative token file, resolved against the first file's directory.
    assert.equal((await headersOf(kc)).authorization, 'Bearer token-of-a');

    // Without current-context in the first file, the second's applies; its names still lose to the first's.
    const noCurrent = write(dir, 'c/config', {
      clusters: [{ name: 'other', cluster: { server: 'https://third.example' } }],
      users: [{ name: 'me', user: { token: 'token-of-c' } }],
    });
    const kc2 = loadKubeconfig(isolated({ env: { KUBECONFIG: `${noCurrent}:${second}` } }));
    assert.equal(kc2.currentContext, 'play');
    assert.equal(kc2.getCurrentCluster().server, 'https://third.example');
    assert.equal((await headersOf(kc2)).authorization, 'Bearer token-of-c');
  });

  test('none of its files exists: a clear error', () => {
    assert.throws(
      () => loadKubeconfig(isolated({ env: { KUBECONFIG: '/nonexistent/a:/nonexistent/b' } })),
      /none of the files in KUBECONFIG exists \(\/nonexistent\/a:\/nonexistent\/b\)/,
    );
  });
});

describe('where the kubeconfig comes from', () => {
  const config = (server: string) => simpleConfig({ server }, { token: 't' });
  function serviceAccount(dir: string) {
    write(dir, 'token', 'sa-token');
    write(dir, 'namespace', 'paddock-system');
    write(dir, 'ca.crt', ca.cert);
    return dir;
  }
  const inClusterEnv = { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' };

  test('--kubeconfig, then KUBECONFIG, then ~/.kube/config, then the service account', () => {
    const dir = tempDir();
    const explicit = write(dir, 'explicit', config('https://explicit'));
    const fromEnv = write(dir, 'env', config('https://env'));
    const home = tempDir();
    write(home, '.kube/config', config('https://home'));
    const sa = serviceAccount(tempDir());
    const all = { home, serviceAccountDir: sa };
    const env = { ...inClusterEnv, KUBECONFIG: fromEnv };
    const server = (o: KubeconfigOptions) => loadKubeconfig(o).getCurrentCluster().server;
    assert.equal(server({ ...all, env, path: explicit }), 'https://explicit');
    assert.equal(server({ ...all, env }), 'https://env');
    assert.equal(server({ ...all, env: inClusterEnv }), 'https://home');
    // HOME from the environment when no home is given.
    assert.equal(server({ serviceAccountDir: sa, env: { ...inClusterEnv, HOME: home } }), 'https://home');
    assert.equal(server({ ...all, home: tempDir(), env: inClusterEnv }), 'https://10.0.0.1:443');
  });

  test('nothing at all: a clear error that names every place looked at', () => {
    const home = tempDir();
    assert.throws(
      () => loadKubeconfig({ env: {}, home, serviceAccountDir: '/nonexistent/sa' }),
      (err: Error) =>
        err instanceof KubeconfigError &&
        err.message.includes(path.join(home, '.kube/config')) &&
        err.message.includes('/nonexistent/sa/token') &&
        err.message.includes('KUBECONFIG'),
    );
  });

  test('--kubeconfig naming a missing file is an error even when others exist', () => {
    const home = tempDir();
    write(home, '.kube/config', config('https://home'));
    assert.throws(
      () => loadKubeconfig({ path: '/nonexistent/kc', home, env: {} }),
      /\/nonexistent\/kc does not exist/,
    );
  });
});

describe('in-cluster', () => {
  test('the service account: API server from the environment, its CA, namespace and token, re-read when the kubelet rotates it', async () => {
    const server = await apiServer(ipServing);
    try {
      // The kubelet's layout: token -> ..data/token, ..data -> a timestamped directory, swapped atomically.
      const sa = tempDir();
      const generation = (name: string, token: string) => {
        write(sa, `${name}/token`, token);
        write(sa, `${name}/namespace`, 'paddock-system');
        write(sa, `${name}/ca.crt`, ca.cert);
      };
      generation('..2026_01_01', 'sa-token-1');
      symlinkSync('..2026_01_01', path.join(sa, '..data'));
      for (const f of ['token', 'namespace', 'ca.crt']) symlinkSync(`..data/${f}`, path.join(sa, f));

      const env = { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(server.port) };
      const kc = loadKubeconfig({ env, home: tempDir(), serviceAccountDir: sa });
      assert.equal(kc.source, 'in-cluster');
      assert.equal(kc.namespace, 'paddock-system');
      assert.equal(kc.getCurrentCluster().server, server.url);
      await get(kc);
      assert.equal(server.seen.at(-1)?.authorization, 'Bearer sa-token-1');

      generation('..2026_01_02', 'sa-token-2');
      symlinkSync('..2026_01_02', path.join(sa, '..data_tmp'));
      renameSync(path.join(sa, '..data_tmp'), path.join(sa, '..data'));
      rmSync(path.join(sa, '..2026_01_01'), { recursive: true });
      await get(kc);
      assert.equal(server.seen.at(-1)?.authorization, 'Bearer sa-token-2');
    } finally {
      await server.close();
    }
  });

  test('an IPv6 service host is bracketed; missing KUBERNETES_SERVICE_* is a clear error', () => {
    const sa = tempDir();
    write(sa, 'token', 't');
    const kc = inClusterKubeconfig({
      env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' },
      serviceAccountDir: sa,
    });
    assert.equal(kc.getCurrentCluster().server, 'https://[fd00::1]:6443');
    assert.equal(kc.namespace, undefined);
    assert.throws(
      () => inClusterKubeconfig({ env: {}, serviceAccountDir: sa }),
      /KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set/,
    );
  });
});

/**
 * An exec credential plugin in `dir`: `plugin.sh` (so the kubeconfig can name it by a relative path)
 * runs `plugin.mjs`, which counts its runs, keeps its KUBERNETES_EXEC_INFO and argv, and answers
 * according to PLUGIN_MODE.
 */
function writePlugin(dir: string): void {
  write(
    dir,
    'plugin.mjs',
    `
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
const dir = ${JSON.stringify(dir)};
appendFileSync(join(dir, 'runs'), 'x');
const run = readFileSync(join(dir, 'runs'), 'utf8').length;
const info = JSON.parse(process.env.KUBERNETES_EXEC_INFO);
writeFileSync(join(dir, 'last-run.json'), JSON.stringify({ info, args: process.argv.slice(2) }));
const mode = process.env.PLUGIN_MODE ?? 'token';
if (mode === 'fail') {
  process.stdout.write(JSON.stringify({ status: { token: 'stdout-secret' } }));
  process.stderr.write('warming up\\nerror: the session expired, log in again\\n');
  process.exit(3);
}
if (mode === 'garbage') {
  process.stdout.write('token=garbage-secret');
  process.exit(0);
}
if (mode === 'hang') setInterval(() => {}, 1000);
else {
  const status = mode === 'cert'
    ? { clientCertificateData: readFileSync(join(dir, 'client.crt'), 'utf8'), clientKeyData: readFileSync(join(dir, 'client.key'), 'utf8') }
    : { token: 'exec-' + run + '-' + (process.env.PLUGIN_GREETING ?? '') };
  if (process.env.PLUGIN_EXPIRES) status.expirationTimestamp = process.env.PLUGIN_EXPIRES;
  process.stdout.write(JSON.stringify({ apiVersion: process.env.PLUGIN_API_VERSION ?? info.apiVersion, kind: 'ExecCredential', status }));
}
`,
  );
  write(dir, 'plugin.sh', `#!/bin/sh\nexec "${process.execPath}" "$(dirname "$0")/plugin.mjs" "$@"\n`, 0o755);
  chmodSync(path.join(dir, 'plugin.sh'), 0o755);
}

function execConfig(
  dir: string,
  exec: Record<string, unknown>,
  cluster: Record<string, unknown> = { server: 'https://127.0.0.1:1' },
): string {
  return write(
    dir,
    'config',
    simpleConfig(cluster, {
      exec: {
        apiVersion: 'client.authentication.k8s.io/v1',
        command: './plugin.sh',
        interactiveMode: 'Never',
        ...exec,
      },
    }),
  );
}
const runsOf = (dir: string) => {
  try {
    return readFileSync(path.join(dir, 'runs'), 'utf8').length;
  } catch {
    return 0;
  }
};

describe('exec credential plugins', () => {
  test('token: the command (relative to the kubeconfig) runs with its args, env and KUBERNETES_EXEC_INFO, once', async () => {
    for (const apiVersion of ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1']) {
      const dir = tempDir();
      writePlugin(dir);
      const file = execConfig(dir, {
        apiVersion,
        args: ['get-token', '--cluster', 'c'],
        env: [{ name: 'PLUGIN_GREETING', value: 'hi' }],
      });
      const kc = loadKubeconfig(isolated({ path: file }));
      assert.equal(runsOf(dir), 0, 'not run before it is needed');
      const [a, b] = await Promise.all([headersOf(kc), headersOf(kc)]);
      assert.equal(a.authorization, 'Bearer exec-1-hi');
      assert.equal(b.authorization, 'Bearer exec-1-hi');
      assert.equal((await headersOf(kc)).authorization, 'Bearer exec-1-hi', 'no expiry: kept');
      assert.equal(runsOf(dir), 1);
      assert.equal(kc.execRuns, 1);
      const last = JSON.parse(readFileSync(path.join(dir, 'last-run.json'), 'utf8'));
      assert.deepEqual(last.args, ['get-token', '--cluster', 'c']);
      assert.deepEqual(last.info, { apiVersion, kind: 'ExecCredential', spec: { interactive: false } });
    }
  });

  test('provideClusterInfo hands the plugin the cluster, with the exec extension as config', async () => {
    const dir = tempDir();
    writePlugin(dir);
    const file = execConfig(
      dir,
      { provideClusterInfo: true },
      {
        server: 'https://kube.example:6443',
        'certificate-authority-data': b64(ca.cert),
        'tls-server-name': 'kube.internal',
        extensions: [{ name: 'client.authentication.k8s.io/exec', extension: { audience: 'paddock' } }],
      },
    );
    await headersOf(loadKubeconfig(isolated({ path: file })));
    const last = JSON.parse(readFileSync(path.join(dir, 'last-run.json'), 'utf8'));
    assert.deepEqual(last.info.spec, {
      interactive: false,
      cluster: {
        server: 'https://kube.example:6443',
        'tls-server-name': 'kube.internal',
        'certificate-authority-data': b64(ca.cert),
        config: { audience: 'paddock' },
      },
    });
  });

  test('expirationTimestamp: kept until then, run again after', async () => {
    const dir = tempDir();
    writePlugin(dir);
    const T = Date.parse('2026-03-01T10:00:00Z');
    let now = T;
    const file = execConfig(dir, { env: [{ name: 'PLUGIN_EXPIRES', value: '2026-03-01T10:15:00Z' }] });
    const kc = loadKubeconfig(isolated({ path: file, now: () => now }));
    assert.equal((await headersOf(kc)).authorization, 'Bearer exec-1-');
    now = T + 14 * 60_000;
    assert.equal((await headersOf(kc)).authorization, 'Bearer exec-1-');
    assert.equal(runsOf(dir), 1);
    now = T + 15 * 60_000;
    assert.equal((await headersOf(kc)).authorization, 'Bearer exec-2-');
    assert.equal(runsOf(dir), 2);
  });

  test('client certificate from the plugin (mutual TLS)', async () => {
    const server = await apiServer(ipServing, { clientCa: ca.cert });
    try {
      const dir = tempDir();
      writePlugin(dir);
      write(dir, 'client.crt', client.cert);
      write(dir, 'client.key', client.key);
      const file = execConfig(
        dir,
        { env: [{ name: 'PLUGIN_MODE', value: 'cert' }] },
        { server: server.url, 'certificate-authority-data': b64(ca.cert) },
      );
      await get(loadKubeconfig(isolated({ path: file })));
      assert.equal(server.seen[0]?.clientCN, 'client-of-test');
      assert.equal(server.seen[0]?.authorization, undefined);
    } finally {
      await server.close();
    }
  });

  test('a failing plugin: an error naming the command and what it said on stderr, never its output', async () => {
    const dir = tempDir();
    writePlugin(dir);
    const kc = loadKubeconfig(
      isolated({
        path: execConfig(dir, { args: ['--secret-arg'], env: [{ name: 'PLUGIN_MODE', value: 'fail' }] }),
      }),
    );
    const err = await headersOf(kc).then(
      () => assert.fail('resolved'),
      (e: Error) => e,
    );
    assert.ok(err instanceof KubeconfigError);
    assert.match(
      err.message,
      new RegExp(`exec credential plugin "${path.join(dir, 'plugin.sh')}" failed with exit code 3`),
    );
    assert.match(err.message, /the session expired, log in again/);
    assert.doesNotMatch(err.message, /stdout-secret|--secret-arg/);

    // Through KubeHttp the request fails with the same words.
    const http = new KubeHttp(kc);
    await assert.rejects(http.request('GET', '/version'), /plugin\.sh" failed with exit code 3/);
    http.close();
  });

  test('unusable output, a wrong apiVersion, a missing command, a hang: clear errors without the output', async () => {
    const dir = tempDir();
    writePlugin(dir);
    const load = (exec: Record<string, unknown>) =>
      loadKubeconfig(isolated({ path: execConfig(dir, exec), execTimeoutMs: 1500 }));
    await assert.rejects(
      headersOf(load({ env: [{ name: 'PLUGIN_MODE', value: 'garbage' }] })),
      (e: Error) => {
        assert.match(e.message, /did not print an ExecCredential \(not JSON\)/);
        assert.doesNotMatch(e.message, /garbage-secret/);
        return true;
      },
    );
    await assert.rejects(
      headersOf(
        load({ env: [{ name: 'PLUGIN_API_VERSION', value: 'client.authentication.k8s.io/v1beta1' }] }),
      ),
      /apiVersion "client\.authentication\.k8s\.io\/v1beta1", expected client\.authentication\.k8s\.io\/v1/,
    );
    await assert.rejects(
      headersOf(load({ command: 'paddock-no-such-plugin', installHint: 'install it with: brew install x' })),
      /exec credential plugin "paddock-no-such-plugin" not found; install it with: brew install x/,
    );
    await assert.rejects(
      headersOf(load({ env: [{ name: 'PLUGIN_MODE', value: 'hang' }] })),
      /did not finish within 1500 ms/,
    );
  });

  test('configuration errors at load: apiVersion, interactiveMode Always', () => {
    const dir = tempDir();
    assert.throws(
      () =>
        loadKubeconfig(
          isolated({ path: execConfig(dir, { apiVersion: 'client.authentication.k8s.io/v1alpha1' }) }),
        ),
      /apiVersion "client\.authentication\.k8s\.io\/v1alpha1"; paddock supports/,
    );
    assert.throws(
      () => loadKubeconfig(isolated({ path: execConfig(dir, { interactiveMode: 'Always' }) })),
      /interactiveMode is Always/,
    );
  });
});

describe('refused configurations: clear errors that never quote a credential', () => {
  const secret = 'very-secret-value';
  const cases: [string, object, RegExp][] = [
    [
      'auth-provider',
      simpleConfig(
        { server: 'https://x' },
        { 'auth-provider': { name: 'gcp', config: { 'access-token': secret } } },
      ),
      /user "u" .* uses the auth-provider "gcp", which paddock does not support: use an exec credential plugin/,
    ],
    [
      'proxy-url',
      simpleConfig(
        { server: 'https://x', 'proxy-url': `http://user:${secret}@proxy:3128` },
        { token: secret },
      ),
      /cluster "c" .* sets proxy-url, which paddock does not support/,
    ],
    [
      'token and basic',
      simpleConfig({ server: 'https://x' }, { token: secret, username: 'a', password: secret }),
      /sets both a token and a username\/password/,
    ],
    [
      'certificate without key',
      simpleConfig({ server: 'https://x' }, { 'client-certificate-data': b64(secret) }),
      /client certificate without a key/,
    ],
    [
      'no current-context',
      { clusters: [{ name: 'c', cluster: { server: 'https://x' } }] },
      /no current-context is set/,
    ],
    [
      'unknown current-context',
      { ...simpleConfig({ server: 'https://x' }), 'current-context': 'nope' },
      /current-context "nope" is not among the contexts/,
    ],
    [
      'unknown cluster',
      { contexts: [{ name: 'm', context: { cluster: 'gone' } }], 'current-context': 'm' },
      /cluster "gone" is not defined/,
    ],
    [
      'unknown user',
      {
        clusters: [{ name: 'c', cluster: { server: 'https://x' } }],
        contexts: [{ name: 'm', context: { cluster: 'c', user: 'gone' } }],
        'current-context': 'm',
      },
      /user "gone" is not defined/,
    ],
    ['no server', simpleConfig({}), /cluster "c" .* has no server/],
    ['server not a URL', simpleConfig({ server: `${secret} nope` }), /server is not a URL/],
    [
      'token not a string',
      simpleConfig({ server: 'https://x' }, { token: { nested: secret } }),
      /token must be a string/,
    ],
  ];
  for (const [name, config, want] of cases) {
    test(name, () => {
      const file = write(tempDir(), 'config', config);
      assert.throws(
        () => loadKubeconfig(isolated({ path: file })),
        (err: Error) => {
          assert.ok(err instanceof KubeconfigError, String(err));
          assert.match(err.message, want);
          assert.ok(!err.message.includes(secret), `no secret in: ${err.message}`);
          assert.ok(!err.message.includes(b64(secret)), `no secret in: ${err.message}`);
          return true;
        },
      );
    });
  }

  test('only the current context is checked: other entries may use what paddock does not support', () => {
    const file = write(tempDir(), 'config', {
      clusters: [
        { name: 'c', cluster: { server: 'https://x' } },
        { name: 'proxied', cluster: { server: 'https://y', 'proxy-url': 'http://p' } },
      ],
      users: [
        { name: 'u', user: { token: 't' } },
        { name: 'gcp', user: { 'auth-provider': { name: 'gcp' } } },
      ],
      contexts: [
        { name: 'main', context: { cluster: 'c', user: 'u' } },
        { name: 'old', context: { cluster: 'proxied', user: 'gcp' } },
      ],
      'current-context': 'main',
    });
    assert.equal(loadKubeconfigFiles([file]).getCurrentCluster().server, 'https://x');
  });

  test('a JSON kubeconfig is read without loading the YAML parser; flow-style YAML that starts with a brace is still YAML', () => {
    const dir = tempDir();
    const json = write(dir, 'json', simpleConfig({ server: 'https://x' }));
    const script = `
      import { createRequire } from 'node:module';
      const { loadKubeconfigFiles } = await import(${JSON.stringify(new URL('./kubeconfig.ts', import.meta.url).href)});
      const server = loadKubeconfigFiles([process.argv[1]]).getCurrentCluster().server;
      const yamlLoaded = Object.keys(createRequire(import.meta.url).cache).some((k) => k.includes('/node_modules/yaml/'));
      process.stdout.write(JSON.stringify({ server, yamlLoaded }));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script, json], {
      encoding: 'utf8',
    });
    assert.deepEqual(JSON.parse(out), { server: 'https://x', yamlLoaded: false });

    const flow = write(
      dir,
      'flow',
      '{apiVersion: v1, current-context: main, clusters: [{name: c, cluster: {server: "https://x"}}], contexts: [{name: main, context: {cluster: c}}]}\n',
    );
    assert.equal(loadKubeconfigFiles([flow]).getCurrentCluster().server, 'https://x');
    assert.throws(() => loadKubeconfigFiles([write(dir, 'broken', '{"clusters": [\n')]), /is not valid YAML/);
  });

  test('not YAML, not a mapping, an entry without a name', () => {
    const dir = tempDir();
    assert.throws(
      () => loadKubeconfig(isolated({ path: write(dir, 'a', 'clusters: [\n') })),
      /is not valid YAML/,
    );
    assert.throws(() => loadKubeconfig(isolated({ path: write(dir, 'b', '- 1\n') })), /is not a kubeconfig/);
    assert.throws(
      () => loadKubeconfig(isolated({ path: write(dir, 'c', { users: [{ user: { token: secret } }] }) })),
      (e: Error) => /users\[0\] has no name/.test(e.message) && !e.message.includes(secret),
    );
  });
});
