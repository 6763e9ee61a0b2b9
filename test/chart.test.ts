import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { parse, parseAllDocuments } from 'yaml';
import { API_VERSION, type Runner } from '../src/api/index.ts';
import { type FlagSpec, parseFlags } from '../src/cli/flags.ts';
import { RUN_FLAGS } from '../src/cli/run-flags.ts';
import { WEBHOOK_SERVER_FLAGS } from '../src/cli/webhook-server.ts';
import { runnerRbacObjects } from '../src/controllers/runner-pod-spec.ts';
import { isNotFound, type KubeError } from '../src/runtime/errors.ts';
import { KubeHttp, PATCH_CONTENT_TYPES } from '../src/runtime/kube-http.ts';
import { findBinaries } from '../src/testenv/control-plane.ts';
import { ensureHelm, type HelmResult, isolatedHelmEnv, runHelm } from '../src/testenv/helm.ts';
import { clusterRoleOwner } from '../src/webhooks/configuration.ts';
import { eventually, type TestCluster, useCluster } from './support/cluster.ts';

/**
 * The Helm chart (charts/paddock) and the plain manifests made from it (config/default), issue 13:
 * `helm lint`, `helm template` with the values files of test/fixtures/chart-values/ (an ARC user's
 * among them) and what the rendered objects must say, a server-side dry run of every rendered object
 * against the API server, a real `helm install` and `helm uninstall`, and config/default being the
 * chart's current output.
 *
 * Helm is the pinned v4 (hack/build-helm.sh builds it once into the cache), run with its homes in a
 * temporary directory and the test cluster's kubeconfig. No kubelet runs: the installed Deployments'
 * pods are created but never start, which is all an install needs here.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CHART = 'charts/paddock';
const FIXTURES = path.join(root, 'test', 'fixtures', 'chart-values');
const FIXTURE_FILES = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.yaml'))
  .sort();
const RELEASE = 'ci';
const FULLNAME = 'ci-paddock';
const WEBHOOK_SERVER = 'ci-paddock-github-webhook-server';

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are untyped YAML
type Json = any;
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: Json;
  data?: Record<string, string>;
  [k: string]: Json;
}

function parseManifests(text: string): K8sObject[] {
  const out: K8sObject[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) throw new Error(`rendered YAML: ${doc.errors[0]!.message}`);
    const obj = doc.toJS() as K8sObject | null;
    if (obj) out.push(obj);
  }
  return out;
}

const fixture = (name: string) => path.join(FIXTURES, name);

/** The cluster of `kc`, reached with a bearer token instead of its user. */
function withToken(kc: KubeConfig, token: string): KubeConfig {
  const cluster = kc.getCurrentCluster();
  assert.ok(cluster, 'the kubeconfig has a current cluster');
  const out = new KubeConfig();
  out.loadFromOptions({
    clusters: [cluster],
    users: [{ name: 'token', token }],
    contexts: [{ name: 'token', cluster: cluster.name, user: 'token' }],
    currentContext: 'token',
  });
  return out;
}

/** Objects of one kind (and name). */
const all = (objs: K8sObject[], kind: string) => objs.filter((o) => o.kind === kind);
function one(objs: K8sObject[], kind: string, name: string): K8sObject {
  const found = objs.filter((o) => o.kind === kind && o.metadata.name === name);
  assert.equal(found.length, 1, `exactly one ${kind} ${name}; have ${describeObjects(objs)}`);
  return found[0]!;
}
const describeObjects = (objs: K8sObject[]) => objs.map((o) => `${o.kind}/${o.metadata.name}`).join(', ');

const containerOf = (d: K8sObject) => d.spec.template.spec.containers[0];
const argsOf = (d: K8sObject): string[] => containerOf(d).args;
function flag(d: K8sObject, name: string): string | true | undefined {
  for (const a of argsOf(d)) {
    if (a === `--${name}`) return true;
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  }
  return undefined;
}
const flagsNamed = (d: K8sObject, name: string) =>
  argsOf(d)
    .filter((a) => a.startsWith(`--${name}=`))
    .map((a) => a.slice(name.length + 3));
const envOf = (d: K8sObject, name: string) =>
  (containerOf(d).env as Json[]).find((e: Json) => e.name === name);
const matches = (selector: Record<string, string>, labels: Record<string, string> | undefined) =>
  Object.entries(selector).every(([k, v]) => labels?.[k] === v);

/** Where each kind the chart renders is served (dry-run apply needs the path). */
const API: Record<string, { plural: string; namespaced: boolean }> = {
  'v1/Namespace': { plural: 'namespaces', namespaced: false },
  'v1/ServiceAccount': { plural: 'serviceaccounts', namespaced: true },
  'v1/Secret': { plural: 'secrets', namespaced: true },
  'v1/Service': { plural: 'services', namespaced: true },
  'apps/v1/Deployment': { plural: 'deployments', namespaced: true },
  'rbac.authorization.k8s.io/v1/ClusterRole': { plural: 'clusterroles', namespaced: false },
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': { plural: 'clusterrolebindings', namespaced: false },
  'rbac.authorization.k8s.io/v1/Role': { plural: 'roles', namespaced: true },
  'rbac.authorization.k8s.io/v1/RoleBinding': { plural: 'rolebindings', namespaced: true },
  'networking.k8s.io/v1/NetworkPolicy': { plural: 'networkpolicies', namespaced: true },
  'networking.k8s.io/v1/Ingress': { plural: 'ingresses', namespaced: true },
  'policy/v1/PodDisruptionBudget': { plural: 'poddisruptionbudgets', namespaced: true },
  'monitoring.coreos.com/v1/ServiceMonitor': { plural: 'servicemonitors', namespaced: true },
  'apiextensions.k8s.io/v1/CustomResourceDefinition': {
    plural: 'customresourcedefinitions',
    namespaced: false,
  },
};

function apiPath(o: K8sObject): string {
  const key = `${o.apiVersion}/${o.kind}`;
  const api = API[key];
  if (!api)
    throw new Error(`${key} ${o.metadata.name}: no API path known; add the kind to API in chart.test.ts`);
  const base = o.apiVersion.includes('/') ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
  if (!api.namespaced) return `${base}/${api.plural}/${o.metadata.name}`;
  assert.ok(o.metadata.namespace, `${o.kind} ${o.metadata.name} names no namespace`);
  return `${base}/namespaces/${o.metadata.namespace}/${api.plural}/${o.metadata.name}`;
}

