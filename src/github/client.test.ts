import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { GitHubDouble } from '../testenv/github-double/index.ts';
import { GitHubClient, type GitHubClientOptions } from './client.ts';
import { GitHubApiError, GitHubConfigError } from './errors.ts';
import { GitHubMetrics } from './metrics.ts';
import type { GitHubScope } from './scope.ts';
import {
  capturingLogger,
  drive,
  NO_TIMEOUT_MS,
  realSleep,
  SteppingClock,
  silentLogger,
  until,
} from './test-support.ts';

const org: GitHubScope = { kind: 'organization', org: 'acme' };
const repo: GitHubScope = { kind: 'repository', owner: 'acme', repo: 'app' };
const DELETE_ORG = 'DELETE /orgs/{org}/actions/runners/{runner_id}';
const LIST_ORG = 'GET /orgs/{org}/actions/runners';
const TOKEN_ORG = 'POST /orgs/{org}/actions/runners/registration-token';
const JIT_ORG = 'POST /orgs/{org}/actions/runners/generate-jitconfig';

function makeClient(
  double: GitHubDouble,
  clock: SteppingClock,
  token: string,
  extra: Partial<GitHubClientOptions> = {},
): GitHubClient {
  return new GitHubClient({
    credentials: { kind: 'token', token },
    endpoints: { apiUrl: double.apiUrl },
    clock,
    logger: silentLogger(),
    random: () => 0.5, // exact doubling: 1 s, 2 s, 4 s
    requestTimeoutMs: NO_TIMEOUT_MS,
    ...extra,
  });
}

function addRunner(double: GitHubDouble, name: string, scope = 'orgs/acme') {
  const t = double.model.issueToken(scope, 'registration');
  return double.registerRunner({ registrationToken: t.token, name });
}

const entries = (double: GitHubDouble, route: string) => double.log.filter((e) => e.route === route);

