import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RunnerSet } from '../api/index.ts';
import type {
  GitHubRunner,
  GitHubScope,
  JitConfigInput,
  JitConfigOutcome,
  RemoveRunnerOutcome,
} from '../github/index.ts';
import { GitHubApiError, GitHubClient, GitHubConfigError, RunnerSnapshot } from '../github/index.ts';
import { registrationToken } from '../github/registration-tokens.ts';
import { capturingLogger } from '../github/test-support.ts';
import { realClock } from '../runtime/clock.ts';
import { KubeError } from '../runtime/errors.ts';
import { silentLogger } from '../runtime/log.ts';
import type { KubeObject, OwnerReference } from '../runtime/store.ts';
import { GitHubDouble } from '../testenv/github-double/index.ts';
import {
  type AdmissionResult,
  ANNOTATION_TOKEN_EXPIRES_AT,
  ENV_JIT_CONFIG,
  mutateRunnerPod,
  type RunnerTokenClient,
  type RunnerTokenInjectorDeps,
  runnerPodAdmissionHandler,
} from './runner-token.ts';
import { applyJsonPatch, FakeRunnerPodCluster } from './test-support.ts';
import { ANNOTATION_JIT_RUNNER_ID, ANNOTATION_JIT_RUNNER_NAME } from './token-secret.ts';

const EXPIRES_AT = Date.parse('2030-01-02T03:04:05.678Z');
const TOKEN = 'AABBCCDDEEFFGGHHIIJJKKLLMMNNO';
const JIT = 'JITCONFIG-SECRET';
const NS = 'ns1';
const STS = { name: 'rs-abcde', uid: 'sts-uid' };
const SECRET_NAME = 'rs-abcde-runner-token';

interface Env {
  name: string;
  value?: string;
  valueFrom?: unknown;
}

interface TestPod {
  apiVersion: string;
  kind: string;
  metadata: {
    name?: string;
    generateName?: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: OwnerReference[];
  };
  spec: {
    restartPolicy?: string;
    containers: { name: string; image: string; env?: Env[] }[];
  };
}

function scopeEnv(o: { org?: string; repo?: string; enterprise?: string } = {}): Env[] {
  return [
    { name: 'RUNNER_ORG', value: o.org ?? 'acme' },
    { name: 'RUNNER_REPO', value: o.repo ?? '' },
    { name: 'RUNNER_ENTERPRISE', value: o.enterprise ?? '' },
  ];
}

const STS_OWNER: OwnerReference = {
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  name: STS.name,
  uid: STS.uid,
  controller: true,
  blockOwnerDeletion: true,
};

function runnerPod(
  o: {
    env?: Env[];
    annotations?: Record<string, string>;
    name?: string;
    namespace?: string;
    owner?: OwnerReference | null;
  } = {},
): TestPod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: o.name ?? `${STS.name}-0`,
      namespace: o.namespace ?? NS,
      labels: { 'actions-runner-controller/inject-registration-token': 'true' },
      ...(o.annotations ? { annotations: o.annotations } : {}),
      ...(o.owner === null ? {} : { ownerReferences: [o.owner ?? STS_OWNER] }),
    },
    spec: {
      restartPolicy: 'Always',
      containers: [
        { name: 'runner', image: 'summerwind/actions-runner:latest', env: o.env ?? scopeEnv() },
        { name: 'docker', image: 'docker:dind' },
      ],
    },
  };
}

function githubRunner(o: Partial<GitHubRunner> & { id: number; name: string }): GitHubRunner {
  return { os: 'linux', status: 'offline', busy: false, ephemeral: true, runnerGroupId: 1, labels: [], ...o };
}

interface Calls {
  clientFor: { namespace: string; name: string; credentialsSecret: string | undefined }[];
  token: GitHubScope[];
  jit: { scope: GitHubScope; input: JitConfigInput }[];
  listed: GitHubScope[];
  removed: number[];
}

interface StubOptions {
  fail?: unknown;
  /** Outcomes of successive generate-jitconfig calls (the last one repeats); default: created, ID 7. */
  jit?: (JitConfigOutcome | (() => never))[];
  clientError?: unknown;
  /** The RunnerSet `rs` in NS (default: organization acme, no credentials Secret). */
  runnerSet?: Partial<RunnerSet['spec']>;
  namespace?: string;
  /** What GitHub lists (for the JIT name-collision check). */
  runners?: GitHubRunner[];
  removeOutcome?: RemoveRunnerOutcome;
}

function jitCreated(id: number, name: string): JitConfigOutcome {
  return {
    kind: 'created',
    encodedJitConfig: `${JIT}-${id}`,
    runner: githubRunner({ id, name }),
  };
}

function stub(o: StubOptions = {}): {
  deps: RunnerTokenInjectorDeps;
  calls: Calls;
  cluster: FakeRunnerPodCluster;
} {
  const calls: Calls = { clientFor: [], token: [], jit: [], listed: [], removed: [] };
  const cluster = new FakeRunnerPodCluster();
  cluster.addRunnerSet({
    namespace: o.namespace ?? NS,
    name: 'rs',
    uid: 'rs-uid',
    spec: o.runnerSet ?? { organization: 'acme' },
    statefulSet: STS,
  });
  const client: RunnerTokenClient = {
    registrationToken: async (scope) => {
      calls.token.push(scope);
      if (o.fail !== undefined) throw o.fail;
      return registrationToken(TOKEN, EXPIRES_AT);
    },
    generateJitConfig: async (scope, input) => {
      calls.jit.push({ scope, input });
      const outcomes = o.jit ?? [];
      const next = outcomes[Math.min(calls.jit.length, outcomes.length) - 1];
      if (typeof next === 'function') return next();
      return next ?? jitCreated(7, input.name);
    },
    removeRunner: async (_scope, id) => {
      calls.removed.push(id);
      return o.removeOutcome ?? { kind: 'removed' };
    },
    registry: {
      refreshNow: async (scope) => {
        calls.listed.push(scope);
        return new RunnerSnapshot(scope, o.runners ?? [], 0, 60_000);
      },
    },
  };
  return {
    calls,
    cluster,
    deps: {
      logger: silentLogger(),
      cluster,
      github: {
        clientFor: async (pod) => {
          calls.clientFor.push(pod);
          if (o.clientError !== undefined) throw o.clientError;
          return client;
        },
      },
    },
  };
}

