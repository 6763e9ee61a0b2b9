import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  assembleImage,
  disposeStage,
  type ImageResult,
  type Stage,
  stageImage,
} from '../hack/image/build.ts';
import { RUNNER_DEPLOYMENTS, RUNNERS, type Runner } from '../src/api/index.ts';
import { PADDOCK_NODE_FLAGS } from '../src/cli/node-flags.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { PODS } from '../src/runtime/resources.ts';
import { NodeAgent, type PodObject } from '../src/sandbox/node-agent.ts';
import { freePort } from '../src/testenv/control-plane.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import {
  chrootUnavailable,
  type ImageProcess,
  leftovers,
  runImage,
  runImageToEnd,
  type UnpackedImage,
  unpackOciArchive,
} from './support/image.ts';
import { deleteTestWebhookConfiguration } from './support/paddock.ts';

/**
 * The container image (`make image`), checked the way a user would: built with the code `make image`
 * runs, unpacked from the archive alone, and run — its entry point, user, working directory and
 * environment from its config — in a chroot with a read-only root file system (test/support/image.ts;
 * `podman run` does not work on these machines). `paddock run` from the image then works against
 * the test control plane and the GitHub double.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const unavailable = chrootUnavailable();
// Counted as a skipped test (a skipped suite alone would not show in the totals).
if (unavailable)
  test('container image', { skip: `cannot run the image here: ${unavailable}` }, () => undefined);

describe('container image', {
  skip: unavailable ? `cannot run the image here: ${unavailable}` : false,
}, () => {
  const ns = namespaceFixture('t-image');
  let dir: string;
  let stage: Stage | undefined;
  let built: ImageResult;
  let image: UnpackedImage;
  const running: ImageProcess[] = [];

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'paddock-image-test-'));
    const started = Date.now();
    stage = await stageImage({ root, log: () => undefined });
    const staged = Date.now();
    built = await assembleImage(stage, { outFile: path.join(dir, 'paddock.oci.tar') });
    process.stderr.write(
      `[image] staged in ${staged - started} ms, assembled in ${Date.now() - staged} ms: ` +
        `${built.manifestDigest}, ${(built.compressedSize / 1048576).toFixed(1)} MiB compressed\n`,
    );
    image = await unpackOciArchive(built.archive, path.join(dir, 'image'));
  });

  after(async () => {
    for (const p of running) p.child.kill('SIGKILL');
    await Promise.all(running.map((p) => p.exited));
    if (stage) await disposeStage(stage);
    if (!dir) return;
    // The mounts lived in the processes' own namespaces; nothing of them may be left before rm -rf.
    const left = leftovers(path.join(dir, 'image', 'rootfs'));
    if (left.processes.length || left.mounts.length) {
      throw new Error(
        `left behind: processes ${left.processes}, mount tables of ${left.mounts}; not removing ${dir}`,
      );
    }
    await rm(dir, { recursive: true, force: true });
  });

  /** A fresh /tmp for one run (an emptyDir). */
  const tmpDir = async (name: string) => {
    const d = path.join(dir, 'tmp', name);
    await mkdir(d, { recursive: true });
    return d;
  };

  test('the same inputs give the same archive, byte for byte', async () => {
    const again = await assembleImage(stage!, { outFile: path.join(dir, 'again.oci.tar') });
    assert.equal(again.manifestDigest, built.manifestDigest);
    assert.deepEqual(
      again.layers.map((l) => l.digest),
      built.layers.map((l) => l.digest),
    );
    assert.ok((await readFile(again.archive)).equals(await readFile(built.archive)), 'identical archives');
    await rm(again.archive);
  });

  test('the archive names its image; the config: non-root user, paddock as entry point, labels, no build paths', () => {
    assert.equal(image.manifestDigest, built.manifestDigest);
    assert.equal(image.refName, `paddock:${stage!.version}`);
    const { config } = image;
    assert.equal(config.architecture, 'amd64');
    assert.equal(config.os, 'linux');
    assert.equal(config.config.User, '65532:65532');
    assert.equal(config.config.WorkingDir, '/app');
    assert.deepEqual(config.config.Entrypoint, [
      '/usr/local/bin/node',
      ...PADDOCK_NODE_FLAGS,
      '/app/bin/paddock.js',
    ]);
    assert.deepEqual(config.config.Cmd, ['run']);
    assert.deepEqual(config.config.Env, [
      'PATH=/usr/local/bin:/usr/bin:/bin',
      'NODE_ENV=production',
      'MALLOC_ARENA_MAX=2',
    ]);
    const labels = config.config.Labels ?? {};
    assert.equal(labels['org.opencontainers.image.version'], stage!.version);
    assert.equal(labels['org.opencontainers.image.revision'], stage!.revision);
    assert.equal(labels['org.opencontainers.image.licenses'], 'Apache-2.0');
    assert.equal(config.created, new Date(stage!.epoch * 1000).toISOString().replace('.000Z', 'Z'));
    const text = JSON.stringify(config);
    for (const p of [root, stage!.dir, dir, `${os.homedir()}/`]) {
      assert.ok(!text.includes(p), `no ${p} in the config`);
    }
    // Big and rarely changing first: Debian libraries, Node.js, node_modules, then paddock itself.
    const has = (i: number, p: string) => image.layerPaths[i]?.includes(p);
    assert.ok(has(0, 'lib/x86_64-linux-gnu/libc.so.6') && has(0, 'etc/passwd'));
    assert.ok(has(1, 'usr/local/bin/node'));
    assert.ok(has(2, 'app/node_modules/@kubernetes/client-node/package.json'));
    assert.ok(has(3, 'app/dist/cli/main.js') && has(3, 'app/bin/paddock.js') && has(3, 'app/package.json'));
    assert.ok(has(3, 'app/config/crd/actions.summerwind.dev_runners.yaml'), 'the CRDs, for --install-crds');
    assert.ok(!image.layerPaths.flat().some((p) => p.endsWith('.d.ts') || p.endsWith('.js.map')));
    assert.ok(!image.layerPaths.flat().some((p) => p.startsWith('usr/local/include') || p.includes('/npm/')));
  });

  test('paddock --version and --help from the image', async () => {
    const version = await runImageToEnd(image, {
      hostTmp: await tmpDir('version'),
      launcherDir: dir,
      args: ['--version'],
    });
    assert.equal(version.code, 0, version.err);
    assert.equal(version.out.trim(), `paddock ${stage!.version}`);
    const help = await runImageToEnd(image, {
      hostTmp: await tmpDir('help'),
      launcherDir: dir,
      args: ['--help'],
    });
    assert.equal(help.code, 0, help.err);
    assert.match(help.out, /^ {2}run {7}/m);
    assert.equal(help.err, '');
  });

  test('every production dependency loads from the image (nothing needed was stripped)', async () => {
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const names = Object.keys(pkg.dependencies);
    const script = `for (const n of ${JSON.stringify(names)}) await import(n); console.log('loaded', ${names.length});`;
    const r = await runImageToEnd(image, {
      hostTmp: await tmpDir('deps'),
      launcherDir: dir,
      entrypoint: ['/usr/local/bin/node', '--input-type=module', '-e', script],
      args: [],
    });
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out.trim(), `loaded ${names.length}`);
  });

  describe('paddock run from the image', () => {
    const double = new GitHubDouble();
    let http: KubeHttp;
    let agent: NodeAgent | undefined;
    let paddock: ImageProcess | undefined;
    let hostTmp: string;
    let probePort: number;
    let stopping = false;
    /** Set when paddock exits before the test stops it. */
    let earlyExit: string | undefined;
    let exited = false;
    /** `eventually`, but failing at once when paddock has exited. */
    const untilExit = async <T>(
      what: string,
      fn: () => Promise<T | undefined | false>,
      timeoutMs: number,
      intervalMs: number,
    ): Promise<T> => {
      const r = await eventually(
        what,
        async () => {
          if (exited) return { exited: true as const };
          const value = await fn();
          return value === undefined || value === false ? undefined : { value };
        },
        timeoutMs,
        intervalMs,
      );
      if ('exited' in r) throw new Error(earlyExit ?? 'paddock exited');
      return r.value;
    };

    before(async () => {
      double.cacheMaxAgeSeconds = 1;
      await double.start();
      double.addOrg('acme');
      http = new KubeHttp(ns.cluster.kubeConfig);
    });
    after(async () => {
      paddock?.child.kill('SIGKILL');
      await paddock?.exited;
      await agent?.stop();
      await deleteTestWebhookConfiguration(ns.cluster.kubeConfig, ns.name);
      await http
        ?.request('DELETE', resourcePath(PODS, ns.name), { query: { gracePeriodSeconds: 0 } })
        .catch(() => undefined);
      http?.close();
      await double.stop();
    });

    /** The test cluster's kubeconfig with the CA inline, readable by the image's user only. */
    const writeKubeconfig = async (file: string) => {
      const kc = ns.cluster.kubeConfig;
      const cluster = kc.getCurrentCluster()!;
      const user = kc.getCurrentUser()!;
      const ca = cluster.caData ?? (cluster.caFile ? readFileSync(cluster.caFile).toString('base64') : '');
      const yaml = [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        `- name: test\n  cluster:\n    server: ${JSON.stringify(cluster.server)}`,
        ca ? `    certificate-authority-data: ${ca}` : '    insecure-skip-tls-verify: true',
        'users:',
        `- name: test\n  user:\n    token: ${JSON.stringify(user.token)}`,
        'contexts:',
        '- name: test\n  context: {cluster: test, user: test}',
        'current-context: test',
        '',
      ].join('\n');
      await writeFile(file, yaml, { mode: 0o400 });
      await chown(file, 65532, 65532);
    };

    test('starts, becomes ready, runs as 65532 with only the given environment and writes nothing', async () => {
      hostTmp = await tmpDir('run');
      await writeKubeconfig(path.join(hostTmp, 'kubeconfig'));
      probePort = await freePort();
      const webhookPort = await freePort();
      const { token } = double.addToken();
      paddock = await runImage(image, {
        hostTmp,
        launcherDir: dir,
        args: [
          'run',
          '--watch-namespace',
          ns.name,
          '--metrics-addr',
          '0',
          '--health-probe-addr',
          `127.0.0.1:${probePort}`,
          '--webhook-addr',
          `127.0.0.1:${webhookPort}`,
          '--webhook-url',
          `https://127.0.0.1:${webhookPort}`,
          '--sync-period',
          '5s',
          '--registration-recheck-interval',
          '1s',
          '--registration-recheck-jitter',
          '100ms',
        ],
        env: {
          KUBECONFIG: '/tmp/kubeconfig',
          GITHUB_TOKEN: token,
          GITHUB_URL: double.apiUrl,
          LOG_LEVEL: 'info',
        },
      });
      running.push(paddock);
      const p = paddock;
      const why = () => `\nstdout:\n${p.out().slice(-3000)}\nstderr:\n${p.err().slice(-3000)}`;
      p.exited.then(({ code, signal }) => {
        exited = true;
        if (!stopping) earlyExit = `paddock exited early (${code ?? signal})${why()}`;
      });
      await untilExit(
        '/readyz from paddock in the image',
        async () => (await fetch(`http://127.0.0.1:${probePort}/readyz`)).status === 200,
        60_000,
        250,
      ).catch((e) => {
        throw new Error(`${(e as Error).message}${why()}`);
      });
      // /readyz can answer (caches synced) a moment before the start-up line is logged.
      await untilExit(
        'the "paddock started" log line',
        async () => /"msg":"paddock started"/.test(p.out()),
        10_000,
        50,
      );

      const status = readFileSync(`/proc/${p.pid}/status`, 'utf8');
      const line = (k: string) =>
        status
          .split('\n')
          .find((l) => l.startsWith(`${k}:`))
          ?.split(/\s+/)
          .slice(1);
      assert.deepEqual(line('Uid'), ['65532', '65532', '65532', '65532']);
      assert.deepEqual(line('Gid'), ['65532', '65532', '65532', '65532']);
      assert.deepEqual(line('Groups')?.filter(Boolean), ['65532']);
      assert.equal(line('CapEff')?.[0], '0000000000000000', 'no capabilities');
      // The image's entry point: node, its flags (PADDOCK_NODE_FLAGS), paddock.
      assert.deepEqual(
        readFileSync(`/proc/${p.pid}/cmdline`, 'utf8')
          .split('\0')
          .slice(0, 3 + PADDOCK_NODE_FLAGS.length),
        ['/usr/local/bin/node', ...PADDOCK_NODE_FLAGS, '/app/bin/paddock.js', 'run'],
      );
      const environ = readFileSync(`/proc/${p.pid}/environ`, 'utf8').split('\0').filter(Boolean);
      assert.deepEqual(environ.map((e) => e.split('=')[0]).sort(), [
        'GITHUB_TOKEN',
        'GITHUB_URL',
        'KUBECONFIG',
        'LOG_LEVEL',
        'MALLOC_ARENA_MAX',
        'NODE_ENV',
        'PATH',
      ]);
    });

    test('does real work: a RunnerDeployment gets its runner pod, registered with GitHub', async () => {
      assert.ok(paddock, 'paddock is running');
      agent = new NodeAgent({
        http,
        namespace: ns.name,
        double,
        startupDelayMs: 300,
        registrationDelayMs: 100,
        assignIntervalMs: 100,
        nodeCount: 1,
        nodePrefix: `${ns.name}-node-`,
        jobDurationMs: 300,
      });
      await agent.start();
      await http.request('POST', resourcePath(RUNNER_DEPLOYMENTS, ns.name), {
        body: {
          apiVersion: 'actions.summerwind.dev/v1alpha1',
          kind: 'RunnerDeployment',
          metadata: { name: 'from-image' },
          spec: { replicas: 1, template: { spec: { organization: 'acme' } } },
        },
      });
      const p = paddock;
      assert.equal(earlyExit, undefined);
      const runner = await untilExit(
        'a Running Runner whose pod is registered online',
        async () => {
          const runners = (await http.request<{ items: Runner[] }>('GET', resourcePath(RUNNERS, ns.name)))
            .items;
          const r = runners.find((x) => x.status?.phase === 'Running' && x.status.ready === true);
          if (!r) return undefined;
          const pod = await http
            .request<PodObject>('GET', resourcePath(PODS, ns.name, r.metadata.name))
            .catch(() => undefined);
          const online = double
            .runners('orgs/acme')
            .find((x) => x.name === r.metadata.name && x.status === 'online');
          return pod && online && r;
        },
        90_000,
        250,
      ).catch((e) => {
        throw new Error(
          `${(e as Error).message}\nGitHub: ${double.runners().map((r) => `${r.name}(${r.status})`)}\n` +
            `paddock log:\n${p.out().slice(-4000)}\n${p.err().slice(-2000)}`,
        );
      });
      assert.ok(runner.metadata.name?.startsWith('from-image-'), runner.metadata.name);
    });

    test('stops on SIGTERM with exit code 0, leaving no process and no mount; wrote nothing but its kubeconfig', async () => {
      assert.ok(paddock, 'paddock is running');
      assert.equal(earlyExit, undefined);
      const p = paddock;
      stopping = true;
      p.child.kill('SIGTERM');
      const timer = setTimeout(() => p.child.kill('SIGKILL'), 30_000);
      const { code, signal } = await p.exited;
      clearTimeout(timer);
      assert.equal(signal, null, `exited by ${signal}`);
      assert.equal(code, 0, p.err().slice(-3000));
      assert.throws(() => process.kill(p.pid, 0), /ESRCH/);
      assert.deepEqual(leftovers(image.rootfs), { processes: [], mounts: [] });
      // Read-only root: a write anywhere but /tmp would have failed loudly; and /tmp holds only ours.
      assert.deepEqual(readdirSync(hostTmp), ['kubeconfig']);
      assert.doesNotMatch(p.out() + p.err(), /EROFS|read-only file system/i);
      assert.equal(p.err(), '');
    });
  });
});
