import assert from 'node:assert/strict';
import { createSign } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { Octokit } from '@octokit/core';
import { verify } from '@octokit/webhooks-methods';
import { deliverWebhook, GitHubDouble, signWebhookBody, workflowJobPayload } from './index.ts';

interface Call {
  method?: string;
  token?: string | null;
  body?: unknown;
  headers?: Record<string, string>;
}

function client(double: GitHubDouble) {
  return async (path: string, call: Call = {}) => {
    const headers: Record<string, string> = {
      accept: 'application/vnd.github+json',
      'x-github-api-version': '2022-11-28',
      ...call.headers,
    };
    if (call.token) headers.authorization = `Bearer ${call.token}`;
    const res = await fetch(`${double.apiUrl}${path}`, {
      method: call.method ?? 'GET',
      headers,
      ...(call.body === undefined ? {} : { body: JSON.stringify(call.body) }),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : undefined };
  };
}

function jwtFor(appId: number, privateKeyPem: string, nowSec: number, lifetime = 540): string {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const unsigned = `${enc({ alg: 'RS256', typ: 'JWT' })}.${enc({ iat: nowSec - 30, exp: nowSec + lifetime, iss: String(appId) })}`;
  const sig = createSign('RSA-SHA256').update(unsigned).sign(privateKeyPem).toString('base64url');
  return `${unsigned}.${sig}`;
}

describe('GitHub API double: runner endpoints', () => {
  const double = new GitHubDouble();
  const gh = client(double);
  let token: string;
  let orgScope: string;

  before(async () => {
    await double.start();
    token = double.addToken({ login: 'admin' }).token;
    orgScope = double.addOrg('acme');
    double.addRepo('acme', 'app');
    double.addEnterprise('bigcorp');
  });
  after(() => double.stop());

  async function registerViaToken(
    path: string,
    name: string,
    extra: { ephemeral?: boolean; labels?: string[] } = {},
  ) {
    const res = await gh(`${path}/actions/runners/registration-token`, { method: 'POST', token });
    assert.equal(res.status, 201);
    return double.registerRunner({ registrationToken: res.json.token, name, ...extra });
  }

  test('registration token: 201, expires one hour ahead, registers a runner in its scope', async () => {
    const before = Date.now();
    const res = await gh('/orgs/acme/actions/runners/registration-token', { method: 'POST', token });
    assert.equal(res.status, 201);
    assert.match(res.json.token, /^[A-Z0-9]{29}$/);
    const expires = Date.parse(res.json.expires_at);
    assert.ok(expires >= before + 3599_000 && expires <= Date.now() + 3601_000, res.json.expires_at);
    const r = double.registerRunner({ registrationToken: res.json.token, name: 'org-r1', labels: ['gpu'] });
    assert.equal(r.status, 'online');
    assert.equal(r.scope, orgScope);
    assert.throws(() => double.registerRunner({ registrationToken: 'WRONG', name: 'x' }), /not valid/);
    assert.throws(
      () => double.registerRunner({ registrationToken: res.json.token, name: 'org-r1' }),
      /same name/,
    );
  });

  test('remove token: 201 with expiry, removes the named runner', async () => {
    await registerViaToken('/repos/acme/app', 'to-remove');
    const res = await gh('/repos/acme/app/actions/runners/remove-token', { method: 'POST', token });
    assert.equal(res.status, 201);
    assert.ok(Date.parse(res.json.expires_at) > Date.now() + 3500_000);
    double.model.removeRunnerWithToken(res.json.token, 'to-remove');
    assert.equal(double.runnerByName('repos/acme/app', 'to-remove'), undefined);
  });

  test('list: total_count, per_page capped at 100, page, Link header', async () => {
    for (let i = 0; i < 130; i++) await registerViaToken('/enterprises/bigcorp', `ent-${i}`);
    const first = await gh('/enterprises/bigcorp/actions/runners?per_page=500', { token });
    assert.equal(first.status, 200);
    assert.equal(first.json.total_count, 130);
    assert.equal(first.json.runners.length, 100);
    const link = first.headers.get('link') ?? '';
    assert.match(link, /[?&]page=2[^>]*>; rel="next"/);
    assert.match(link, /[?&]page=2[^>]*>; rel="last"/);
    assert.doesNotMatch(link, /rel="prev"/);
    const next = /<([^>]+)>; rel="next"/.exec(link)?.[1];
    assert.ok(next?.startsWith(double.apiUrl));
    const second = await gh(next!.slice(double.apiUrl.length), { token });
    assert.equal(second.json.runners.length, 30);
    assert.match(second.headers.get('link') ?? '', /rel="prev"/);
    assert.doesNotMatch(second.headers.get('link') ?? '', /rel="next"/);
    const names = [...first.json.runners, ...second.json.runners].map((r: { name: string }) => r.name);
    assert.equal(new Set(names).size, 130);
    const dflt = await gh('/enterprises/bigcorp/actions/runners', { token });
    assert.equal(dflt.json.runners.length, 30, 'default per_page is 30');
    const byName = await gh('/enterprises/bigcorp/actions/runners?name=ent-7', { token });
    assert.deepEqual(
      byName.json.runners.map((r: { name: string }) => r.name),
      ['ent-7'],
    );
  });

  test('runner object has the documented fields and labels', async () => {
    const r = await registerViaToken('/orgs/acme', 'shape', { labels: ['linux-large'], ephemeral: true });
    const res = await gh(`/orgs/acme/actions/runners/${r.id}`, { token });
    assert.equal(res.status, 200);
    assert.deepEqual(Object.keys(res.json).sort(), [
      'busy',
      'ephemeral',
      'id',
      'labels',
      'name',
      'os',
      'runner_group_id',
      'status',
    ]);
    assert.equal(res.json.ephemeral, true);
    assert.deepEqual(
      res.json.labels.map((l: { name: string; type: string }) => `${l.name}:${l.type}`),
      ['self-hosted:read-only', 'Linux:read-only', 'X64:read-only', 'linux-large:custom'],
    );
    const other = await gh(`/repos/acme/app/actions/runners/${r.id}`, { token });
    assert.equal(other.status, 404, 'a runner is only visible in its own scope');
  });

  test('delete: 204 when idle, 422 with the busy message, 404 when unknown', async () => {
    const idle = await registerViaToken('/orgs/acme', 'del-idle');
    const busy = await registerViaToken('/orgs/acme', 'del-busy');
    double.setRunnerBusy(busy.id, true);
    const ok = await gh(`/orgs/acme/actions/runners/${idle.id}`, { method: 'DELETE', token });
    assert.equal(ok.status, 204);
    assert.equal(ok.json, undefined);
    const refused = await gh(`/orgs/acme/actions/runners/${busy.id}`, { method: 'DELETE', token });
    assert.equal(refused.status, 422);
    assert.equal(refused.json.message, 'Bad request - Runner "del-busy" is still running a job');
    assert.ok(
      double.runners().some((r) => r.id === busy.id),
      'busy runner must survive',
    );
    const gone = await gh(`/orgs/acme/actions/runners/${idle.id}`, { method: 'DELETE', token });
    assert.equal(gone.status, 404);
    assert.equal(gone.json.message, 'Not Found');
  });

  test('generate-jitconfig: 201 with runner and config, 409 for a taken name, 422 for bad input', async () => {
    const res = await gh('/orgs/acme/actions/runners/generate-jitconfig', {
      method: 'POST',
      token,
      body: { name: 'jit-1', runner_group_id: 1, labels: ['self-hosted', 'arm64'], work_folder: '_work' },
    });
    assert.equal(res.status, 201);
    assert.equal(res.json.runner.name, 'jit-1');
    assert.equal(res.json.runner.status, 'offline');
    assert.equal(typeof res.json.encoded_jit_config, 'string');
    const online = double.registerRunner({ jitConfig: res.json.encoded_jit_config });
    assert.equal(online.id, res.json.runner.id);
    assert.equal(online.status, 'online');
    assert.equal(online.ephemeral, true);
    assert.throws(
      () => double.registerRunner({ jitConfig: res.json.encoded_jit_config }),
      /not valid/,
      'single use',
    );

    const dup = await gh('/orgs/acme/actions/runners/generate-jitconfig', {
      method: 'POST',
      token,
      body: { name: 'jit-1', runner_group_id: 1, labels: ['x'] },
    });
    assert.equal(dup.status, 409);
    const bad = await gh('/repos/acme/app/actions/runners/generate-jitconfig', {
      method: 'POST',
      token,
      body: { name: 'jit-2', labels: [] },
    });
    assert.equal(bad.status, 422);
    assert.deepEqual(
      bad.json.errors.map((e: { field: string }) => e.field),
      ['runner_group_id', 'labels'],
    );
    const ent = await gh('/enterprises/bigcorp/actions/runners/generate-jitconfig', {
      method: 'POST',
      token,
      body: { name: 'jit-3', runner_group_id: 1, labels: ['x'] },
    });
    assert.equal(ent.status, 404);
  });

  test('unknown scopes and routes answer 404 with GitHub’s body; bad JSON 400', async () => {
    const res = await gh('/orgs/nope/actions/runners', { token });
    assert.equal(res.status, 404);
    assert.deepEqual(res.json, {
      message: 'Not Found',
      documentation_url: 'https://docs.github.com/rest',
      status: '404',
    });
    assert.equal((await gh('/orgs/acme/nothing-here', { token })).status, 404);
    const raw = await fetch(`${double.apiUrl}/orgs/acme/actions/runners/generate-jitconfig`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: '{not json',
    });
    assert.equal(raw.status, 400);
  });

  test('simulation: online/offline, busy/idle, vanish', async () => {
    const r = await registerViaToken('/orgs/acme', 'sim');
    double.setRunnerStatus(r.id, 'offline');
    double.setRunnerBusy(r.id, true);
    let got = await gh(`/orgs/acme/actions/runners/${r.id}`, { token });
    assert.equal(got.json.status, 'offline');
    assert.equal(got.json.busy, true);
    double.vanishRunner(r.id);
    got = await gh(`/orgs/acme/actions/runners/${r.id}`, { token });
    assert.equal(got.status, 404);
  });

  test('simulation over HTTP under /_double/', async () => {
    const reg = await gh('/orgs/acme/actions/runners/registration-token', { method: 'POST', token });
    const sim = (path: string, method: string, body?: unknown) =>
      fetch(`${double.origin}/_double${path}`, { method, ...(body ? { body: JSON.stringify(body) } : {}) });
    const created = await sim('/runners/register', 'POST', {
      registrationToken: reg.json.token,
      name: 'http-sim',
    });
    assert.equal(created.status, 201);
    const runner = (await created.json()) as { id: number };
    assert.equal((await sim(`/runners/${runner.id}`, 'PATCH', { busy: true })).status, 200);
    assert.equal(double.runners().find((r) => r.id === runner.id)?.busy, true);
    assert.equal((await sim(`/runners/${runner.id}`, 'DELETE')).status, 204);
    assert.equal((await sim('/runners/register', 'POST', { registrationToken: 'bad' })).status, 404);
    const stats = (await (await sim('/requests', 'GET')).json()) as { total: number };
    assert.ok(stats.total > 0);
  });
});

