import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, test } from 'node:test';
import { installCrds } from '../src/cli/run.ts';
import { rfc3339 } from '../src/controllers/constants.ts';
import { GitHubClient } from '../src/github/index.ts';
import { realClock } from '../src/runtime/clock.ts';
import { isNotFound, KubeError } from '../src/runtime/errors.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { silentLogger } from '../src/runtime/log.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { loadOrCreateWebhookCertificates, type WebhookCertificates } from '../src/webhooks/certs.ts';
import {
  applyRunnerPodWebhookConfiguration,
  deleteRunnerPodWebhookConfiguration,
  RUNNER_POD_WEBHOOK_NAME,
} from '../src/webhooks/configuration.ts';
import { kubeRunnerPodCluster } from '../src/webhooks/runner-set-owner.ts';
import {
  ANNOTATION_TOKEN_EXPIRES_AT,
  LABEL_INJECT_REGISTRATION_TOKEN,
  MUTATE_RUNNER_POD_PATH,
  mutateRunnerPod,
  type RunnerTokenInjectorDeps,
  runnerPodAdmissionHandler,
} from '../src/webhooks/runner-token.ts';
import { WebhookServer } from '../src/webhooks/server.ts';
import { ANNOTATION_JIT_RUNNER_ID, tokenSecretName } from '../src/webhooks/token-secret.ts';
import { eventually, namespaceFixture } from './support/cluster.ts';