const ctx = { namespace: NS };

function envEntry(pod: TestPod, name: string): Env | undefined {
  return pod.spec.containers[0]!.env?.filter((e) => e.name === name).at(-1);
}

function env(pod: TestPod, name: string): string | undefined {
  return envEntry(pod, name)?.value;
}

const secretRef = (key: string) => ({ secretKeyRef: { name: SECRET_NAME, key } });

function patched(pod: TestPod, res: AdmissionResult): TestPod {
  assert.equal(res.allowed, true, JSON.stringify(res.status));
  return applyJsonPatch(pod, res.patch ?? []);
}

function assertNoCredential(res: AdmissionResult, ...secrets: string[]): void {
  const text = JSON.stringify(res);
  for (const s of [TOKEN, JIT, ...secrets]) assert.ok(!text.includes(s), `the answer carries ${s}`);
}

function decodedData(secret: KubeObject): Record<string, string> {
  return Object.fromEntries(
    Object.entries((secret.data ?? {}) as Record<string, string>).map(([k, v]) => [
      k,
      Buffer.from(v, 'base64').toString('utf8'),
    ]),
  );
}

describe('runner pod token injector', () => {
  test('a pod without a runner container passes unchanged, without a GitHub call', async () => {
    const pod = runnerPod();
    pod.spec.containers[0]!.name = 'main';
    const { deps, calls } = stub();
    assert.deepEqual(await mutateRunnerPod(pod, ctx, deps), { allowed: true });
    assert.equal(calls.clientFor.length + calls.token.length, 0);
  });

  for (const missing of ['RUNNER_ORG', 'RUNNER_REPO', 'RUNNER_ENTERPRISE']) {
    test(`a runner container without ${missing} passes unchanged`, async () => {
      const pod = runnerPod({ env: scopeEnv().filter((e) => e.name !== missing) });
      const { deps, calls } = stub();
      assert.deepEqual(await mutateRunnerPod(pod, ctx, deps), { allowed: true });
      assert.equal(calls.token.length, 0);
    });
  }

  test("a verified RunnerSet pod: the token goes into the StatefulSet's Secret and the env refers to it", async () => {
    const pod = runnerPod();
    const { deps, calls, cluster } = stub();
    const res = await mutateRunnerPod(pod, ctx, deps);
    assert.deepEqual(res.patch, [
      {
        op: 'add',
        path: '/metadata/annotations',
        value: { 'actions-runner-controller/token-expires-at': '2030-01-02T03:04:05Z' },
      },
      { op: 'replace', path: '/spec/restartPolicy', value: 'Never' },
      { op: 'add', path: '/spec/containers/0/env/3', value: { name: 'RUNNER_NAME', value: 'rs-abcde-0' } },
      {
        op: 'add',
        path: '/spec/containers/0/env/4',
        value: { name: 'RUNNER_TOKEN', valueFrom: secretRef('registration-token') },
      },
    ]);
    assertNoCredential(res);
    assert.deepEqual(calls.token, [{ kind: 'organization', org: 'acme' }]);
    assert.deepEqual(calls.clientFor, [{ namespace: NS, name: 'rs-abcde-0', credentialsSecret: undefined }]);
    assert.deepEqual(cluster.reads, ['StatefulSet ns1/rs-abcde', 'RunnerSet ns1/rs']);
    assert.equal(cluster.applied.length, 1);
    const secret = cluster.applied[0]!;
    assert.deepEqual(secret.metadata, {
      name: SECRET_NAME,
      namespace: NS,
      labels: { 'app.kubernetes.io/managed-by': 'paddock', 'runnerset-name': 'rs' },
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'StatefulSet', name: STS.name, uid: STS.uid, controller: true },
      ],
    });
    assert.equal(secret.type, 'Opaque');
    assert.deepEqual(decodedData(secret), { 'registration-token': TOKEN });
  });

  test('an empty RUNNER_TOKEN entry loses its value and gets the Secret reference in place', async () => {
    const pod = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_TOKEN', value: '' }] });
    const res = await mutateRunnerPod(pod, ctx, stub().deps);
    const out = patched(pod, res);
    assert.deepEqual(
      out.spec.containers[0]!.env!.filter((e) => e.name === 'RUNNER_TOKEN'),
      [{ name: 'RUNNER_TOKEN', valueFrom: secretRef('registration-token') }],
    );
    assert.deepEqual(
      res.patch?.filter((op) => op.path.startsWith('/spec/containers/0/env/3')),
      [
        { op: 'remove', path: '/spec/containers/0/env/3/value' },
        { op: 'add', path: '/spec/containers/0/env/3/valueFrom', value: secretRef('registration-token') },
      ],
    );
  });

  test('existing annotations get the expiry as one escaped member', async () => {
    const pod = runnerPod({ annotations: { 'sync-time': 'x' } });
    const res = await mutateRunnerPod(pod, ctx, stub().deps);
    assert.ok(
      res.patch?.some(
        (op) =>
          op.op === 'add' && op.path === '/metadata/annotations/actions-runner-controller~1token-expires-at',
      ),
    );
    assert.deepEqual(patched(pod, res).metadata.annotations, {
      'sync-time': 'x',
      [ANNOTATION_TOKEN_EXPIRES_AT]: '2030-01-02T03:04:05Z',
    });
  });

  test('a missing restartPolicy is added', async () => {
    const pod = runnerPod();
    delete pod.spec.restartPolicy;
    const res = await mutateRunnerPod(pod, ctx, stub().deps);
    assert.ok(res.patch?.some((op) => op.op === 'add' && op.path === '/spec/restartPolicy'));
    assert.equal(patched(pod, res).spec.restartPolicy, 'Never');
  });

  test('RUNNER_NAME: an empty value is filled in, a set one or a valueFrom is kept', async () => {
    const empty = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_NAME', value: '' }] });
    const r1 = await mutateRunnerPod(empty, ctx, stub().deps);
    assert.equal(env(patched(empty, r1), 'RUNNER_NAME'), 'rs-abcde-0');
    assert.ok(r1.patch?.some((op) => op.op === 'replace' && op.path === '/spec/containers/0/env/3/value'));

    const set = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_NAME', value: 'custom' }] });
    assert.equal(env(patched(set, await mutateRunnerPod(set, ctx, stub().deps)), 'RUNNER_NAME'), 'custom');

    const from = runnerPod({
      env: [...scopeEnv(), { name: 'RUNNER_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
    });
    const r3 = patched(from, await mutateRunnerPod(from, ctx, stub().deps));
    assert.deepEqual(
      r3.spec.containers[0]!.env!.filter((e) => e.name === 'RUNNER_NAME'),
      [{ name: 'RUNNER_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
    );
  });

  test('a pod with no name yet (generateName) keeps RUNNER_NAME unset but gets its token reference', async () => {
    const pod = runnerPod();
    delete pod.metadata.name;
    pod.metadata.generateName = 'rs-abcde-';
    const { deps, calls } = stub();
    const out = patched(pod, await mutateRunnerPod(pod, ctx, deps));
    assert.equal(env(out, 'RUNNER_NAME'), undefined);
    assert.deepEqual(envEntry(out, 'RUNNER_TOKEN')?.valueFrom, secretRef('registration-token'));
    assert.equal(calls.clientFor[0]!.name, 'rs-abcde-');
  });

  test("a verified pod with its own RUNNER_TOKEN keeps it; the annotation still records the scope's token expiry", async () => {
    const pod = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_TOKEN', value: 'FROM-RUNNER' }] });
    const { deps, cluster } = stub();
    const out = patched(pod, await mutateRunnerPod(pod, ctx, deps));
    assert.equal(env(out, 'RUNNER_TOKEN'), 'FROM-RUNNER');
    assert.equal(out.metadata.annotations?.[ANNOTATION_TOKEN_EXPIRES_AT], '2030-01-02T03:04:05Z');
    assert.equal(cluster.applied.length, 0, 'nothing to store');
  });

  test('an unverified pod that brings its own token or JIT config is admitted without any GitHub call', async () => {
    for (const own of [
      { name: 'RUNNER_TOKEN', value: 'FROM-RUNNER' },
      { name: 'RUNNER_TOKEN', valueFrom: { secretKeyRef: { name: 'mine', key: 't' } } },
      { name: ENV_JIT_CONFIG, value: 'MY-JIT' },
    ]) {
      const pod = runnerPod({ env: [...scopeEnv(), own], owner: null });
      const { deps, calls, cluster } = stub();
      const res = await mutateRunnerPod(pod, ctx, deps);
      const out = patched(pod, res);
      assert.equal(out.spec.restartPolicy, 'Never');
      assert.deepEqual(envEntry(out, own.name), own);
      assert.equal(out.metadata.annotations, undefined);
      assert.equal(calls.clientFor.length + calls.token.length + calls.jit.length, 0);
      assert.equal(cluster.applied.length, 0);
    }
  });

  test('a verified pod that brought its own token is admitted when GitHub fails, with a warning', async () => {
    const pod = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_TOKEN', value: 'FROM-RUNNER' }] });
    const fail = new GitHubApiError({ kind: 'server', endpoint: 'POST /x', status: 502 });
    const res = await mutateRunnerPod(pod, ctx, stub({ fail }).deps);
    const out = patched(pod, res);
    assert.equal(out.metadata.annotations, undefined);
    assert.equal(out.spec.restartPolicy, 'Never');
    assert.match(res.warnings?.[0] ?? '', /502/);
  });

  test("the RunnerSet's credentials Secret picks the client", async () => {
    const pod = runnerPod({
      namespace: 'team-a',
      annotations: { 'actions-runner/github-api-creds-secret': 'team-a-creds' },
    });
    const { deps, calls } = stub({
      namespace: 'team-a',
      runnerSet: { organization: 'acme', githubAPICredentialsFrom: { secretRef: { name: 'team-a-creds' } } },
    });
    await mutateRunnerPod(pod, { namespace: 'team-a' }, deps);
    assert.deepEqual(calls.clientFor, [
      { namespace: 'team-a', name: 'rs-abcde-0', credentialsSecret: 'team-a-creds' },
    ]);
  });

  test('a credentials Secret annotation that is not a DNS-1123 subdomain is denied with the reason', async () => {
    const pod = runnerPod({ annotations: { 'actions-runner/github-api-creds-secret': '../Creds' } });
    const { deps, calls, cluster } = stub();
    const res = await mutateRunnerPod(pod, ctx, deps);
    assert.equal(res.allowed, false);
    assert.equal(res.status?.code, 400);
    assert.match(res.status!.message, /runner pod ns1\/rs-abcde-0/);
    assert.match(
      res.status!.message,
      /"\.\.\/Creds" is not a valid name: it must be a lower-case RFC 1123 subdomain/,
    );
    assert.equal(calls.clientFor.length, 0);
    assert.equal(cluster.reads.length, 0);
  });

  test("the RunnerSet's scope is used: repository beats organization; enterprise alone is used", async () => {
    const repo = stub({ runnerSet: { organization: 'acme', repository: 'acme/app' } });
    await mutateRunnerPod(runnerPod({ env: scopeEnv({ org: 'acme', repo: 'acme/app' }) }), ctx, repo.deps);
    const ent = stub({ runnerSet: { enterprise: 'ent' } });
    await mutateRunnerPod(runnerPod({ env: scopeEnv({ org: '', enterprise: 'ent' }) }), ctx, ent.deps);
    assert.deepEqual(repo.calls.token, [{ kind: 'repository', owner: 'acme', repo: 'app' }]);
    assert.deepEqual(ent.calls.token, [{ kind: 'enterprise', enterprise: 'ent' }]);
  });

  describe('forged or foreign pods get no credential', () => {
    const cases: [string, (pod: TestPod, cluster: FakeRunnerPodCluster) => void, RegExp][] = [
      ['a bare pod (no owner)', (pod) => delete pod.metadata.ownerReferences, /has no controller owner/],
      [
        'a pod controlled by something else than a StatefulSet',
        (pod) => {
          pod.metadata.ownerReferences = [{ ...STS_OWNER, apiVersion: 'apps/v1', kind: 'ReplicaSet' }];
        },
        /its controller is a ReplicaSet/,
      ],
      [
        'a pod naming a StatefulSet that does not exist',
        (pod) => {
          pod.metadata.ownerReferences = [{ ...STS_OWNER, name: 'nope' }];
        },
        /StatefulSet ns1\/nope does not exist/,
      ],
      [
        'a pod naming a real StatefulSet with another UID',
        (pod) => {
          pod.metadata.ownerReferences = [{ ...STS_OWNER, uid: 'forged-uid' }];
        },
        /names StatefulSet ns1\/rs-abcde with UID forged-uid, but that StatefulSet has UID sts-uid/,
      ],
      [
        'a pod of a StatefulSet that no RunnerSet controls',
        (_pod, cluster) => {
          cluster.statefulSets.get('ns1/rs-abcde')!.metadata.ownerReferences = [];
        },
        /StatefulSet ns1\/rs-abcde is not controlled by a RunnerSet/,
      ],
      [
        'a pod whose RunnerSet is gone',
        (_pod, cluster) => cluster.runnerSets.delete('ns1/rs'),
        /RunnerSet ns1\/rs does not exist/,
      ],
      [
        'a pod whose StatefulSet names a RunnerSet of another UID',
        (_pod, cluster) => {
          cluster.runnerSets.get('ns1/rs')!.metadata.uid = 'recreated';
        },
        /names RunnerSet ns1\/rs with UID rs-uid, but that RunnerSet has UID recreated/,
      ],
      [
        'a pod asking for another organization',
        (pod) => {
          pod.spec.containers[0]!.env = scopeEnv({ org: 'evil' });
        },
        /its RUNNER_ORG "evil" is not RunnerSet ns1\/rs's organization "acme"/,
      ],
      [
        'a pod asking for a repository its RunnerSet does not name',
        (pod) => {
          pod.spec.containers[0]!.env = scopeEnv({ repo: 'acme/secret' });
        },
        /its RUNNER_REPO "acme\/secret" is not RunnerSet ns1\/rs's repository ""/,
      ],
      [
        'a pod whose scope comes from valueFrom',
        (pod) => {
          pod.spec.containers[0]!.env = [
            { name: 'RUNNER_ORG', valueFrom: { configMapKeyRef: { name: 'x', key: 'y' } } },
            ...scopeEnv().slice(1),
          ];
        },
        /its RUNNER_ORG is not a literal value/,
      ],
      [
        'a pod asking for another credentials Secret',
        (pod) => {
          pod.metadata.annotations = { 'actions-runner/github-api-creds-secret': 'other-team' };
        },
        /its credentials Secret "other-team" is not RunnerSet ns1\/rs's githubAPICredentialsFrom Secret \(none\)/,
      ],
    ];
    for (const [what, forge, reason] of cases) {
      test(`${what}: denied 403 Forbidden naming the pod and why, with no GitHub call and no Secret write`, async () => {
        const pod = runnerPod();
        const { deps, calls, cluster } = stub();
        forge(pod, cluster);
        const res = await mutateRunnerPod(pod, ctx, { ...deps, jit: {} });
        assert.equal(res.allowed, false);
        assert.equal(res.patch, undefined);
        assert.equal(res.status?.code, 403);
        assert.equal(res.status?.reason, 'Forbidden');
        assert.match(res.status!.message, /runner pod ns1\/rs-abcde-0 gets no runner credential/);
        assert.match(res.status!.message, reason);
        assert.equal(calls.clientFor.length + calls.token.length + calls.jit.length, 0);
        assert.equal(cluster.applied.length, 0);
        assertNoCredential(res);
      });
    }

    test('the owner check failing (API server unreachable) denies with 500 when a credential is needed', async () => {
      const { deps, calls, cluster } = stub();
      cluster.lookupError = new KubeError({ code: 503, reason: 'ServiceUnavailable', message: 'etcd down' });
      const res = await mutateRunnerPod(runnerPod(), ctx, deps);
      assert.equal(res.allowed, false);
      assert.equal(res.status?.code, 500);
      assert.match(res.status!.message, /cannot check the owner of runner pod ns1\/rs-abcde-0: etcd down/);
      assert.equal(calls.token.length, 0);
    });
  });

  test('the Secret write failing denies the creation; the message carries no token', async () => {
    const { deps, cluster } = stub();
    cluster.applyError = new KubeError({
      code: 403,
      reason: 'Forbidden',
      message: `secrets is forbidden (echo ${TOKEN})`,
    });
    const res = await mutateRunnerPod(runnerPod(), ctx, deps);
    assert.equal(res.allowed, false);
    assert.equal(res.status?.code, 500);
    assert.match(
      res.status!.message,
      /cannot write the runner's credential into Secret ns1\/rs-abcde-runner-token/,
    );
    assert.match(res.status!.message, /\[redacted\]/);
    assertNoCredential(res);
  });

  test('dry run: the token reference is patched but no Secret is written', async () => {
    const pod = runnerPod();
    const { deps, cluster } = stub();
    const res = await mutateRunnerPod(pod, { ...ctx, dryRun: true }, deps);
    assert.deepEqual(envEntry(patched(pod, res), 'RUNNER_TOKEN')?.valueFrom, secretRef('registration-token'));
    assert.equal(cluster.applied.length, 0);
  });

  test('a GitHub failure denies the creation, naming the pod and the cause', async () => {
    const fail = new GitHubApiError({
      kind: 'server',
      endpoint: 'POST /orgs/{org}/actions/runners/registration-token',
      status: 502,
      githubMessage: 'Server Error',
    });
    const { deps, cluster } = stub({ fail });
    const res = await mutateRunnerPod(runnerPod(), ctx, deps);
    assert.equal(res.allowed, false);
    assert.equal(res.patch, undefined);
    assert.equal(res.status?.code, 500);
    assert.match(res.status!.message, /ns1\/rs-abcde-0/);
    assert.match(res.status!.message, /registration token/);
    assert.match(res.status!.message, /502: Server Error/);
    assert.equal(cluster.applied.length, 0);
  });

  test('a rate limit says so', async () => {
    const fail = new GitHubApiError({
      kind: 'rateLimited',
      endpoint: 'POST /orgs/{org}/actions/runners/registration-token',
      status: 403,
      rateLimitCause: 'primary',
      rateLimitResetAt: Date.parse('2030-01-01T00:00:00Z'),
      githubMessage: 'API rate limit exceeded',
    });
    const res = await mutateRunnerPod(runnerPod(), ctx, stub({ fail }).deps);
    assert.equal(res.allowed, false);
    assert.match(res.status!.message, /rate limit exceeded \(primary limit until 2030-01-01T00:00:00.000Z\)/);
  });

  test('GitHub taking too long is reported as such', async () => {
    const { deps } = stub();
    deps.github = {
      clientFor: async () => ({
        registrationToken: (_scope, opts) =>
          new Promise((_resolve, reject) => {
            opts?.signal?.addEventListener('abort', () => reject(opts.signal!.reason));
          }),
        generateJitConfig: async () => assert.fail('no JIT'),
        removeRunner: async () => assert.fail('no removal'),
        registry: { refreshNow: async () => assert.fail('no listing') },
      }),
    };
    const res = await mutateRunnerPod(runnerPod(), ctx, { ...deps, githubTimeoutMs: 50 });
    assert.equal(res.allowed, false);
    assert.match(res.status!.message, /GitHub did not answer within/);
  });

  test('configuration problems deny with their message', async () => {
    const bad = await mutateRunnerPod(
      runnerPod({ env: scopeEnv({ org: '', repo: 'no-slash' }) }),
      ctx,
      stub({ runnerSet: { repository: 'no-slash' } }).deps,
    );
    assert.equal(bad.allowed, false);
    assert.match(bad.status!.message, /invalid repository name/);

    const empty = await mutateRunnerPod(
      runnerPod({ env: scopeEnv({ org: '' }) }),
      ctx,
      stub({ runnerSet: {} }).deps,
    );
    assert.equal(empty.allowed, false);
    assert.match(empty.status!.message, /all empty/);

    const clientError = new GitHubConfigError('secret team-a/creds not found');
    const res = await mutateRunnerPod(runnerPod(), ctx, stub({ clientError }).deps);
    assert.equal(res.allowed, false);
    assert.match(res.status!.message, /ns1\/rs-abcde-0: secret team-a\/creds not found/);
  });

  test('an undecodable pod is a 400', async () => {
    for (const raw of [
      undefined,
      'pod',
      { spec: {} },
      { spec: { containers: [{ image: 'x' }] } },
      { kind: 'Secret', spec: { containers: [] } },
      { metadata: { ownerReferences: [{ kind: 'StatefulSet' }] }, spec: { containers: [] } },
    ]) {
      const res = await mutateRunnerPod(raw, ctx, stub().deps);
      assert.equal(res.allowed, false);
      assert.equal(res.status?.code, 400);
      assert.match(res.status!.message, /cannot decode the pod/);
    }
  });

  test('neither the token nor a JIT config reaches the logs or the answer', async () => {
    const { logger, text } = capturingLogger();
    const { deps } = stub();
    const results = [
      await mutateRunnerPod(runnerPod(), ctx, { ...deps, logger }),
      await mutateRunnerPod(runnerPod(), ctx, { ...deps, logger, jit: {} }),
    ];
    assert.match(text(), /registration token/);
    assert.doesNotMatch(text(), new RegExp(TOKEN));
    assert.doesNotMatch(text(), new RegExp(JIT));
    for (const r of results) assertNoCredential(r);
  });

  describe('JIT mode', () => {
    test('off by default', async () => {
      const { deps, calls } = stub();
      await mutateRunnerPod(runnerPod(), ctx, deps);
      assert.equal(calls.jit.length, 0);
    });

    test("the JIT config goes into the StatefulSet's Secret with the runner ID; the pod gets the reference and actions-runner/id", async () => {
      const pod = runnerPod({
        env: [
          ...scopeEnv({ org: 'acme', repo: 'acme/app' }),
          { name: 'RUNNER_LABELS', value: 'gpu, big ,' },
          { name: 'RUNNER_WORKDIR', value: '/runner/_work' },
        ],
      });
      const { deps, calls, cluster } = stub({ runnerSet: { organization: 'acme', repository: 'acme/app' } });
      const res = await mutateRunnerPod(pod, ctx, { ...deps, jit: { runnerGroupId: 3 } });
      const out = patched(pod, res);
      assertNoCredential(res, `${JIT}-7`);
      assert.deepEqual(envEntry(out, ENV_JIT_CONFIG), {
        name: ENV_JIT_CONFIG,
        valueFrom: secretRef('jit-config'),
      });
      assert.equal(envEntry(out, 'RUNNER_TOKEN'), undefined);
      assert.equal(env(out, 'RUNNER_NAME'), 'rs-abcde-0');
      assert.equal(out.spec.restartPolicy, 'Never');
      assert.deepEqual(out.metadata.annotations, { 'actions-runner/id': '7' });
      assert.equal(calls.token.length, 0);
      assert.deepEqual(calls.jit, [
        {
          scope: { kind: 'repository', owner: 'acme', repo: 'app' },
          input: {
            name: 'rs-abcde-0',
            runnerGroupId: 3,
            labels: ['self-hosted', 'gpu', 'big'],
            workFolder: '/runner/_work',
          },
        },
      ]);
      const secret = cluster.applied[0]!;
      assert.deepEqual(decodedData(secret), { 'jit-config': `${JIT}-7` });
      assert.deepEqual(secret.metadata.annotations, {
        [ANNOTATION_JIT_RUNNER_ID]: '7',
        [ANNOTATION_JIT_RUNNER_NAME]: 'rs-abcde-0',
      });
    });

    test('falls back to a token for a runner group named in the pod', async () => {
      const { deps, calls } = stub();
      const grouped = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_GROUP', value: 'builders' }] });
      const out = patched(grouped, await mutateRunnerPod(grouped, ctx, { ...deps, jit: {} }));
      assert.deepEqual(envEntry(out, 'RUNNER_TOKEN')?.valueFrom, secretRef('registration-token'));
      assert.equal(envEntry(out, ENV_JIT_CONFIG), undefined);
      assert.equal(calls.jit.length, 0, 'never registered in the default group by mistake');
    });

    test('falls back to a token for enterprise scopes and non-ephemeral runners', async () => {
      const ent = stub({ runnerSet: { enterprise: 'ent' } });
      const entPod = runnerPod({ env: scopeEnv({ org: '', enterprise: 'ent' }) });
      const entOut = patched(entPod, await mutateRunnerPod(entPod, ctx, { ...ent.deps, jit: {} }));
      assert.ok(envEntry(entOut, 'RUNNER_TOKEN')?.valueFrom);
      const { deps, calls } = stub();
      const persistent = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_EPHEMERAL', value: 'false' }] });
      const out = patched(persistent, await mutateRunnerPod(persistent, ctx, { ...deps, jit: {} }));
      assert.ok(envEntry(out, 'RUNNER_TOKEN')?.valueFrom);
      assert.equal(calls.jit.length + ent.calls.jit.length, 0);
    });

    test('a pod that already has a token or a JIT config gets no JIT config', async () => {
      const { deps, calls } = stub();
      const jitDeps = { ...deps, jit: {} };
      const withToken = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_TOKEN', value: 'T' }] });
      await mutateRunnerPod(withToken, ctx, jitDeps);
      const withJit = runnerPod({ env: [...scopeEnv(), { name: ENV_JIT_CONFIG, value: 'J' }] });
      const out = patched(withJit, await mutateRunnerPod(withJit, ctx, jitDeps));
      assert.equal(env(out, ENV_JIT_CONFIG), 'J');
      assert.equal(envEntry(out, 'RUNNER_TOKEN'), undefined);
      assert.equal(calls.jit.length, 0);
      assert.equal(calls.token.length, 1);
    });

    test('dry runs create no runner on GitHub and write no Secret', async () => {
      const { deps, calls, cluster } = stub();
      const pod = runnerPod();
      const res = await mutateRunnerPod(pod, { ...ctx, dryRun: true }, { ...deps, jit: {} });
      assert.equal(calls.jit.length, 0);
      assert.equal(cluster.applied.length, 0);
      assert.equal(envEntry(patched(pod, res), ENV_JIT_CONFIG), undefined);
      assert.match(res.warnings?.[0] ?? '', /dry run/);
    });

    test('GitHub refusals deny with the reason', async () => {
      const cases: [JitConfigOutcome, RegExp][] = [
        [
          { kind: 'nameTaken', message: 'Already exists' },
          /a runner named "rs-abcde-0" is already registered in orgs\/acme: Already exists; it is not removed because the StatefulSet's token Secret records no runner paddock created/,
        ],
        [
          { kind: 'rateLimited', cause: 'secondary', resetAt: 0, message: 'slow down' },
          /rate limit exceeded \(secondary/,
        ],
        [{ kind: 'failed', status: 502, message: 'Server Error' }, /GitHub answered 502: Server Error/],
        [{ kind: 'notFound', message: 'Not Found' }, /refused \(notFound\)/],
      ];
      for (const [outcome, re] of cases) {
        const { deps, cluster, calls } = stub({ jit: [outcome] });
        const res = await mutateRunnerPod(runnerPod(), ctx, { ...deps, jit: {} });
        assert.equal(res.allowed, false);
        assert.match(res.status!.message, /just-in-time runner configuration for runner pod ns1\/rs-abcde-0/);
        assert.match(res.status!.message, re);
        assert.equal(cluster.applied.length, 0);
        assert.equal(calls.removed.length, 0);
      }
    });

    test('a JIT Secret that cannot be written: the new runner is removed again and the creation denied', async () => {
      const { deps, calls, cluster } = stub();
      cluster.applyError = new KubeError({ code: 403, reason: 'Forbidden', message: 'secrets is forbidden' });
      const res = await mutateRunnerPod(runnerPod(), ctx, { ...deps, jit: {} });
      assert.equal(res.allowed, false);
      assert.match(res.status!.message, /secrets is forbidden/);
      assert.deepEqual(calls.removed, [7]);
      assertNoCredential(res, `${JIT}-7`);
    });

    describe('name collisions (409)', () => {
      const taken: JitConfigOutcome = { kind: 'nameTaken', message: 'Already exists' };

      /** The Secret as paddock wrote it for the pod's previous incarnation (runner 5). */
      function withRecord(
        cluster: FakeRunnerPodCluster,
        o: { id?: string; name?: string; ownerUid?: string; managed?: boolean } = {},
      ): void {
        cluster.secrets.set(`${NS}/${SECRET_NAME}`, {
          metadata: {
            name: SECRET_NAME,
            namespace: NS,
            labels: o.managed === false ? {} : { 'app.kubernetes.io/managed-by': 'paddock' },
            annotations: {
              [ANNOTATION_JIT_RUNNER_ID]: o.id ?? '5',
              [ANNOTATION_JIT_RUNNER_NAME]: o.name ?? 'rs-abcde-0',
            },
            ownerReferences: [
              { apiVersion: 'apps/v1', kind: 'StatefulSet', name: STS.name, uid: o.ownerUid ?? STS.uid },
            ],
          },
        });
      }

      test('the offline runner paddock recorded for this pod is removed and the JIT config retried once', async () => {
        const { deps, calls, cluster } = stub({
          jit: [taken, jitCreated(8, 'rs-abcde-0')],
          runners: [githubRunner({ id: 5, name: 'rs-abcde-0', status: 'offline' })],
        });
        withRecord(cluster);
        const pod = runnerPod();
        const res = await mutateRunnerPod(pod, ctx, { ...deps, jit: {} });
        const out = patched(pod, res);
        assert.deepEqual(calls.removed, [5]);
        assert.equal(calls.jit.length, 2);
        assert.equal(out.metadata.annotations?.['actions-runner/id'], '8');
        assert.equal(cluster.applied.at(-1)!.metadata.annotations?.[ANNOTATION_JIT_RUNNER_ID], '8');
      });

      test('a runner already gone by the time it is removed (404) counts as removed', async () => {
        const { deps, calls, cluster } = stub({
          jit: [taken, jitCreated(8, 'rs-abcde-0')],
          runners: [githubRunner({ id: 5, name: 'rs-abcde-0' })],
          removeOutcome: { kind: 'notFound' },
        });
        withRecord(cluster);
        const res = await mutateRunnerPod(runnerPod(), ctx, { ...deps, jit: {} });
        assert.equal(res.allowed, true);
        assert.equal(calls.jit.length, 2);
      });

      const refusals: [
        string,
        Partial<StubOptions>,
        Parameters<typeof withRecord>[1] | null,
        RegExp,
        { listed: boolean },
      ][] = [
        [
          'no record (another runner of that name)',
          { runners: [githubRunner({ id: 5, name: 'rs-abcde-0' })] },
          null,
          /records no runner paddock created/,
          { listed: false },
        ],
        [
          'a record of a Secret paddock does not manage',
          {},
          { managed: false },
          /records no runner paddock created/,
          { listed: false },
        ],
        [
          'a record left by another StatefulSet of that name',
          {},
          { ownerUid: 'old-sts' },
          /records no runner paddock created/,
          { listed: false },
        ],
        [
          'a record of another runner name',
          {},
          { name: 'rs-abcde-1' },
          /records runner 5 named "rs-abcde-1", not "rs-abcde-0"/,
          { listed: false },
        ],
        [
          'the recorded runner is no longer listed',
          { runners: [githubRunner({ id: 6, name: 'rs-abcde-0' })] },
          {},
          /runner 5, which paddock created for the pod, is no longer listed/,
          { listed: true },
        ],
        [
          'the recorded runner is online',
          { runners: [githubRunner({ id: 5, name: 'rs-abcde-0', status: 'online' })] },
          {},
          /runner 5 is online/,
          { listed: true },
        ],
        [
          'the recorded runner is busy',
          { runners: [githubRunner({ id: 5, name: 'rs-abcde-0', busy: true })] },
          {},
          /runner 5 is running a job/,
          { listed: true },
        ],
        [
          'GitHub refuses the removal (busy meanwhile)',
          {
            runners: [githubRunner({ id: 5, name: 'rs-abcde-0' })],
            removeOutcome: { kind: 'busy', message: 'Bad request - Runner is currently running a job' },
          },
          {},
          /removing the stale runner 5 failed \(busy\)/,
          { listed: true },
        ],
      ];
      for (const [what, options, record, reason, { listed }] of refusals) {
        test(`${what}: denied, the runner left alone`, async () => {
          const { deps, calls, cluster } = stub({ jit: [taken], ...options });
          if (record) withRecord(cluster, record);
          const res = await mutateRunnerPod(runnerPod(), ctx, { ...deps, jit: {} });
          assert.equal(res.allowed, false);
          assert.match(
            res.status!.message,
            /a runner named "rs-abcde-0" is already registered in orgs\/acme/,
          );
          assert.match(res.status!.message, reason);
          if (!/removal/.test(what)) assert.deepEqual(calls.removed, []);
          assert.equal(calls.listed.length, listed ? 1 : 0);
          assert.equal(calls.jit.length, 1);
          assert.equal(cluster.applied.length, 0);
        });
      }

      test('a second 409 after the removal is not retried again', async () => {
        const { deps, calls, cluster } = stub({
          jit: [taken, taken],
          runners: [githubRunner({ id: 5, name: 'rs-abcde-0' })],
        });
        withRecord(cluster);
        const res = await mutateRunnerPod(runnerPod(), ctx, { ...deps, jit: {} });
        assert.equal(res.allowed, false);
        assert.equal(calls.jit.length, 2);
        assert.deepEqual(calls.removed, [5]);
        assert.match(res.status!.message, /already registered/);
      });
    });
  });

  test('admission handler: CREATE only, namespace from the request', async () => {
    const { deps, calls } = stub({ namespace: 'ns9' });
    const handler = runnerPodAdmissionHandler(deps);
    const signal = new AbortController().signal;
    const pod = runnerPod();
    delete pod.metadata.namespace;
    assert.deepEqual(await handler({ uid: 'u', operation: 'UPDATE', object: pod }, signal), {
      allowed: true,
    });
    const res = await handler({ uid: 'u', operation: 'CREATE', namespace: 'ns9', object: pod }, signal);
    assert.equal(res.allowed, true);
    assert.equal(calls.clientFor[0]!.namespace, 'ns9');
  });
});

describe('runner pod token injector against the GitHub double', () => {
  const double = new GitHubDouble();
  let client: GitHubClient;
  let token: string;

  before(async () => {
    await double.start();
    double.addOrg('acme');
    token = double.addToken().token;
    client = new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { apiUrl: double.apiUrl },
      clock: realClock,
      logger: silentLogger(),
      maxRetries: 0,
    });
  });
  after(async () => {
    client.close();
    await double.stop();
  });

  function depsWith(cluster: FakeRunnerPodCluster, jit?: boolean): RunnerTokenInjectorDeps {
    return {
      logger: silentLogger(),
      cluster,
      github: { clientFor: async () => client },
      ...(jit ? { jit: {} } : {}),
    };
  }

  function clusterFor(spec: Partial<RunnerSet['spec']>, statefulSets: { name: string; uid: string }[]) {
    const cluster = new FakeRunnerPodCluster();
    for (const sts of statefulSets) {
      cluster.addRunnerSet({ namespace: NS, name: 'rs', uid: 'rs-uid', spec, statefulSet: sts });
    }
    return cluster;
  }

  const podOf = (sts: { name: string; uid: string }, env: Env[] = scopeEnv()) =>
    runnerPod({ name: `${sts.name}-0`, env, owner: { ...STS_OWNER, name: sts.name, uid: sts.uid } });

  test('stores a token the double issued, one GitHub call for many pods', async () => {
    const a = { name: 'a', uid: 'a-uid' };
    const b = { name: 'b', uid: 'b-uid' };
    const cluster = clusterFor({ organization: 'acme' }, [a, b]);
    const route = 'POST /orgs/{org}/actions/runners/registration-token';
    const before = double.requestCount(route);
    const results = await Promise.all(
      [a, b].map((sts) => mutateRunnerPod(podOf(sts), ctx, depsWith(cluster))),
    );
    for (const r of results) assert.equal(r.allowed, true);
    const stored = cluster.applied.map((s) => decodedData(s)['registration-token']!);
    assert.equal(stored.length, 2);
    assert.equal(stored[0], stored[1]);
    assert.ok(double.model.tokens.has(stored[0]!));
    assert.equal(double.requestCount(route) - before, 1);
    for (const r of results) assert.ok(!JSON.stringify(r).includes(stored[0]!));
  });

  test('JIT: a recreated pod heals the name collision with the offline runner of its previous incarnation', async () => {
    const sts = { name: 'jit-sts', uid: 'jit-uid' };
    const cluster = clusterFor({ organization: 'acme' }, [sts]);
    const first = await mutateRunnerPod(podOf(sts), ctx, depsWith(cluster, true));
    assert.equal(first.allowed, true, JSON.stringify(first.status));
    const firstId = Number(cluster.applied[0]!.metadata.annotations?.[ANNOTATION_JIT_RUNNER_ID]);
    assert.equal(double.runnerByName('orgs/acme', 'jit-sts-0')?.id, firstId);

    // The pod is recreated before its runner ever came online: GitHub answers 409 for the name.
    const second = await mutateRunnerPod(podOf(sts), ctx, depsWith(cluster, true));
    assert.equal(second.allowed, true, JSON.stringify(second.status));
    const secondId = Number(cluster.applied[1]!.metadata.annotations?.[ANNOTATION_JIT_RUNNER_ID]);
    assert.notEqual(secondId, firstId);
    assert.equal(double.model.runners.get(firstId), undefined, 'the stale runner was removed');
    assert.equal(double.runnerByName('orgs/acme', 'jit-sts-0')?.id, secondId);
    const out = applyJsonPatch(podOf(sts), second.patch ?? []);
    assert.equal(out.metadata.annotations?.['actions-runner/id'], String(secondId));

    // Online now: a third pod of that name is refused and the live runner stays.
    double.registerRunner({ jitConfig: decodedData(cluster.applied[1]!)['jit-config']! });
    const third = await mutateRunnerPod(podOf(sts), ctx, depsWith(cluster, true));
    assert.equal(third.allowed, false);
    assert.match(third.status!.message, new RegExp(`runner ${secondId} is online`));
    assert.ok(double.model.runners.get(secondId));
  });

  test("JIT: someone else's runner of the pod's name is never removed", async () => {
    const sts = { name: 'foreign-sts', uid: 'foreign-uid' };
    const cluster = clusterFor({ organization: 'acme' }, [sts]);
    const { runner } = double.model.generateJitConfig('orgs/acme', {
      name: 'foreign-sts-0',
      runnerGroupId: 1,
      labels: ['self-hosted'],
    });
    const res = await mutateRunnerPod(podOf(sts), ctx, depsWith(cluster, true));
    assert.equal(res.allowed, false);
    assert.match(res.status!.message, /records no runner paddock created/);
    assert.ok(double.model.runners.get(runner.id));
  });

  test('a rate-limited registration is denied with a rate-limit message', async () => {
    double.addOrg('limited');
    double.setRateLimit(token, { resource: 'actions_runner_registration', remaining: 0, resetInMs: 600_000 });
    const sts = { name: 'lim', uid: 'lim-uid' };
    const cluster = clusterFor({ organization: 'limited' }, [sts]);
    const res = await mutateRunnerPod(podOf(sts, scopeEnv({ org: 'limited' })), ctx, depsWith(cluster));
    assert.equal(res.allowed, false);
    assert.match(res.status!.message, /rate limit exceeded/i);
  });
});