describe('removeRunner: every outcome', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  let token: string;
  let client: GitHubClient;

  before(async () => {
    await double.start();
    double.addOrg('acme');
    double.addRepo('acme', 'app');
    token = double.addToken({ login: 'remover' }).token;
    client = makeClient(double, clock, token);
  });
  after(() => double.stop());
  beforeEach(() => double.clearFaults());

  test('removed (204), then notFound (404)', async () => {
    const r = addRunner(double, 'idle-1');
    assert.deepEqual(await client.removeRunner(org, r.id), { kind: 'removed' });
    assert.equal(double.runnerByName('orgs/acme', 'idle-1'), undefined);
    assert.deepEqual(await client.removeRunner(org, r.id), { kind: 'notFound' });
  });

  test('busy (422) carries GitHub’s message and the runner stays', async () => {
    const r = addRunner(double, 'busy-1');
    double.setRunnerBusy(r.id, true);
    const before = entries(double, DELETE_ORG).length;
    assert.deepEqual(await client.removeRunner(org, r.id), {
      kind: 'busy',
      message: 'Bad request - Runner "busy-1" is still running a job',
    });
    assert.equal(entries(double, DELETE_ORG).length, before + 1, '422 is not retried');
    assert.ok(double.runnerByName('orgs/acme', 'busy-1'));
  });

  test('forbidden (403 without rate-limit signs)', async () => {
    const orgOnly = double.addToken({ login: 'org-only', scopes: ['admin:org'] }).token;
    const c = makeClient(double, clock, orgOnly);
    const r = addRunner(double, 'repo-1', 'repos/acme/app');
    assert.deepEqual(await c.removeRunner(repo, r.id), {
      kind: 'forbidden',
      message: 'Resource not accessible by personal access token',
    });
  });

  test('invalidCredentials (401): not retried, then held back without calling', async () => {
    const c = makeClient(double, clock, 'ghp_revoked', { invalidCredentialsHoldMs: 60_000 });
    const r = addRunner(double, 'cred-1');
    const count = () => double.log.filter((e) => e.route === DELETE_ORG && e.credential === 'invalid').length;
    assert.deepEqual(await c.removeRunner(org, r.id), {
      kind: 'invalidCredentials',
      message: 'Bad credentials',
    });
    assert.equal(count(), 1);
    assert.equal((await c.removeRunner(org, r.id)).kind, 'invalidCredentials');
    assert.equal(count(), 1, 'held back during the hold');
    await clock.advance(60_000);
    assert.equal((await c.removeRunner(org, r.id)).kind, 'invalidCredentials');
    assert.equal(count(), 2);
  });

  test('rateLimited (403, remaining 0): resetAt from x-ratelimit-reset; nothing sent until then', async () => {
    const c = makeClient(double, clock, token);
    const r = addRunner(double, 'rl-1');
    const view = double.setRateLimit(token, { remaining: 0, resetInMs: 120_000 });
    const before = entries(double, DELETE_ORG).length;
    const first = await c.removeRunner(org, r.id);
    assert.deepEqual(first, {
      kind: 'rateLimited',
      resetAt: view.reset * 1000,
      cause: 'primary',
      message: first.kind === 'rateLimited' ? first.message : '',
    });
    assert.match(first.kind === 'rateLimited' ? first.message : '', /^API rate limit exceeded/);
    const second = await c.removeRunner(org, r.id);
    assert.equal(second.kind, 'rateLimited');
    assert.equal(entries(double, DELETE_ORG).length, before + 1, 'the second call was not sent');
    await clock.advance(view.reset * 1000 - clock.now());
    assert.deepEqual(await c.removeRunner(org, r.id), { kind: 'removed' });
  });

  test('rateLimited (429 secondary): retry-after pauses the credential', async () => {
    const c = makeClient(double, clock, token);
    const r = addRunner(double, 'sec-1');
    double.injectSecondaryLimit({ route: DELETE_ORG, status: 429, retryAfterSeconds: 7, times: 1 });
    const t0 = clock.now();
    const first = await c.removeRunner(org, r.id);
    assert.equal(first.kind, 'rateLimited');
    assert.equal(first.kind === 'rateLimited' && first.cause, 'secondary');
    assert.equal(first.kind === 'rateLimited' && first.resetAt, t0 + 7000);
    const before = entries(double, DELETE_ORG).length;
    const held = await c.removeRunner(org, r.id);
    assert.equal(held.kind === 'rateLimited' && held.resetAt, t0 + 7000);
    assert.equal(entries(double, DELETE_ORG).length, before, 'paused: not sent');
    await clock.advance(7000);
    assert.deepEqual(await c.removeRunner(org, r.id), { kind: 'removed' });
  });

  test('secondary limit with waitForBudget: waits retry-after, then succeeds', async () => {
    const c = makeClient(double, clock, token);
    const r = addRunner(double, 'sec-2');
    double.injectSecondaryLimit({ route: DELETE_ORG, status: 403, retryAfterSeconds: 30, times: 1 });
    const before = entries(double, DELETE_ORG).length;
    assert.deepEqual(await drive(clock, c.removeRunner(org, r.id, { waitForBudget: true })), {
      kind: 'removed',
    });
    const log = entries(double, DELETE_ORG).slice(before);
    assert.deepEqual(
      log.map((e) => e.status),
      [403, 204],
    );
    assert.equal(log[1]!.at - log[0]!.at, 30_000);
  });

  test('failed (400): other statuses are reported, not retried', async () => {
    const r = addRunner(double, 'bad-1');
    double.injectFault({ route: DELETE_ORG, status: 400, times: 1 });
    const before = entries(double, DELETE_ORG).length;
    assert.deepEqual(await client.removeRunner(org, r.id), {
      kind: 'failed',
      status: 400,
      message: 'Injected fault',
    });
    assert.equal(entries(double, DELETE_ORG).length, before + 1);
  });

  test('5xx: retried with doubling back-off, then success', async () => {
    const r = addRunner(double, 'flaky-1');
    double.injectFault({ route: DELETE_ORG, status: 502, times: 2 });
    const before = entries(double, DELETE_ORG).length;
    assert.deepEqual(await drive(clock, client.removeRunner(org, r.id)), { kind: 'removed' });
    const log = entries(double, DELETE_ORG).slice(before);
    assert.deepEqual(
      log.map((e) => e.status),
      [502, 502, 204],
    );
    assert.deepEqual([log[1]!.at - log[0]!.at, log[2]!.at - log[1]!.at], [1000, 2000]);
  });

  test('5xx: gives up after maxRetries with failed(status)', async () => {
    const r = addRunner(double, 'down-1');
    double.injectFault({ route: DELETE_ORG, status: 503, times: 10 });
    const before = entries(double, DELETE_ORG).length;
    assert.deepEqual(await drive(clock, client.removeRunner(org, r.id)), {
      kind: 'failed',
      status: 503,
      message: 'Server Error',
    });
    const log = entries(double, DELETE_ORG).slice(before);
    assert.equal(log.length, 4, 'one try and three retries');
    assert.deepEqual(
      log.slice(1).map((e, i) => e.at - log[i]!.at),
      [1000, 2000, 4000],
    );
  });

  test('network: a stalled answer times out (on the clock) and is retried', async () => {
    const c = makeClient(double, clock, token, { requestTimeoutMs: 5000 });
    const r = addRunner(double, 'stall-1');
    double.injectFault({ route: DELETE_ORG, stall: true, times: 1 });
    const before = entries(double, DELETE_ORG).length;
    const p = c.removeRunner(org, r.id);
    await until(() => entries(double, DELETE_ORG).length > before, 'the stalled request');
    await clock.advance(5000);
    assert.deepEqual(await drive(clock, p, 2000), { kind: 'removed' });
    assert.deepEqual(
      entries(double, DELETE_ORG)
        .slice(before)
        .map((e) => e.status),
      [0, 204],
    );
  });

  test('network: no server at all → failed(null) after the retries', async () => {
    const c = new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { apiUrl: 'http://127.0.0.1:9' },
      clock,
      logger: silentLogger(),
      requestTimeoutMs: NO_TIMEOUT_MS,
      maxRetries: 2,
      random: () => 0.5,
    });
    const outcome = await drive(clock, c.removeRunner(org, 1));
    assert.equal(outcome.kind, 'failed');
    assert.equal(outcome.kind === 'failed' && outcome.status, null);
    assert.match(outcome.kind === 'failed' ? outcome.message : '', /ECONNREFUSED|fetch failed/);
  });
});

