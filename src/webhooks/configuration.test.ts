import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { KubeError } from '../runtime/errors.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import {
  applyRunnerPodWebhookConfiguration,
  applyRunnerResourceWebhookConfigurations,
  deleteRunnerPodWebhookConfiguration,
  deleteRunnerResourceWebhookConfigurations,
  runnerPodWebhookConfiguration,
  runnerResourceWebhookConfiguration,
} from './configuration.ts';

const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

type Webhook = Record<string, unknown> & { clientConfig: Record<string, unknown> };

function webhookOf(obj: Record<string, unknown>): Webhook {
  const hooks = obj.webhooks as Webhook[];
  assert.equal(hooks.length, 1);
  return hooks[0]!;
}

describe('runner pod MutatingWebhookConfiguration', () => {
  test('url client config, CA bundle, rules, selectors and policies', () => {
    const obj = runnerPodWebhookConfiguration({
      clientConfig: { url: 'https://127.0.0.1:9443/mutate-runner-set-pod' },
      caBundle: CA,
    });
    assert.equal(obj.apiVersion, 'admissionregistration.k8s.io/v1');
    assert.equal(obj.kind, 'MutatingWebhookConfiguration');
    assert.equal((obj.metadata as { name: string }).name, 'paddock-runner-pod-token');
    const w = webhookOf(obj);
    assert.equal(w.name, 'mutate-runner-set-pod.actions.summerwind.dev');
    assert.deepEqual(w.clientConfig, {
      url: 'https://127.0.0.1:9443/mutate-runner-set-pod',
      caBundle: Buffer.from(CA).toString('base64'),
    });
    assert.deepEqual(w.rules, [
      {
        operations: ['CREATE'],
        apiGroups: [''],
        apiVersions: ['v1'],
        resources: ['pods'],
        scope: 'Namespaced',
      },
    ]);
    assert.deepEqual(w.objectSelector, {
      matchLabels: { 'actions-runner-controller/inject-registration-token': 'true' },
    });
    assert.equal(w.namespaceSelector, undefined);
    assert.equal(w.failurePolicy, 'Fail');
    assert.equal(w.sideEffects, 'NoneOnDryRun', 'the webhook writes a Secret, never on dry runs');
    assert.deepEqual(w.admissionReviewVersions, ['v1']);
    assert.equal(w.timeoutSeconds, 10);
    assert.equal(w.reinvocationPolicy, 'Never');
  });

  test('service client config and watch namespace', () => {
    const obj = runnerPodWebhookConfiguration({
      name: 'custom',
      clientConfig: { service: { namespace: 'paddock-system', name: 'paddock-webhook' } },
      caBundle: CA,
      namespace: 'runners',
    });
    const w = webhookOf(obj);
    assert.deepEqual(w.clientConfig.service, {
      namespace: 'paddock-system',
      name: 'paddock-webhook',
      path: '/mutate-runner-set-pod',
      port: 443,
    });
    assert.deepEqual(w.namespaceSelector, { matchLabels: { 'kubernetes.io/metadata.name': 'runners' } });
    assert.equal(w.sideEffects, 'NoneOnDryRun');
    assert.equal((obj.metadata as { name: string }).name, 'custom');
  });

  test('applied with server-side apply; deleting an absent one is fine', async () => {
    const calls: { method: string; path: string; opts: Record<string, unknown> }[] = [];
    const http = {
      async request(method: string, path: string, opts: Record<string, unknown> = {}) {
        calls.push({ method, path, opts });
        if (method === 'DELETE') throw new KubeError({ code: 404, reason: 'NotFound', message: 'gone' });
        return opts.body;
      },
    } as unknown as KubeHttp;
    await applyRunnerPodWebhookConfiguration(http, { clientConfig: { url: 'https://x/y' }, caBundle: CA });
    await deleteRunnerPodWebhookConfiguration(http);
    assert.equal(calls[0]!.method, 'PATCH');
    assert.equal(
      calls[0]!.path,
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/paddock-runner-pod-token',
    );
    assert.equal(calls[0]!.opts.contentType, 'application/apply-patch+yaml');
    assert.deepEqual(calls[0]!.opts.query, { fieldManager: 'paddock', force: true });
    assert.equal(calls[1]!.method, 'DELETE');
  });
});