describe('GitHub API double: authentication', () => {
  let now = Date.parse('2026-12-01T10:00:00Z');
  const double = new GitHubDouble({ now: () => now });
  const gh = client(double);
  let appKey: string;

  before(async () => {
    await double.start();
    double.addOrg('acme');
    double.addOrg('other');
    double.addEnterprise('bigcorp');
    double.addRepo('acme', 'app');
    const { privateKeyPem } = double.addApp({ appId: 42 });
    appKey = privateKeyPem!;
    double.addInstallation({ id: 4242, appId: 42, account: 'acme' });
  });
  after(() => double.stop());

  test('wrong credentials → 401 with GitHub’s body, and no budget spent', async () => {
    for (const header of ['Bearer ghp_nope', 'Basic abc', 'token']) {
      const res = await fetch(`${double.apiUrl}/orgs/acme/actions/runners`, {
        headers: { authorization: header },
      });
      assert.equal(res.status, 401, header);
      assert.deepEqual(await res.json(), {
        message: 'Bad credentials',
        documentation_url: 'https://docs.github.com/rest',
        status: '401',
      });
    }
    const anon = await gh('/orgs/acme/actions/runners');
    assert.equal(anon.status, 401);
    assert.equal(anon.json.message, 'Requires authentication');
  });

  test('token scopes decide which runner scopes are reachable', async () => {
    const orgOnly = double.addToken({ login: 'org-only', scopes: ['admin:org'] }).token;
    assert.equal((await gh('/orgs/acme/actions/runners', { token: orgOnly })).status, 200);
    const ent = await gh('/enterprises/bigcorp/actions/runners', { token: orgOnly });
    assert.equal(ent.status, 403);
    assert.equal(ent.json.message, 'Resource not accessible by personal access token');
    assert.equal((await gh('/repos/acme/app/actions/runners', { token: orgOnly })).status, 403);
  });

  test('GitHub App: JWT → installation token with one hour expiry → runner endpoints', async () => {
    const jwt = jwtFor(42, appKey, Math.floor(now / 1000));
    const app = await gh('/app', { token: jwt });
    assert.equal(app.status, 200);
    assert.equal(app.json.id, 42);
    const res = await gh('/app/installations/4242/access_tokens', { method: 'POST', token: jwt });
    assert.equal(res.status, 201);
    assert.match(res.json.token, /^ghs_/);
    assert.equal(Date.parse(res.json.expires_at), now + 3600_000);
    const inst = res.json.token as string;
    assert.equal((await gh('/orgs/acme/actions/runners', { token: inst })).status, 200);
    assert.equal((await gh('/orgs/other/actions/runners', { token: inst })).status, 404, 'other account');
    const ent = await gh('/enterprises/bigcorp/actions/runners', { token: inst });
    assert.equal(ent.status, 403);
    assert.equal(ent.json.message, 'Resource not accessible by integration');
    assert.equal(
      (await gh('/orgs/acme/actions/runners', { token: jwt })).status,
      403,
      'a JWT is not an installation token',
    );
    assert.equal(
      (await gh('/app/installations/999/access_tokens', { method: 'POST', token: jwt })).status,
      404,
    );

    now += 3600_000;
    const expired = await gh('/orgs/acme/actions/runners', { token: inst });
    assert.equal(expired.status, 401, 'installation tokens expire after an hour');
  });

  test('GitHub App: bad JWTs are refused with 401', async () => {
    const nowSec = Math.floor(now / 1000);
    const { privateKeyPem: otherKey } = new GitHubDouble().addApp({ appId: 42 });
    for (const [what, jwt] of [
      ['signed with another key', jwtFor(42, otherKey!, nowSec)],
      ['expired', jwtFor(42, appKey, nowSec - 1200, 600)],
      ['lives longer than 10 minutes', jwtFor(42, appKey, nowSec, 1200)],
      ['unknown app', jwtFor(7, appKey, nowSec)],
      ['garbage', 'a.b.c'],
    ] as const) {
      const res = await gh('/app/installations/4242/access_tokens', { method: 'POST', token: jwt });
      assert.equal(res.status, 401, what);
      assert.equal(typeof res.json.message, 'string');
    }
  });

  test('GitHub App: @octokit/auth-app drives the flow end to end', async () => {
    now = Date.now();
    const octokit = new Octokit({
      baseUrl: double.apiUrl,
      authStrategy: createAppAuth,
      auth: { appId: 42, privateKey: appKey, installationId: 4242 },
    });
    const res = await octokit.request('GET /orgs/{org}/actions/runners', { org: 'acme', per_page: 100 });
    assert.equal(res.status, 200);
    assert.equal(double.requestCount('POST /app/installations/{installation_id}/access_tokens') >= 1, true);
  });
});

