import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseFlags } from '../src/cli/flags.ts';
import { runConfig, startPaddock } from '../src/cli/run.ts';
import { RUN_FLAGS } from '../src/cli/run-flags.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { createLogger } from '../src/runtime/log.ts';
import { freePort, startControlPlane } from '../src/testenv/control-plane.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import {
  DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME,
  DEFAULT_WEBHOOK_CONFIGURATION_NAME,
} from '../src/webhooks/configuration.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { deleteTestWebhookConfiguration, startTestPaddock } from './support/paddock.ts';
import { duplicateKeys } from './support/strict-json.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'bin/paddock.js');

function paddock(args: string[], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, [bin, ...args], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<number>((resolve) =>
    // 'close': after the output, which may arrive after 'exit'.
    child.on('close', (code, signal) => resolve(code ?? (signal ? 128 : 0))),
  );
  return { child, exited, out: () => stdout, err: () => stderr };
}

/** Each line is one JSON object with no key twice at any depth; returns the parsed lines. */
function strictJsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line) => {
      let dups: string[];
      try {
        dups = duplicateKeys(line);
      } catch (err) {
        throw new Error(`not JSON (${(err as Error).message}): ${line}`);
      }
      assert.deepEqual(dups, [], `duplicate keys ${dups.join(', ')} in ${line}`);
      const value = JSON.parse(line) as unknown;
      assert.ok(
        value !== null && typeof value === 'object' && !Array.isArray(value),
        `not an object: ${line}`,
      );
      return value as Record<string, unknown>;
    });
}

describe('strict JSON checker (JSON.parse keeps the last of two equal keys without a word)', () => {
  const cases: { text: string; want: string[] }[] = [
    { text: '{"a":1,"b":2}', want: [] },
    { text: '{"a":1,"a":2}', want: ['$.a'] },
    { text: '{"a":1,"\\u0061":2}', want: ['$.a'] },
    { text: '{"a":{"b":1,"c":{"d":1,"d":2}},"b":{"b":1,"b":1}}', want: ['$.a.c.d', '$.b.b'] },
    { text: '[{"k":1},{"k":2}]', want: [] },
    { text: '{"l":[{"k":1,"k":2}]}', want: ['$.l[0].k'] },
    { text: ' { "s" : "a \\" quote, \\u00e9" , "n" : -1.5e3 , "t" : [true,false,null] } ', want: [] },
  ];
  for (const c of cases) {
    test(c.text, () => {
      assert.deepEqual(duplicateKeys(c.text), c.want);
    });
  }
  for (const bad of [
    '{"a":1,}',
    '{"a":1} x',
    "{'a':1}",
    '{"a":01}',
    '{"a"}',
    '',
    '{"a":"\n"}', // a raw line break inside a string
  ]) {
    test(`refuses ${JSON.stringify(bad)}`, () => {
      assert.throws(() => duplicateKeys(bad), SyntaxError);
    });
  }
});

