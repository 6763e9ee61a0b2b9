import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments, stringify } from 'yaml';
import {
  API_VERSION,
  RUNNER_DEPLOYMENTS,
  RUNNER_REPLICA_SETS,
  RUNNERS,
  type Runner,
  type RunnerReplicaSet,
} from '../src/api/index.ts';
import { RUN_FLAGS } from '../src/cli/run-flags.ts';
import { isNotFound, KubeError } from '../src/runtime/errors.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { mergePatch } from '../src/runtime/objects.ts';
import { PODS, SECRETS } from '../src/runtime/resources.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import {
  type ChartRelease,
  chartContainer,
  localArgs,
  serviceAccountKubeconfig,
} from '../src/sandbox/chart-install.ts';
import { NodeAgent, type PodObject } from '../src/sandbox/node-agent.ts';
import {
  type ControlPlane,
  findBinaries,
  freePort,
  startControlPlane,
} from '../src/testenv/control-plane.ts';
import { GitHubDouble, type JobRecord } from '../src/testenv/github-double/index.ts';
import { ensureHelm, isolatedHelmEnv, runHelm } from '../src/testenv/helm.ts';
import { type ManagedProcess, startManagedProcess } from '../src/testenv/processes.ts';
import { generateWebhookCertificates } from '../src/webhooks/certs.ts';
import {
  ARC_KEPT_TOKEN,
  ARC_POD_FINALIZER,
  ARC_RUNNER_FINALIZER,
  type ArcFleet,
  createArcFleet,
} from './support/arc-fleet.ts';
import { eventually } from './support/cluster.ts';

/**
 * docs/migrating-from-arc.md, executed: every ```sh block of the guide runs, in order, with
 * `bash -euo pipefail` (kubectl and Helm first on PATH, the admin kubeconfig, Helm's homes in a
 * temporary directory, the guide's variables set, the repository as working directory), against a
 * control plane of its own with kube-controller-manager (the release's cluster-scoped objects and the
 * garbage collection of paddock's webhook configurations must not touch the shared test cluster).
 *
 * ARC is test/fixtures/arc-chart, a stand-in with the object names of ARC's chart, installed with
 * Helm; a RunnerDeployment fleet is made as ARC leaves it (test/support/arc-fleet.ts), one runner busy
 * with a job. No Service routes to a process here, so while "ARC runs" its webhook configurations
 * point at a stand-in server that admits everything, as ARC's would; it stops with ARC's pods, after
 * which the configurations really refuse writes. Between the guide's install and verify steps paddock
 * is started as a local process from the release's Deployment (its arguments and environment, its
 * ServiceAccount's token; only listen addresses changed), as the kubelet would start it.
 *
 * Nothing may be re-registered, deleted or recreated, the busy job must go on, the Runners and pods keep
 * ARC's finalizer names, ARC's Secrets survive its uninstall, a scale-down works under paddock, and
 * going back leaves no paddock webhook configuration and ARC's release installed again. A second round
 * then switches again and backs out before ARC's release is removed, which the going-back steps undo
 * by upgrading that release.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const GUIDE = path.join(root, 'docs', 'migrating-from-arc.md');

const ARC_NAMESPACE = 'actions-runner-system';
const ARC_RELEASE = 'actions-runner-controller';
const ARC_CHART_VERSION = '0.23.7';
const RUNNER_NAMESPACE = 'ci';
const ORG = 'acme';
const NODE_PREFIX = 'node-';
/** Names the stand-in chart gives ARC's objects for this release. */
const ARC_MUTATING = `${ARC_RELEASE}-mutating-webhook-configuration`;
const ARC_VALIDATING = `${ARC_RELEASE}-validating-webhook-configuration`;
const ARC_DEPLOYMENTS = [ARC_RELEASE, `${ARC_RELEASE}-github-webhook-server`];
const ARC_SECRETS = ['controller-manager', 'github-webhook-server'];
/** What paddock registers (no --watch-namespace). */
const PADDOCK_VALIDATING = 'paddock-runner-resources';
const PADDOCK_MUTATING = 'paddock-runner-pod-token';

/** The guide's steps in order; the test fails when the guide gains, loses or reorders one. */
const STEPS = [
  'variables',
  'save-arc-values',
  'stop-arc',
  'delete-arc-webhooks',
  'apply-crds',
  'hand-over-secrets',
  'install-paddock',
  'verify',
  'remove-arc',
  'uninstall-paddock',
  'restore-arc-crds',
  'reinstall-arc',
] as const;
type StepName = (typeof STEPS)[number];

interface GuideStep {
  name: string;
  script: string;
}

/**
 * The guide's shell blocks: each ```sh block must follow a `<!-- test: <name> -->` line, and every
 * marker must be followed by one. Fences in another shell language would hold untested commands.
 */