describe('GitHub API double: rate limits and conditional requests', () => {
  let now = Date.parse('2026-12-01T10:00:00Z');
  const double = new GitHubDouble({ now: () => now });
  const gh = client(double);
  let token: string;

  before(async () => {
    await double.start();
    double.addOrg('acme');
    token = double.addToken({ login: 'rl' }).token;
  });
  after(() => double.stop());

  test('x-ratelimit-* on every response, counting down per credential', async () => {
    const a = await gh('/orgs/acme/actions/runners', { token });
    const b = await gh('/orgs/acme/actions/runners', { token });
    assert.equal(a.headers.get('x-ratelimit-limit'), '5000');
    assert.equal(a.headers.get('x-ratelimit-resource'), 'core');
    assert.equal(
      Number(a.headers.get('x-ratelimit-remaining')) - 1,
      Number(b.headers.get('x-ratelimit-remaining')),
    );
    assert.equal(b.headers.get('x-ratelimit-used'), '2');
    assert.equal(Number(a.headers.get('x-ratelimit-reset')), Math.ceil((now + 3600_000) / 1000));
    const reg = await gh('/orgs/acme/actions/runners/registration-token', { method: 'POST', token });
    assert.equal(reg.headers.get('x-ratelimit-resource'), 'actions_runner_registration');
    assert.equal(reg.headers.get('x-ratelimit-limit'), '10000');
    const other = double.addToken({ login: 'rl2' }).token;
    assert.equal(
      (await gh('/orgs/acme/actions/runners', { token: other })).headers.get('x-ratelimit-used'),
      '1',
    );
  });

  test('ETag + If-None-Match → 304 that costs nothing; a change gives a new ETag', async () => {
    const first = await gh('/orgs/acme/actions/runners', { token });
    const etag = first.headers.get('etag')!;
    assert.match(etag, /^W\/"[0-9a-f]+"$/);
    assert.equal(first.headers.get('cache-control'), 'private, max-age=60, s-maxage=60');
    const used = double.rateLimit(token).used;
    const again = await gh('/orgs/acme/actions/runners', { token, headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal(again.json, undefined);
    assert.equal(double.rateLimit(token).used, used, '304 must not consume budget');
    assert.equal(Number(again.headers.get('x-ratelimit-used')), used);
    const reg = await gh('/orgs/acme/actions/runners/registration-token', { method: 'POST', token });
    double.registerRunner({ registrationToken: reg.json.token, name: 'changes-etag' });
    const changed = await gh('/orgs/acme/actions/runners', { token, headers: { 'if-none-match': etag } });
    assert.equal(changed.status, 200);
    assert.notEqual(changed.headers.get('etag'), etag);
    const stats = double.stats({ credential: token })['GET /orgs/{org}/actions/runners']!;
    assert.equal(stats.notModified, 1);
    assert.equal(stats.total - stats.countedAgainstRateLimit, 1);
  });

  test('exhaustion → 403 with remaining 0 and GitHub’s message, until the reset', async () => {
    double.setRateLimit(token, { remaining: 1, resetInMs: 120_000 });
    assert.equal((await gh('/orgs/acme/actions/runners', { token })).status, 200);
    const denied = await gh('/orgs/acme/actions/runners', { token });
    assert.equal(denied.status, 403);
    assert.equal(denied.headers.get('x-ratelimit-remaining'), '0');
    assert.match(denied.json.message, /^API rate limit exceeded for /);
    assert.equal(Number(denied.headers.get('x-ratelimit-reset')), Math.ceil((now + 120_000) / 1000));
    const rl = await gh('/rate_limit', { token });
    assert.equal(rl.status, 200, '/rate_limit is free');
    assert.equal(rl.json.resources.core.remaining, 0);
    now += 120_000;
    const after = await gh('/orgs/acme/actions/runners', { token });
    assert.equal(after.status, 200);
    assert.equal(after.headers.get('x-ratelimit-remaining'), '4999');
  });

  test('secondary limits → 403/429 with retry-after', async () => {
    double.injectSecondaryLimit({
      route: 'GET /orgs/{org}/actions/runners',
      status: 429,
      retryAfterSeconds: 7,
      times: 1,
    });
    double.injectSecondaryLimit({ credential: token, status: 403, times: 1 });
    const a = await gh('/orgs/acme/actions/runners', { token });
    assert.equal(a.status, 429);
    assert.equal(a.headers.get('retry-after'), '7');
    assert.match(a.json.message, /secondary rate limit/);
    const b = await gh('/orgs/acme/actions/runners', { token });
    assert.equal(b.status, 403);
    assert.equal(b.headers.get('retry-after'), '60');
    assert.notEqual(b.headers.get('x-ratelimit-remaining'), '0');
    assert.equal((await gh('/orgs/acme/actions/runners', { token })).status, 200);
  });

  test('too many concurrent requests per credential trip the secondary limit', async () => {
    double.maxConcurrentPerCredential = 2;
    double.injectFault({ route: 'GET /orgs/{org}/actions/runners', latencyMs: 150, times: 3 });
    const results = await Promise.all([1, 2, 3].map(() => gh('/orgs/acme/actions/runners', { token })));
    double.maxConcurrentPerCredential = 100;
    double.clearFaults();
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 403]);
    const limited = results.find((r) => r.status === 403)!;
    assert.match(limited.json.message, /secondary rate limit/);
    assert.equal(limited.headers.get('retry-after'), '60');
  });

  test('API version header: unsupported → 400', async () => {
    const res = await gh('/orgs/acme/actions/runners', {
      token,
      headers: { 'x-github-api-version': '1999-01-01' },
    });
    assert.equal(res.status, 400);
  });
});