describe('Runner, RunnerReplicaSet and RunnerDeployment webhook configurations', () => {
  const KINDS = [
    ['runner', 'runners'],
    ['runnerdeployment', 'runnerdeployments'],
    ['runnerreplicaset', 'runnerreplicasets'],
  ] as const;
  const webhooks = (obj: Record<string, unknown>) => obj.webhooks as Webhook[];

  test('a validating configuration, one webhook per kind at ARC’s names and paths; no mutating one', () => {
    const validating = runnerResourceWebhookConfiguration({
      endpoint: { baseUrl: 'https://127.0.0.1:9443/' },
      caBundle: CA,
    });
    assert.equal(validating.apiVersion, 'admissionregistration.k8s.io/v1');
    assert.equal(validating.kind, 'ValidatingWebhookConfiguration');
    assert.deepEqual(validating.metadata, {
      name: 'paddock-runner-resources',
      labels: { 'app.kubernetes.io/managed-by': 'paddock' },
    });
    assert.deepEqual(
      webhooks(validating).map((w) => [w.name, w.clientConfig.url]),
      KINDS.map(([singular]) => [
        `validate.${singular}.actions.summerwind.dev`,
        `https://127.0.0.1:9443/validate-actions-summerwind-dev-v1alpha1-${singular}`,
      ]),
    );
    for (const [i, [, resource]] of KINDS.entries()) {
      const w = webhooks(validating)[i]!;
      assert.deepEqual(w.rules, [
        {
          operations: ['CREATE', 'UPDATE'],
          apiGroups: ['actions.summerwind.dev'],
          apiVersions: ['v1alpha1'],
          resources: [resource],
          scope: 'Namespaced',
        },
      ]);
      assert.equal(w.clientConfig.caBundle, Buffer.from(CA).toString('base64'));
      assert.equal(w.failurePolicy, 'Fail');
      assert.equal(w.sideEffects, 'None');
      assert.deepEqual(w.admissionReviewVersions, ['v1']);
      assert.equal(w.matchPolicy, 'Equivalent');
      assert.equal(w.timeoutSeconds, 10);
      assert.equal(w.namespaceSelector, undefined);
      assert.equal(w.objectSelector, undefined);
      assert.ok(!(w.rules as { operations: string[] }[])[0]!.operations.includes('DELETE'));
      assert.equal(w.reinvocationPolicy, undefined, 'not a field of validating webhooks');
    }
  });

  test('in-cluster service, a watched namespace, a name per namespace', () => {
    const validating = runnerResourceWebhookConfiguration({
      name: 'paddock-runner-resources-team-a',
      endpoint: { service: { namespace: 'paddock-system', name: 'paddock-webhook' } },
      caBundle: CA,
      namespace: 'team-a',
      timeoutSeconds: 5,
    });
    assert.equal((validating.metadata as { name: string }).name, 'paddock-runner-resources-team-a');
    for (const w of webhooks(validating)) {
      assert.deepEqual(w.namespaceSelector, { matchLabels: { 'kubernetes.io/metadata.name': 'team-a' } });
      assert.equal(w.timeoutSeconds, 5);
      assert.equal(w.clientConfig.url, undefined);
    }
    assert.deepEqual(
      webhooks(validating).map((w) => w.clientConfig.service),
      KINDS.map(([singular]) => ({
        namespace: 'paddock-system',
        name: 'paddock-webhook',
        path: `/validate-actions-summerwind-dev-v1alpha1-${singular}`,
        port: 443,
      })),
    );
  });

  test('applied with server-side apply, an earlier version’s mutating one removed; deleted; absent ones are fine', async () => {
    const calls: { method: string; path: string; opts: Record<string, unknown> }[] = [];
    const http = {
      async request(method: string, path: string, opts: Record<string, unknown> = {}) {
        calls.push({ method, path, opts });
        if (method === 'DELETE') throw new KubeError({ code: 404, reason: 'NotFound', message: 'gone' });
        return opts.body;
      },
    } as unknown as KubeHttp;
    await applyRunnerResourceWebhookConfigurations(http, {
      name: 'paddock-runner-resources-ns1',
      endpoint: { baseUrl: 'https://x' },
      caBundle: CA,
    });
    await deleteRunnerResourceWebhookConfigurations(http, 'paddock-runner-resources-ns1');
    assert.deepEqual(
      calls.map((c) => [c.method, c.path, (c.opts.body as { kind?: string } | undefined)?.kind]),
      [
        [
          'PATCH',
          '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/paddock-runner-resources-ns1',
          'ValidatingWebhookConfiguration',
        ],
        [
          'DELETE',
          '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/paddock-runner-resources-ns1',
          undefined,
        ],
        [
          'DELETE',
          '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/paddock-runner-resources-ns1',
          undefined,
        ],
        [
          'DELETE',
          '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/paddock-runner-resources-ns1',
          undefined,
        ],
      ],
    );
    for (const c of calls.slice(0, 1)) {
      assert.equal(c.opts.contentType, 'application/apply-patch+yaml');
      assert.deepEqual(c.opts.query, { fieldManager: 'paddock', force: true });
    }
  });

  test('a failure other than NotFound on delete is reported', async () => {
    const http = {
      async request() {
        throw new KubeError({ code: 403, reason: 'Forbidden', message: 'no' });
      },
    } as unknown as KubeHttp;
    await assert.rejects(deleteRunnerResourceWebhookConfigurations(http), /no/);
  });
});