describe('rate-limit budget against the double', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });

  before(async () => {
    await double.start();
    double.addOrg('acme');
  });
  after(() => double.stop());

  test('reads stop at the 10 % reserve, removal still goes through, a waiting read resumes at the reset', async () => {
    const token = double.addToken({ login: 'reserve' }).token;
    const metrics = new GitHubMetrics(new Registry());
    // Unconditional lists so each read costs one request.
    const c = makeClient(double, clock, token, { conditionalRequests: false, metrics });
    const victim = addRunner(double, 'victim');
    const view = double.setRateLimit(token, { limit: 100, remaining: 12, resetInMs: 600_000 });
    await c.registry.refreshNow(org); // remaining 11
    await c.registry.refreshNow(org); // remaining 10 = the reserve
    assert.equal(double.rateLimit(token).remaining, 10);
    const lists = () => entries(double, LIST_ORG).length;
    assert.equal(lists(), 2);

    await assert.rejects(c.registry.refreshNow(org), (e: unknown) => {
      assert.ok(e instanceof GitHubApiError);
      assert.equal(e.kind, 'rateLimited');
      assert.equal(e.rateLimitCause, 'reserve');
      assert.equal(e.sent, false);
      assert.equal(e.rateLimitResetAt, view.reset * 1000);
      return true;
    });
    assert.equal(lists(), 2, 'the held-back read was not sent');

    assert.deepEqual(await c.removeRunner(org, victim.id), { kind: 'removed' });
    assert.equal(double.rateLimit(token).remaining, 9, 'removal spent the reserve');

    const token2 = await c.registrationToken(org);
    assert.equal(typeof token2.token, 'string', 'registration draws on its own bucket');

    const waiting = c.registry.refreshNow(org, { waitForBudget: true });
    await realSleep(30);
    assert.equal(lists(), 2, 'nothing is called while waiting');
    assert.equal(clock.nextDueAt(), view.reset * 1000, 'waiting for the reset');
    const snapshot = await drive(clock, waiting);
    assert.equal(snapshot.byName('victim'), undefined);
    const last = entries(double, LIST_ORG).at(-1)!;
    assert.ok(last.at >= view.reset * 1000, 'sent after the reset');
    assert.equal(lists(), 3);
    const text = await metrics.budgetHeldBack.get();
    assert.ok(text.values.some((v) => v.labels.reason === 'reserve' && v.value >= 2));
  });

  test('removal stops at zero: rateLimited without calling, or waits for the reset', async () => {
    const token = double.addToken({ login: 'zero' }).token;
    const c = makeClient(double, clock, token);
    const a = addRunner(double, 'zero-a');
    const b = addRunner(double, 'zero-b');
    const view = double.setRateLimit(token, { limit: 100, remaining: 1, resetInMs: 300_000 });
    assert.deepEqual(await c.removeRunner(org, a.id), { kind: 'removed' });
    const before = entries(double, DELETE_ORG).length;
    const held = await c.removeRunner(org, b.id);
    assert.equal(held.kind, 'rateLimited');
    assert.equal(held.kind === 'rateLimited' && held.resetAt, view.reset * 1000);
    assert.equal(held.kind === 'rateLimited' && held.cause, 'primary');
    assert.equal(entries(double, DELETE_ORG).length, before);
    assert.deepEqual(await drive(clock, c.removeRunner(org, b.id, { waitForBudget: true })), {
      kind: 'removed',
    });
    assert.ok(entries(double, DELETE_ORG).at(-1)!.at >= view.reset * 1000);
  });

  test('the reserve is configurable', async () => {
    const token = double.addToken({ login: 'half' }).token;
    const c = makeClient(double, clock, token, { reserveFraction: 0.5, conditionalRequests: false });
    double.setRateLimit(token, { limit: 100, remaining: 52, resetInMs: 300_000 });
    await c.registry.refreshNow(org);
    await c.registry.refreshNow(org);
    await assert.rejects(c.registry.refreshNow(org), /reserve limit/);
  });
});