function guideSteps(markdown: string): GuideStep[] {
  const lines = markdown.split('\n');
  const steps: GuideStep[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const marker = /^<!-- test: ([a-z0-9-]+) -->$/.exec(line.trim());
    if (/^```\s*(bash|shell|console|zsh|shell-session)\b/.test(line)) {
      throw new Error(`line ${i + 1}: a ${line.trim()} block; shell commands go in marked \`\`\`sh blocks`);
    }
    if (/^```sh\s*$/.test(line)) {
      const previous = lines[i - 1]?.trim() ?? '';
      if (!/^<!-- test: [a-z0-9-]+ -->$/.test(previous)) {
        throw new Error(`line ${i + 1}: a \`\`\`sh block without a <!-- test: <step> --> line before it`);
      }
      continue;
    }
    if (!marker) continue;
    if (!/^```sh\s*$/.test(lines[i + 1] ?? '')) {
      throw new Error(`line ${i + 1}: marker ${marker[1]} is not followed by a \`\`\`sh block`);
    }
    const end = lines.findIndex((l, j) => j > i + 1 && /^```\s*$/.test(l));
    if (end < 0) throw new Error(`line ${i + 2}: the block of ${marker[1]} is never closed`);
    if (steps.some((s) => s.name === marker[1])) throw new Error(`step ${marker[1]} appears twice`);
    steps.push({ name: marker[1]!, script: `${lines.slice(i + 2, end).join('\n')}\n` });
    i = end;
  }
  return steps;
}

// biome-ignore lint/suspicious/noExplicitAny: webhook configurations and CRDs are read as untyped JSON
type Json = any;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An HTTPS admission server that allows every request: ARC's webhook server while ARC runs. */
async function startAdmitAllServer(): Promise<{ baseUrl: string; caBundle: string; stop(): Promise<void> }> {
  const certs = generateWebhookCertificates({ ipAddresses: ['127.0.0.1'] });
  const server = https.createServer({ key: certs.serving.key, cert: certs.serving.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let uid = '';
      try {
        uid = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json).request?.uid ?? '';
      } catch {
        // answered below without a uid: the API server then fails the call, as it should
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          response: { uid, allowed: true },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let stopped = false;
  return {
    baseUrl: `https://127.0.0.1:${port}`,
    caBundle: Buffer.from(certs.ca.cert).toString('base64'),
    async stop() {
      if (stopped) return;
      stopped = true;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * `bash -euo pipefail <file>` in a process group of its own (its kubectl and helm with it), the group
 * killed after 3 minutes or when this process exits first; resolves once its output is complete.
 */
function runBash(
  file: string,
  env: Record<string, string>,
  cwd: string,
): Promise<{ code: number | string; output: string }> {
  const bash = ['/bin/bash', '/usr/bin/bash'].find((b) => existsSync(b)) ?? 'bash';
  const child = spawn(bash, ['-euo', 'pipefail', file], {
    cwd,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const killGroup = () => {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // gone already
    }
  };
  process.once('exit', killGroup);
  const limit = setTimeout(killGroup, 180_000);
  let output = '';
  child.stdout.on('data', (d: Buffer) => {
    output += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    output += d.toString();
  });
  return new Promise((resolve) => {
    const done = (code: number | string) => {
      clearTimeout(limit);
      process.off('exit', killGroup);
      resolve({ code, output });
    };
    child.on('error', (err) => done(err.message));
    child.on('close', (code, signal) => done(code ?? signal ?? 'unknown'));
  });
}

describe('migrating from ARC as docs/migrating-from-arc.md says', () => {
  const guide = (() => {
    try {
      return { steps: guideSteps(readFileSync(GUIDE, 'utf8')) };
    } catch (err) {
      return { error: err as Error, steps: [] as GuideStep[] };
    }
  })();
  const double = new GitHubDouble();
  let plane: ControlPlane | undefined;
  let http: KubeHttp;
  let workDir: string;
  let helm: string;
  let helmEnv: Record<string, string>;
  let blockEnv: Record<string, string>;
  let arcWebhook: Awaited<ReturnType<typeof startAdmitAllServer>> | undefined;
  let agent: NodeAgent | undefined;
  let paddock: ManagedProcess | undefined;
  let paddockLog = '';
  let fleet: ArcFleet;
  let busy: { runnerId: number; podUid: string; job: JobRecord };
  let secretsBefore: Map<string, { uid: string; data: Record<string, string> }>;
  /** GitHub runner IDs, pod and Runner uids the test expects at each point. */
  let expected: { runnerIds: number[]; podUids: string[]; runnerUids: string[] };
  let githubRequestsAtStart = 0;
  let failedStep: string | undefined;

  before(async () => {
    plane = await startControlPlane({ controllerManager: true });
    http = new KubeHttp(plane.kubeConfig);
    workDir = await mkdtemp(path.join(os.tmpdir(), 'paddock-migration-'));
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg(ORG);
    double.addRepo(ORG, 'app');
    const kubectl = findBinaries().kubectl;
    assert.ok(kubectl, 'kubectl is built with the control plane (make control-plane)');
    helm = await ensureHelm();
    helmEnv = isolatedHelmEnv(path.join(workDir, 'home'), plane.kubeconfigPath);
    blockEnv = {
      ...helmEnv,
      PATH: [path.dirname(kubectl), path.dirname(helm), process.env.PATH ?? '/usr/bin:/bin'].join(':'),
      ARC_NAMESPACE,
      ARC_RELEASE,
      ARC_CHART: 'test/fixtures/arc-chart',
      ARC_CHART_VERSION,
      ARC_VALUES: path.join(workDir, 'arc-values.yaml'),
      PADDOCK_IMAGE: 'registry.example.com/paddock',
    };
  });

  after(async () => {
    await agent?.stop().catch(() => undefined);
    await paddock?.stop();
    await arcWebhook?.stop();
    http?.close();
    await double.stop();
    await plane?.stop();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  // ------------------------------------------------------------------------------------- helpers

  const helmRun = async (args: string[]) => {
    const r = await runHelm(helm, args, helmEnv);
    if (r.code !== 0) throw new Error(`helm ${args.join(' ')}: exit ${r.code}\n${r.stderr}`);
    return r.stdout;
  };

  /** A read, retried while the API server asks to (429 while a changed CRD's storage restarts). */
  const read = async <T>(p: string, query: Record<string, string> = {}): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await http.request<T>('GET', p, { query });
      } catch (err) {
        if (!(err instanceof KubeError) || !err.retryable || attempt >= 20) throw err;
        await sleep(err.retryAfterMs ?? 500);
      }
    }
  };
  const get = async <T = Json>(p: string): Promise<T | undefined> => {
    try {
      return await read<T>(p);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const list = async <T extends KubeObject>(p: string, labelSelector?: string) =>
    (await read<{ items: T[] }>(p, labelSelector ? { labelSelector } : {})).items;
  const WEBHOOKS = '/apis/admissionregistration.k8s.io/v1';
  const secretOf = (name: string) => get<Json>(resourcePath(SECRETS, ARC_NAMESPACE, name));
  const crdOf = (plural: string) =>
    get<Json>(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.actions.summerwind.dev`);

  const pods = () => list<PodObject>(resourcePath(PODS, RUNNER_NAMESPACE));
  const runners = () => list<Runner>(resourcePath(RUNNERS, RUNNER_NAMESPACE));

  /** Polls with a generous limit (a loaded 2-core machine); the message says what was left. */
  const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 60_000) =>
    eventually(what, fn, timeoutMs, 200).catch(async (err) => {
      const state = [
        `Runners: ${(await runners()).map((r) => r.metadata.name).join(', ')}`,
        `pods: ${(await pods()).map((p) => `${p.metadata.name}${p.metadata.deletionTimestamp ? '(deleting)' : ''}`).join(', ')}`,
        `GitHub: ${double
          .runners(`orgs/${ORG}`)
          .map((r) => `${r.name}(${r.status}${r.busy ? ', busy' : ''})`)
          .join(', ')}`,
      ].join('\n');
      throw new Error(`${(err as Error).message}\n${state}\n${paddockLogTail()}`);
    });

  const paddockLogTail = () => {
    if (!paddockLog) return '';
    try {
      const lines = readFileSync(paddockLog, 'utf8').trimEnd().split('\n');
      return `paddock's log (last lines):\n${lines.slice(-25).join('\n')}`;
    } catch {
      return '';
    }
  };

  /** Runs one block of the guide as the guide says; returns what it printed (stdout and stderr). */
  const runStep = async (name: StepName): Promise<string> => {
    const step = guide.steps.find((s) => s.name === name);
    assert.ok(step, `the guide has a step ${name}`);
    const file = path.join(workDir, `${name}.sh`);
    await writeFile(file, step.script);
    const { code, output } = await runBash(file, blockEnv, root);
    assert.equal(code, 0, `step ${name} exited with ${code}:\n${step.script}\n--- output:\n${output}`);
    return output;
  };

  /** The uids and registrations as they stand, to compare with `expected`. */
  const snapshot = async () => ({
    runnerIds: double
      .runners(`orgs/${ORG}`)
      .map((r) => r.id)
      .sort((a, b) => a - b),
    podUids: (await pods()).map((p) => p.metadata.uid ?? '').sort(),
    runnerUids: (await runners()).map((r) => r.metadata.uid ?? '').sort(),
  });

  /** Nothing deleted, recreated or registered again; ARC's finalizers; the busy job still running. */
  const assertFleetIntact = async (when: string) => {
    const now = await snapshot();
    assert.deepEqual(now.runnerIds, expected.runnerIds, `${when}: the same GitHub registrations`);
    assert.deepEqual(now.podUids, expected.podUids, `${when}: the same pods (uids)`);
    assert.deepEqual(now.runnerUids, expected.runnerUids, `${when}: the same Runners (uids)`);
    for (const p of await pods()) {
      assert.ok(!p.metadata.deletionTimestamp, `${when}: pod ${p.metadata.name} is not being deleted`);
      assert.deepEqual(p.metadata.finalizers, [ARC_POD_FINALIZER], `${when}: pod ${p.metadata.name}`);
    }
    for (const r of await runners()) {
      assert.deepEqual(r.metadata.finalizers, [ARC_RUNNER_FINALIZER], `${when}: Runner ${r.metadata.name}`);
    }
    const sets = await list<RunnerReplicaSet>(resourcePath(RUNNER_REPLICA_SETS, RUNNER_NAMESPACE));
    assert.deepEqual(
      sets.map((s) => s.metadata.uid),
      [fleet.replicaSet.metadata.uid],
      `${when}: still the one RunnerReplicaSet ARC made (no rollout)`,
    );
    const job = double.model.jobs.get(busy.job.id);
    assert.equal(job?.status, 'in_progress', `${when}: the busy runner's job is still running`);
    assert.equal(job?.conclusion, null, `${when}: the job was not cancelled`);
    assert.equal(agent?.stats().jobsCancelled, 0, `${when}: no job cancelled on any runner`);
    assert.equal(double.model.runners.get(busy.runnerId)?.busy, true, `${when}: its runner is still busy`);
    assert.ok(
      (await pods()).some((p) => p.metadata.uid === busy.podUid),
      `${when}: the busy runner's pod is still there`,
    );
  };

  /** A write ARC's webhooks cover: a Runner created (server-side dry run: nothing is stored). */
  const probeRunnerWrite = () =>
    http.request('POST', resourcePath(RUNNERS, RUNNER_NAMESPACE), {
      query: { dryRun: 'All' },
      body: {
        apiVersion: API_VERSION,
        kind: 'Runner',
        metadata: { name: 'write-probe' },
        spec: { organization: ORG },
      },
    });
  const probeScaleWrite = () =>
    http.request('PATCH', resourcePath(RUNNER_DEPLOYMENTS, RUNNER_NAMESPACE, 'ci'), {
      query: { dryRun: 'All' },
      contentType: 'application/merge-patch+json',
      body: { spec: { replicas: 4 } },
    });

  const paddockConfigurations = async () => [
    ...(
      await list<KubeObject>(
        `${WEBHOOKS}/validatingwebhookconfigurations`,
        'app.kubernetes.io/managed-by=paddock',
      )
    ).map((o) => `validating/${o.metadata.name}`),
    ...(
      await list<KubeObject>(
        `${WEBHOOKS}/mutatingwebhookconfigurations`,
        'app.kubernetes.io/managed-by=paddock',
      )
    ).map((o) => `mutating/${o.metadata.name}`),
  ];

  /** paddock as the release's Deployment runs it (chartContainer), listening on 127.0.0.1 only. */
  const startPaddockFromRelease = async () => {
    const manifest = await helmRun(['get', 'manifest', 'paddock', '--namespace', ARC_NAMESPACE]);
    const release: ChartRelease = {
      name: 'paddock',
      namespace: ARC_NAMESPACE,
      objects: parseAllDocuments(manifest)
        .map((d) => d.toJSON() as KubeObject | null)
        .filter((o): o is KubeObject => !!o && typeof o === 'object' && 'kind' in o),
      helm: helmRun,
    };
    const chartDir = path.join(workDir, 'paddock-pod');
    const c = await chartContainer(release, 'run', http, chartDir);
    assert.ok(c, 'the release has a Deployment that runs `paddock run`');
    const kubeconfig = path.join(workDir, 'paddock-sa.kubeconfig');
    await serviceAccountKubeconfig({
      http,
      server: plane!.server,
      caPath: path.join(plane!.dataDir, 'pki', 'apiserver.crt'),
      namespace: ARC_NAMESPACE,
      serviceAccount: c.serviceAccountName,
      file: kubeconfig,
    });
    const metricsPort = await freePort();
    const local = [
      '--metrics-addr',
      `127.0.0.1:${metricsPort}`,
      '--health-probe-addr',
      '0',
      '--webhook-addr',
      '127.0.0.1:0',
      '--webhook-url',
      'https://127.0.0.1:0',
    ];
    const args = localArgs(c.args, RUN_FLAGS, local);
    paddockLog = path.join(workDir, 'paddock.log');
    paddock = startManagedProcess({
      name: 'paddock',
      command: process.execPath,
      args: [path.join(root, 'bin', 'paddock.js'), ...args],
      logFile: paddockLog,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: workDir,
        LOG_LEVEL: 'info',
        ...c.env,
        KUBECONFIG: kubeconfig,
      },
    });
    const proc = paddock;
    // Ready once its caches synced; an exit ends the wait at once.
    let exited: number | string | undefined;
    void proc.exited.then((code) => {
      exited = code;
    });
    for (const deadline = Date.now() + 90_000; ; ) {
      if (exited !== undefined) {
        await sleep(100); // the last lines reach the log
        assert.fail(`paddock exited with ${exited}\n${paddockLogTail()}`);
      }
      const r = await fetch(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => undefined);
      if (r?.ok) break;
      if (Date.now() > deadline) assert.fail(`paddock not ready after 90 s\n${paddockLogTail()}`);
      await sleep(200);
    }
    assert.ok(proc.running(), `paddock is running\n${paddockLogTail()}`);
  };

  // ----------------------------------------------------------------------------------- the story

  /** Runs `fn` unless an earlier step failed (later steps then mean nothing). */
  const step = (name: string, fn: () => Promise<void>) =>
    test(name, async (t) => {
      if (failedStep) {
        t.skip(`skipped: "${failedStep}" failed`);
        return;
      }
      try {
        await fn();
      } catch (err) {
        failedStep = name;
        throw err;
      }
    });

  step('the guide: every shell command is in a marked ```sh block, the steps in order', async () => {
    if (guide.error) throw guide.error;
    assert.deepEqual(
      guide.steps.map((s) => s.name),
      [...STEPS],
    );
    const exported = [...guide.steps[0]!.script.matchAll(/^export ([A-Z_]+)=/gm)].map((m) => m[1]).sort();
    assert.deepEqual(
      exported,
      Object.keys(blockEnv)
        .filter((k) => /^(ARC|PADDOCK)_/.test(k))
        .sort(),
      'the test sets the variables the guide names',
    );
  });

  /** While ARC runs its webhook server answers: a stand-in, which ARC's configurations now call. */
  const arcWebhooksServed = async () => {
    arcWebhook = await startAdmitAllServer();
    for (const [kind, name] of [
      ['mutatingwebhookconfigurations', ARC_MUTATING],
      ['validatingwebhookconfigurations', ARC_VALIDATING],
    ] as const) {
      const cfg = await get<Json>(`${WEBHOOKS}/${kind}/${name}`);
      assert.ok(cfg, `ARC's chart installed ${kind} ${name}`);
      for (const w of cfg.webhooks) {
        assert.equal(w.failurePolicy, 'Fail', `${name} ${w.name} is Fail-closed`);
        w.clientConfig = {
          url: `${arcWebhook.baseUrl}${w.clientConfig.service.path}`,
          caBundle: arcWebhook.caBundle,
        };
      }
      await http.request('PUT', `${WEBHOOKS}/${kind}/${name}`, { body: cfg });
    }
  };

  /** What ARC's release has now: the Secrets (uid, data) the switch must keep. */
  const recordArcState = async () => {
    secretsBefore = new Map();
    for (const name of ARC_SECRETS) {
      const s = await secretOf(name);
      assert.ok(s, `ARC's chart created Secret ${name}`);
      secretsBefore.set(name, { uid: s.metadata.uid, data: s.data });
    }
    githubRequestsAtStart = double.log.length;
  };

  step('ARC runs: its chart installed, and a busy fleet as ARC runs it', async () => {
    const arcValues = path.join(workDir, 'arc-install-values.yaml');
    await writeFile(
      arcValues,
      stringify({
        githubURL: double.apiUrl,
        certManagerEnabled: false,
        logFormat: 'json',
        image: { tag: 'v0.27.6' },
        authSecret: { create: true, github_token: double.addToken({ login: 'arc' }).token },
        githubWebhookServer: {
          enabled: true,
          secret: { create: true, github_webhook_secret_token: randomBytes(16).toString('hex') },
        },
      }),
    );
    await helmRun([
      'install',
      ARC_RELEASE,
      path.join(root, 'test', 'fixtures', 'arc-chart'),
      '--namespace',
      ARC_NAMESPACE,
      '--create-namespace',
      '-f',
      arcValues,
    ]);
    // ARC's CRDs came from its chart, under Helm's field manager.
    const crd = await crdOf('runners');
    assert.equal(crd?.spec.versions[0].schema.openAPIV3Schema['x-kubernetes-preserve-unknown-fields'], true);
    assert.ok(!crd.metadata.managedFields.some((f: Json) => f.manager === 'paddock'));
    await arcWebhooksServed();

    await http.request('POST', '/api/v1/namespaces', { body: { metadata: { name: RUNNER_NAMESPACE } } });
    fleet = await createArcFleet({
      http,
      namespace: RUNNER_NAMESPACE,
      double,
      organization: ORG,
      nodeName: `${NODE_PREFIX}0`,
      replicas: 3,
      // Running for a while: paddock looks such runners up on GitHub as soon as it takes over.
      startedAt: new Date(Date.now() - 5 * 60_000),
    });
    agent = new NodeAgent({
      http,
      namespace: RUNNER_NAMESPACE,
      double,
      startupDelayMs: 300,
      registrationDelayMs: 100,
      assignIntervalMs: 100,
      nodeCount: 1,
      nodePrefix: NODE_PREFIX,
    });
    await agent.start();
    // The first runner is in the middle of a job, which ends only when this test says so.
    const first = fleet.members[0]!;
    const job = double.createJob({ owner: ORG, repo: 'app', labels: ['self-hosted', 'linux'] });
    busy = {
      runnerId: first.runnerId,
      podUid: first.pod.metadata.uid ?? '',
      job: double.startJob(job.id, first.runnerId),
    };
    await waitFor(
      'the node agent runs the busy runner’s job',
      async () => agent!.pod(first.runner.metadata.name ?? '')?.jobId === job.id,
    );
    expected = await snapshot();
    assert.equal(expected.runnerIds.length, 3);
    assert.equal(expected.podUids.length, 3);
    await recordArcState();
    await assertFleetIntact('before the switch');
  });

  /** What each step of the guide must have done, checked right after it ran (round 2 backs out early). */
  const checks: Record<StepName, (out: string, round: 1 | 2) => Promise<void>> = {
    variables: async () => {},

    'save-arc-values': async () => {
      const values = parse(await readFile(blockEnv.ARC_VALUES!, 'utf8')) as Json;
      assert.equal(values.authSecret?.create, true, 'the saved values are the ones ARC was installed with');
      assert.equal(values.githubURL, double.apiUrl);
    },

    'stop-arc': async () => {
      assert.deepEqual(
        (await list<KubeObject>(resourcePath(PODS, ARC_NAMESPACE))).map((p) => p.metadata.name),
        [],
        'no ARC pod is left',
      );
      for (const d of ARC_DEPLOYMENTS) {
        const dep = await get<Json>(`/apis/apps/v1/namespaces/${ARC_NAMESPACE}/deployments/${d}`);
        assert.equal(dep?.spec.replicas, 0, `Deployment ${d} scaled to 0`);
      }
      // Its webhook server went with its pods: now its configurations refuse what they cover.
      await arcWebhook!.stop();
      await assert.rejects(
        probeRunnerWrite(),
        /failed calling webhook/,
        'a stopped ARC blocks Runner creation',
      );
      await assert.rejects(probeScaleWrite(), /failed calling webhook/, 'and RunnerDeployment updates');
      await assertFleetIntact('ARC stopped');
    },

    'delete-arc-webhooks': async () => {
      for (const [kind, name] of [
        ['mutatingwebhookconfigurations', ARC_MUTATING],
        ['validatingwebhookconfigurations', ARC_VALIDATING],
      ] as const) {
        assert.equal((await get(`${WEBHOOKS}/${kind}/${name}`))?.metadata.name, undefined, `${name} deleted`);
      }
      await probeRunnerWrite(); // admitted again: nothing validates until paddock runs
      await probeScaleWrite();
    },

    'apply-crds': async () => {
      const file = parse(
        await readFile(path.join(root, 'config', 'crd', 'actions.summerwind.dev_runners.yaml'), 'utf8'),
      ) as Json;
      const crd = await crdOf('runners');
      const schema = crd.spec.versions[0].schema.openAPIV3Schema;
      assert.equal(schema['x-kubernetes-preserve-unknown-fields'], undefined, 'ARC’s schema is gone');
      assert.deepEqual(
        Object.keys(schema.properties).sort(),
        Object.keys(file.spec.versions[0].schema.openAPIV3Schema.properties).sort(),
      );
      assert.deepEqual(
        crd.spec.versions[0].additionalPrinterColumns.map((c: Json) => c.name),
        file.spec.versions[0].additionalPrinterColumns.map((c: Json) => c.name),
      );
      await assertFleetIntact('paddock’s CRDs applied');
    },

    'hand-over-secrets': async () => {
      for (const name of ARC_SECRETS) {
        const s = await secretOf(name);
        assert.equal(s.metadata.annotations['meta.helm.sh/release-name'], 'paddock', `Secret ${name}`);
      }
    },

    'install-paddock': async () => {
      for (const name of ARC_SECRETS) {
        const s = await secretOf(name);
        assert.equal(s?.metadata.uid, secretsBefore.get(name)!.uid, `Secret ${name} adopted, not recreated`);
        assert.deepEqual(s.data, secretsBefore.get(name)!.data, `Secret ${name} keeps its data`);
      }
      // What the kubelet would do with the release's Deployment.
      await startPaddockFromRelease();
    },

    verify: async (out) => {
      const holder = `${os.hostname()}_${paddock!.pid}`;
      assert.ok(out.includes(`leader: ${holder}\n`), `the Lease holder is the paddock started (${holder})`);
      assert.match(out, /runnerdeployment\.actions\.summerwind\.dev\/paddock-webhook-check/);
      assert.match(out, new RegExp(`validatingwebhookconfiguration[^\\s]*/${PADDOCK_VALIDATING}`));
      assert.deepEqual((await paddockConfigurations()).sort(), [
        `mutating/${PADDOCK_MUTATING}`,
        `validating/${PADDOCK_VALIDATING}`,
      ]);
      // The API server calls paddock's validation: what only the webhook checks (no CRD rule says
      // it) is denied.
      await assert.rejects(
        http.request('POST', resourcePath(RUNNER_DEPLOYMENTS, RUNNER_NAMESPACE), {
          query: { dryRun: 'All' },
          body: {
            apiVersion: API_VERSION,
            kind: 'RunnerDeployment',
            metadata: { name: 'no-work-volume' },
            spec: { template: { spec: { organization: ORG, containerMode: 'kubernetes' } } },
          },
        }),
        /must have workVolumeClaimTemplate/,
        'paddock’s webhook denies container mode kubernetes without a work volume claim template',
      );
      const owned = await get<Json>(`${WEBHOOKS}/validatingwebhookconfigurations/${PADDOCK_VALIDATING}`);
      assert.deepEqual(
        owned.metadata.ownerReferences?.map((r: Json) => `${r.kind}/${r.name}`),
        ['ClusterRole/paddock'],
        'owned by the release’s ClusterRole',
      );
      // paddock has reconciled the fleet: the token ARC kept left the Runner status, the
      // deployment's status counts the runners.
      await waitFor('the Runners reconciled (ARC’s token gone from their status)', async () =>
        (await runners()).every((r) => r.status?.registration?.token === ''),
      );
      await waitFor('the RunnerDeployment status written by paddock', async () => {
        const rd = await get<Json>(resourcePath(RUNNER_DEPLOYMENTS, RUNNER_NAMESPACE, 'ci'));
        return rd?.status?.replicas === expected.podUids.length;
      });
      for (const p of await pods()) {
        const token = (p.spec?.containers?.[0]?.env ?? []).find((e) => e.name === 'RUNNER_TOKEN');
        assert.equal(token?.value, ARC_KEPT_TOKEN, `pod ${p.metadata.name} keeps its literal token`);
      }
      // It looked the runners up (and so knows which one is busy), with reads only.
      await waitFor('paddock listed the organization’s runners', async () =>
        double.log
          .slice(githubRequestsAtStart)
          .some(
            (e) => e.method === 'GET' && e.path.startsWith(`/orgs/${ORG}/actions/runners`) && e.status < 400,
          ),
      );
      await assertFleetIntact('paddock running');
      const writes = double.log.slice(githubRequestsAtStart).filter((e) => e.method !== 'GET');
      assert.deepEqual(
        writes.map((e) => `${e.method} ${e.route}`),
        [],
        'no GitHub writes: nothing removed, no token asked for',
      );
    },

    'remove-arc': async (out) => {
      assert.match(out, /not owned by this release/);
      const status = await runHelm(helm, ['status', ARC_RELEASE, '-n', ARC_NAMESPACE], helmEnv);
      assert.notEqual(status.code, 0, 'ARC’s release is gone');
      for (const d of ARC_DEPLOYMENTS) {
        assert.equal(await get(`/apis/apps/v1/namespaces/${ARC_NAMESPACE}/deployments/${d}`), undefined);
      }
      for (const name of ARC_SECRETS) {
        const s = await secretOf(name);
        assert.equal(
          s?.metadata.uid,
          secretsBefore.get(name)!.uid,
          `Secret ${name} survived ARC's uninstall`,
        );
        assert.deepEqual(s.data, secretsBefore.get(name)!.data);
        assert.ok(out.includes(name), `the step lists Secret ${name}`);
      }
      assert.ok(await crdOf('runners'), 'the CRDs stay');
      assert.ok(paddock!.running(), `paddock still runs\n${paddockLogTail()}`);
      await assertFleetIntact('ARC removed');
    },

    'uninstall-paddock': async () => {
      await waitFor('no paddock webhook configuration left', async () =>
        (await paddockConfigurations()).length === 0 ? true : undefined,
      );
      for (const name of ARC_SECRETS)
        assert.equal(await secretOf(name), undefined, `Secret ${name} went with paddock's release`);
      await assertFleetIntact('paddock removed');
    },

    'restore-arc-crds': async () => {
      const crd = await crdOf('runners');
      assert.equal(crd.spec.versions[0].schema.openAPIV3Schema['x-kubernetes-preserve-unknown-fields'], true);
      await assertFleetIntact('ARC’s CRDs back');
    },

    'reinstall-arc': async (out, round) => {
      assert.match(out, /STATUS: deployed/);
      // Round 1 installs the release anew; round 2 upgrades the one that was never removed.
      assert.match(out, round === 1 ? /REVISION: 1\n/ : /REVISION: 2\n/);
      for (const name of [ARC_MUTATING, ARC_VALIDATING]) assert.ok(out.includes(name), `${name} is listed`);
      for (const d of ARC_DEPLOYMENTS) {
        const dep = await get<Json>(`/apis/apps/v1/namespaces/${ARC_NAMESPACE}/deployments/${d}`);
        assert.equal(dep?.spec.replicas, 1, `Deployment ${d} is back at its replicas`);
      }
      for (const name of ARC_SECRETS) {
        const s = await secretOf(name);
        assert.deepEqual(s?.data, secretsBefore.get(name)!.data, `Secret ${name} is back with its data`);
        assert.equal(s.metadata.annotations['meta.helm.sh/release-name'], ARC_RELEASE);
      }
      assert.deepEqual(await paddockConfigurations(), []);
      assert.ok(
        await secretOf('paddock-webhook-tls'),
        'paddock’s certificate Secret is left, as the guide says',
      );
      await assertFleetIntact('ARC back');
    },
  };

  /** What the test does around a step that the guide leaves to the cluster. */
  const beforeStep: Partial<Record<StepName, () => Promise<void>>> = {
    'stop-arc': async () => {
      await waitFor('ARC’s controller and webhook server pods exist', async () => {
        const names = (await list<KubeObject>(resourcePath(PODS, ARC_NAMESPACE))).map((p) => p.metadata.name);
        return ARC_DEPLOYMENTS.every((d) => names.some((n) => n?.startsWith(`${d}-`))) && names;
      });
      await probeRunnerWrite(); // admitted while ARC runs
    },
    'uninstall-paddock': async () => {
      // The kubelet stops paddock's pod when its Deployment goes. Stopping it first changes nothing
      // (it does not remove its configurations), and shows who does: the garbage collector.
      await paddock!.stop();
      assert.deepEqual(
        (await paddockConfigurations()).sort(),
        [`mutating/${PADDOCK_MUTATING}`, `validating/${PADDOCK_VALIDATING}`],
        'paddock’s configurations outlive its process',
      );
    },
  };

  const guideStep = (name: StepName, round: 1 | 2, title = name) =>
    step(round === 1 ? title : `${title} (round 2)`, async () => {
      await beforeStep[name]?.();
      const out = await runStep(name);
      await checks[name](out, round);
    });

  // Round 1: the switch, ARC's release removed, a scale-down under paddock, and back to ARC.
  for (const name of STEPS) {
    guideStep(name, 1);
    if (name === 'remove-arc') {
      step('after the switch, a scale-down removes an idle runner, never the busy one', async () => {
        await mergePatch(
          http,
          RUNNER_DEPLOYMENTS,
          { metadata: { namespace: RUNNER_NAMESPACE, name: 'ci' } },
          { spec: { replicas: 2 } },
        );
        await waitFor('one runner unregistered, its Runner and pod gone', async () => {
          const now = await snapshot();
          return now.runnerIds.length === 2 && now.podUids.length === 2 && now.runnerUids.length === 2;
        });
        const removed = fleet.members.filter((m) => !double.model.runners.has(m.runnerId));
        assert.equal(removed.length, 1);
        assert.notEqual(removed[0]!.runnerId, busy.runnerId, 'the busy runner stays');
        assert.ok(
          double.log.some(
            (e) => e.method === 'DELETE' && e.status === 204 && e.path.endsWith(`/${removed[0]!.runnerId}`),
          ),
          'paddock unregistered it',
        );
        expected = await snapshot();
        await assertFleetIntact('after the scale-down');
      });
    }
  }

  // Round 2: ARC runs again; the switch up to the check, then backing out while ARC's release still
  // exists (the going-back steps then upgrade it).
  step('round 2: ARC runs again, its webhooks served', async () => {
    await arcWebhooksServed();
    await recordArcState();
    await assertFleetIntact('ARC back in charge');
  });
  for (const name of STEPS) {
    if (name === 'variables' || name === 'remove-arc') continue;
    guideStep(name, 2);
  }
});
