import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { KubeError } from '../runtime/errors.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import {
  ANNOTATION_APPLIED_DIGEST,
  applyRunnerPodWebhookConfiguration,
  applyRunnerResourceWebhookConfigurations,
  deleteRunnerPodWebhookConfiguration,
  deleteRunnerResourceWebhookConfigurations,
  holdsFields,
  readingAhead,
  runnerPodWebhookConfiguration,
  runnerResourceWebhookConfiguration,
  webhookConfigurationPaths,
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

  test('applied with server-side apply unless current; deleting an absent one is fine', async () => {
    const api = new FakeConfigurationApi();
    const options = { clientConfig: { url: 'https://x/y' }, caBundle: CA };
    const path =
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/paddock-runner-pod-token';
    await applyRunnerPodWebhookConfiguration(api.http, options);
    assert.deepEqual(api.methods(), ['GET', 'PATCH']);
    const patch = api.calls[1]!;
    assert.equal(patch.path, path);
    assert.equal(patch.opts.contentType, 'application/apply-patch+yaml');
    assert.deepEqual(patch.opts.query, { fieldManager: 'paddock', force: true });
    assert.match(api.digest(path) ?? '', /^sha256:[0-9a-f]{64}$/);

    // A restart with the same CA and flags: nothing to write.
    api.calls.length = 0;
    await applyRunnerPodWebhookConfiguration(api.http, options);
    assert.deepEqual(api.methods(), ['GET']);

    // Each of these has it applied again.
    const changes: [string, () => void, typeof options][] = [
      [
        'a hand edit',
        () => api.edit(path, (o) => ((o.webhooks as Webhook[])[0]!.timeoutSeconds = 30)),
        options,
      ],
      [
        'another webhook added',
        () => api.edit(path, (o) => (o.webhooks as Webhook[]).push(webhookOf(o))),
        options,
      ],
      [
        'applied by a paddock without the digest',
        () => api.edit(path, (o) => delete api.annotationsOf(o)[ANNOTATION_APPLIED_DIGEST]),
        options,
      ],
      [
        'applied by a paddock that set other fields',
        () => api.edit(path, (o) => (api.annotationsOf(o)[ANNOTATION_APPLIED_DIGEST] = 'sha256:0')),
        options,
      ],
      ['the object cannot be read', () => (api.failGets = true), options],
      ['a new CA', () => undefined, { ...options, caBundle: `${CA}${CA}` }],
    ];
    for (const [what, change, opts] of changes) {
      change();
      api.calls.length = 0;
      await applyRunnerPodWebhookConfiguration(api.http, opts);
      assert.deepEqual(api.methods(), ['GET', 'PATCH'], what);
      api.failGets = false;
      await applyRunnerPodWebhookConfiguration(api.http, opts);
      assert.deepEqual(api.methods(), ['GET', 'PATCH', 'GET'], `${what}: current once applied`);
    }

    api.calls.length = 0;
    await deleteRunnerPodWebhookConfiguration(api.http);
    await deleteRunnerPodWebhookConfiguration(api.http);
    assert.deepEqual(api.methods(), ['DELETE', 'DELETE']);
  });

  test('holdsFields: every wanted field with its value, extra fields allowed, arrays of the same length', () => {
    assert.ok(
      holdsFields({ a: 1, b: { c: [1, { d: 'x', e: 2 }] }, f: true }, { a: 1, b: { c: [1, { d: 'x' }] } }),
    );
    assert.ok(!holdsFields({ a: 1 }, { a: 2 }));
    assert.ok(!holdsFields({ a: [1, 2] }, { a: [1] }));
    assert.ok(!holdsFields({ a: [1] }, { a: [1, 2] }));
    assert.ok(
      !holdsFields({ a: { b: 1 } }, { a: { b: 1, c: undefined } }),
      'an absent field is not undefined',
    );
    assert.ok(!holdsFields({ a: null }, { a: {} }));
    assert.ok(!holdsFields({ a: [] }, { a: {} }));
    assert.ok(!holdsFields({ a: '1' }, { a: 1 }));
  });
});

/**
 * The admission-registration API as far as these functions use it: GET (404 when absent), server-side
 * apply (stores the body with the fields the API server defaults) and DELETE.
 */
class FakeConfigurationApi {
  readonly objects = new Map<string, Record<string, unknown>>();
  readonly calls: { method: string; path: string; opts: Record<string, unknown> }[] = [];
  failGets = false;
  readonly http = {
    request: async (method: string, path: string, opts: Record<string, unknown> = {}) => {
      this.calls.push({ method, path, opts });
      const stored = this.objects.get(path);
      switch (method) {
        case 'GET':
          if (this.failGets) throw new KubeError({ code: 403, reason: 'Forbidden', message: 'no get' });
          if (!stored) throw new KubeError({ code: 404, reason: 'NotFound', message: 'absent' });
          return structuredClone(stored);
        case 'PATCH': {
          const body = structuredClone(opts.body) as Record<string, unknown>;
          for (const w of body.webhooks as Record<string, unknown>[]) {
            w.namespaceSelector ??= {};
            w.objectSelector ??= {};
          }
          (body.metadata as Record<string, unknown>).resourceVersion = String(this.calls.length);
          this.objects.set(path, body);
          return structuredClone(body);
        }
        case 'DELETE':
          if (!this.objects.delete(path))
            throw new KubeError({ code: 404, reason: 'NotFound', message: 'gone' });
          return {};
        default:
          throw new Error(`unexpected ${method}`);
      }
    },
  } as unknown as KubeHttp;

  methods(): string[] {
    return this.calls.map((c) => c.method);
  }