/** Server-side applies every object with dryRun=All and strict field validation; returns the failures. */
async function dryRunApply(http: KubeHttp, objs: K8sObject[]): Promise<string[]> {
  const failures: string[] = [];
  for (const o of objs) {
    try {
      await http.request('PATCH', apiPath(o), {
        query: { dryRun: 'All', fieldManager: 'paddock-chart-test', fieldValidation: 'Strict', force: true },
        contentType: PATCH_CONTENT_TYPES.apply,
        body: o,
      });
    } catch (err) {
      failures.push(`${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}: ${(err as Error).message}`);
    }
  }
  return failures;
}

/** Prometheus' duration syntax, as the operator validates it. */
const DURATION =
  '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$';

/**
 * The ServiceMonitor API for the dry run and the install: the test cluster has no Prometheus
 * Operator. A schema for the fields ServiceMonitors of this chart (and ARC's) use, structural and
 * with the operator's duration syntax, so strict validation still rejects a misspelt field.
 */
const SERVICE_MONITOR_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'servicemonitors.monitoring.coreos.com', labels: { 'paddock.dev/test': 'true' } },
  spec: {
    group: 'monitoring.coreos.com',
    scope: 'Namespaced',
    names: {
      kind: 'ServiceMonitor',
      listKind: 'ServiceMonitorList',
      plural: 'servicemonitors',
      singular: 'servicemonitor',
    },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: 'object',
            required: ['spec'],
            properties: {
              apiVersion: { type: 'string' },
              kind: { type: 'string' },
              metadata: { type: 'object' },
              spec: {
                type: 'object',
                required: ['selector'],
                properties: {
                  jobLabel: { type: 'string' },
                  namespaceSelector: {
                    type: 'object',
                    properties: {
                      any: { type: 'boolean' },
                      matchNames: { type: 'array', items: { type: 'string' } },
                    },
                  },
                  selector: {
                    type: 'object',
                    properties: {
                      matchLabels: { type: 'object', additionalProperties: { type: 'string' } },
                      matchExpressions: {
                        type: 'array',
                        items: {
                          type: 'object',
                          required: ['key', 'operator'],
                          properties: {
                            key: { type: 'string' },
                            operator: { type: 'string' },
                            values: { type: 'array', items: { type: 'string' } },
                          },
                        },
                      },
                    },
                  },
                  endpoints: {
                    type: 'array',
                    items: {
                      type: 'object',
                      properties: {
                        port: { type: 'string' },
                        path: { type: 'string' },
                        scheme: { type: 'string', enum: ['http', 'https'] },
                        interval: { type: 'string', pattern: DURATION },
                        scrapeTimeout: { type: 'string', pattern: DURATION },
                        honorLabels: { type: 'boolean' },
                        bearerTokenFile: { type: 'string' },
                        tlsConfig: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    ],
  },
};

/** Runs `node hack/gen-manifests.ts --check`. */
function manifestsCheck(): Promise<HelmResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['hack/gen-manifests.ts', '--check'], {
      cwd: root,
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
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

describe('Helm chart', () => {
  let cluster: TestCluster;
  let http: KubeHttp;
  let helm: string;
  let home: string;
  let env: Record<string, string>;
  /** Namespaces this file created; deleted after it, whatever happened. */
  const namespaces: string[] = [];
  /** Removes what the tests left in the cluster (run last, even after a failure). */
  const cleanups: (() => Promise<unknown>)[] = [];

  before(async () => {
    cluster = await useCluster();
    http = new KubeHttp(cluster.kubeConfig);
    helm = await ensureHelm();
    home = mkdtempSync(path.join(os.tmpdir(), 'paddock-chart-test-'));
    const kubeconfig = process.env.PADDOCK_TEST_KUBECONFIG || cluster.own?.kubeconfigPath;
    assert.ok(kubeconfig, 'the test cluster has no kubeconfig file');
    env = isolatedHelmEnv(home, kubeconfig);
  });

  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    for (const name of namespaces)
      await http?.request('DELETE', `/api/v1/namespaces/${name}`).catch(() => undefined);
    http?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const helmRun = (args: string[]) => runHelm(helm, args, env);
  async function helmOk(args: string[]): Promise<HelmResult> {
    const r = await helmRun(args);
    assert.equal(r.code, 0, `helm ${args.join(' ')} failed:\n${r.stderr}${r.stdout}`);
    return r;
  }
  const valuesArgs = (files: string[], set: string[] = []) => [
    ...files.flatMap((f) => ['--values', fixture(f)]),
    ...set.flatMap((s) => ['--set', s]),
  ];
  async function template(files: string[], set: string[] = [], namespace = 'paddock-test') {
    const r = await helmOk(['template', RELEASE, CHART, '--namespace', namespace, ...valuesArgs(files, set)]);
    return parseManifests(r.stdout);
  }
  async function freshNamespace(prefix: string): Promise<string> {
    const ns = await http.request<{ metadata: { name: string } }>('POST', '/api/v1/namespaces', {
      body: { metadata: { generateName: `${prefix}-`, labels: { 'paddock.dev/test': 'true' } } },
    });
    namespaces.push(ns.metadata.name);
    return ns.metadata.name;
  }
  /** Makes the ServiceMonitor API exist, and removes it after the file when this test added it. */
  let serviceMonitorApi: Promise<void> | undefined;
  function ensureServiceMonitorApi(): Promise<void> {
    serviceMonitorApi ??= (async () => {
      const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${SERVICE_MONITOR_CRD.metadata.name}`;
      try {
        await http.request('GET', crdPath);
        return; // someone's Prometheus Operator CRD: use it, leave it
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      await http.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
        body: SERVICE_MONITOR_CRD,
      });
      cleanups.push(() => http.request('DELETE', crdPath));
      await eventually('the ServiceMonitor API served', () =>
        http.request('GET', '/apis/monitoring.coreos.com/v1/servicemonitors').then(() => true),
      );
    })();
    return serviceMonitorApi;
  }

  test("the chart's CRDs are config/crd's, byte for byte", () => {
    const crdDir = path.join(root, 'config', 'crd');
    const chartCrdDir = path.join(root, CHART, 'crds');
    const crds = readdirSync(crdDir).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
    assert.deepEqual(readdirSync(chartCrdDir).sort(), crds.sort());
    for (const f of crds) {
      assert.ok(
        readFileSync(path.join(chartCrdDir, f)).equals(readFileSync(path.join(crdDir, f))),
        `${CHART}/crds/${f} differs from config/crd/${f}: run make manifests`,
      );
    }
  });

  test('helm lint --strict passes with every values file and rejects values of the wrong type', async () => {
    for (const f of FIXTURE_FILES) await helmOk(['lint', CHART, '--strict', '--values', fixture(f)]);
    const bad = await helmRun(['lint', CHART, '--set', 'replicaCount=three']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stdout + bad.stderr, /replicaCount/);
  });

  describe('helm template', () => {
    /** Every rendering: the invariants that hold whatever the values. */
    function checkInvariants(objs: K8sObject[], file: string) {
      const where = (o: K8sObject) => `${file}: ${o.kind} ${o.metadata.name}`;
      const deployments = all(objs, 'Deployment');
      for (const o of objs) {
        const api = API[`${o.apiVersion}/${o.kind}`];
        assert.ok(api, `${where(o)}: unexpected kind`);
        if (api.namespaced && o.kind !== 'ServiceMonitor' && !['Role', 'RoleBinding'].includes(o.kind))
          assert.equal(o.metadata.namespace, 'paddock-test', `${where(o)}: in the release namespace`);
        assert.equal(o.metadata.labels?.['app.kubernetes.io/instance'], RELEASE, `${where(o)}: labelled`);
      }
      // paddock registers its webhooks itself and needs no cert-manager.
      for (const kind of [
        'MutatingWebhookConfiguration',
        'ValidatingWebhookConfiguration',
        'Certificate',
        'Issuer',
      ])
        assert.equal(all(objs, kind).length, 0, `${file}: renders no ${kind}`);
      for (const d of deployments) {
        const pod = d.spec.template;
        assert.ok(matches(d.spec.selector.matchLabels, pod.metadata.labels), `${where(d)}: selects its pods`);
        for (const other of deployments.filter((x) => x !== d))
          assert.ok(
            !matches(d.spec.selector.matchLabels, other.spec.template.metadata.labels),
            `${where(d)}: selects no pod of ${other.metadata.name}`,
          );
        // The restricted Pod Security Standard, and a writable /tmp only.
        const c = containerOf(d);
        assert.equal(pod.spec.securityContext.runAsNonRoot, true, where(d));
        assert.equal(pod.spec.securityContext.seccompProfile.type, 'RuntimeDefault', where(d));
        assert.equal(c.securityContext.allowPrivilegeEscalation, false, where(d));
        assert.equal(c.securityContext.readOnlyRootFilesystem, true, where(d));
        assert.deepEqual(c.securityContext.capabilities.drop, ['ALL'], where(d));
        const tmp = c.volumeMounts.find((m: Json) => m.mountPath === '/tmp');
        assert.ok(tmp, `${where(d)}: mounts /tmp`);
        assert.deepEqual(
          pod.spec.volumes.find((v: Json) => v.name === tmp.name).emptyDir,
          {},
          `${where(d)}: /tmp is an emptyDir`,
        );
        assert.ok(c.resources?.requests?.cpu && c.resources?.limits?.memory, `${where(d)}: sized`);
        // The arguments are flags paddock has, with values it accepts.
        const [command, ...flags] = argsOf(d);
        const specs: FlagSpec[] = command === 'run' ? RUN_FLAGS : WEBHOOK_SERVER_FLAGS;
        assert.ok(command === 'run' || command === 'webhook-server', `${where(d)}: runs ${command}`);
        const literalEnv = Object.fromEntries(
          (c.env as Json[]).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]),
        );
        const parsed = parseFlags(specs, flags, literalEnv);
        assert.deepEqual(parsed.positionals, [], `${where(d)}: no stray arguments`);
        // The variables the chart sets are paddock's (the user's own env aside).
        const known = new Set(specs.flatMap((s) => (s.env ? [s.env] : [])));
        for (const e of c.env as Json[])
          if (/^(GITHUB_|POD_NAMESPACE$)/.test(e.name))
            assert.ok(known.has(e.name), `${where(d)}: ${e.name}`);
        // Probes on /healthz and /readyz of a port the container has.
        const ports = new Map<string | number, number>();
        for (const p of c.ports) {
          ports.set(p.name, p.containerPort);
          ports.set(p.containerPort, p.containerPort);
        }
        assert.equal(c.livenessProbe.httpGet.path, '/healthz', where(d));
        assert.equal(c.readinessProbe.httpGet.path, '/readyz', where(d));
        for (const probe of [c.livenessProbe, c.readinessProbe])
          assert.ok(ports.has(probe.httpGet.port), `${where(d)}: probe port ${probe.httpGet.port}`);
      }
      // Every Service, PDB, NetworkPolicy selects the pods of exactly one Deployment, by ports it has.
      const podsOf = (selector: Record<string, string>) =>
        deployments.filter((d) => matches(selector, d.spec.template.metadata.labels));
      for (const s of all(objs, 'Service')) {
        const [d, ...more] = podsOf(s.spec.selector);
        assert.ok(d && more.length === 0, `${where(s)}: selects one Deployment's pods`);
        const names = new Set(containerOf(d).ports.map((p: Json) => p.name));
        for (const p of s.spec.ports)
          assert.ok(names.has(p.targetPort), `${where(s)}: targetPort ${p.targetPort}`);
      }
      for (const kind of ['PodDisruptionBudget', 'NetworkPolicy']) {
        for (const o of all(objs, kind)) {
          const selector =
            kind === 'NetworkPolicy' ? o.spec.podSelector.matchLabels : o.spec.selector.matchLabels;
          assert.equal(podsOf(selector).length, 1, `${where(o)}: selects one Deployment's pods`);
        }
      }
      for (const m of all(objs, 'ServiceMonitor')) {
        const services = all(objs, 'Service').filter((s) =>
          matches(m.spec.selector.matchLabels, s.metadata.labels),
        );
        assert.equal(services.length, 1, `${where(m)}: selects one Service`);
        assert.ok(
          services[0]!.spec.ports.some((p: Json) => p.name === m.spec.endpoints[0].port),
          `${where(m)}: scrapes a port of the Service`,
        );
        assert.deepEqual(m.spec.namespaceSelector.matchNames, ['paddock-test'], where(m));
      }
    }

    test('every values file renders objects that fit together', async () => {
      for (const f of FIXTURE_FILES) checkInvariants(await template([f]), f);
    });

    test('defaults: the controller, its Services and RBAC; no Secret, budget, monitor or policy', async () => {
      const objs = await template(['defaults.yaml']);
      assert.deepEqual([...new Set(objs.map((o) => o.kind))].sort(), [
        'ClusterRole',
        'ClusterRoleBinding',
        'Deployment',
        'Role',
        'RoleBinding',
        'Service',
        'ServiceAccount',
      ]);
      const d = one(objs, 'Deployment', FULLNAME);
      assert.equal(argsOf(d)[0], 'run');
      assert.equal(d.spec.replicas, 1);
      assert.equal(flag(d, 'enable-leader-election'), true);
      assert.equal(flag(d, 'leader-election-id'), FULLNAME);
      assert.equal(flag(d, 'webhook-addr'), ':9443');
      assert.equal(flag(d, 'webhook-service'), `${FULLNAME}-webhook`);
      // The ClusterRole of the release owns the webhook configurations paddock registers.
      assert.equal(flag(d, 'owner-cluster-role'), FULLNAME);
      one(objs, 'ClusterRole', FULLNAME);
      assert.equal(flag(d, 'metrics-addr'), ':8080');
      assert.equal(flag(d, 'health-probe-addr'), ':8081');
      assert.equal(flag(d, 'watch-namespace'), undefined);
      assert.equal(flag(d, 'install-crds'), undefined, 'CRDs come from the chart');
      assert.equal(flag(d, 'runner-image'), 'summerwind/actions-runner:latest');
      assert.equal(flag(d, 'docker-image'), 'docker:dind');
      const c = containerOf(d);
      assert.equal(c.image, 'paddock:0.1.0');
      assert.deepEqual(envOf(d, 'POD_NAMESPACE').valueFrom, {
        fieldRef: { fieldPath: 'metadata.namespace' },
      });
      for (const [name, key] of [
        ['GITHUB_TOKEN', 'github_token'],
        ['GITHUB_APP_ID', 'github_app_id'],
        ['GITHUB_APP_INSTALLATION_ID', 'github_app_installation_id'],
        ['GITHUB_APP_PRIVATE_KEY', 'github_app_private_key'],
      ] as const) {
        assert.deepEqual(envOf(d, name).valueFrom, {
          secretKeyRef: { name: 'controller-manager', key, optional: true },
        });
      }
      assert.deepEqual(c.livenessProbe.httpGet, { path: '/healthz', port: 8081 });
      assert.deepEqual(c.readinessProbe.httpGet, { path: '/readyz', port: 8081 });
      assert.deepEqual(c.resources, {
        requests: { cpu: '100m', memory: '128Mi' },
        limits: { memory: '512Mi' },
      });
      assert.equal(
        d.spec.template.metadata.annotations,
        undefined,
        'no checksum of a Secret the chart does not make',
      );
      const webhook = one(objs, 'Service', `${FULLNAME}-webhook`);
      assert.deepEqual(webhook.spec.ports, [
        { name: 'https', port: 443, targetPort: 'webhook-server', protocol: 'TCP' },
      ]);
      assert.equal(c.ports.find((p: Json) => p.name === 'webhook-server').containerPort, 9443);
      const metrics = one(objs, 'Service', `${FULLNAME}-metrics`);
      assert.deepEqual(metrics.spec.ports, [
        { name: 'metrics', port: 8080, targetPort: 'metrics', protocol: 'TCP' },
      ]);
      // helm template sees no cluster, so it knows no API server address: no policy that would lock it out.
      assert.equal(all(objs, 'NetworkPolicy').length, 0);
    });

    test("an ARC user's values file: its values reach paddock, ARC-only keys change nothing", async () => {
      const objs = await template(['arc.yaml']);
      const d = one(objs, 'Deployment', FULLNAME);
      assert.equal(flag(d, 'sync-period'), '5m');
      assert.equal(flag(d, 'default-scale-down-delay'), '15m');
      assert.equal(flag(d, 'enable-leader-election'), true);
      assert.equal(flag(d, 'leader-election-id'), 'actions-runner-controller');
      assert.equal(flag(d, 'runner-image'), 'summerwind/actions-runner-dind:v2.311.0-ubuntu-22.04');
      assert.equal(flag(d, 'docker-image'), 'docker:24.0.7-dind');
      assert.deepEqual(flagsNamed(d, 'runner-image-pull-secret'), ['regcred']);
      assert.equal(flag(d, 'docker-registry-mirror'), 'https://mirror.gcr.io');
      assert.equal(flag(d, 'docker-gid'), '121');
      assert.equal(flag(d, 'runner-status-update-hook'), true);
      assert.equal(flag(d, 'log-level'), 'info');
      assert.equal(flag(d, 'metrics-addr'), ':8443', 'metrics.port, served by paddock itself');
      assert.equal(envOf(d, 'GITHUB_ENTERPRISE_URL').value, 'https://github.example.com');
      assert.equal(envOf(d, 'GITHUB_APP_ID').valueFrom.secretKeyRef.name, 'arc-github-app');
      assert.equal(envOf(d, 'http_proxy').value, 'http://proxy.example.com:3128', 'env as a map');
      const pod = d.spec.template;
      assert.equal(pod.metadata.labels.team, 'platform');
      assert.equal(pod.metadata.annotations['cluster-autoscaler.kubernetes.io/safe-to-evict'], 'false');
      assert.equal(pod.spec.priorityClassName, 'system-cluster-critical');
      assert.deepEqual(pod.spec.nodeSelector, { 'kubernetes.io/os': 'linux' });
      assert.equal(pod.spec.tolerations[0].key, 'CriticalAddonsOnly');
      assert.deepEqual(containerOf(d).resources.limits, { cpu: '500m', memory: '300Mi' });
      // ARC's empty security contexts keep paddock's hardened defaults.
      assert.equal(containerOf(d).securityContext.readOnlyRootFilesystem, true);
      // No kube-rbac-proxy, cert-manager or ARC image.
      assert.deepEqual(
        pod.spec.containers.map((c: Json) => c.name),
        ['manager'],
      );
      assert.equal(all(objs, 'Secret').length, 0, 'the Secrets exist already (create: false)');
      assert.equal(
        one(objs, 'ServiceAccount', FULLNAME).metadata.annotations?.['eks.amazonaws.com/role-arn'],
        'arn:aws:iam::123456789012:role/arc',
      );

      assert.equal(one(objs, 'PodDisruptionBudget', FULLNAME).spec.minAvailable, 1);
      assert.equal(one(objs, 'PodDisruptionBudget', WEBHOOK_SERVER).spec.maxUnavailable, 1);

      const monitors = all(objs, 'ServiceMonitor');
      assert.deepEqual(monitors.map((m) => m.metadata.name).sort(), [FULLNAME, WEBHOOK_SERVER]);
      for (const m of monitors) {
        assert.equal(m.metadata.namespace, 'monitoring');
        assert.equal(m.metadata.labels?.release, 'kube-prometheus-stack');
        assert.deepEqual(m.spec.endpoints, [
          { port: 'metrics', path: '/metrics', scheme: 'http', interval: '30s', scrapeTimeout: '10s' },
        ]);
      }
      const metrics = one(objs, 'Service', `${FULLNAME}-metrics`);
      assert.equal(metrics.metadata.annotations?.['prometheus.io/scrape'], 'true');

      // The GitHub webhook server, as ARC's.
      const w = one(objs, 'Deployment', WEBHOOK_SERVER);
      assert.equal(argsOf(w)[0], 'webhook-server');
      assert.equal(w.spec.replicas, 2);
      assert.equal(flag(w, 'queue-limit'), '200');
      assert.equal(flag(w, 'log-level'), 'info');
      assert.deepEqual(envOf(w, 'GITHUB_WEBHOOK_SECRET_TOKEN').valueFrom, {
        secretKeyRef: { name: 'github-webhook-server', key: 'github_webhook_secret_token', optional: true },
      });
      // useRunnerGroupsVisibility with secret.enabled: GitHub credentials from the webhook server's Secret.
      assert.equal(envOf(w, 'GITHUB_TOKEN').valueFrom.secretKeyRef.name, 'github-webhook-server');
      assert.equal(envOf(w, 'GITHUB_ENTERPRISE_URL').value, 'https://github.example.com');
      const ws = one(objs, 'Service', WEBHOOK_SERVER);
      assert.equal(ws.spec.type, 'NodePort');
      assert.equal(ws.spec.ports[0].nodePort, 31080);
      const ingress = one(objs, 'Ingress', WEBHOOK_SERVER);
      assert.equal(ingress.spec.ingressClassName, 'nginx');
      assert.equal(ingress.metadata.annotations?.['cert-manager.io/cluster-issuer'], 'letsencrypt');
      assert.deepEqual(ingress.spec.tls, [
        { secretName: 'arc-webhook-tls', hosts: ['arc-webhook.example.com'] },
      ]);
      assert.deepEqual(ingress.spec.rules, [
        {
          host: 'arc-webhook.example.com',
          http: {
            paths: [
              {
                path: '/',
                pathType: 'Prefix',
                backend: { service: { name: WEBHOOK_SERVER, port: { number: 80 } } },
              },
            ],
          },
        },
      ]);
    });

    test('scope: --watch-namespace for both servers; singleNamespace alone means the release namespace', async () => {
      const objs = await template(['single-namespace.yaml']);
      assert.equal(flag(one(objs, 'Deployment', FULLNAME), 'watch-namespace'), 'team-a');
      assert.equal(flag(one(objs, 'Deployment', WEBHOOK_SERVER), 'watch-namespace'), 'team-a');
      assert.ok(
        objs.some((o) => o.kind === 'Role' && o.metadata.namespace === 'team-a'),
        'RBAC in the watched namespace',
      );
      const own = await template(['defaults.yaml'], ['scope.singleNamespace=true']);
      assert.equal(flag(one(own, 'Deployment', FULLNAME), 'watch-namespace'), 'paddock-test');
    });

    test('replicaCount > 1 turns leader election on even when the values turn it off', async () => {
      const objs = await template(['replicas.yaml']);
      const d = one(objs, 'Deployment', FULLNAME);
      assert.equal(d.spec.replicas, 3);
      assert.equal(flag(d, 'enable-leader-election'), true);
      assert.equal(one(objs, 'PodDisruptionBudget', FULLNAME).spec.minAvailable, 2);
      const single = await template(['replicas.yaml'], ['replicaCount=1']);
      assert.equal(flag(one(single, 'Deployment', FULLNAME), 'enable-leader-election'), undefined);
      const both = await helmRun([
        'template',
        RELEASE,
        CHART,
        ...valuesArgs(['replicas.yaml'], ['podDisruptionBudget.maxUnavailable=1']),
      ]);
      assert.notEqual(both.code, 0);
      assert.match(both.stderr, /minAvailable or maxUnavailable, not both/);
    });

    test('NetworkPolicy: the API server alone reaches the webhook port; none without its addresses', async () => {
      const objs = await template(['network-policy.yaml']);
      const np = one(objs, 'NetworkPolicy', FULLNAME);
      assert.deepEqual(np.spec.policyTypes, ['Ingress']);
      assert.deepEqual(
        np.spec.podSelector.matchLabels,
        one(objs, 'Deployment', FULLNAME).spec.selector.matchLabels,
      );
      const [webhookRule, metricsRule, ...rest] = np.spec.ingress;
      assert.deepEqual(rest, []);
      assert.deepEqual(webhookRule.from, [
        { ipBlock: { cidr: '10.0.0.10/32' } },
        { ipBlock: { cidr: '10.0.0.11/32' } },
      ]);
      assert.deepEqual(webhookRule.ports, [{ port: 'webhook-server', protocol: 'TCP' }]);
      assert.deepEqual(metricsRule.from, [
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
      ]);
      assert.deepEqual(metricsRule.ports, [
        { port: 'metrics', protocol: 'TCP' },
        { port: 8081, protocol: 'TCP' },
      ]);
      const w = one(objs, 'NetworkPolicy', WEBHOOK_SERVER);
      assert.deepEqual(w.spec.ingress[0].ports, [{ port: 'http', protocol: 'TCP' }]);
      assert.deepEqual(w.spec.ingress[0].from, [
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } },
      ]);

      const open = await template(['defaults.yaml'], ['githubWebhookServer.enabled=true']);
      assert.deepEqual(
        all(open, 'NetworkPolicy').map((o) => o.metadata.name),
        [WEBHOOK_SERVER],
        'no API server address: no policy for the controller; the webhook server stays reachable',
      );
      assert.equal(one(open, 'NetworkPolicy', WEBHOOK_SERVER).spec.ingress[0].from, undefined);
      const off = await template(['network-policy.yaml'], ['networkPolicy.enabled=false']);
      assert.equal(all(off, 'NetworkPolicy').length, 0);
    });

    test("paddock's own values and the Secrets the chart creates", async () => {
      const objs = await template(['paddock.yaml']);
      const d = one(objs, 'Deployment', FULLNAME);
      assert.equal(flag(d, 'registration-timeout'), '15m');
      assert.equal(flag(d, 'force-delete-timeout'), '2m');
      assert.equal(flag(d, 'webhook-jit-config'), true);
      assert.equal(flag(d, 'common-runner-labels'), 'linux,paddock');
      assert.equal(flag(d, 'registration-recheck-interval'), '2m');
      assert.equal(envOf(d, 'NODE_OPTIONS').value, '--max-old-space-size=384', 'env as a list');
      assert.ok(containerOf(d).volumeMounts.some((m: Json) => m.mountPath === '/etc/ghes-ca'));
      assert.ok(d.spec.template.spec.volumes.some((v: Json) => v.configMap?.name === 'ghes-ca'));
      for (const o of objs)
        assert.equal(o.metadata.labels?.['cost-center'], 'ci', `${o.kind} ${o.metadata.name}`);

      const secret = one(objs, 'Secret', 'controller-manager');
      const data = Object.fromEntries(
        Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
      );
      assert.deepEqual(Object.keys(data).sort(), [
        'github_app_id',
        'github_app_installation_id',
        'github_app_private_key',
      ]);
      assert.equal(data.github_app_id, '123456', 'a number stays a whole number');
      assert.equal(data.github_app_installation_id, '7891011');
      assert.match(data.github_app_private_key!, /^-----BEGIN RSA PRIVATE KEY-----\n/);
      assert.match(d.spec.template.metadata.annotations['checksum/auth-secret'], /^[0-9a-f]{64}$/);
      const changed = await template(['paddock.yaml'], ['authSecret.github_app_id=654321']);
      assert.notEqual(
        one(changed, 'Deployment', FULLNAME).spec.template.metadata.annotations['checksum/auth-secret'],
        d.spec.template.metadata.annotations['checksum/auth-secret'],
        'new credentials restart the pods',
      );

      const whSecret = one(objs, 'Secret', 'github-webhook-server');
      assert.equal(
        Buffer.from(whSecret.data!.github_webhook_secret_token!, 'base64').toString(),
        'not-a-real-secret',
      );
      const w = one(objs, 'Deployment', WEBHOOK_SERVER);
      assert.match(w.spec.template.metadata.annotations['checksum/secret'], /^[0-9a-f]{64}$/);
      assert.equal(envOf(w, 'GITHUB_TOKEN'), undefined, 'no credentials without useRunnerGroupsVisibility');
      assert.equal(one(objs, 'PodDisruptionBudget', FULLNAME).spec.maxUnavailable, 1, 'the default budget');
      const ingress = one(objs, 'Ingress', WEBHOOK_SERVER);
      assert.deepEqual(ingress.spec.rules[0].http.paths[0].path, '/');
    });
  });

  test('the ClusterRole lets paddock create each runner’s Role, only with the values that ask for it', async () => {
    // Kubernetes lets a ServiceAccount create a Role only with rules it holds itself (no escalation):
    // the per-runner Roles of --runner-status-update-hook and containerMode kubernetes must be
    // covered by the chart's ClusterRole when, and only when, their values are set.
    const ns = await freshNamespace('t-chart-escalate');
    const runner = (name: string, containerMode?: string): Runner => ({
      apiVersion: API_VERSION,
      kind: 'Runner',
      metadata: { name, namespace: ns, uid: '00000000-0000-4000-8000-000000000000' },
      spec: { organization: 'acme', ...(containerMode ? { containerMode } : {}) },
    });
    const cases: { sets: string[]; hook: boolean; kubernetesMode: boolean; allowed: boolean }[] = [
      { sets: [], hook: true, kubernetesMode: false, allowed: false },
      { sets: [], hook: false, kubernetesMode: true, allowed: false },
      { sets: ['runner.statusUpdateHook.enabled=true'], hook: true, kubernetesMode: false, allowed: true },
      { sets: ['runner.statusUpdateHook.enabled=true'], hook: false, kubernetesMode: true, allowed: false },
      {
        sets: ['rbac.allowGrantingKubernetesContainerModePermissions=true'],
        hook: false,
        kubernetesMode: true,
        allowed: true,
      },
      {
        sets: [
          'rbac.allowGrantingKubernetesContainerModePermissions=true',
          'runner.statusUpdateHook.enabled=true',
        ],
        hook: true,
        kubernetesMode: true,
        allowed: true,
      },
    ];
    for (const [i, c] of cases.entries()) {
      const where = `${c.sets.join(',') || 'defaults'}: hook ${c.hook}, kubernetes mode ${c.kubernetesMode}`;
      const rules = one(await template(['defaults.yaml'], c.sets), 'ClusterRole', FULLNAME).rules;
      const role = `t-chart-escalate-${randomBytes(4).toString('hex')}`;
      await http.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
        body: { metadata: { name: role, labels: { 'paddock.dev/test': 'true' } }, rules },
      });
      cleanups.push(() => http.request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${role}`));
      const sa = `controller-${i}`;
      await http.request('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, {
        body: { metadata: { name: sa } },
      });
      await http.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
        body: {
          metadata: { name: sa },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
          subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
        },
      });
      const { status } = await http.request<{ status: { token: string } }>(
        'POST',
        `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`,
        { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {} } },
      );
      const asController = new KubeHttp(withToken(cluster.kubeConfig, status.token));
      try {
        const objects = runnerRbacObjects(
          runner(`runner-${i}`, c.kubernetesMode ? 'kubernetes' : undefined),
          {
            useRunnerStatusUpdateHook: c.hook,
          },
        );
        assert.ok(objects, where);
        const strip = <T extends { metadata?: object }>(o: T) => ({
          ...o,
          metadata: { ...o.metadata, ownerReferences: undefined },
        });
        const create = (plural: string, body: unknown) =>
          asController
            .request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/${plural}`, { body })
            .then(
              () => 'created',
              (err: KubeError) => `${err.code} ${err.message}`,
            );
        // A new RoleBinding reaches the authorizer a moment after it is written.
        await eventually(`${where}: the binding is in force`, () =>
          asController.request('GET', `/api/v1/namespaces/${ns}/pods`).then(
            () => true,
            () => false,
          ),
        );
        const outcome = await create('roles', strip(objects.role));
        if (c.allowed) {
          assert.equal(outcome, 'created', where);
          assert.equal(await create('rolebindings', strip(objects.roleBinding)), 'created', where);
        } else {
          assert.match(outcome, /^403 /, where);
        }
      } finally {
        asController.close();
      }
    }
  });

  test('server-side dry run: every object of every values file is valid for the API server', async () => {
    await ensureServiceMonitorApi();
    const ns = await freshNamespace('t-chart-dry');
    const slices = await http.request<{ items: unknown[] }>(
      'GET',
      '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices',
      { query: { labelSelector: 'kubernetes.io/service-name=kubernetes' } },
    );
    const failures: string[] = [];
    for (const f of FIXTURE_FILES) {
      const values = parse(readFileSync(fixture(f), 'utf8')) ?? {};
      // Objects go where the test may create them: the ServiceMonitor and the watched namespace's RBAC.
      const set = ['metrics.serviceMonitor.namespace='];
      if (values.scope?.watchNamespace) set.push(`scope.watchNamespace=${ns}`);
      const r = await helmOk([
        'install',
        RELEASE,
        CHART,
        '--namespace',
        ns,
        '--dry-run=server',
        '--output',
        'json',
        ...valuesArgs([f], set),
      ]);
      const release = JSON.parse(r.stdout) as { manifest: string; info: { notes: string } };
      const objs = parseManifests(release.manifest);
      assert.ok(objs.length > 0, f);
      failures.push(...(await dryRunApply(http, objs)).map((m) => `${f}: ${m}`));
      const notes = release.info.notes;
      assert.match(notes, new RegExp(`kubectl -n ${ns} rollout status deployment/${FULLNAME}`), f);
      if (slices.items.length === 0 && !values.networkPolicy?.apiServerCIDRs) {
        // This cluster's API server advertises a loopback address: no `kubernetes` endpoints.
        assert.equal(all(objs, 'NetworkPolicy').filter((o) => o.metadata.name === FULLNAME).length, 0, f);
        assert.match(notes, /No NetworkPolicy protects the admission-webhook port/, f);
      }
      if (f === 'arc.yaml') {
        assert.match(notes, /ARC values this chart accepts but ignores:/);
        for (const key of ['certManagerEnabled', 'metrics.proxy', 'githubAPICacheDuration'])
          assert.ok(notes.includes(`  - ${key}`), `NOTES names ${key}:\n${notes}`);
      }
    }
    assert.deepEqual(failures, []);
  });

  test("without apiServerCIDRs, the policy takes the API server's addresses from its EndpointSlices", async () => {
    const ns = await freshNamespace('t-chart-lookup');
    // Stand-ins for the API server's own slices (this one advertises loopback and has none);
    // only the Helm lookup reads them.
    const suffix = randomBytes(3).toString('hex');
    const slice = (family: 'IPv4' | 'IPv6', address: string) => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: `paddock-chart-test-${family.toLowerCase()}-${suffix}`,
        labels: {
          'kubernetes.io/service-name': 'kubernetes',
          'endpointslice.kubernetes.io/managed-by': 'paddock-chart-test',
          'paddock.dev/test': 'true',
        },
      },
      addressType: family,
      endpoints: [{ addresses: [address] }],
      ports: [{ name: 'https', port: 6443, protocol: 'TCP' }],
    });
    const slicesPath = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices';
    for (const s of [slice('IPv4', '192.0.2.10'), slice('IPv6', '2001:db8::10')]) {
      await http.request('POST', slicesPath, { body: s });
      cleanups.push(() => http.request('DELETE', `${slicesPath}/${s.metadata.name}`));
    }
    try {
      const r = await helmOk([
        'install',
        RELEASE,
        CHART,
        '--namespace',
        ns,
        '--dry-run=server',
        '--output',
        'json',
      ]);
      const release = JSON.parse(r.stdout) as { manifest: string; info: { notes: string } };
      const np = one(parseManifests(release.manifest), 'NetworkPolicy', FULLNAME);
      const cidrs = np.spec.ingress[0].from.map((p: Json) => p.ipBlock.cidr);
      assert.ok(cidrs.includes('192.0.2.10/32'), cidrs.join(', '));
      assert.ok(cidrs.includes('2001:db8::10/128'), cidrs.join(', '));
      assert.match(
        release.info.notes,
        /may reach the\nadmission-webhook port \(the API server's addresses at install time/,
      );
      assert.deepEqual(await dryRunApply(http, [np]), []);
    } finally {
      for (const s of ['ipv4', 'ipv6'])
        await http
          .request('DELETE', `${slicesPath}/paddock-chart-test-${s}-${suffix}`)
          .catch(() => undefined);
    }
  });

  test('helm install creates every object; helm uninstall removes them and the webhook configurations', async () => {
    await ensureServiceMonitorApi();
    const ns = await freshNamespace('t-chart-install');
    const release = `paddock-${randomBytes(3).toString('hex')}`;
    const installArgs = ['install', release, CHART, '--namespace', ns, ...valuesArgs(['paddock.yaml'])];
    installArgs.push(
      '--set',
      'metrics.serviceMonitor.enable=true',
      '--set',
      'networkPolicy.apiServerCIDRs={192.0.2.10/32}',
    );
    let installed = false;
    cleanups.push(async () => {
      if (installed) await helmRun(['uninstall', release, '--namespace', ns, '--ignore-not-found']);
    });
    await helmOk(installArgs);
    installed = true;
    const objs = parseManifests((await helmOk(['get', 'manifest', release, '--namespace', ns])).stdout);
    const kinds = new Set(objs.map((o) => o.kind));
    for (const kind of [
      'Deployment',
      'Service',
      'ServiceMonitor',
      'NetworkPolicy',
      'PodDisruptionBudget',
      'Ingress',
    ])
      assert.ok(kinds.has(kind), `installed a ${kind}: ${describeObjects(objs)}`);
    for (const o of objs) await http.request('GET', apiPath(o)); // each exists
    // The Deployment went on to a ReplicaSet and pods (which never start: there is no kubelet).
    await eventually('the controller Deployment to create its pods', async () => {
      const pods = await http.request<{ items: unknown[] }>('GET', `/api/v1/namespaces/${ns}/pods`, {
        query: {
          labelSelector: `app.kubernetes.io/instance=${release},app.kubernetes.io/component=controller-manager`,
        },
      });
      return pods.items.length === 1;
    });

    // What paddock does at start-up with --owner-cluster-role: its webhook configurations name the
    // release's ClusterRole as owner. (An empty configuration: nothing in the cluster is intercepted.)
    const fullname = `${release}`; // the release name contains "paddock"
    const d = one(objs, 'Deployment', fullname);
    assert.equal(flag(d, 'owner-cluster-role'), fullname);
    const owner = await clusterRoleOwner(http, fullname);
    const configPath = `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${release}-chart-test`;
    await http.request('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
      body: { metadata: { name: `${release}-chart-test`, ownerReferences: [owner] }, webhooks: [] },
    });
    cleanups.push(() => http.request('DELETE', configPath));

    await helmOk(['uninstall', release, '--namespace', ns, '--wait', '--timeout', '120s']);
    installed = false;
    const gone = (p: string) =>
      http.request('GET', p).then(
        () => false,
        (err) => isNotFound(err),
      );
    for (const o of objs) await eventually(`${o.kind} ${o.metadata.name} deleted`, () => gone(apiPath(o)));
    await eventually(
      'the garbage collector to delete the webhook configuration',
      () => gone(configPath),
      60_000,
    );
    const releases = await http.request<{ items: unknown[] }>('GET', `/api/v1/namespaces/${ns}/secrets`, {
      query: { labelSelector: `owner=helm,name=${release}` },
    });
    assert.deepEqual(releases.items, [], 'no release record left');
  });

  test('config/default is the chart rendered with config/default/values.yaml, and valid', async () => {
    const r = await manifestsCheck();
    assert.equal(r.code, 0, `config/default is stale: run make manifests\n${r.stderr}`);
    const kustomization = (dir: string) =>
      parse(readFileSync(path.join(root, dir, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
    for (const dir of ['config/default', 'config/crd']) {
      for (const res of kustomization(dir).resources) {
        const p = path.join(root, dir, res);
        assert.ok(existsSync(p), `${dir}/kustomization.yaml: ${res} exists`);
        if (statSync(p).isDirectory())
          assert.ok(existsSync(path.join(p, 'kustomization.yaml')), `${res} is a kustomization`);
      }
    }
    const objs = parseManifests(readFileSync(path.join(root, 'config', 'default', 'paddock.yaml'), 'utf8'));
    assert.equal(objs[0]?.kind, 'Namespace');
    assert.equal(objs[0]?.metadata.name, 'paddock-system');
    for (const o of objs.slice(1)) {
      assert.equal(
        o.metadata.labels?.['app.kubernetes.io/managed-by'],
        undefined,
        `${o.kind}: no Helm label`,
      );
      if (API[`${o.apiVersion}/${o.kind}`]?.namespaced) assert.equal(o.metadata.namespace, 'paddock-system');
    }
    // What `kubectl apply -k config/default` applies: the CRDs and these objects, nothing else.
    const kubectl = findBinaries().kubectl;
    assert.ok(kubectl, 'kubectl is in the binary cache (make control-plane)');
    const built = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawn(kubectl, ['kustomize', path.join(root, 'config', 'default')], { stdio: 'pipe' });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
      });
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
      });
      child.on('close', (code) => resolve({ code, out, err }));
    });
    assert.equal(built.code, 0, `kubectl kustomize config/default: ${built.err}`);
    const crdNames = readdirSync(path.join(root, 'config', 'crd'))
      .filter((f) => f.startsWith('actions.summerwind.dev_'))
      .map(
        (f) =>
          `CustomResourceDefinition/${f.replace(/^actions\.summerwind\.dev_(.*)\.yaml$/, '$1.actions.summerwind.dev')}`,
      );
    const key = (o: K8sObject) => `${o.kind}/${o.metadata.name}`;
    assert.deepEqual(
      parseManifests(built.out).map(key).sort(),
      [...crdNames, ...objs.map(key)].sort(),
      'kubectl kustomize config/default gives the CRDs and config/default/paddock.yaml',
    );
    // Into a namespace of the test's (paddock-system need not exist for a dry run of the rest).
    const ns = await freshNamespace('t-chart-default');
    const moved = objs.map((o) =>
      API[`${o.apiVersion}/${o.kind}`]?.namespaced ? { ...o, metadata: { ...o.metadata, namespace: ns } } : o,
    );
    assert.deepEqual(await dryRunApply(http, moved), []);
  });
});