describe('registration tokens', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  let client: GitHubClient;

  before(async () => {
    await double.start();
    double.addOrg('acme');
    double.addRepo('acme', 'app');
    client = makeClient(double, clock, double.addToken().token);
  });
  after(() => double.stop());

  test('reused while more than 30 minutes remain, renewed after; per scope; shared in flight', async () => {
    const count = () => entries(double, TOKEN_ORG).length;
    const [a, a2, a3] = await Promise.all([
      client.registrationToken(org),
      client.registrationToken(org),
      client.registrationToken(org),
    ]);
    assert.equal(count(), 1, 'concurrent callers share one request');
    assert.equal(a.token, a2.token);
    assert.equal(a.token, a3.token);
    assert.equal(a.expiresAt, clock.now() + 3600_000);
    double.registerRunner({ registrationToken: a.token, name: 'with-token' });

    await clock.advance(29 * 60_000 + 59_000);
    assert.equal((await client.registrationToken(org)).token, a.token);
    assert.equal(count(), 1, '30 min 1 s of validity left: reused');

    await clock.advance(1000);
    const b = await client.registrationToken(org);
    assert.notEqual(b.token, a.token, 'exactly 30 min left: renewed');
    assert.equal(count(), 2);

    await client.registrationToken(repo);
    assert.equal(entries(double, 'POST /repos/{owner}/{repo}/actions/runners/registration-token').length, 1);
    assert.equal(JSON.stringify(b).includes(b.token), false, 'JSON form hides the token');
  });

  test('failures throw GitHubApiError and are not cached', async () => {
    const ent = { kind: 'enterprise', enterprise: 'big' } as const;
    await assert.rejects(
      client.registrationToken(ent),
      (e: unknown) => e instanceof GitHubApiError && e.kind === 'notFound' && e.status === 404,
    );
    double.addEnterprise('big');
    double.injectFault({
      route: 'POST /enterprises/{enterprise}/actions/runners/registration-token',
      status: 500,
    });
    await assert.rejects(
      drive(clock, client.registrationToken(ent)),
      (e: unknown) => e instanceof GitHubApiError && e.kind === 'server' && e.status === 500,
    );
    double.clearFaults();
    assert.equal(typeof (await client.registrationToken(ent)).token, 'string');
  });
});

