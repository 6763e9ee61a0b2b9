import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { RESOURCES } from '../src/api/index.ts';
import type { Paddock } from '../src/cli/run.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { PODS } from '../src/runtime/resources.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import { NodeAgent, type PodObject } from '../src/sandbox/node-agent.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { startTestPaddock, stopTestFleet } from './support/paddock.ts';

/**
 * Every manifest in config/samples/ (ARC's documented RunnerDeployment shapes) applied unchanged to a
 * real API server with paddock and the simulated kubelet and runners running: each must end up with
 * `replicas` runners registered where its spec says, with its labels, group and ephemerality. The
 * GitHub double knows the organization, repository, enterprise and runner group the samples name.
 */

const SAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'config', 'samples');

interface RunnerSpec {
  enterprise?: string;
  organization?: string;
  repository?: string;
  labels?: string[];
  group?: string;
  ephemeral?: boolean;
}

interface Sample {
  file: string;
  doc: KubeObject & { kind: string; spec: { replicas?: number; template: { spec: RunnerSpec } } };
}

function samples(): Sample[] {
  const out: Sample[] = [];
  for (const file of readdirSync(SAMPLES)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    for (const d of parseAllDocuments(readFileSync(path.join(SAMPLES, file), 'utf8'))) {
      if (d.errors.length) throw new Error(`${file}: ${d.errors[0]!.message}`);
      const doc = d.toJS() as Sample['doc'] | null;
      if (doc) out.push({ file, doc });
    }
  }
  return out;
}

/** The double's scope key a runner spec registers to. */
function scopeOf(spec: RunnerSpec): string {
  if (spec.enterprise) return `enterprises/${spec.enterprise}`;
  if (spec.repository) return `repos/${spec.repository}`;
  if (spec.organization) return `orgs/${spec.organization}`;
  throw new Error('sample names no enterprise, organization or repository');
}

describe('config/samples apply unchanged and register runners', () => {
  const ns = namespaceFixture('t-samples');
  const double = new GitHubDouble();
  const logLines: string[] = [];
  let http: KubeHttp;
  let agent: NodeAgent;
  let paddock: Paddock | undefined;
  let buildFarm = 0;

  before(async () => {
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg('example-org');
    double.addRepo('example-org', 'example-repo');
    double.addEnterprise('example-enterprise');
    buildFarm = double.model.addRunnerGroup('build-farm');
    const { token } = double.addToken();
    http = new KubeHttp(ns.cluster.kubeConfig);
    ({ paddock } = await startTestPaddock({
      kubeConfig: ns.cluster.kubeConfig,
      namespace: ns.name,
      env: { GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl },
      logLevel: 'info',
      logLines,
    }));
    agent = new NodeAgent({
      http,
      namespace: ns.name,
      double,
      startupDelayMs: 300,
      registrationDelayMs: 100,
      assignIntervalMs: 100,
      nodeCount: 2,
      nodePrefix: `${ns.name}-node-`,
    });
    await agent.start();
  });

  after(() =>
    stopTestFleet({ kubeConfig: ns.cluster.kubeConfig, namespace: ns.name, agent, paddock, http, double }),
  );

  for (const { file, doc } of samples()) {
    test(`${file}: ${doc.kind} ${doc.metadata.name}`, async () => {
      const ref = RESOURCES.find((r) => r.kind === doc.kind);
      assert.ok(ref, `a kind paddock serves: ${doc.kind}`);
      await http.request('POST', resourcePath(ref, ns.name), { body: doc });

      const name = doc.metadata.name!;
      const spec = doc.spec.template.spec;
      const replicas = doc.spec.replicas ?? 1;
      const scope = scopeOf(spec);
      const ours = () => double.runners(scope).filter((r) => r.name.startsWith(`${name}-`));
      const runners = await eventually(
        `${replicas} runner(s) of ${name} online in ${scope}`,
        async () => {
          const online = ours().filter((r) => r.status === 'online');
          return online.length === replicas && online;
        },
        60_000,
        200,
      ).catch((err: Error) => {
        const gh = double
          .runners()
          .map((r) => `${r.scope}:${r.name}(${r.status})`)
          .join(', ');
        const tail = logLines.filter((l) => /"level":"(warn|error)"/.test(l)).slice(-20);
        throw new Error(`${err.message}\nGitHub: ${gh}\nlog:\n${tail.join('')}`);
      });

      const pods = (await http.request<{ items: PodObject[] }>('GET', resourcePath(PODS, ns.name))).items;
      const ephemeral = spec.ephemeral ?? true;
      for (const r of runners) {
        assert.ok(
          pods.some((p) => p.metadata.name === r.name && !p.metadata.deletionTimestamp),
          `runner ${r.name} has its pod`,
        );
        const labels = r.labels.map((l) => l.name.toLowerCase());
        for (const l of spec.labels ?? [])
          assert.ok(labels.includes(l.toLowerCase()), `label ${l} on ${r.name}`);
        assert.equal(r.ephemeral, ephemeral, `${r.name} ephemeral`);
        assert.equal(r.runner_group_id, spec.group ? buildFarm : 1, `${r.name} runner group`);
      }
      await eventually(
        `${name} reports ${replicas} available`,
        async () => {
          const got = await http.request<KubeObject & { status?: { availableReplicas?: number } }>(
            'GET',
            resourcePath(ref, ns.name, name),
          );
          return got.status?.availableReplicas === replicas;
        },
        30_000,
        200,
      );
    });
  }
});
