import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Paddock } from '../src/cli/run.ts';
import { isNotFound, KubeError } from '../src/runtime/errors.ts';
import { KubeHttp, PATCH_CONTENT_TYPES } from '../src/runtime/kube-http.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';
import { deleteTestWebhookConfiguration, startTestPaddock } from './support/paddock.ts';

/**
 * The validating and defaulting webhooks of Runner, RunnerReplicaSet and RunnerDeployment, as
 * `kubectl apply` meets them: through the real API server, with paddock started as `paddock run`.
 *
 * paddock's own CRDs already carry ARC's two rules as CEL validations, which the API server checks
 * before any webhook, so the webhook-only rules (unknown container mode, work volumes, selectors,
 * Secret names, …) are what shows the webhook at work here; the unit tests cover ARC's rules as the
 * webhook enforces them for clusters running ARC's own CRDs.
 */

const GROUP_PATH = '/apis/actions.summerwind.dev/v1alpha1';
const DENIED = (webhook: string) => `admission webhook "${webhook}" denied the request: `;

type Manifest = Record<string, unknown> & { metadata: Record<string, unknown> };

function runner(name: string, spec: Record<string, unknown>): Manifest {
  return { apiVersion: 'actions.summerwind.dev/v1alpha1', kind: 'Runner', metadata: { name }, spec };
}

function runnerDeployment(name: string, spec: Record<string, unknown>): Manifest {
  return {
    apiVersion: 'actions.summerwind.dev/v1alpha1',
    kind: 'RunnerDeployment',
    metadata: { name },
    spec,
  };
}

function runnerReplicaSet(name: string, spec: Record<string, unknown>): Manifest {
  return {
    apiVersion: 'actions.summerwind.dev/v1alpha1',
    kind: 'RunnerReplicaSet',
    metadata: { name },
    spec,
  };
}

