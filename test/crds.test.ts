import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { API_VERSION, crdManifests, GROUP, RESOURCES, VERSION } from '../src/api/index.ts';
import type { KubeError } from '../src/runtime/errors.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp, PATCH_CONTENT_TYPES } from '../src/runtime/kube-http.ts';
import { eventually, namespaceFixture, useCluster } from './support/cluster.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'arc-examples');

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [k: string]: unknown };
  spec?: Record<string, unknown>;
  [k: string]: unknown;
}

function fixtures(): { file: string; doc: Manifest }[] {
  const out: { file: string; doc: Manifest }[] = [];
  for (const file of readdirSync(FIXTURES)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    for (const d of parseAllDocuments(readFileSync(path.join(FIXTURES, file), 'utf8'))) {
      if (d.errors.length) throw new Error(`${file}: ${d.errors[0]!.message}`);
      const doc = d.toJS() as Manifest | null;
      if (doc) out.push({ file, doc });
    }
  }
  return out;
}

function refOf(kind: string) {
  const ref = RESOURCES.find((r) => r.kind === kind);
  if (!ref) throw new Error(`no resource for kind ${kind}`);
  return ref;
}

/** Installs (server-side applies) every CRD and waits until each is Established. */
async function installCrds(http: KubeHttp): Promise<void> {
  for (const crd of await crdManifests()) {
    const name = (crd.metadata as { name: string }).name;
    await http.request('PATCH', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`, {
      query: { fieldManager: 'paddock-crds-test', force: true, fieldValidation: 'Strict' },
      contentType: PATCH_CONTENT_TYPES.apply,
      body: crd,
    });
  }
  for (const crd of await crdManifests()) {
    const name = (crd.metadata as { name: string }).name;
    await eventually(
      `CRD ${name} Established`,
      async () => {
        const got = await http.request<{ status?: { conditions?: { type: string; status: string }[] } }>(
          'GET',
          `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`,
        );
        return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
      },
      30_000,
    );
  }
}

interface Table {
  kind: string;
  columnDefinitions: { name: string; type: string }[];
  rows: { cells: unknown[]; object: { metadata: { name: string } } }[];
}

/** A list as `kubectl get` asks for it: server-side printing into a meta.k8s.io Table. */
async function getTable(kc: KubeConfig, apiPath: string): Promise<Table> {
  const server = new URL(kc.getCurrentCluster()!.server);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  return await new Promise((resolve, reject) => {
    const req = https.request(
      {
        ...opts,
        hostname: server.hostname,
        port: server.port,
        path: apiPath,
        headers: {
          ...(opts.headers as Record<string, string>),
          accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json',
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) reject(new Error(`${res.statusCode}: ${text}`));
          else resolve(JSON.parse(text) as Table);
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Asserts a 4xx whose message contains every given fragment; returns the error. */
async function rejected(p: Promise<unknown>, code: number, ...fragments: string[]): Promise<KubeError> {
  let error: KubeError | undefined;
  await assert.rejects(p, (err: KubeError) => {
    error = err;
    return true;
  });
  assert.equal(error!.code, code, error!.message);
  for (const f of fragments) assert.ok(error!.message.includes(f), `expected "${f}" in: ${error!.message}`);
  return error!;
}

const EXPECTED_COLUMNS: Record<string, string[]> = {
  Runner: [
    'Name',
    'Enterprise',
    'Organization',
    'Repository',
    'Group',
    'Labels',
    'Status',
    'Message',
    'WF Repo',
    'WF Run',
    'Age',
  ],
  RunnerReplicaSet: ['Name', 'Desired', 'Current', 'Ready', 'Age'],
  RunnerDeployment: [
    'Name',
    'Enterprise',
    'Organization',
    'Repository',
    'Group',
    'Labels',
    'Desired',
    'Current',
    'Up-To-Date',
    'Available',
    'Age',
  ],
  RunnerSet: ['Name', 'Desired', 'Current', 'Up-To-Date', 'Available', 'Age'],
  HorizontalRunnerAutoscaler: ['Name', 'Min', 'Max', 'Desired', 'Schedule'],
};

describe('actions.summerwind.dev CRDs', () => {
  let http: KubeHttp;
  before(async () => {
    const cluster = await useCluster();
    http = new KubeHttp(cluster.kubeConfig);
    await installCrds(http);
  });

  test('every CRD is installed, Established, small, with a status subresource and printer columns', async () => {
    const manifests = await crdManifests();
    assert.deepEqual(
      manifests.map((m) => (m.metadata as { name: string }).name),
      RESOURCES.map((r) => `${r.plural}.${GROUP}`),
    );
    for (const r of RESOURCES) {
      const crd = await http.request<{
        spec: {
          scope: string;
          versions: {
            name: string;
            subresources: { status?: object };
            additionalPrinterColumns: { name: string }[];
          }[];
        };
      }>('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${r.plural}.${GROUP}`);
      assert.equal(crd.spec.scope, 'Namespaced');
      const v = crd.spec.versions.find((x) => x.name === VERSION)!;
      assert.deepEqual(v.subresources.status, {});
      assert.deepEqual(
        v.additionalPrinterColumns.map((c) => c.name),
        EXPECTED_COLUMNS[r.kind]!.filter((c) => c !== 'Name'),
      );
      // etcd refuses requests above 1.5 MiB; stay far below it, managedFields included.
      const stored = JSON.stringify(crd).length;
      assert.ok(stored < 512 * 1024, `${r.plural} CRD is ${stored} bytes`);
    }
  });

  describe('ARC documentation examples apply unchanged', () => {
    const ns = namespaceFixture('t-crd-examples');
    const ssa = namespaceFixture('t-crd-examples-ssa');
    const all = fixtures();

    test('the fixture set covers every kind and enough examples', () => {
      assert.ok(new Set(all.map((f) => f.file)).size >= 15);
      assert.deepEqual(new Set(all.map((f) => f.doc.kind)), new Set(RESOURCES.map((r) => r.kind)));
      for (const f of all) assert.equal(f.doc.apiVersion, API_VERSION, f.file);
    });

    test('create with strict field validation keeps every field as written', async () => {
      for (const { file, doc } of all) {
        const ref = refOf(doc.kind);
        const body = { ...doc, metadata: { ...doc.metadata, namespace: ns.name } };
        const created = await http
          .request<Manifest>('POST', resourcePath(ref, ns.name), {
            body,
            query: { fieldValidation: 'Strict' },
          })
          .catch((err: Error) => {
            throw new Error(`${file} (${doc.kind} ${doc.metadata.name}): ${err.message}`);
          });
        // Nothing pruned, nothing defaulted.
        assert.deepEqual(created.spec, doc.spec, `${file}: spec changed by the API server`);
      }
    });

    test('server-side apply (kubectl apply --server-side) accepts them too', async () => {
      for (const { file, doc } of all) {
        const ref = refOf(doc.kind);
        const body = { ...doc, metadata: { ...doc.metadata, namespace: ssa.name } };
        await http
          .request('PATCH', resourcePath(ref, ssa.name, doc.metadata.name), {
            body,
            contentType: PATCH_CONTENT_TYPES.apply,
            query: { fieldManager: 'kubectl', fieldValidation: 'Strict' },
          })
          .catch((err: Error) => {
            throw new Error(`${file} (${doc.kind} ${doc.metadata.name}): ${err.message}`);
          });
      }
    });

    test('kubectl get prints the ARC columns', async () => {
      for (const ref of RESOURCES) {
        const table = await getTable(ns.cluster.kubeConfig, resourcePath(ref, ns.name));
        assert.equal(table.kind, 'Table');
        assert.deepEqual(
          table.columnDefinitions.map((c) => c.name),
          EXPECTED_COLUMNS[ref.kind],
        );
        const names = all.filter((f) => f.doc.kind === ref.kind).map((f) => f.doc.metadata.name);
        assert.deepEqual(table.rows.map((r) => r.cells[0]).sort(), [...names].sort());
      }
      const rd = await getTable(ns.cluster.kubeConfig, resourcePath(refOf('RunnerDeployment'), ns.name));
      const row = rd.rows.find((r) => r.cells[0] === 'grouped-runners')!;
      // Name, Enterprise, Organization, Repository, Group, Labels, Desired
      assert.deepEqual(row.cells.slice(0, 7), [
        'grouped-runners',
        null,
        'octo-org',
        null,
        'build-farm',
        null,
        1,
      ]);
      const labelled = rd.rows.find((r) => r.cells[0] === 'labelled-runners')!;
      assert.equal(labelled.cells[5], '["gpu","linux","X64"]');
      const hra = await getTable(
        ns.cluster.kubeConfig,
        resourcePath(refOf('HorizontalRunnerAutoscaler'), ns.name),
      );
      const scheduled = hra.rows.find((r) => r.cells[0] === 'scheduled-autoscaler')!;
      assert.deepEqual(scheduled.cells.slice(1, 3), [1, 100]);
    });
  });

  describe('invalid manifests are rejected with readable messages', () => {
    const ns = namespaceFixture('t-crd-invalid');
    const rd = (name: string, spec: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
      apiVersion: API_VERSION,
      kind: 'RunnerDeployment',
      metadata: { name },
      spec: { ...extra, template: { spec } },
    });
    const create = (kind: string, body: object, strict = true) =>
      http.request<Manifest>('POST', resourcePath(refOf(kind), ns.name), {
        body,
        ...(strict ? { query: { fieldValidation: 'Strict' } } : {}),
      });

    test('two scopes', async () => {
      await rejected(
        create('RunnerDeployment', rd('two', { organization: 'o', repository: 'o/r' })),
        422,
        'RunnerDeployment.actions.summerwind.dev "two" is invalid',
        'spec.template.spec.repository',
        'spec cannot have many fields defined enterprise, organization and repository',
      );
      await rejected(
        create('Runner', {
          apiVersion: API_VERSION,
          kind: 'Runner',
          metadata: { name: 'three' },
          spec: { enterprise: 'e', organization: 'o', repository: 'o/r' },
        }),
        422,
        'spec.repository',
        'spec cannot have many fields defined enterprise, organization and repository',
      );
    });

    test('no scope', async () => {
      await rejected(
        create('RunnerDeployment', rd('none', { labels: ['x'] })),
        422,
        'spec.template.spec.repository',
        'spec needs enterprise, organization or repository',
      );
      await rejected(
        create('Runner', { apiVersion: API_VERSION, kind: 'Runner', metadata: { name: 'r' }, spec: {} }),
        422,
        'spec.repository',
        'spec needs enterprise, organization or repository',
      );
      await rejected(
        create('RunnerReplicaSet', {
          apiVersion: API_VERSION,
          kind: 'RunnerReplicaSet',
          metadata: { name: 'rrs' },
          spec: { template: { spec: { repository: '' } } },
        }),
        422,
        'spec needs enterprise, organization or repository',
      );
      // A Runner without any spec is as invalid as one with an empty spec.
      await rejected(
        create('Runner', { apiVersion: API_VERSION, kind: 'Runner', metadata: { name: 'bare' } }),
        422,
        'spec: Required value',
      );
    });

    test('scope syntax', async () => {
      await rejected(
        create('RunnerDeployment', rd('slashless', { repository: 'just-a-name' })),
        422,
        'spec.template.spec.repository',
        "should match '^[^/]+/[^/]+$'",
      );
      await rejected(
        create('RunnerDeployment', rd('slashed', { organization: 'a/b' })),
        422,
        'spec.template.spec.organization',
      );
    });

    test('the scope rules also hold on update', async () => {
      await create('RunnerDeployment', rd('patched', { organization: 'o' }));
      await rejected(
        http.request('PATCH', resourcePath(refOf('RunnerDeployment'), ns.name, 'patched'), {
          contentType: PATCH_CONTENT_TYPES.merge,
          body: { spec: { template: { spec: { enterprise: 'e' } } } },
        }),
        422,
        'spec cannot have many fields defined enterprise, organization and repository',
      );
    });

    test('negative replicas', async () => {
      await rejected(
        create('RunnerDeployment', rd('negative', { organization: 'o' }, { replicas: -1 })),
        422,
        'spec.replicas',
        'should be greater than or equal to 0',
      );
      await rejected(
        create('RunnerReplicaSet', {
          apiVersion: API_VERSION,
          kind: 'RunnerReplicaSet',
          metadata: { name: 'negative' },
          spec: { replicas: -3, template: { spec: { organization: 'o' } } },
        }),
        422,
        'spec.replicas',
        'should be greater than or equal to 0',
      );
      await rejected(
        create('RunnerSet', {
          apiVersion: API_VERSION,
          kind: 'RunnerSet',
          metadata: { name: 'negative' },
          spec: {
            organization: 'o',
            replicas: -1,
            selector: { matchLabels: { a: 'b' } },
            template: { metadata: { labels: { a: 'b' } } },
          },
        }),
        422,
        'spec.replicas',
        'should be greater than or equal to 0',
      );
    });

    test('an unknown field in the pod template (strict, as kubectl sends it)', async () => {
      const body = rd('typo', {
        organization: 'o',
        containers: [{ name: 'runner', imagePullPolicyy: 'Always' }],
      });
      await rejected(
        create('RunnerDeployment', body),
        400,
        'unknown field "spec.template.spec.containers[0].imagePullPolicyy"',
      );
      // Without strict validation the API server prunes it instead of storing it.
      const created = await create('RunnerDeployment', body, false);
      const spec = created.spec as { template: { spec: { containers: Record<string, unknown>[] } } };
      assert.deepEqual(spec.template.spec.containers, [{ name: 'runner' }]);

      const set = {
        apiVersion: API_VERSION,
        kind: 'RunnerSet',
        metadata: { name: 'typo' },
        spec: {
          organization: 'o',
          selector: { matchLabels: { a: 'b' } },
          template: {
            metadata: { labels: { a: 'b' } },
            spec: { containers: [{ name: 'runner', volumeMount: [] }] },
          },
        },
      };
      await rejected(
        create('RunnerSet', set),
        400,
        'unknown field "spec.template.spec.containers[0].volumeMount"',
      );
    });

    test('a wrong type in the pod template', async () => {
      await rejected(
        create('RunnerSet', {
          apiVersion: API_VERSION,
          kind: 'RunnerSet',
          metadata: { name: 'port' },
          spec: {
            organization: 'o',
            selector: { matchLabels: { a: 'b' } },
            template: {
              metadata: { labels: { a: 'b' } },
              spec: { containers: [{ name: 'runner', ports: [{ containerPort: 'abc' }] }] },
            },
          },
        }),
        422,
        'spec.template.spec.containers[0].ports[0].containerPort',
        'must be of type integer',
      );
      await rejected(
        create(
          'RunnerDeployment',
          rd('env', { organization: 'o', env: [{ name: 'WAIT_FOR_DOCKER_SECONDS', value: 120 }] }),
        ),
        422,
        'spec.template.spec.env[0].value',
        'must be of type string',
      );
      await rejected(
        create('RunnerDeployment', rd('cpu', { organization: 'o', resources: { limits: { cpu: 'lots' } } })),
        422,
        'spec.template.spec.resources.limits.cpu',
      );
      await rejected(
        create('RunnerDeployment', rd('missing', { organization: 'o', containers: [{ image: 'x' }] })),
        422,
        'spec.template.spec.containers[0].name: Required value',
      );
    });

    test('RunnerSet requires the StatefulSet selector and template', async () => {
      await rejected(
        create('RunnerSet', {
          apiVersion: API_VERSION,
          kind: 'RunnerSet',
          metadata: { name: 'bare' },
          spec: { organization: 'o' },
        }),
        422,
        'spec.selector: Required value',
        'spec.template: Required value',
      );
    });

    test('container mode kubernetes needs a usable workVolumeClaimTemplate', async () => {
      const wvct = (accessModes: string[]) => ({
        storageClassName: 'standard',
        accessModes,
        resources: { requests: { storage: '1Gi' } },
      });
      await rejected(
        create('RunnerDeployment', rd('k8s-none', { organization: 'o', containerMode: 'kubernetes' })),
        422,
        'spec.template.spec.workVolumeClaimTemplate',
        'Spec.ContainerMode: kubernetes must have workVolumeClaimTemplate field specified',
      );
      await rejected(
        create(
          'RunnerDeployment',
          rd('k8s-empty', {
            organization: 'o',
            containerMode: 'kubernetes',
            workVolumeClaimTemplate: wvct([]),
          }),
        ),
        422,
        'access mode should have at least one mode specified',
      );
      await rejected(
        create('Runner', {
          apiVersion: API_VERSION,
          kind: 'Runner',
          metadata: { name: 'k8s-rox' },
          spec: {
            organization: 'o',
            containerMode: 'kubernetes',
            workVolumeClaimTemplate: wvct(['ReadWriteOnce', 'ReadOnlyMany']),
          },
        }),
        422,
        'spec.workVolumeClaimTemplate',
        'access mode ReadOnlyMany is not supported',
      );
      await rejected(
        create(
          'RunnerDeployment',
          rd('k8s-partial', {
            organization: 'o',
            containerMode: 'kubernetes',
            workVolumeClaimTemplate: { accessModes: ['ReadWriteOnce'] },
          }),
        ),
        422,
        'spec.template.spec.workVolumeClaimTemplate.storageClassName: Required value',
        'spec.template.spec.workVolumeClaimTemplate.resources: Required value',
      );
      // Outside container mode kubernetes the template is not checked, as in ARC.
      await create(
        'RunnerDeployment',
        rd('docker-mode', { organization: 'o', workVolumeClaimTemplate: wvct(['ReadOnlyMany']) }),
      );
      await create(
        'RunnerDeployment',
        rd('k8s-rwx', {
          organization: 'o',
          containerMode: 'kubernetes',
          workVolumeClaimTemplate: wvct(['ReadWriteMany']),
        }),
      );
    });

    test('HorizontalRunnerAutoscaler enums and bounds', async () => {
      const hra = (name: string, spec: Record<string, unknown>) => ({
        apiVersion: API_VERSION,
        kind: 'HorizontalRunnerAutoscaler',
        metadata: { name },
        spec: { minReplicas: 1, maxReplicas: 2, ...spec },
      });
      await rejected(
        create(
          'HorizontalRunnerAutoscaler',
          hra('kind', { scaleTargetRef: { kind: 'Deployment', name: 'x' } }),
        ),
        422,
        'spec.scaleTargetRef.kind',
        'supported values: "RunnerDeployment", "RunnerSet"',
      );
      await rejected(
        create(
          'HorizontalRunnerAutoscaler',
          hra('override', {
            scheduledOverrides: [
              {
                startTime: '2021-05-01T00:00:00Z',
                endTime: '2021-05-02T00:00:00Z',
                minReplicas: -1,
                recurrenceRule: { frequency: 'Hourly' },
              },
            ],
          }),
        ),
        422,
        'spec.scheduledOverrides[0].minReplicas',
        'spec.scheduledOverrides[0].recurrenceRule.frequency',
      );
      await rejected(
        create('HorizontalRunnerAutoscaler', hra('times', { scheduledOverrides: [{ minReplicas: 1 }] })),
        422,
        'spec.scheduledOverrides[0].startTime: Required value',
        'spec.scheduledOverrides[0].endTime: Required value',
      );
      await rejected(
        create('HorizontalRunnerAutoscaler', hra('creds', { githubAPICredentialsFrom: { secretRef: {} } })),
        422,
        'spec.githubAPICredentialsFrom.secretRef.name: Required value',
      );
    });
  });
});
