import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { GitHubScope, JitConfigInput, JitConfigOutcome } from '../github/index.ts';
import { GitHubApiError, GitHubClient, GitHubConfigError } from '../github/index.ts';
import { registrationToken } from '../github/registration-tokens.ts';
import { capturingLogger } from '../github/test-support.ts';
import { realClock } from '../runtime/clock.ts';
import { silentLogger } from '../runtime/log.ts';
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
import { applyJsonPatch } from './test-support.ts';

const EXPIRES_AT = Date.parse('2030-01-02T03:04:05.678Z');
const TOKEN = 'AABBCCDDEEFFGGHHIIJJKKLLMMNNO';

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

function runnerPod(o: { env?: Env[]; annotations?: Record<string, string>; name?: string } = {}): TestPod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: o.name ?? 'rs-abcde-0',
      namespace: 'ns1',
      labels: { 'actions-runner-controller/inject-registration-token': 'true' },
      ...(o.annotations ? { annotations: o.annotations } : {}),
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

interface Calls {
  clientFor: { namespace: string; name: string; credentialsSecret: string | undefined }[];
  token: GitHubScope[];
  jit: { scope: GitHubScope; input: JitConfigInput }[];
}

function stub(o: { fail?: unknown; jit?: JitConfigOutcome | (() => never); clientError?: unknown } = {}): {
  deps: RunnerTokenInjectorDeps;
  calls: Calls;
} {
  const calls: Calls = { clientFor: [], token: [], jit: [] };
  const client: RunnerTokenClient = {
    registrationToken: async (scope) => {
      calls.token.push(scope);
      if (o.fail !== undefined) throw o.fail;
      return registrationToken(TOKEN, EXPIRES_AT);
    },
    generateJitConfig: async (scope, input) => {
      calls.jit.push({ scope, input });
      if (typeof o.jit === 'function') return o.jit();
      return (
        o.jit ?? {
          kind: 'created',
          encodedJitConfig: 'JITCONFIG-SECRET',
          runner: {
            id: 7,
            name: input.name,
            os: 'linux',
            status: 'offline',
            busy: false,
            ephemeral: true,
            runnerGroupId: 1,
            labels: [],
          },
        }
      );
    },
  };
  return {
    calls,
    deps: {
      logger: silentLogger(),
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

const ctx = { namespace: 'ns1' };

function env(pod: TestPod, name: string): string | undefined {
  return pod.spec.containers[0]!.env?.find((e) => e.name === name)?.value;
}

function patched(pod: TestPod, res: AdmissionResult): TestPod {
  assert.equal(res.allowed, true, JSON.stringify(res.status));
  return applyJsonPatch(pod, res.patch ?? []);
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

  test('injects token, runner name, expiry annotation and restartPolicy Never', async () => {
    const pod = runnerPod();
    const { deps, calls } = stub();
    const res = await mutateRunnerPod(pod, ctx, deps);
    const expected = structuredClone(pod);
    expected.spec.restartPolicy = 'Never';
    expected.spec.containers[0]!.env!.push(
      { name: 'RUNNER_NAME', value: 'rs-abcde-0' },
      { name: 'RUNNER_TOKEN', value: TOKEN },
    );
    expected.metadata.annotations = { [ANNOTATION_TOKEN_EXPIRES_AT]: '2030-01-02T03:04:05Z' };
    assert.deepEqual(patched(pod, res), expected);
    assert.deepEqual(res.patch, [
      {
        op: 'add',
        path: '/metadata/annotations',
        value: { 'actions-runner-controller/token-expires-at': '2030-01-02T03:04:05Z' },
      },
      { op: 'replace', path: '/spec/restartPolicy', value: 'Never' },
      { op: 'add', path: '/spec/containers/0/env/3', value: { name: 'RUNNER_NAME', value: 'rs-abcde-0' } },
      { op: 'add', path: '/spec/containers/0/env/4', value: { name: 'RUNNER_TOKEN', value: TOKEN } },
    ]);
    assert.deepEqual(calls.token, [{ kind: 'organization', org: 'acme' }]);
    assert.deepEqual(calls.clientFor, [
      { namespace: 'ns1', name: 'rs-abcde-0', credentialsSecret: undefined },
    ]);
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

  test('a pod with no name yet (generateName) keeps RUNNER_NAME unset but gets its token', async () => {
    const pod = runnerPod();
    delete pod.metadata.name;
    pod.metadata.generateName = 'rd-abc-';
    const { deps, calls } = stub();
    const out = patched(pod, await mutateRunnerPod(pod, ctx, deps));
    assert.equal(env(out, 'RUNNER_NAME'), undefined);
    assert.equal(env(out, 'RUNNER_TOKEN'), TOKEN);
    assert.equal(calls.clientFor[0]!.name, 'rd-abc-');
  });

  test("an existing RUNNER_TOKEN is kept; the annotation still records the scope's token expiry", async () => {
    const pod = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_TOKEN', value: 'FROM-RUNNER' }] });
    const out = patched(pod, await mutateRunnerPod(pod, ctx, stub().deps));
    assert.equal(env(out, 'RUNNER_TOKEN'), 'FROM-RUNNER');
    assert.equal(out.metadata.annotations?.[ANNOTATION_TOKEN_EXPIRES_AT], '2030-01-02T03:04:05Z');
  });

  test('a pod that brought its own token is admitted when GitHub fails, with a warning', async () => {
    const pod = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_TOKEN', value: 'FROM-RUNNER' }] });
    const fail = new GitHubApiError({ kind: 'server', endpoint: 'POST /x', status: 502 });
    const res = await mutateRunnerPod(pod, ctx, stub({ fail }).deps);
    const out = patched(pod, res);
    assert.equal(out.metadata.annotations, undefined);
    assert.equal(out.spec.restartPolicy, 'Never');
    assert.match(res.warnings?.[0] ?? '', /502/);
  });

  test('the credentials annotation picks the client', async () => {
    const pod = runnerPod({ annotations: { 'actions-runner/github-api-creds-secret': 'team-a-creds' } });
    const { deps, calls } = stub();
    await mutateRunnerPod(pod, { namespace: 'team-a' }, deps);
    assert.deepEqual(calls.clientFor, [
      { namespace: 'team-a', name: 'rs-abcde-0', credentialsSecret: 'team-a-creds' },
    ]);
  });

  test('repository beats organization; enterprise alone is used', async () => {
    const { deps, calls } = stub();
    await mutateRunnerPod(runnerPod({ env: scopeEnv({ org: 'acme', repo: 'acme/app' }) }), ctx, deps);
    await mutateRunnerPod(runnerPod({ env: scopeEnv({ org: '', enterprise: 'ent' }) }), ctx, deps);
    assert.deepEqual(calls.token, [
      { kind: 'repository', owner: 'acme', repo: 'app' },
      { kind: 'enterprise', enterprise: 'ent' },
    ]);
  });

  test('a GitHub failure denies the creation, naming the pod and the cause', async () => {
    const fail = new GitHubApiError({
      kind: 'server',
      endpoint: 'POST /orgs/{org}/actions/runners/registration-token',
      status: 502,
      githubMessage: 'Server Error',
    });
    const res = await mutateRunnerPod(runnerPod(), ctx, stub({ fail }).deps);
    assert.equal(res.allowed, false);
    assert.equal(res.patch, undefined);
    assert.equal(res.status?.code, 500);
    assert.match(res.status!.message, /ns1\/rs-abcde-0/);
    assert.match(res.status!.message, /registration token/);
    assert.match(res.status!.message, /502: Server Error/);
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
      }),
    };
    const res = await mutateRunnerPod(runnerPod(), ctx, { ...deps, githubTimeoutMs: 50 });
    assert.equal(res.allowed, false);
    assert.match(res.status!.message, /GitHub did not answer within/);
  });

  test('configuration problems deny with their message', async () => {
    const bad = await mutateRunnerPod(runnerPod({ env: scopeEnv({ repo: 'no-slash' }) }), ctx, stub().deps);
    assert.equal(bad.allowed, false);
    assert.match(bad.status!.message, /invalid repository name/);

    const empty = await mutateRunnerPod(runnerPod({ env: scopeEnv({ org: '' }) }), ctx, stub().deps);
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
    ]) {
      const res = await mutateRunnerPod(raw, ctx, stub().deps);
      assert.equal(res.allowed, false);
      assert.equal(res.status?.code, 400);
      assert.match(res.status!.message, /cannot decode the pod/);
    }
  });

  test('the token never reaches the logs', async () => {
    const { logger, text } = capturingLogger();
    const { deps } = stub();
    await mutateRunnerPod(runnerPod(), ctx, { ...deps, logger });
    await mutateRunnerPod(runnerPod(), ctx, { ...deps, logger, jit: {} });
    assert.match(text(), /registration token/);
    assert.doesNotMatch(text(), new RegExp(TOKEN));
    assert.doesNotMatch(text(), /JITCONFIG-SECRET/);
  });

  describe('JIT mode', () => {
    test('off by default', async () => {
      const { deps, calls } = stub();
      await mutateRunnerPod(runnerPod(), ctx, deps);
      assert.equal(calls.jit.length, 0);
    });

    test('injects a JIT config instead of a token', async () => {
      const pod = runnerPod({
        env: [
          ...scopeEnv({ repo: 'acme/app' }),
          { name: 'RUNNER_LABELS', value: 'gpu, big ,' },
          { name: 'RUNNER_WORKDIR', value: '/runner/_work' },
        ],
      });
      const { deps, calls } = stub();
      const res = await mutateRunnerPod(pod, ctx, { ...deps, jit: { runnerGroupId: 3 } });
      const out = patched(pod, res);
      assert.equal(env(out, ENV_JIT_CONFIG), 'JITCONFIG-SECRET');
      assert.equal(env(out, 'RUNNER_TOKEN'), undefined);
      assert.equal(env(out, 'RUNNER_NAME'), 'rs-abcde-0');
      assert.equal(out.spec.restartPolicy, 'Never');
      assert.equal(out.metadata.annotations, undefined);
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
    });

    test('falls back to a token for a runner group named in the pod', async () => {
      const { deps, calls } = stub();
      const grouped = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_GROUP', value: 'builders' }] });
      const out = patched(grouped, await mutateRunnerPod(grouped, ctx, { ...deps, jit: {} }));
      assert.equal(env(out, 'RUNNER_TOKEN'), TOKEN);
      assert.equal(env(out, ENV_JIT_CONFIG), undefined);
      assert.equal(calls.jit.length, 0, 'never registered in the default group by mistake');
    });

    test('falls back to a token for enterprise scopes and non-ephemeral runners', async () => {
      const { deps, calls } = stub();
      const jitDeps = { ...deps, jit: {} };
      const ent = runnerPod({ env: scopeEnv({ org: '', enterprise: 'ent' }) });
      assert.equal(env(patched(ent, await mutateRunnerPod(ent, ctx, jitDeps)), 'RUNNER_TOKEN'), TOKEN);
      const persistent = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_EPHEMERAL', value: 'false' }] });
      assert.equal(
        env(patched(persistent, await mutateRunnerPod(persistent, ctx, jitDeps)), 'RUNNER_TOKEN'),
        TOKEN,
      );
      assert.equal(calls.jit.length, 0);
    });

    test('a pod that already has a token or a JIT config gets no JIT config', async () => {
      const { deps, calls } = stub();
      const jitDeps = { ...deps, jit: {} };
      const withToken = runnerPod({ env: [...scopeEnv(), { name: 'RUNNER_TOKEN', value: 'T' }] });
      await mutateRunnerPod(withToken, ctx, jitDeps);
      const withJit = runnerPod({ env: [...scopeEnv(), { name: ENV_JIT_CONFIG, value: 'J' }] });
      const out = patched(withJit, await mutateRunnerPod(withJit, ctx, jitDeps));
      assert.equal(env(out, ENV_JIT_CONFIG), 'J');
      assert.equal(env(out, 'RUNNER_TOKEN'), undefined);
      assert.equal(calls.jit.length, 0);
      assert.equal(calls.token.length, 1);
    });

    test('dry runs create no runner on GitHub', async () => {
      const { deps, calls } = stub();
      const pod = runnerPod();
      const res = await mutateRunnerPod(pod, { ...ctx, dryRun: true }, { ...deps, jit: {} });
      assert.equal(calls.jit.length, 0);
      assert.equal(env(patched(pod, res), ENV_JIT_CONFIG), undefined);
      assert.match(res.warnings?.[0] ?? '', /dry run/);
    });

    test('GitHub refusals deny with the reason', async () => {
      const cases: [JitConfigOutcome, RegExp][] = [
        [
          { kind: 'nameTaken', message: 'Already exists' },
          /a runner named "rs-abcde-0" is already registered in orgs\/acme/,
        ],
        [
          { kind: 'rateLimited', cause: 'secondary', resetAt: 0, message: 'slow down' },
          /rate limit exceeded \(secondary/,
        ],
        [{ kind: 'failed', status: 502, message: 'Server Error' }, /GitHub answered 502: Server Error/],
        [{ kind: 'notFound', message: 'Not Found' }, /refused \(notFound\)/],
      ];
      for (const [outcome, re] of cases) {
        const res = await mutateRunnerPod(runnerPod(), ctx, { ...stub({ jit: outcome }).deps, jit: {} });
        assert.equal(res.allowed, false);
        assert.match(res.status!.message, /just-in-time runner configuration for runner pod ns1\/rs-abcde-0/);
        assert.match(res.status!.message, re);
      }
    });
  });

  test('admission handler: CREATE only, namespace from the request', async () => {
    const { deps, calls } = stub();
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

  test('injects a token the double issued, one GitHub call for many pods', async () => {
    const deps: RunnerTokenInjectorDeps = {
      logger: silentLogger(),
      github: { clientFor: async () => client },
    };
    const route = 'POST /orgs/{org}/actions/runners/registration-token';
    const before = double.requestCount(route);
    const pods = [runnerPod({ name: 'a-0' }), runnerPod({ name: 'b-0' })];
    const outs = await Promise.all(pods.map(async (p) => patched(p, await mutateRunnerPod(p, ctx, deps))));
    const injected = outs.map((o) => env(o, 'RUNNER_TOKEN')!);
    assert.equal(injected[0], injected[1]);
    assert.ok(double.model.tokens.has(injected[0]!));
    assert.equal(double.requestCount(route) - before, 1);
  });

  test('a rate-limited registration is denied with a rate-limit message', async () => {
    double.addOrg('limited');
    double.setRateLimit(token, { resource: 'actions_runner_registration', remaining: 0, resetInMs: 600_000 });
    const deps: RunnerTokenInjectorDeps = {
      logger: silentLogger(),
      github: { clientFor: async () => client },
    };
    const res = await mutateRunnerPod(runnerPod({ env: scopeEnv({ org: 'limited' }) }), ctx, deps);
    assert.equal(res.allowed, false);
    assert.match(res.status!.message, /rate limit exceeded/i);
  });
});