interface Env {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
interface Pod {
  metadata: {
    name: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: KubeObject['metadata']['ownerReferences'];
  };
  spec: { restartPolicy?: string; containers: { name: string; image: string; env?: Env[] }[] };
}
interface Secret extends KubeObject {
  data?: Record<string, string>;
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

function envEntry(pod: Pod, name: string): Env | undefined {
  return pod.spec.containers[0]!.env?.find((e) => e.name === name);
}

function envOf(pod: Pod, name: string): string | undefined {
  return envEntry(pod, name)?.value;
}

describe('runner pod webhook', () => {
  const ns = namespaceFixture('t-webhook');
  const double = new GitHubDouble();
  let http: KubeHttp;
  let client: GitHubClient;
  let server: WebhookServer;
  let certs: WebhookCertificates;
  let configName: string;
  let podsPath: string;

  const createPod = (body: unknown, query: Record<string, string> = {}) =>
    http.request<Pod>('POST', podsPath, { body, query });
  const getPod = (name: string) => http.request<Pod>('GET', `${podsPath}/${name}`);
  const getSecret = (name: string) =>
    http.request<Secret>('GET', `/api/v1/namespaces/${ns.name}/secrets/${name}`).catch((err) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
  const deps = (jit = false): RunnerTokenInjectorDeps => ({
    logger: silentLogger(),
    github: { clientFor: async () => client },
    cluster: kubeRunnerPodCluster(http),
    ...(jit ? { jit: {} } : {}),
  });

  /** A RunnerSet (nobody reconciles it here) and a StatefulSet it controls, as paddock would make them. */
  async function runnerSetWithStatefulSet(
    name: string,
    o: { replicas: number; org?: string },
  ): Promise<{ runnerSet: KubeObject; statefulSet: KubeObject }> {
    const org = o.org ?? 'acme';
    const runnerSet = await http.request<KubeObject>(
      'POST',
      `/apis/actions.summerwind.dev/v1alpha1/namespaces/${ns.name}/runnersets`,
      {
        body: {
          apiVersion: 'actions.summerwind.dev/v1alpha1',
          kind: 'RunnerSet',
          metadata: { name },
          spec: {
            organization: org,
            selector: { matchLabels: { 'runnerset-name': name } },
            serviceName: name,
            template: {
              metadata: { labels: { 'runnerset-name': name } },
              spec: { containers: [{ name: 'runner' }] },
            },
          },
        },
      },
    );
    const labels = { [LABEL_INJECT_REGISTRATION_TOKEN]: 'true', 'runnerset-name': name };
    const statefulSet = await http.request<KubeObject>(
      'POST',
      `/apis/apps/v1/namespaces/${ns.name}/statefulsets`,
      {
        body: {
          metadata: {
            name: `${name}-sts`,
            ownerReferences: [
              {
                apiVersion: 'actions.summerwind.dev/v1alpha1',
                kind: 'RunnerSet',
                name,
                uid: runnerSet.metadata.uid,
                controller: true,
                blockOwnerDeletion: true,
              },
            ],
          },
          spec: {
            replicas: o.replicas,
            serviceName: `${name}-sts`,
            selector: { matchLabels: labels },
            template: { metadata: { labels }, spec: podBody('ignored', { org }).spec },
          },
        },
      },
    );
    return { runnerSet, statefulSet };
  }

  /** A pod claiming `statefulSet` as its controller, with `uid` (default: the real one). */
  function podOf(statefulSet: KubeObject, o: { uid?: string; org?: string } = {}): Pod {
    const pod = podBody(`${statefulSet.metadata.name}-0`, { org: o.org ?? 'acme' });
    pod.metadata.ownerReferences = [
      {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        name: statefulSet.metadata.name!,
        uid: o.uid ?? statefulSet.metadata.uid!,
        controller: true,
        blockOwnerDeletion: true,
      },
    ];
    return pod;
  }

  /** A hand-made AdmissionReview POSTed straight to the webhook's port, as anyone on the network could. */
  function forge(pod: Pod): Promise<{ status: number; body: string }> {
    const review = {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: `forged-${pod.metadata.name}`,
        kind: { group: '', version: 'v1', kind: 'Pod' },
        resource: { group: '', version: 'v1', resource: 'pods' },
        namespace: ns.name,
        operation: 'CREATE',
        object: { apiVersion: 'v1', kind: 'Pod', ...pod },
        dryRun: false,
      },
    };
    const url = new URL(server.url(MUTATE_RUNNER_POD_PATH));
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          ca: certs.ca.cert,
          agent: false,
          headers: { 'content-type': 'application/json' },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
          );
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify(review));
    });
  }

  /** Every token the double ever issued, and every JIT configuration it generated. */
  const issuedCredentials = () => [...double.model.tokens.keys(), ...double.model.jitConfigs.keys()];

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
    await installCrds(http);
    podsPath = `/api/v1/namespaces/${ns.name}/pods`;

    // Kept in a Secret as a deployment would (so a second replica would serve the same CA).
    certs = await loadOrCreateWebhookCertificates({
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
      handlers: { [MUTATE_RUNNER_POD_PATH]: runnerPodAdmissionHandler(deps()) },
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
    // The API server picks configurations up asynchronously: wait until a dry run of a bare runner
    // pod is refused by the webhook.
    await eventually(
      'the webhook to be active',
      async () =>
        createPod(podBody('probe'), { dryRun: 'All' }).then(
          () => false,
          (err: unknown) => err instanceof KubeError && /gets no runner credential/.test(err.message),
        ),
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

  test("a RunnerSet's StatefulSet pod (the real path) gets its token through a Secret the StatefulSet owns; the pod carries none", async () => {
    const { statefulSet } = await runnerSetWithStatefulSet('real', { replicas: 1 });
    const stsName = statefulSet.metadata.name!;
    const pod = await eventually(
      'the StatefulSet pod',
      async () => getPod(`${stsName}-0`).catch(() => undefined),
      30_000,
    );
    const secretName = tokenSecretName(stsName);
    assert.deepEqual(envEntry(pod, 'RUNNER_TOKEN'), {
      name: 'RUNNER_TOKEN',
      valueFrom: { secretKeyRef: { name: secretName, key: 'registration-token' } },
    });
    assert.equal(envOf(pod, 'RUNNER_NAME'), `${stsName}-0`);
    assert.equal(pod.spec.restartPolicy, 'Never');

    const secret = await getSecret(secretName);
    assert.ok(secret, 'the token Secret exists');
    const token = Buffer.from(secret.data?.['registration-token'] ?? '', 'base64').toString('utf8');
    const issued = double.model.tokens.get(token);
    assert.ok(issued, 'a token the double issued');
    assert.equal(issued.kind, 'registration');
    assert.ok(!JSON.stringify(pod).includes(token), 'the pod object carries no token');
    assert.equal(pod.metadata.annotations?.[ANNOTATION_TOKEN_EXPIRES_AT], rfc3339(issued.expiresAt));
    assert.deepEqual(secret.metadata.ownerReferences, [
      {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        name: stsName,
        uid: statefulSet.metadata.uid,
        controller: true,
      },
    ]);
    assert.deepEqual(secret.metadata.labels, {
      'app.kubernetes.io/managed-by': 'paddock',
      'runnerset-name': 'real',
    });
    assert.ok(
      (secret.metadata.managedFields as { manager?: string }[]).some((f) => f.manager === 'paddock'),
      'written by server-side apply as paddock',
    );

    // The garbage collector removes the Secret together with its StatefulSet.
    await http.request('DELETE', `/apis/apps/v1/namespaces/${ns.name}/statefulsets/${stsName}`, {
      query: { propagationPolicy: 'Background' },
    });
    await eventually(
      'the token Secret to be collected',
      async () => (await getSecret(secretName)) === undefined,
      30_000,
    );
  });

  describe('forged AdmissionReviews POSTed straight to the webhook port get no credential', () => {
    let target: { runnerSet: KubeObject; statefulSet: KubeObject };
    before(async () => {
      // Real objects to claim, with no pod of their own (replicas 0) and hence no token Secret.
      target = await runnerSetWithStatefulSet('forgery-target', { replicas: 0 });
      // The token a forged request would have been handed before: issued and cached for acme.
      await client.registrationToken({ kind: 'organization', org: 'acme' });
    });

    const cases: [string, () => Pod][] = [
      ['(a) a bare pod with RUNNER_ORG=acme', () => podBody('forged-bare')],
      [
        '(b) a pod claiming a real StatefulSet of a real RunnerSet with another UID',
        () => podOf(target.statefulSet, { uid: '00000000-0000-0000-0000-000000000000' }),
      ],
      [
        '(c) a pod claiming the real owner chain but another organization',
        () => podOf(target.statefulSet, { org: 'broken' }),
      ],
    ];
    for (const [what, pod] of cases) {
      test(`${what}: denied 403, no issued token anywhere in the answer, no Secret written`, async (t) => {
        const tokenCalls = double.requestCount(TOKEN_ROUTE);
        const answer = await forge(pod());
        assert.equal(answer.status, 200);
        const review = JSON.parse(answer.body) as {
          response: {
            allowed: boolean;
            patch?: string;
            status?: { code: number; reason?: string; message: string };
          };
        };
        assert.equal(review.response.allowed, false);
        assert.equal(review.response.status?.code, 403);
        assert.equal(review.response.status?.reason, 'Forbidden');
        assert.match(review.response.status!.message, /gets no runner credential/);
        t.diagnostic(review.response.status!.message);
        const patch = review.response.patch
          ? Buffer.from(review.response.patch, 'base64').toString('utf8')
          : '';
        const issued = issuedCredentials();
        assert.ok(issued.length > 0, 'the double did issue a token for acme');
        for (const credential of issued) {
          assert.ok(!answer.body.includes(credential), 'no issued token in the answer');
          assert.ok(!patch.includes(credential), 'no issued token in the patch');
        }
        assert.equal(double.requestCount(TOKEN_ROUTE), tokenCalls, 'no GitHub call');
        assert.equal(await getSecret(tokenSecretName(target.statefulSet.metadata.name!)), undefined);
        const secrets = await http.request<{ items: Secret[] }>(
          'GET',
          `/api/v1/namespaces/${ns.name}/secrets`,
          {
            query: { labelSelector: 'app.kubernetes.io/managed-by=paddock' },
          },
        );
        assert.deepEqual(
          secrets.items.map((s) => s.metadata.name).filter((n) => n?.startsWith('forg')),
          [],
          'no token Secret for the forged pods',
        );
      });
    }
  });

  test('a bare runner pod created through the API server is refused with the reason', async (t) => {
    await assert.rejects(createPod(podBody('bare-0')), (err: unknown) => {
      assert.ok(err instanceof KubeError);
      assert.match(
        err.message,
        new RegExp(`admission webhook "${RUNNER_POD_WEBHOOK_NAME}" denied the request`),
      );
      assert.match(
        err.message,
        new RegExp(`runner pod ${ns.name}/bare-0 gets no runner credential: it has no controller owner`),
      );
      t.diagnostic(err.message);
      return true;
    });
  });

  test('an unlabelled pod is created untouched without reaching the webhook', async () => {
    const seen = server.requestCount();
    const tokenCalls = double.requestCount(TOKEN_ROUTE);
    await createPod(podBody('plain', { labelled: false }));
    const pod = await getPod('plain');
    assert.equal(envEntry(pod, 'RUNNER_TOKEN'), undefined);
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
    assert.equal(envEntry(pod, 'RUNNER_TOKEN'), undefined);
    assert.equal(pod.spec.restartPolicy, 'Always');
    assert.equal(pod.metadata.annotations, undefined);
    assert.equal(double.requestCount(TOKEN_ROUTE), tokenCalls);
  });

  test('a GitHub failure rejects the creation of a verified pod with the cause', async (t) => {
    const { statefulSet } = await runnerSetWithStatefulSet('broken', { replicas: 0, org: 'broken' });
    double.injectFault({
      route: TOKEN_ROUTE,
      pathSuffix: '/orgs/broken/actions/runners/registration-token',
      status: 502,
      times: 10,
    });
    const name = `${statefulSet.metadata.name}-0`;
    try {
      await assert.rejects(createPod(podOf(statefulSet, { org: 'broken' })), (err: unknown) => {
        assert.ok(err instanceof KubeError);
        assert.match(
          err.message,
          new RegExp(`admission webhook "${RUNNER_POD_WEBHOOK_NAME}" denied the request`),
        );
        assert.match(err.message, new RegExp(`runner pod ${ns.name}/${name}`));
        assert.match(err.message, /registration token/);
        assert.match(err.message, /502/);
        t.diagnostic(err.message);
        return true;
      });
    } finally {
      double.clearFaults();
    }
    await assert.rejects(getPod(name), (err: unknown) => err instanceof KubeError && err.code === 404);
    assert.equal(await getSecret(tokenSecretName(statefulSet.metadata.name!)), undefined);
  });

  test('JIT against the API server: the runner ID is recorded in the Secret, and a recreated pod heals the name collision', async () => {
    const { statefulSet } = await runnerSetWithStatefulSet('jit', { replicas: 0 });
    const secretName = tokenSecretName(statefulSet.metadata.name!);
    const admit = async () => {
      const res = await mutateRunnerPod(podOf(statefulSet), { namespace: ns.name }, deps(true));
      assert.equal(res.allowed, true, JSON.stringify(res.status));
      for (const credential of issuedCredentials()) assert.ok(!JSON.stringify(res).includes(credential));
      const secret = (await getSecret(secretName))!;
      return { res, secret, id: Number(secret.metadata.annotations?.[ANNOTATION_JIT_RUNNER_ID]) };
    };
    const first = await admit();
    assert.deepEqual(Object.keys(first.secret.data ?? {}), ['jit-config']);
    const runnerName = `${statefulSet.metadata.name}-0`;
    assert.equal(double.runnerByName('orgs/acme', runnerName)?.id, first.id);
    assert.ok(first.res.patch?.some((op) => op.op === 'add' && JSON.stringify(op).includes(`"${first.id}"`)));

    // The pod is recreated before its runner ever connected: 409, proven stale by the record, removed.
    const second = await admit();
    assert.notEqual(second.id, first.id);
    assert.equal(double.model.runners.get(first.id), undefined);
    assert.equal(double.runnerByName('orgs/acme', runnerName)?.id, second.id);
    const jit = Buffer.from(second.secret.data?.['jit-config'] ?? '', 'base64').toString('utf8');
    assert.equal(double.model.jitConfigs.get(jit), second.id, 'the Secret holds the new runner’s JIT config');
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
