import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Paddock } from '../src/cli/run.ts';
import { uninstall } from '../src/cli/uninstall.ts';
import { FINALIZER_RUNNER_POD } from '../src/controllers/constants.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp, PATCH_CONTENT_TYPES } from '../src/runtime/kube-http.ts';
import { PODS } from '../src/runtime/resources.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import {
  DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME,
  DEFAULT_WEBHOOK_CONFIGURATION_NAME,
} from '../src/webhooks/index.ts';
import { namespaceFixture } from './support/cluster.ts';
import { startTestPaddock, stopTestFleet } from './support/paddock.ts';

/**
 * Removing paddock (issue 13 item 5): with paddock gone, its dangling webhook configurations do
 * not block pods that are not runner pods; `paddock uninstall` refuses while objects still carry
 * paddock's finalizers, and afterwards removes every configuration it registered.
 */

const ADMISSION = '/apis/admissionregistration.k8s.io/v1';

describe('uninstall', () => {
  const ns = namespaceFixture('t-uninstall');
  const double = new GitHubDouble();
  let http: KubeHttp;
  let paddock: Paddock | undefined;

  before(async () => {
    await double.start();
    double.addOrg('acme');
    const { token } = double.addToken();
    http = new KubeHttp(ns.cluster.kubeConfig);
    ({ paddock } = await startTestPaddock({
      kubeConfig: ns.cluster.kubeConfig,
      namespace: ns.name,
      env: { GITHUB_TOKEN: token, GITHUB_URL: double.apiUrl },
    }));
  });

  after(() =>
    stopTestFleet({ kubeConfig: ns.cluster.kubeConfig, namespace: ns.name, paddock, http, double }),
  );

  const exists = (path: string) =>
    http.request('GET', path).then(
      () => true,
      () => false,
    );
  const configurations = () =>
    Promise.all([
      exists(`${ADMISSION}/mutatingwebhookconfigurations/${DEFAULT_WEBHOOK_CONFIGURATION_NAME}-${ns.name}`),
      exists(
        `${ADMISSION}/validatingwebhookconfigurations/${DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME}-${ns.name}`,
      ),
    ]);
  const pod = (name: string, finalizers: string[] = []) =>
    http.request('POST', resourcePath(PODS, ns.name), {
      body: {
        metadata: { name, finalizers },
        spec: { containers: [{ name: 'main', image: 'busybox' }] },
      },
    });

  test('paddock stopped: its configurations stay but block no ordinary pod; uninstall waits for finalizers, then removes them', async () => {
    assert.deepEqual(await configurations(), [true, true], 'registered by paddock run');
    await paddock!.stop();
    paddock = undefined;
    // Nothing answers the webhooks now; a pod that is no runner pod is still admitted.
    await pod('ordinary');
    await pod('left-behind', [FINALIZER_RUNNER_POD]);

    const blocked = await uninstall(http, { namespace: ns.name, force: false });
    assert.deepEqual(blocked.removed, []);
    assert.deepEqual(blocked.blockers, [`Pod ${ns.name}/left-behind`]);
    assert.deepEqual(await configurations(), [true, true], 'nothing removed while blocked');

    await http.request('PATCH', resourcePath(PODS, ns.name, 'left-behind'), {
      body: { metadata: { finalizers: null } },
      contentType: PATCH_CONTENT_TYPES.merge,
    });
    const done = await uninstall(http, { namespace: ns.name, force: false });
    assert.deepEqual(done.blockers, []);
    assert.equal(done.removed.length, 2);
    assert.deepEqual(await configurations(), [false, false]);
    // Again: nothing left to remove is no error.
    assert.equal((await uninstall(http, { namespace: ns.name, force: false })).removed.length, 2);
  });
});