describe('GitHub API double: faults and the request log', () => {
  const double = new GitHubDouble();
  const gh = client(double);
  let token: string;
  before(async () => {
    await double.start();
    double.addOrg('acme');
    token = double.addToken().token;
  });
  after(() => double.stop());

  test('5xx per endpoint, limited to n requests; not counted against the limit', async () => {
    double.injectFault({ route: 'GET /orgs/{org}/actions/runners', status: 502, times: 2 });
    assert.equal((await gh('/orgs/acme/actions/runners', { token })).status, 502);
    assert.equal((await gh('/orgs/acme/actions/runners', { token })).status, 502);
    assert.equal((await gh('/orgs/acme/actions/runners', { token })).status, 200);
    const reg = await gh('/orgs/acme/actions/runners/registration-token', { method: 'POST', token });
    assert.equal(reg.status, 201, 'other endpoints unaffected');
    const s = double.stats()['GET /orgs/{org}/actions/runners']!;
    assert.deepEqual(s.byStatus, { 200: 1, 502: 2 });
    assert.equal(s.countedAgainstRateLimit, 1);
    assert.equal(double.rateLimitedRequestCount(token), 2);
  });

  test('a fault can target one path of a route', async () => {
    double.injectFault({
      route: 'GET /orgs/{org}/actions/runners/{runner_id}',
      pathSuffix: '/runners/2',
      status: 500,
      times: 1,
    });
    assert.equal((await gh('/orgs/acme/actions/runners/1', { token })).status, 404, 'other IDs unaffected');
    assert.equal((await gh('/orgs/acme/actions/runners/2', { token })).status, 500);
    assert.equal((await gh('/orgs/acme/actions/runners/2', { token })).status, 404, 'used up');
  });

  test('latency and stalled responses', async () => {
    double.injectFault({ route: 'GET /orgs/{org}/actions/runners', latencyMs: 200, times: 1 });
    const t0 = Date.now();
    await gh('/orgs/acme/actions/runners', { token });
    assert.ok(Date.now() - t0 >= 190);
    double.injectFault({ route: 'GET /orgs/{org}/actions/runners', stall: true, times: 1 });
    await assert.rejects(
      fetch(`${double.apiUrl}/orgs/acme/actions/runners`, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(300),
      }),
      /abort|timeout/i,
    );
  });
});

