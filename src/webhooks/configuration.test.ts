import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { KubeError } from '../runtime/errors.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import {
  applyRunnerPodWebhookConfiguration,
  deleteRunnerPodWebhookConfiguration,
  runnerPodWebhookConfiguration,
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