describe('admission webhooks of Runner, RunnerReplicaSet and RunnerDeployment', () => {
  const ns = namespaceFixture('t-admission');
  let http: KubeHttp;
  let paddock: Paddock | undefined;
  /** paddock's log (debug: one line per admission review), quoted when something fails. */
  const logLines: string[] = [];

  const path = (plural: string, name?: string) =>
    `${GROUP_PATH}/namespaces/${ns.name}/${plural}${name ? `/${encodeURIComponent(name)}` : ''}`;
  const pluralOf = (m: Manifest) => `${String(m.kind).toLowerCase()}s`;
  const create = (m: Manifest, query: Record<string, string> = {}) =>
    http.request<KubeObject>('POST', path(pluralOf(m)), { body: m, query });
  const get = (plural: string, name: string) => http.request<KubeObject>('GET', path(plural, name));
  const exists = (plural: string, name: string) =>
    get(plural, name).then(
      () => true,
      (err: unknown) => {
        if (isNotFound(err)) return false;
        throw err;
      },
    );
  /** Reviews of `path` in paddock's log so far. */
  const reviews = (webhookPath: string) =>
    logLines.filter((l) => l.includes('"admission review"') && l.includes(`"path":"${webhookPath}"`)).length;

  /** The rejection of `m`, asserted to be a 422 Invalid from the API server. */
  async function rejection(m: Manifest, query: Record<string, string> = {}): Promise<KubeError> {
    try {
      await create(m, query);
    } catch (err) {
      assert.ok(err instanceof KubeError, String(err));
      assert.equal(err.code, 422, err.message);
      assert.equal(err.reason, 'Invalid', err.message);
      return err;
    }
    assert.fail(`${m.kind} ${String(m.metadata.name)} was created`);
  }

  before(async () => {
    http = new KubeHttp(ns.cluster.kubeConfig);
    // No GitHub double: nothing here talks to GitHub (no default credentials is a warning only).
    ({ paddock } = await startTestPaddock({
      kubeConfig: ns.cluster.kubeConfig,
      namespace: ns.name,
      env: {},
      // Renewal checks every second, for the CA rotation test; with leader election the certificate
      // Secret lives in the Lease's namespace (this test's) instead of the shared `default`.
      flags: ['--webhook-cert-check-interval', '1s', '--leader-elect'],
      logLines,
    }));
    // The API server loads webhook configurations asynchronously: wait until a dry run of an invalid
    // Runner is turned away by the webhook.
    await eventually(
      'the validating webhook to be active',
      async () =>
        create(runner('probe', { organization: 'acme', containerMode: 'probe' }), { dryRun: 'All' }).then(
          () => false,
          (err: unknown) =>
            err instanceof KubeError &&
            err.message.includes(DENIED('validate.runner.actions.summerwind.dev')),
        ),
      20_000,
    );
  });

  after(async () => {
    await paddock?.stop().catch(() => undefined);
    // Even when a test failed half-way: never leave a Fail-closed webhook pointing at a dead port.
    await deleteTestWebhookConfiguration(ns.cluster.kubeConfig, ns.name);
    http?.close();
  });

  test('invalid Runners, RunnerDeployments and RunnerReplicaSets are rejected with a readable 422', async (t) => {
    const cases: [Manifest, string][] = [
      [
        runner('bad-mode', { organization: 'acme', containerMode: 'dind' }),
        DENIED('validate.runner.actions.summerwind.dev') +
          'Runner.actions.summerwind.dev "bad-mode" is invalid: spec.containerMode: Unsupported value: "dind": supported values: "", "kubernetes"',
      ],
      [
        runner('bad-volume', { organization: 'acme', volumeSizeLimit: '0' }),
        DENIED('validate.runner.actions.summerwind.dev') +
          'Runner.actions.summerwind.dev "bad-volume" is invalid: spec.volumeSizeLimit: Invalid value: "0": ' +
          "runner volume can't be disabled because it is required to share the working directory between the runner and the dockerd containers",
      ],
      [
        runnerDeployment('bad-selector', {
          selector: { matchLabels: { app: 'ci' } },
          template: { metadata: { labels: { app: 'cd' } }, spec: { repository: 'owner/repo' } },
        }),
        DENIED('validate.runnerdeployment.actions.summerwind.dev') +
          'RunnerDeployment.actions.summerwind.dev "bad-selector" is invalid: spec.selector: Invalid value: {"matchLabels":{"app":"ci"}}: ' +
          'selector does not match the labels of the runners (spec.template.metadata.labels plus runner-deployment-name=bad-selector): ' +
          'their RunnerReplicaSets would never find them and would keep creating more',
      ],
      [
        runnerDeployment('bad-work', {
          template: {
            spec: {
              repository: 'owner/repo',
              containerMode: 'kubernetes',
              workVolumeClaimTemplate: {
                storageClassName: 'standard',
                accessModes: ['ReadWriteOnce'],
                resources: { requests: { storage: '1Gi' } },
              },
              volumes: [{ name: 'work', emptyDir: {} }],
              volumeMounts: [{ name: 'work', mountPath: '/runner/_work' }],
            },
          },
        }),
        DENIED('validate.runnerdeployment.actions.summerwind.dev') +
          'RunnerDeployment.actions.summerwind.dev "bad-work" is invalid: [' +
          'spec.template.spec.volumeMounts[0].name: Invalid value: "work": volume mount "work" should be specified by workVolumeClaimTemplate in container mode kubernetes, ' +
          'spec.template.spec.volumes[0].name: Invalid value: "work": volume "work" should be specified by workVolumeClaimTemplate in container mode kubernetes]',
      ],
      [
        runnerReplicaSet('bad-creds', {
          template: {
            spec: { organization: 'acme', githubAPICredentialsFrom: { secretRef: { name: 'Team_Creds' } } },
          },
        }),
        DENIED('validate.runnerreplicaset.actions.summerwind.dev') +
          'RunnerReplicaSet.actions.summerwind.dev "bad-creds" is invalid: spec.template.spec.githubAPICredentialsFrom.secretRef.name: Invalid value: "Team_Creds": ' +
          "must be a Secret name: a lower-case RFC 1123 subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or digit, at most 253 characters)",
      ],
      [
        runnerReplicaSet('bad-expression', {
          selector: { matchExpressions: [{ key: 'app', operator: 'Equals', values: ['ci'] }] },
          template: { metadata: { labels: { app: 'ci' } }, spec: { organization: 'acme' } },
        }),
        DENIED('validate.runnerreplicaset.actions.summerwind.dev') +
          'RunnerReplicaSet.actions.summerwind.dev "bad-expression" is invalid: spec.selector.matchExpressions[0].operator: Unsupported value: "Equals": supported values: "In", "NotIn", "Exists", "DoesNotExist"',
      ],
    ];
    for (const [manifest, message] of cases) {
      const err = await rejection(manifest);
      t.diagnostic(err.message);
      assert.equal(err.message, message);
      assert.equal(await exists(pluralOf(manifest), String(manifest.metadata.name)), false);
    }
  });

  test("ARC's own rules: rejected with ARC's messages (by the CRD's validation or the webhook, whichever runs first)", async (t) => {
    const cases: [Manifest, RegExp][] = [
      [
        runner('no-scope', { labels: ['x'] }),
        /Runner\.actions\.summerwind\.dev "no-scope" is invalid: spec\.repository: .*spec needs enterprise, organization or repository/,
      ],
      [
        runnerDeployment('many-scopes', {
          template: { spec: { organization: 'acme', repository: 'acme/app' } },
        }),
        /RunnerDeployment\.actions\.summerwind\.dev "many-scopes" is invalid: spec\.template\.spec\.repository: .*spec cannot have many fields defined enterprise, organization and repository/,
      ],
      [
        runnerReplicaSet('no-claim', {
          template: { spec: { organization: 'acme', containerMode: 'kubernetes' } },
        }),
        /spec\.template\.spec\.workVolumeClaimTemplate: .*Spec\.ContainerMode: kubernetes must have workVolumeClaimTemplate field specified/,
      ],
      [
        runnerDeployment('negative', { replicas: -1, template: { spec: { organization: 'acme' } } }),
        /spec\.replicas: .*greater than or equal to 0/,
      ],
    ];
    for (const [manifest, pattern] of cases) {
      const err = await rejection(manifest);
      t.diagnostic(err.message);
      assert.match(err.message, pattern);
    }
  });

  test('valid manifests, ARC documentation examples among them, are accepted unchanged', async () => {
    const valid: Manifest[] = [
      // docs: a repository RunnerDeployment with labels
      runnerDeployment('example-runnerdeploy', {
        replicas: 1,
        template: { spec: { repository: 'owner/repo', labels: ['custom-runner'] } },
      }),
      // docs: an organization RunnerDeployment in a runner group
      runnerDeployment('org-runners', {
        template: { spec: { organization: 'your-organization-name', group: 'NewGroup' } },
      }),
      // docs: container mode kubernetes
      runnerDeployment('k8s-mode', {
        template: {
          spec: {
            containerMode: 'kubernetes',
            serviceAccountName: 'my-service-account',
            workVolumeClaimTemplate: {
              storageClassName: 'my-dynamic-storage-class',
              accessModes: ['ReadWriteOnce'],
              resources: { requests: { storage: '10Gi' } },
            },
            repository: 'owner/repo',
            env: [],
          },
        },
      }),
      runnerDeployment('with-selector', {
        selector: { matchLabels: { app: 'ci' } },
        template: { metadata: { labels: { app: 'ci' } }, spec: { enterprise: 'acme-corp' } },
      }),
      runner('plain', { organization: 'acme' }),
      // docs: a RAM-disk work directory in docker mode
      runner('ram-disk', {
        repository: 'owner/repo',
        volumes: [{ name: 'work', emptyDir: { medium: 'Memory' } }],
        volumeMounts: [{ name: 'work', mountPath: '/runner/_work' }],
      }),
      // As the RunnerDeployment controller makes them.
      {
        ...runnerReplicaSet('org-runners-abcde', {
          replicas: 2,
          selector: {
            matchLabels: { 'runner-deployment-name': 'org-runners', 'runner-template-hash': 'abc123' },
          },
          template: {
            metadata: {
              labels: { 'runner-deployment-name': 'org-runners', 'runner-template-hash': 'abc123' },
            },
            spec: { organization: 'acme', group: 'NewGroup' },
          },
        }),
        metadata: {
          name: 'org-runners-abcde',
          labels: { 'runner-deployment-name': 'org-runners', 'runner-template-hash': 'abc123' },
        },
      },
    ];
    const mutateReviews = reviews('/mutate-actions-summerwind-dev-v1alpha1-runnerdeployment');
    const validateReviews = reviews('/validate-actions-summerwind-dev-v1alpha1-runnerdeployment');
    for (const manifest of valid) {
      const created = await create(manifest);
      assert.deepEqual((created as unknown as Manifest).spec, manifest.spec, 'stored exactly as written');
    }
    assert.ok(
      reviews('/validate-actions-summerwind-dev-v1alpha1-runnerdeployment') >= validateReviews + 4,
      'the validating webhook was called',
    );
    // ARC's defaulters change nothing: paddock serves their paths but does not register them.
    assert.equal(reviews('/mutate-actions-summerwind-dev-v1alpha1-runnerdeployment'), mutateReviews);
  });

  test('an UPDATE that introduces an error is rejected; one that keeps the object valid is not', async () => {
    const name = 'example-runnerdeploy';
    const patch = (body: unknown) =>
      http.request<KubeObject>('PATCH', path('runnerdeployments', name), {
        body,
        contentType: PATCH_CONTENT_TYPES.merge,
      });
    await assert.rejects(
      patch({ spec: { template: { spec: { containerMode: 'Kubernetes' } } } }),
      (err: unknown) => {
        assert.ok(err instanceof KubeError);
        assert.equal(err.code, 422);
        assert.equal(
          err.message,
          `${DENIED('validate.runnerdeployment.actions.summerwind.dev')}RunnerDeployment.actions.summerwind.dev "${name}" is invalid: spec.template.spec.containerMode: Unsupported value: "Kubernetes": supported values: "", "kubernetes"`,
        );
        return true;
      },
    );
    await assert.rejects(
      patch({ spec: { selector: { matchLabels: { 'runner-deployment-name': 'someone-else' } } } }),
      (err: unknown) =>
        err instanceof KubeError && err.code === 422 && /spec\.selector: Invalid value/.test(err.message),
    );
    const updated = await patch({
      spec: { replicas: 3, template: { spec: { labels: ['custom-runner', 'gpu'] } } },
    });
    assert.equal((updated as unknown as { spec: { replicas: number } }).spec.replicas, 3);
    // A metadata-only update goes through too.
    await patch({ metadata: { labels: { team: 'a' } } });
  });

  test('a dry-run create (dryRun=All) is validated too, and a valid one is not stored', async () => {
    const before = reviews('/validate-actions-summerwind-dev-v1alpha1-runner');
    const err = await rejection(runner('dry-bad', { organization: 'acme', containerMode: 'dind' }), {
      dryRun: 'All',
    });
    assert.match(err.message, /spec\.containerMode: Unsupported value: "dind"/);
    await create(runner('dry-good', { organization: 'acme' }), { dryRun: 'All' });
    assert.equal(await exists('runners', 'dry-good'), false);
    assert.ok(
      reviews('/validate-actions-summerwind-dev-v1alpha1-runner') >= before + 2,
      'both reached the webhook',
    );
  });

  test("a Runner a RunnerReplicaSet controls is its set's validated template: not sent to the webhook", async () => {
    const validatePath = '/validate-actions-summerwind-dev-v1alpha1-runner';
    const before = reviews(validatePath);
    const owned = (name: string, controller: boolean): Manifest => ({
      ...runner(name, { organization: 'acme' }),
      metadata: {
        name,
        ownerReferences: [
          {
            apiVersion: 'actions.summerwind.dev/v1alpha1',
            kind: 'RunnerReplicaSet',
            name: 'some-set',
            uid: '00000000-0000-0000-0000-000000000001',
            controller,
          },
        ],
      },
    });
    await create(owned('of-a-set', true), { dryRun: 'All' });
    assert.equal(reviews(validatePath), before, 'a replica set’s Runner: no webhook call');
    await create(owned('merely-referring', false), { dryRun: 'All' });
    await create(runner('of-its-own', { organization: 'acme' }), { dryRun: 'All' });
    assert.equal(reviews(validatePath), before + 2, 'anything else is validated');
  });

  test('a new CA reaches every configuration, and the webhooks keep answering', async () => {
    const configurations = [
      ['mutatingwebhookconfigurations', `paddock-runner-pod-token-${ns.name}`],
      ['validatingwebhookconfigurations', `paddock-runner-resources-${ns.name}`],
    ];
    const bundles = async () =>
      (
        await Promise.all(
          configurations.map(async ([kind, name]) => {
            const c = await http.request<{ webhooks: { clientConfig: { caBundle: string } }[] }>(
              'GET',
              `/apis/admissionregistration.k8s.io/v1/${kind}/${name}`,
            );
            return c.webhooks.map((w) => w.clientConfig.caBundle);
          }),
        )
      ).flat();
    const first = await bundles();
    assert.equal(first.length, 4, 'the pod webhook and three runner-kind validating webhooks');
    assert.equal(new Set(first).size, 1, 'one CA for all');

    // A lost certificate Secret: paddock makes a new CA and publishes it next to the old one.
    await http.request('DELETE', `/api/v1/namespaces/${ns.name}/secrets/paddock-webhook-tls`);
    const next = await eventually(
      'the new caBundle in every configuration',
      async () => {
        const b = await bundles();
        return new Set(b).size === 1 && b[0] !== first[0] ? b : undefined;
      },
      30_000,
    );
    const pem = Buffer.from(next[0]!, 'base64').toString('utf8');
    assert.equal(pem.match(/BEGIN CERTIFICATE/g)?.length, 2, 'the new CA, the old one still trusted');
    assert.ok(pem.endsWith(Buffer.from(first[0]!, 'base64').toString('utf8')), 'the old CA last');

    // Served with the new certificate and trusted by the API server.
    await eventually('the webhook to answer with the new certificate', async () =>
      create(runner('after-rotation', { organization: 'acme', containerMode: 'x' }), { dryRun: 'All' }).then(
        () => false,
        (err: unknown) =>
          err instanceof KubeError && err.message.includes(DENIED('validate.runner.actions.summerwind.dev')),
      ),
    );
    await create(runner('after-rotation', { organization: 'acme' }));
  });

  test('with paddock stopped: fail-closed for the runner kinds only; DELETE still works; creation works again once the configurations are gone', async (t) => {
    await paddock!.stop();
    paddock = undefined;

    // The configurations are still there, their server is not: a Runner cannot be created…
    await assert.rejects(create(runner('while-down', { organization: 'acme' })), (err: unknown) => {
      assert.ok(err instanceof KubeError);
      t.diagnostic(err.message);
      assert.match(
        err.message,
        /failed calling webhook "(mutate|validate)\.runner\.actions\.summerwind\.dev"/,
      );
      assert.match(err.message, /connection refused/);
      return true;
    });
    assert.equal(await exists('runners', 'while-down'), false);
    // …while an ordinary pod of the namespace is created as usual.
    await eventually('an ordinary pod to be created', async () => {
      await http.request('POST', `/api/v1/namespaces/${ns.name}/pods`, {
        body: { metadata: { name: 'ordinary' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
      });
      return true;
    });

    // An UPDATE that leaves the spec alone is not sent either: labels, annotations and finalizers
    // can be changed while paddock is down…
    await http.request('PATCH', path('runners', 'plain'), {
      body: { metadata: { labels: { team: 'ci' }, annotations: { note: 'while paddock is down' } } },
      contentType: 'application/merge-patch+json',
    });
    assert.equal((await get('runners', 'plain')).metadata.labels?.team, 'ci');
    // …while a spec change still needs the webhooks.
    await assert.rejects(
      http.request('PATCH', path('runners', 'plain'), {
        body: { spec: { labels: ['changed'] } },
        contentType: 'application/merge-patch+json',
      }),
      (err: unknown) => err instanceof KubeError && /failed calling webhook/.test(err.message),
    );

    // DELETE is not sent to the webhooks. (A Runner keeps its finalizer until a paddock runs
    // again: the deletion is accepted, the object waits.)
    for (const [plural, name] of [
      ['runnerdeployments', 'example-runnerdeploy'],
      ['runnerreplicasets', 'org-runners-abcde'],
      ['runners', 'plain'],
    ] as const) {
      await http.request('DELETE', path(plural, name));
      await eventually(`${plural}/${name} to be gone or deleting`, async () => {
        const obj = await get(plural, name).catch((err: unknown) => {
          if (isNotFound(err)) return undefined;
          throw err;
        });
        return (
          !obj || Boolean((obj as { metadata?: { deletionTimestamp?: string } }).metadata?.deletionTimestamp)
        );
      });
    }

    // No paddock to remove the Runner finalizers any more: the test does, so the namespace can go.
    // With the configurations still in place: removing a finalizer is not a spec change.
    const runners = await http.request<{ items: { metadata: { name: string; finalizers?: string[] } }[] }>(
      'GET',
      `/apis/actions.summerwind.dev/v1alpha1/namespaces/${ns.name}/runners`,
    );
    for (const r of runners.items) {
      if (!r.metadata.finalizers?.length) continue;
      await http.request('PATCH', path('runners', r.metadata.name), {
        body: { metadata: { finalizers: null } },
        contentType: 'application/merge-patch+json',
      });
    }
    await deleteTestWebhookConfiguration(ns.cluster.kubeConfig, ns.name);
    for (const kind of ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations']) {
      await assert.rejects(
        http.request(
          'GET',
          `/apis/admissionregistration.k8s.io/v1/${kind}/paddock-runner-resources-${ns.name}`,
        ),
        (err: unknown) => isNotFound(err),
      );
    }
    // The API server drops the configurations asynchronously.
    await eventually(
      'creation to work again',
      () => create(runner('after-delete', { organization: 'acme' })).then(() => true),
      20_000,
    );
    // Nothing validates the webhook-only rules any more.
    await create(runner('unchecked', { organization: 'acme', containerMode: 'dind' }));
  });
});