  annotationsOf(obj: Record<string, unknown>): Record<string, string> {
    const metadata = obj.metadata as { annotations?: Record<string, string> };
    metadata.annotations ??= {};
    return metadata.annotations;
  }

  digest(path: string): string | undefined {
    const obj = this.objects.get(path);
    return obj && this.annotationsOf(obj)[ANNOTATION_APPLIED_DIGEST];
  }

  edit(path: string, change: (obj: Record<string, unknown>) => void): void {
    change(this.objects.get(path)!);
  }
}

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

  test('applied with server-side apply unless current, an earlier version’s mutating one removed; deleted; absent ones are fine', async () => {
    const api = new FakeConfigurationApi();
    const validating =
      '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/paddock-runner-resources-ns1';
    const mutating =
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/paddock-runner-resources-ns1';
    api.objects.set(mutating, { metadata: { name: 'paddock-runner-resources-ns1' }, webhooks: [] });
    const options = {
      name: 'paddock-runner-resources-ns1',
      endpoint: { baseUrl: 'https://x' },
      caBundle: CA,
    };
    await applyRunnerResourceWebhookConfigurations(api.http, options);
    const line = (c: (typeof api.calls)[number]) => [
      c.method,
      c.path,
      (c.opts.body as { kind?: string } | undefined)?.kind,
    ];
    assert.deepEqual(
      api.calls.map(line).sort(),
      [
        ['GET', mutating, undefined],
        ['DELETE', mutating, undefined],
        ['GET', validating, undefined],
        ['PATCH', validating, 'ValidatingWebhookConfiguration'],
      ].sort(),
    );
    const patch = api.calls.find((c) => c.method === 'PATCH')!;
    assert.equal(patch.opts.contentType, 'application/apply-patch+yaml');
    assert.deepEqual(patch.opts.query, { fieldManager: 'paddock', force: true });
    assert.ok(!api.objects.has(mutating), 'the earlier version’s mutating configuration is gone');

    api.calls.length = 0;
    await applyRunnerResourceWebhookConfigurations(api.http, options);
    assert.deepEqual(
      api.calls.map(line).sort(),
      [
        ['GET', mutating, undefined],
        ['GET', validating, undefined],
      ].sort(),
      'current: not written, and the mutating one, absent now, not deleted again',
    );

    api.calls.length = 0;
    await applyRunnerResourceWebhookConfigurations(api.http, {
      ...options,
      endpoint: { baseUrl: 'https://y' },
    });
    assert.ok(api.methods().includes('PATCH'), 'another endpoint is applied');

    api.calls.length = 0;
    await deleteRunnerResourceWebhookConfigurations(api.http, 'paddock-runner-resources-ns1');
    await deleteRunnerResourceWebhookConfigurations(api.http, 'paddock-runner-resources-ns1');
    assert.deepEqual(api.calls.map(line), [
      ['DELETE', validating, undefined],
      ['DELETE', mutating, undefined],
      ['DELETE', validating, undefined],
      ['DELETE', mutating, undefined],
    ]);
    assert.equal(api.objects.size, 0);
  });

  test('writes wait for `writesAfter` (the start-up checks); reads and a current configuration do not', async () => {
    const api = new FakeConfigurationApi();
    const mutating =
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/paddock-runner-resources';
    api.objects.set(mutating, { metadata: { name: 'paddock-runner-resources' }, webhooks: [] });
    const options = { endpoint: { baseUrl: 'https://x' }, caBundle: CA };
    let clear!: () => void;
    const checksPassed = new Promise<void>((resolve) => {
      clear = resolve;
    });
    let done = false;
    const applying = applyRunnerResourceWebhookConfigurations(api.http, options, checksPassed).then(() => {
      done = true;
    });
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      api.methods().sort(),
      ['GET', 'GET'],
      'both read before the checks pass, nothing written',
    );
    assert.equal(done, false);
    clear();
    await applying;
    assert.deepEqual(api.methods().sort(), ['DELETE', 'GET', 'GET', 'PATCH']);

    // Current, and the leftover gone: done without the checks (which here never pass).
    api.calls.length = 0;
    await applyRunnerResourceWebhookConfigurations(api.http, options, new Promise(() => undefined));
    assert.deepEqual(api.methods().sort(), ['GET', 'GET']);

    // Refused checks: nothing is written, and the refusal is what the caller sees.
    api.calls.length = 0;
    const refusal = new Error('GitHub credentials do not work');
    await assert.rejects(
      applyRunnerResourceWebhookConfigurations(
        api.http,
        { ...options, caBundle: `${CA}${CA}` },
        Promise.reject(refusal),
      ),
      refusal,
    );
    assert.deepEqual(api.methods(), ['GET', 'GET'], 'a new CA is not written');
  });

  test('readingAhead: the GETs the apply functions make, sent at once and answered once', async () => {
    const api = new FakeConfigurationApi();
    const ahead = readingAhead(api.http, webhookConfigurationPaths('pods-ns1', 'resources-ns1'));
    assert.deepEqual(api.methods(), ['GET', 'GET', 'GET'], 'sent before any apply');
    const apply = () =>
      Promise.all([
        applyRunnerPodWebhookConfiguration(ahead, {
          name: 'pods-ns1',
          clientConfig: { url: 'https://x/y' },
          caBundle: CA,
        }),
        applyRunnerResourceWebhookConfigurations(ahead, {
          name: 'resources-ns1',
          endpoint: { baseUrl: 'https://x' },
          caBundle: CA,
        }),
      ]);
    await apply();
    assert.deepEqual(api.methods(), ['GET', 'GET', 'GET', 'PATCH', 'PATCH'], 'no GET again: the paths match');
    api.calls.length = 0;
    await apply();
    assert.deepEqual(api.methods().sort(), ['GET', 'GET', 'GET'], 'later reads go to the server');
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