describe('JIT runner configuration', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  let client: GitHubClient;

  before(async () => {
    await double.start();
    double.addOrg('acme');
    double.addRepo('acme', 'app');
    client = makeClient(double, clock, double.addToken().token);
  });
  after(() => double.stop());

  test('created: a config the runner can use; then the name is taken', async () => {
    const created = await client.generateJitConfig(org, {
      name: 'jit-1',
      runnerGroupId: 1,
      labels: ['self-hosted', 'linux'],
      workFolder: '_work',
    });
    assert.equal(created.kind, 'created');
    if (created.kind !== 'created') return;
    assert.equal(created.runner.name, 'jit-1');
    assert.equal(created.runner.status, 'offline');
    assert.equal(double.registerRunner({ jitConfig: created.encodedJitConfig }).id, created.runner.id);
    assert.ok(!JSON.stringify(created).includes(created.encodedJitConfig), 'JSON form hides the config');

    const again = await client.generateJitConfig(org, { name: 'jit-1', runnerGroupId: 1, labels: ['x'] });
    assert.deepEqual(again, {
      kind: 'nameTaken',
      message: 'Already exists - A runner with the name jit-1 already exists.',
    });
  });

  test('invalid input, unknown group, repository scope', async () => {
    const invalid = await client.generateJitConfig(repo, { name: 'jit-2', runnerGroupId: 1, labels: [] });
    assert.equal(invalid.kind, 'invalid');
    assert.deepEqual(
      invalid.kind === 'invalid' && invalid.details.map((d) => (d as { field: string }).field),
      ['labels'],
    );
    const noGroup = await client.generateJitConfig(repo, {
      name: 'jit-3',
      runnerGroupId: 999,
      labels: ['x'],
    });
    assert.deepEqual(noGroup, { kind: 'notFound', message: 'Not Found' });
    const ok = await client.generateJitConfig(repo, { name: 'jit-4', runnerGroupId: 1, labels: ['x'] });
    assert.equal(ok.kind, 'created');
  });

  test('not retried on 5xx (a repeated POST could report its own runner as a taken name)', async () => {
    double.injectFault({ route: JIT_ORG, status: 502, times: 1 });
    const before = entries(double, JIT_ORG).length;
    const out = await client.generateJitConfig(org, { name: 'jit-5', runnerGroupId: 1, labels: ['x'] });
    assert.deepEqual(out, { kind: 'failed', status: 502, message: 'Server Error' });
    assert.equal(entries(double, JIT_ORG).length, before + 1);
  });

  test('enterprise scope: a clear error, nothing sent', async () => {
    const before = double.log.length;
    await assert.rejects(
      client.generateJitConfig(
        { kind: 'enterprise', enterprise: 'big' },
        { name: 'x', runnerGroupId: 1, labels: ['x'] },
      ),
      (e: unknown) =>
        e instanceof GitHubConfigError && /organization and repository scopes only/.test(e.message),
    );
    assert.equal(double.log.length, before);
  });
});

