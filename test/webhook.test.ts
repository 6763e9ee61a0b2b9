import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { rfc3339 } from '../src/controllers/constants.ts';
import { GitHubClient } from '../src/github/index.ts';
import { realClock } from '../src/runtime/clock.ts';
import { KubeError } from '../src/runtime/errors.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { silentLogger } from '../src/runtime/log.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { loadOrCreateWebhookCertificates } from '../src/webhooks/certs.ts';
import {
  applyRunnerPodWebhookConfiguration,
  deleteRunnerPodWebhookConfiguration,
  RUNNER_POD_WEBHOOK_NAME,
} from '../src/webhooks/configuration.ts';
import {
  ANNOTATION_TOKEN_EXPIRES_AT,
  LABEL_INJECT_REGISTRATION_TOKEN,
  MUTATE_RUNNER_POD_PATH,
  runnerPodAdmissionHandler,
} from '../src/webhooks/runner-token.ts';
import { WebhookServer } from '../src/webhooks/server.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';

interface Env {
  name: string;
  value?: string;
}
interface Pod {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: { restartPolicy?: string; containers: { name: string; image: string; env?: Env[] }[] };
}

const TOKEN_ROUTE = 'POST /orgs/{org}/actions/runners/registration-token';

function podBody(name: string, o: { labelled?: boolean; container?: string; org?: string } = {}): Pod {
  return {
    metadata: { name, labels: o.labelled === false ? {} : { [LABEL_INJECT_REGISTRATION_TOKEN]: 'true' } },
    spec: {
      restartPolicy: 'Always',
      containers: [
        {
          name: o.container ?? 'runner',
          image: 'summerwind/actions-runner:latest',
          env: [
            { name: 'RUNNER_ORG', value: o.org ?? 'acme' },
            { name: 'RUNNER_REPO', value: '' },
            { name: 'RUNNER_ENTERPRISE', value: '' },
          ],
        },
      ],
    },
  };
}

function envOf(pod: Pod, name: string): string | undefined {
  return pod.spec.containers[0]!.env?.find((e) => e.name === name)?.value;
}