describe('paddock run', () => {
  const ns = namespaceFixture('t-cli');
  const double = new GitHubDouble();
  let kubeconfig: string;
  let token: string;
  const children: ChildProcess[] = [];

  before(async () => {
    await double.start();
    double.addOrg('acme');
    token = double.addToken().token;
    kubeconfig = process.env.PADDOCK_TEST_KUBECONFIG ?? '';
  });
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    await double.stop();
  });

  test('--help explains every flag with its environment variable', async () => {
    const p = paddock(['run', '--help']);
    assert.equal(await p.exited, 0);
    for (const flag of [
      '--github-url',
      '--sync-period',
      '--watch-namespace',
      '--runner-image',
      '--docker-image',
      '--leader-elect',
      '--metrics-addr',
      '--health-probe-addr',
      '--registration-timeout',
      '--force-delete-timeout',
    ]) {
      assert.ok(p.out().includes(flag), `${flag} documented`);
    }
    assert.match(p.out(), /env GITHUB_TOKEN/);
    // In a pod the kubelet probes the pod IP: every interface, as ARC and kubebuilder default to.
    assert.match(p.out(), /env METRICS_ADDR; default :8080\)/);
    assert.match(p.out(), /env HEALTH_PROBE_ADDR; default :8081\)/);
  });

  /** `paddock run` on this namespace, no listening ports unless `args` name one; resolves once started. */
  async function startRun(args: string[] = []) {
    const p = paddock(
      [
        'run',
        '--watch-namespace',
        ns.name,
        '--metrics-addr',
        '0',
        '--health-probe-addr',
        '0',
        '--webhook-addr',
        '0',
        ...args,
      ],
      { KUBECONFIG: kubeconfig!, GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl, LOG_LEVEL: 'info' },
    );
    children.push(p.child);
    await eventually('started', async () => p.out().includes('paddock started'), 30_000);
    return p;
  }

  test('starts against the control plane and the GitHub double, serves probes, stops on SIGTERM', async (t) => {
    if (!kubeconfig) return t.skip('needs the shared control plane of test/run.ts');
    const port = await freePort();
    const p = await startRun(['--install-crds', '--metrics-addr', `127.0.0.1:${port}`]);
    const line = JSON.parse(
      p
        .out()
        .split('\n')
        .find((l) => l.includes('paddock started'))!,
    );
    assert.equal(line.level, 'info');
    assert.equal(line.namespace, ns.name);
    assert.ok(!p.out().includes(token), 'the token never reaches the logs');
    strictJsonLines(p.out());
    assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
    await eventually('ready', async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    assert.match(metrics, /github_rate_limit\{/);
    assert.match(metrics, /workqueue_depth/);
    // The start's steps: in the log once ready, and on /metrics.
    await eventually('ready logged', async () => p.out().includes('"paddock ready"'));
    const ready = JSON.parse(
      p
        .out()
        .split('\n')
        .find((l) => l.includes('"paddock ready"'))!,
    ) as { startupMs: Record<string, number> };
    const steps = ready.startupMs;
    for (const step of [
      'node.js bootstrapped',
      'code loaded',
      'caches started',
      'kubernetes api answered',
      'github credentials checked',
      'cache synced: pods (actions-runner)',
      'caches synced',
      'probes served',
      'ready',
    ]) {
      assert.equal(typeof steps[step], 'number', `${step} in ${JSON.stringify(steps)}`);
    }
    const at = (step: string) => steps[step] as number;
    assert.ok(at('node.js bootstrapped') <= at('code loaded') && at('code loaded') <= at('caches started'));
    assert.ok(at('cache synced: pods (actions-runner)') <= at('caches synced'));
    for (const [step, ms] of Object.entries(steps)) assert.ok(ms <= at('ready'), `${step} before ready`);
    assert.deepEqual(
      Object.values(steps),
      [...Object.values(steps)].sort((a, b) => a - b),
      'in time order',
    );
    assert.ok(
      metrics.includes(`process_startup_step_seconds{step="ready"} ${at('ready') / 1000}\n`),
      'the same figure on /metrics',
    );
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
  });

  test('every log line of a start, some work and a stop is one JSON object without duplicate keys', async () => {
    const lines: string[] = [];
    const { values } = parseFlags(
      RUN_FLAGS,
      [
        '--watch-namespace',
        ns.name,
        '--leader-elect',
        '--leader-election-namespace',
        ns.name,
        '--leader-election-id',
        'paddock-logs',
        '--metrics-addr',
        '127.0.0.1:0',
        '--health-probe-addr',
        '0',
        '--webhook-addr',
        '127.0.0.1:0',
        '--webhook-url',
        'https://127.0.0.1:0',
        '--install-crds',
      ],
      { GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl },
    );
    const log = createLogger({
      level: 'debug',
      destination: { write: (chunk: string) => lines.push(chunk) } as never,
    });
    const paddock = await startPaddock(runConfig(values), { kubeConfig: ns.cluster.kubeConfig, log });
    try {
      await eventually('leading', async () => paddock.manager.isLeader);
      // A RunnerSet, so reconciles log too (with the controller's object bindings).
      await paddock.manager.http.request(
        'POST',
        `/apis/actions.summerwind.dev/v1alpha1/namespaces/${ns.name}/runnersets`,
        {
          body: {
            apiVersion: 'actions.summerwind.dev/v1alpha1',
            kind: 'RunnerSet',
            metadata: { name: 'logs' },
            spec: {
              replicas: 1,
              organization: 'acme',
              selector: { matchLabels: { app: 'logs' } },
              serviceName: 'logs',
              template: { metadata: { labels: { app: 'logs' } }, spec: { containers: [{ name: 'runner' }] } },
            },
          },
        },
      );
      await eventually('a reconcile logged', async () =>
        lines.some((l) => l.includes('"controller":"runnerset-controller"') && l.includes('"name":"logs"')),
      );
    } finally {
      await paddock.stop();
      await deleteTestWebhookConfiguration(ns.cluster.kubeConfig, ns.name);
    }
    const records = strictJsonLines(lines.join(''));
    // The lines that used to repeat a key are among those checked.
    const has = (what: string, fn: (r: Record<string, unknown>) => boolean) =>
      assert.ok(records.some(fn), `a ${what} line was logged`);
    has('GitHub client', (r) => r.component === 'github' && r.credential !== undefined);
    has('webhook server', (r) => r.component === 'webhook-server');
    has('reconcile', (r) => r.controller === 'runnerset-controller' && r.name === 'logs');
    has('leader election', (r) => r.msg === 'released the lease');
    has('paddock started', (r) => r.msg === 'paddock started');
  });

  test('unusable credentials: a clear message and exit code 2', async (t) => {
    if (!kubeconfig) return t.skip('needs the shared control plane of test/run.ts');
    const p = paddock(['run', '--metrics-addr', '0', '--health-probe-addr', '0'], {
      KUBECONFIG: kubeconfig,
      GITHUB_TOKEN: 'ghp_wrong',
      GITHUB_URL: double.apiUrl,
    });
    assert.equal(await p.exited, 2);
    assert.match(
      p.err(),
      /GitHub credentials do not work against http:\/\/127\.0\.0\.1:\d+: .*Bad credentials/,
    );
    assert.ok(!p.err().includes('ghp_wrong'));
  });

  test('refused credentials: the webhook started meanwhile is stopped and publishes no configuration', async (t) => {
    if (!kubeconfig) return t.skip('needs the shared control plane of test/run.ts');
    // A GitHub that refuses the token only after 1.5 s: the webhook's certificates and server are up
    // before the check fails. (The double authenticates before any injected latency.)
    const slowRefusal = http.createServer((_req, res) => {
      setTimeout(() => {
        res.writeHead(401, { 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON.stringify({ message: 'Bad credentials', status: '401' }));
      }, 1_500);
    });
    await new Promise<void>((resolve) => slowRefusal.listen(0, '127.0.0.1', resolve));
    t.after(() => {
      slowRefusal.closeAllConnections();
      slowRefusal.close();
    });
    const githubUrl = `http://127.0.0.1:${(slowRefusal.address() as net.AddressInfo).port}`;
    const port = await freePort();
    // The test helper's paddock, with the webhook on a port that stays the same across its starts.
    const start = (env: Record<string, string>) =>
      startTestPaddock({
        kubeConfig: ns.cluster.kubeConfig,
        namespace: ns.name,
        env,
        flags: ['--webhook-addr', `127.0.0.1:${port}`, '--webhook-url', `https://127.0.0.1:${port}`],
        logLevel: 'silent',
      });
    const refusedStart = () => {
      const starting = start({ GITHUB_TOKEN: 'ghp_wrong', GITHUB_URL: githubUrl });
      starting.catch(() => undefined);
      return starting;
    };
    const starting = refusedStart();
    const listening = () =>
      new Promise<boolean>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => {
          socket.destroy();
          resolve(true);
        });
        socket.on('error', () => resolve(false));
      });
    await eventually('the webhook listening while GitHub is checked', listening, 10_000);
    await assert.rejects(starting, /GitHub credentials do not work/);
    assert.equal(await listening(), false, 'the webhook server is stopped');
    const kube = new KubeHttp(ns.cluster.kubeConfig);
    t.after(() => kube.close());
    for (const kind of ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations']) {
      for (const name of [DEFAULT_WEBHOOK_CONFIGURATION_NAME, DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME]) {
        await assert.rejects(
          kube.request('GET', `/apis/admissionregistration.k8s.io/v1/${kind}/${name}-${ns.name}`),
          (err: unknown) => (err as { code?: number }).code === 404,
          `${kind} ${name}-${ns.name} not published`,
        );
      }
    }

    // Published by a start that works, then a restart refused: the webhook, which found them current,
    // served while GitHub was checked, and is stopped; they are left as they were.
    t.after(() => deleteTestWebhookConfiguration(ns.cluster.kubeConfig, ns.name));
    const { paddock: good } = await start({ GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl });
    await good.stop();
    const versions = async () =>
      Promise.all(
        [
          `mutatingwebhookconfigurations/${DEFAULT_WEBHOOK_CONFIGURATION_NAME}-${ns.name}`,
          `validatingwebhookconfigurations/${DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME}-${ns.name}`,
        ].map(
          async (p) =>
            (
              await kube.request<{ metadata: { resourceVersion: string } }>(
                'GET',
                `/apis/admissionregistration.k8s.io/v1/${p}`,
              )
            ).metadata.resourceVersion,
        ),
      );
    const published = await versions();
    const restart = refusedStart();
    await eventually('the webhook listening again while GitHub is checked', listening, 10_000);
    await assert.rejects(restart, /GitHub credentials do not work/);
    assert.equal(await listening(), false, 'the webhook server is stopped after the refusal');
    assert.deepEqual(await versions(), published, 'the configurations are untouched');
  });

  test('GitHub rate limiting or failing at start-up: paddock starts anyway and says why', async (t) => {
    if (!kubeconfig) return t.skip('needs the shared control plane of test/run.ts');
    const lifted = double.injectSecondaryLimit({
      route: 'GET /rate_limit',
      status: 403,
      retryAfterSeconds: 30,
    });
    t.after(lifted);
    const p = await startRun();
    assert.match(p.out(), /cannot check the GitHub credentials now; starting anyway/);
    assert.match(p.out(), /secondary rate limit/);
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
  });

  test('CRDs missing: a clear message and exit code 2', async () => {
    // A fresh API server that has never seen the CRDs.
    const plane = await startControlPlane({ controllerManager: false, log: () => undefined });
    try {
      const p = paddock(['run', '--metrics-addr', '0', '--health-probe-addr', '0', '--webhook-addr', '0'], {
        KUBECONFIG: plane.kubeconfigPath,
        GITHUB_TOKEN: token,
        GITHUB_URL: double.apiUrl,
      });
      assert.equal(await p.exited, 2);
      assert.match(
        p.err(),
        /the actions\.summerwind\.dev\/v1alpha1 CRDs are not installed .*apply config\/crd\/ or start with --install-crds/,
      );
    } finally {
      await plane.stop();
    }
  });

  test('unreachable cluster: a clear message and exit code 2', async () => {
    const p = paddock(
      [
        'run',
        '--kubeconfig',
        path.join(root, 'test/fixtures/unreachable-kubeconfig.yaml'),
        '--metrics-addr',
        '0',
        '--health-probe-addr',
        '0',
      ],
      {
        GITHUB_TOKEN: token,
        GITHUB_URL: double.apiUrl,
      },
    );
    assert.equal(await p.exited, 2);
    assert.match(p.err(), /cannot reach the Kubernetes API at https:\/\/127\.0\.0\.1:1/);
  });
});