describe('findRunnerByName: one runner in one request', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  let client: GitHubClient;

  before(async () => {
    await double.start();
    double.addOrg('acme');
    client = makeClient(double, clock, double.addToken().token);
    for (let i = 0; i < 150; i++) addRunner(double, `fleet-${i}`);
  });
  after(() => double.stop());

  test('found or absent among 150 runners (two pages), with one request each', async () => {
    const before = entries(double, LIST_ORG).length;
    const found = await client.findRunnerByName(org, 'fleet-120');
    assert.equal(found.filtered, true);
    assert.equal(found.runner?.name, 'fleet-120');
    assert.equal(found.runner?.id, double.runnerByName('orgs/acme', 'fleet-120')?.id);
    assert.deepEqual(await client.findRunnerByName(org, 'fleet-999'), { filtered: true, runner: undefined });
    const sent = entries(double, LIST_ORG).slice(before);
    assert.equal(sent.length, 2);
    assert.ok(sent.every((e) => e.path.includes('name=fleet-')));
  });

  test('a server that ignores the filter answers nothing about the name', async () => {
    const page = {
      total_count: 1,
      runners: [{ id: 1, name: 'someone-else', os: 'linux', status: 'online', busy: false, labels: [] }],
    };
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(page));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const ghes = new GitHubClient({
        credentials: { kind: 'token', token: 'x' },
        endpoints: { apiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` },
        clock,
        logger: silentLogger(),
        requestTimeoutMs: NO_TIMEOUT_MS,
      });
      assert.deepEqual(await ghes.findRunnerByName(org, 'fleet-1'), { filtered: false, runner: undefined });
      ghes.close();
    } finally {
      server.close();
    }
  });
});

describe('secrets stay out of logs and errors; metrics', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });

  before(async () => {
    await double.start();
    double.addOrg('acme');
  });
  after(() => double.stop());

  test('no token, registration token or JIT config in debug logs or error messages', async () => {
    const token = double.addToken({ login: 'logs' }).token;
    const { logger, text } = capturingLogger();
    const c = makeClient(double, clock, token, { logger });
    const reg = await c.registrationToken(org);
    const jit = await c.generateJitConfig(org, { name: 'log-jit', runnerGroupId: 1, labels: ['x'] });
    await c.registry.refreshNow(org);
    double.injectFault({ route: LIST_ORG, status: 500, times: 4 });
    const err = await drive(clock, c.registry.refreshNow(org)).catch((e: unknown) => e);
    assert.ok(err instanceof GitHubApiError);
    logger.info({ reg, jit }, 'an operator logging outcomes');
    const bad = makeClient(double, clock, 'ghp_wrongwrongwrong', { logger });
    await bad.removeRunner(org, 1);
    const logs = text();
    assert.ok(logs.length > 1000, 'debug logs were written');
    assert.ok(logs.includes('"msg":"GitHub request"'));
    for (const secret of [
      token,
      'ghp_wrongwrongwrong',
      reg.token,
      jit.kind === 'created' ? jit.encodedJitConfig : 'x',
    ]) {
      assert.ok(!logs.includes(secret), 'a secret reached the logs');
      assert.ok(!err.message.includes(secret));
    }
  });

  test('rate-limit gauges per credential, requests by endpoint/status/304, registry age', async () => {
    const token = double.addToken({ login: 'metrics' }).token;
    const registry = new Registry();
    const metrics = new GitHubMetrics(registry);
    const c = makeClient(double, clock, token, { metrics });
    addRunner(double, 'm-1');
    await c.registry.refreshNow(org);
    await c.registry.refreshNow(org);
    await clock.advance(12_000);
    const text = await registry.metrics();
    const id = c.credentialId;
    const remaining = double.rateLimit(token).remaining;
    assert.match(text, new RegExp(`github_rate_limit\\{credential="${id}",resource="core"\\} 5000`));
    assert.match(
      text,
      new RegExp(`github_rate_limit_remaining\\{credential="${id}",resource="core"\\} ${remaining}`),
    );
    assert.match(
      text,
      /github_requests_total\{endpoint="GET \/orgs\/\{org\}\/actions\/runners",status="200",not_modified="false"\} 1/,
    );
    assert.match(
      text,
      /github_requests_total\{endpoint="GET \/orgs\/\{org\}\/actions\/runners",status="304",not_modified="true"\} 1/,
    );
    assert.match(
      text,
      new RegExp(`github_runner_registry_age_seconds\\{credential="${id}",scope="orgs/acme"\\} 12`),
    );
    c.close();
    assert.doesNotMatch(await registry.metrics(), /github_runner_registry_age_seconds\{/);
  });
});