describe('runner pod webhook', () => {
  const ns = namespaceFixture('t-webhook');
  const double = new GitHubDouble();
  let http: KubeHttp;
  let client: GitHubClient;
  let server: WebhookServer;
  let configName: string;
  let podsPath: string;

  const createPod = (body: unknown, query: Record<string, string> = {}) =>
    http.request<Pod>('POST', podsPath, { body, query });
  const getPod = (name: string) => http.request<Pod>('GET', `${podsPath}/${name}`);

  before(async () => {
    await double.start();
    double.addOrg('acme');
    double.addOrg('broken');
    const { token } = double.addToken();
    client = new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { apiUrl: double.apiUrl },
      clock: realClock,
      logger: silentLogger(),
      maxRetries: 1,
      retryBaseDelayMs: 50,
    });
    http = new KubeHttp(ns.cluster.kubeConfig);
    podsPath = `/api/v1/namespaces/${ns.name}/pods`;

    // Kept in a Secret as a deployment would (so a second replica would serve the same CA).
    const certs = await loadOrCreateWebhookCertificates({
      http,
      namespace: ns.name,
      secretName: 'paddock-webhook-tls',
      ipAddresses: ['127.0.0.1'],
    });
    const again = await loadOrCreateWebhookCertificates({
      http,
      namespace: ns.name,
      secretName: 'paddock-webhook-tls',
      ipAddresses: ['127.0.0.1'],
    });
    assert.deepEqual(again, certs);

    server = new WebhookServer({
      tls: certs.serving,
      host: '127.0.0.1',
      port: 0,
      logger: silentLogger(),
      handlers: {
        [MUTATE_RUNNER_POD_PATH]: runnerPodAdmissionHandler({
          logger: silentLogger(),
          github: { clientFor: async () => client },
        }),
      },
    });
    await server.start();

    // Unique to this run and scoped to this namespace: files running in parallel never see it.
    configName = `paddock-runner-pod-token-${ns.name}`;
    await applyRunnerPodWebhookConfiguration(http, {
      name: configName,
      clientConfig: { url: server.url(MUTATE_RUNNER_POD_PATH) },
      caBundle: certs.ca.cert,
      namespace: ns.name,
    });
    // The API server picks configurations up asynchronously: wait until a dry run is mutated.
    await eventually(
      'the webhook to be active',
      async () => envOf(await createPod(podBody('probe'), { dryRun: 'All' }), 'RUNNER_TOKEN') !== undefined,
      20_000,
    );
  });

  after(async () => {
    await deleteRunnerPodWebhookConfiguration(http, configName).catch(() => undefined);
    await server?.stop();
    client?.close();
    await double.stop();
    http?.close();
  });

  test('a labelled runner pod is stored with a fresh token, its name and restartPolicy Never', async () => {
    const created = await createPod(podBody('runner-a'));
    const pod = await getPod('runner-a');
    assert.deepEqual(pod.spec, created.spec);
    const token = envOf(pod, 'RUNNER_TOKEN');
    assert.ok(token, 'RUNNER_TOKEN injected');
    const issued = double.model.tokens.get(token);
    assert.ok(issued, 'a token the double issued');
    assert.equal(issued.kind, 'registration');
    assert.equal(envOf(pod, 'RUNNER_NAME'), 'runner-a');
    assert.equal(pod.metadata.annotations?.[ANNOTATION_TOKEN_EXPIRES_AT], rfc3339(issued.expiresAt));
    assert.equal(pod.spec.restartPolicy, 'Never');
    assert.equal(envOf(pod, 'RUNNER_ORG'), 'acme');
  });

  test('an unlabelled pod is created untouched without reaching the webhook', async () => {
    const seen = server.requestCount();
    const tokenCalls = double.requestCount(TOKEN_ROUTE);
    await createPod(podBody('plain', { labelled: false }));
    const pod = await getPod('plain');
    assert.equal(envOf(pod, 'RUNNER_TOKEN'), undefined);
    assert.equal(envOf(pod, 'RUNNER_NAME'), undefined);
    assert.equal(pod.spec.restartPolicy, 'Always');
    assert.equal(pod.metadata.annotations?.[ANNOTATION_TOKEN_EXPIRES_AT], undefined);
    assert.equal(server.requestCount(), seen);
    assert.equal(double.requestCount(TOKEN_ROUTE), tokenCalls);
  });

  test('a labelled pod without a runner container passes through untouched', async () => {
    const seen = server.requestCount(MUTATE_RUNNER_POD_PATH);
    const tokenCalls = double.requestCount(TOKEN_ROUTE);
    await createPod(podBody('other-container', { container: 'main' }));
    const pod = await getPod('other-container');
    assert.equal(server.requestCount(MUTATE_RUNNER_POD_PATH), seen + 1);
    assert.equal(envOf(pod, 'RUNNER_TOKEN'), undefined);
    assert.equal(pod.spec.restartPolicy, 'Always');
    assert.equal(pod.metadata.annotations, undefined);
    assert.equal(double.requestCount(TOKEN_ROUTE), tokenCalls);
  });

  test("a StatefulSet's pod (the RunnerSet path) gets its token and the pod name as runner name", async () => {
    const template = podBody('ignored');
    await http.request('POST', `/apis/apps/v1/namespaces/${ns.name}/statefulsets`, {
      body: {
        metadata: { name: 'rs-sts' },
        spec: {
          replicas: 1,
          serviceName: 'rs-sts',
          selector: { matchLabels: { [LABEL_INJECT_REGISTRATION_TOKEN]: 'true', 'runnerset-name': 'rs' } },
          template: {
            metadata: { labels: { [LABEL_INJECT_REGISTRATION_TOKEN]: 'true', 'runnerset-name': 'rs' } },
            spec: template.spec,
          },
        },
      },
    });
    const pod = await eventually(
      'the StatefulSet pod',
      async () => getPod('rs-sts-0').catch(() => undefined),
      30_000,
    );
    assert.equal(envOf(pod, 'RUNNER_NAME'), 'rs-sts-0');
    assert.ok(double.model.tokens.has(envOf(pod, 'RUNNER_TOKEN') ?? ''));
    assert.equal(pod.spec.restartPolicy, 'Never');
  });

  test('a GitHub failure rejects the creation with the cause', async (t) => {
    double.injectFault({
      route: TOKEN_ROUTE,
      pathSuffix: '/orgs/broken/actions/runners/registration-token',
      status: 502,
      times: 10,
    });
    try {
      await assert.rejects(createPod(podBody('broken-0', { org: 'broken' })), (err: unknown) => {
        assert.ok(err instanceof KubeError);
        assert.match(
          err.message,
          new RegExp(`admission webhook "${RUNNER_POD_WEBHOOK_NAME}" denied the request`),
        );
        assert.match(err.message, new RegExp(`runner pod ${ns.name}/broken-0`));
        assert.match(err.message, /registration token/);
        assert.match(err.message, /502/);
        t.diagnostic(err.message);
        return true;
      });
    } finally {
      double.clearFaults();
    }
    await assert.rejects(getPod('broken-0'), (err: unknown) => err instanceof KubeError && err.code === 404);
  });

  test('with the webhook server down, unrelated pods are created and runner pods are rejected', async (t) => {
    await server.stop();
    await createPod(podBody('plain-while-down', { labelled: false }));
    assert.equal((await getPod('plain-while-down')).metadata.name, 'plain-while-down');
    await assert.rejects(createPod(podBody('runner-while-down')), (err: unknown) => {
      assert.ok(err instanceof KubeError);
      assert.match(err.message, new RegExp(`failed calling webhook "${RUNNER_POD_WEBHOOK_NAME}"`));
      t.diagnostic(err.message);
      return true;
    });
  });
});
