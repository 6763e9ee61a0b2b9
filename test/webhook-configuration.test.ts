import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { KubeHttp, PATCH_CONTENT_TYPES } from '../src/runtime/kube-http.ts';
import {
  applyRunnerPodWebhookConfiguration,
  applyRunnerResourceWebhookConfigurations,
  clusterRoleOwner,
  deleteRunnerPodWebhookConfiguration,
  deleteRunnerResourceWebhookConfigurations,
} from '../src/webhooks/configuration.ts';
import { namespaceFixture } from './support/cluster.ts';

/**
 * paddock's webhook configurations against the real API server, which defaults fields paddock does
 * not set: applied once, a restart with the same CA and flags finds them current and writes nothing;
 * a hand edit or another CA has them applied again.
 */

const ADMISSION = '/apis/admissionregistration.k8s.io/v1';
const CA = (n: number) =>
  `-----BEGIN CERTIFICATE-----\n${Buffer.from(`not a real certificate ${n}`).toString('base64')}\n-----END CERTIFICATE-----\n`;

describe('webhook configurations: applied unless current', () => {
  const ns = namespaceFixture('t-whconfig');
  let http: KubeHttp;
  let roleName: string;
  /** Requests paddock's functions make, by method. */
  const methods: string[] = [];
  const counted = () =>
    ({
      request: (method: string, path: string, opts?: object) => {
        methods.push(method);
        return http.request(method, path, opts);
      },
    }) as unknown as KubeHttp;

  const podName = () => `paddock-runner-pod-token-${ns.name}`;
  const resourcesName = () => `paddock-runner-resources-${ns.name}`;
  const podPath = () => `${ADMISSION}/mutatingwebhookconfigurations/${podName()}`;
  const resourcesPath = () => `${ADMISSION}/validatingwebhookconfigurations/${resourcesName()}`;
  const resourceVersion = async (path: string) =>
    (await http.request<{ metadata: { resourceVersion: string } }>('GET', path)).metadata.resourceVersion;

  async function applyBoth(caBundle: string): Promise<void> {
    const owner = await clusterRoleOwner(http, roleName);
    const service = { namespace: ns.name, name: 'paddock-webhook', port: 443 };
    // As `paddock run` in a cluster: the Service, the watched namespace and the ClusterRole as owner.
    await Promise.all([
      applyRunnerPodWebhookConfiguration(counted(), {
        name: podName(),
        clientConfig: { service },
        caBundle,
        owner,
        namespace: ns.name,
      }),
      applyRunnerResourceWebhookConfigurations(counted(), {
        name: resourcesName(),
        endpoint: { service },
        caBundle,
        owner,
        namespace: ns.name,
      }),
    ]);
  }

  before(async () => {
    http = new KubeHttp(ns.cluster.kubeConfig);
    roleName = `paddock-${ns.name}`;
    await http.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      body: { metadata: { name: roleName }, rules: [] },
    });
  });

  after(async () => {
    if (!http) return;
    await deleteRunnerPodWebhookConfiguration(http, podName()).catch(() => undefined);
    await deleteRunnerResourceWebhookConfigurations(http, resourcesName()).catch(() => undefined);
    await http
      .request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${roleName}`)
      .catch(() => undefined);
    http.close();
  });

  test('a second start writes nothing; a hand edit and a new CA are applied', async () => {
    await applyBoth(CA(1));
    assert.equal(methods.filter((m) => m === 'PATCH').length, 2, 'both created');
    const versions = [await resourceVersion(podPath()), await resourceVersion(resourcesPath())];

    methods.length = 0;
    await applyBoth(CA(1));
    assert.deepEqual(
      methods.filter((m) => m === 'PATCH'),
      [],
      'the API server holds what paddock would apply, defaults and all',
    );
    assert.deepEqual([await resourceVersion(podPath()), await resourceVersion(resourcesPath())], versions);

    // Someone lengthens the pod webhook's timeout by hand: the next start puts it back.
    await http.request('PATCH', podPath(), {
      body: { webhooks: [{ name: 'mutate-runner-set-pod.actions.summerwind.dev', timeoutSeconds: 30 }] },
      contentType: PATCH_CONTENT_TYPES.strategic,
      query: { fieldManager: 'kubectl-edit' },
    });
    methods.length = 0;
    await applyBoth(CA(1));
    assert.equal(methods.filter((m) => m === 'PATCH').length, 1, 'only the edited one');
    const pod = await http.request<{ webhooks: { timeoutSeconds: number }[] }>('GET', podPath());
    assert.equal(pod.webhooks[0]?.timeoutSeconds, 10);

    methods.length = 0;
    await applyBoth(CA(2));
    assert.equal(methods.filter((m) => m === 'PATCH').length, 2, 'a new CA goes to both');
    const resources = await http.request<{ webhooks: { clientConfig: { caBundle: string } }[] }>(
      'GET',
      resourcesPath(),
    );
    assert.ok(
      resources.webhooks.every((w) => Buffer.from(w.clientConfig.caBundle, 'base64').toString() === CA(2)),
    );
  });
});