describe('GitHub API double: GitHub Enterprise Server', () => {
  const double = new GitHubDouble({ flavor: 'ghes' });
  const gh = client(double);
  let token: string;
  before(async () => {
    await double.start();
    double.addOrg('acme');
    token = double.addToken().token;
  });
  after(() => double.stop());

  test('paths live under /api/v3 and there are no rate-limit headers by default', async () => {
    assert.ok(double.apiUrl.endsWith('/api/v3'));
    const res = await gh('/orgs/acme/actions/runners', { token });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-ratelimit-limit'), null);
    const root = await fetch(`${double.origin}/orgs/acme/actions/runners`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(root.status, 404);
    for (let i = 0; i < 35; i++) {
      const t = await gh('/orgs/acme/actions/runners/registration-token', { method: 'POST', token });
      double.registerRunner({ registrationToken: t.json.token, name: `g-${i}` });
    }
    const list = await gh('/orgs/acme/actions/runners?per_page=30', { token });
    assert.match(
      list.headers.get('link') ?? '',
      new RegExp(`<${double.origin}/api/v3/orgs/acme/actions/runners\\?`),
    );
  });
});

describe('GitHub API double: workflow runs and jobs', () => {
  const double = new GitHubDouble();
  const gh = client(double);
  let token: string;
  before(async () => {
    await double.start();
    double.addOrg('acme');
    double.addRepo('acme', 'app');
    token = double.addToken().token;
  });
  after(() => double.stop());

  test('runs by status and jobs per run follow their jobs', async () => {
    const reg = await gh('/orgs/acme/actions/runners/registration-token', { method: 'POST', token });
    const runner = double.registerRunner({
      registrationToken: reg.json.token,
      name: 'worker',
      ephemeral: true,
    });
    const queued = double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted', 'linux'] });
    const sibling = double.createJob({
      owner: 'acme',
      repo: 'app',
      labels: ['self-hosted'],
      runId: queued.run_id,
    });
    const done = double.createJob({
      owner: 'acme',
      repo: 'app',
      labels: ['self-hosted'],
      status: 'completed',
    });

    let runs = await gh('/repos/acme/app/actions/runs?status=queued', { token });
    assert.deepEqual(
      runs.json.workflow_runs.map((r: { id: number }) => r.id),
      [queued.run_id],
    );
    const jobs = await gh(`/repos/acme/app/actions/runs/${queued.run_id}/jobs?per_page=100`, { token });
    assert.equal(jobs.json.total_count, 2);
    assert.deepEqual(jobs.json.jobs[0].labels, ['self-hosted', 'linux']);
    assert.equal(jobs.json.jobs[0].runner_name, null);

    double.startJob(queued.id, runner.id);
    assert.equal(double.runners().find((r) => r.id === runner.id)?.busy, true);
    runs = await gh('/repos/acme/app/actions/runs?status=in_progress', { token });
    assert.deepEqual(
      runs.json.workflow_runs.map((r: { id: number }) => r.id),
      [queued.run_id],
    );
    const job = await gh(`/repos/acme/app/actions/jobs/${queued.id}`, { token });
    assert.equal(job.json.status, 'in_progress');
    assert.equal(job.json.runner_name, 'worker');

    double.completeJob(queued.id, 'success');
    double.startJob(sibling.id);
    double.completeJob(sibling.id, 'failure');
    assert.equal(
      double.runners().some((r) => r.id === runner.id),
      false,
      'ephemeral runner leaves after its job',
    );
    runs = await gh('/repos/acme/app/actions/runs?status=completed', { token });
    assert.deepEqual(
      runs.json.workflow_runs
        .map((r: { id: number; conclusion: string }) => `${r.id}:${r.conclusion}`)
        .sort(),
      [`${done.run_id}:success`, `${queued.run_id}:failure`].sort(),
    );
    assert.equal((await gh('/repos/acme/app/actions/jobs/999999', { token })).status, 404);
  });
});

describe('workflow_job webhook delivery', () => {
  test('signature matches GitHub’s documented test vector', () => {
    assert.equal(
      signWebhookBody("It's a Secret to Everybody", 'Hello, World!'),
      'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    );
  });

  test('delivers a signed workflow_job event with the documented headers', async () => {
    const double = new GitHubDouble();
    double.addRepo('acme', 'app');
    const job = double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted'] });
    const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => {
        body += d.toString();
      });
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.writeHead(202).end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook`;
      const result = await deliverWebhook({
        url,
        secret: 's3cret',
        payload: workflowJobPayload(double, job, 'queued'),
      });
      assert.equal(result.status, 202);
      const got = received[0]!;
      assert.equal(got.headers['x-github-event'], 'workflow_job');
      assert.equal(got.headers['x-github-delivery'], result.deliveryId);
      assert.equal(await verify('s3cret', got.body, String(got.headers['x-hub-signature-256'])), true);
      assert.equal(await verify('wrong', got.body, String(got.headers['x-hub-signature-256'])), false);
      const payload = JSON.parse(got.body);
      assert.equal(payload.action, 'queued');
      assert.equal(payload.workflow_job.id, job.id);
      assert.deepEqual(payload.workflow_job.labels, ['self-hosted']);
      assert.equal(payload.repository.full_name, 'acme/app');
      const again = await deliverWebhook({
        url,
        secret: 's3cret',
        payload: {},
        deliveryId: result.deliveryId,
      });
      assert.equal(again.deliveryId, result.deliveryId, 'redelivery keeps the GUID');
    } finally {
      server.close();
    }
  });
});
