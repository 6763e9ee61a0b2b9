import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { GitHubDouble } from '../testenv/github-double/index.ts';
import { GitHubClient } from './client.ts';
import { GitHubApiError } from './errors.ts';
import { GitHubMetrics } from './metrics.ts';
import type { GitHubScope } from './scope.ts';
import { NO_TIMEOUT_MS, SteppingClock, silentLogger } from './test-support.ts';

const org: GitHubScope = { kind: 'organization', org: 'acme' };

describe('GitHub Enterprise Server', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ flavor: 'ghes', now: () => clock.now() });
  let token: string;

  before(async () => {
    await double.start();
    double.addOrg('acme');
    token = double.addToken().token;
  });
  after(() => double.stop());

  test('the API lives under /api/v3; without rate-limit headers nothing is ever held back', async () => {
    const metricsRegistry = new Registry();
    const client = new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { githubUrl: `${double.origin}/` },
      clock,
      logger: silentLogger(),
      metrics: new GitHubMetrics(metricsRegistry),
      requestTimeoutMs: NO_TIMEOUT_MS,
    });
    assert.equal(client.endpoints.apiBaseUrl, double.apiUrl);
    assert.equal(client.endpoints.serverUrl, `${double.origin}/`);
    assert.equal(client.endpoints.enterpriseServer, true);

    const reg = await client.registrationToken(org);
    for (let i = 0; i < 150; i++) double.registerRunner({ registrationToken: reg.token, name: `g-${i}` });
    const first = await client.registry.refreshNow(org);
    assert.equal(first.runners.length, 150);
    for (let i = 0; i < 30; i++) await client.registry.refreshNow(org);
    const s = double.stats()['GET /orgs/{org}/actions/runners']!;
    assert.equal(s.total, 62, '2 pages x 31 refreshes');
    assert.equal(s.notModified, 60, 'conditional requests work on GHES too');
    assert.deepEqual(await client.removeRunner(org, first.byName('g-0')!.id), { kind: 'removed' });
    const jit = await client.generateJitConfig(org, { name: 'ghes-jit', runnerGroupId: 1, labels: ['x'] });
    assert.equal(jit.kind, 'created');

    assert.ok(double.log.length > 60);
    assert.ok(double.log.every((e) => e.path.startsWith('/api/v3/') && e.status < 400));
    const view = Object.values(client.budget.view());
    assert.ok(view.length > 0);
    assert.ok(
      view.every((v) => v.limit === undefined && v.remaining === undefined && v.inFlight === 0),
      'the budget never learned a limit',
    );
    const text = await metricsRegistry.metrics();
    assert.doesNotMatch(text, /github_rate_limit\{/);
    assert.match(
      text,
      /github_requests_total\{endpoint="DELETE \/orgs\/\{org\}\/actions\/runners\/\{runner_id\}",status="204"/,
    );
    client.close();
  });

  test('GitHub App tokens are minted at the GHES API, not at api.github.com', async () => {
    const { privateKeyPem } = double.addApp({ appId: 7 });
    double.addInstallation({ id: 77, appId: 7, account: 'acme' });
    const client = new GitHubClient({
      credentials: { kind: 'app', appId: 7, installationId: 77, privateKey: privateKeyPem! },
      endpoints: { githubUrl: double.origin },
      clock,
      logger: silentLogger(),
      requestTimeoutMs: NO_TIMEOUT_MS,
    });
    const snap = await client.registry.refreshNow(org);
    assert.ok(snap.runners.length > 100);
    const mint = double.log.find(
      (e) => e.route === 'POST /app/installations/{installation_id}/access_tokens',
    );
    assert.equal(mint?.path, '/api/v3/app/installations/77/access_tokens');
    assert.equal(mint?.status, 201);
    client.close();
  });
});

function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('GHES behind a private CA', { skip: hasOpenssl() ? false : 'openssl not available' }, () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ flavor: 'ghes', now: () => clock.now() });
  let dir: string;
  let ca: string;
  let proxy: https.Server;
  let url: string;
  let token: string;

  before(async () => {
    await double.start();
    double.addOrg('acme');
    token = double.addToken().token;
    dir = mkdtempSync(join(tmpdir(), 'paddock-ca-'));
    const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
    run(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '1',
      '-subj',
      '/CN=paddock test CA',
    );
    run(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'srv.key',
      '-out',
      'srv.csr',
      '-subj',
      '/CN=127.0.0.1',
    );
    writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n');
    run(
      'x509',
      '-req',
      '-in',
      'srv.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'srv.pem',
      '-days',
      '1',
      '-extfile',
      'ext.cnf',
    );
    ca = readFileSync(join(dir, 'ca.pem'), 'utf8');
    const target = new URL(double.origin);
    // A TLS front for the double, as a GHES appliance with a certificate from a private CA.
    proxy = https.createServer(
      { key: readFileSync(join(dir, 'srv.key')), cert: readFileSync(join(dir, 'srv.pem')) },
      (req, res) => {
        const upstream = http.request(
          {
            host: target.hostname,
            port: target.port,
            path: req.url,
            method: req.method,
            headers: req.headers,
          },
          (up) => {
            res.writeHead(up.statusCode ?? 502, up.headers);
            up.pipe(res);
          },
        );
        req.pipe(upstream);
      },
    );
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    url = `https://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  });
  after(async () => {
    proxy.closeAllConnections();
    await new Promise((r) => proxy.close(r));
    await double.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('trusted with the CA bundle; refused without it', async () => {
    const trusting = new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { githubUrl: url },
      caBundle: ca,
      clock,
      logger: silentLogger(),
      requestTimeoutMs: NO_TIMEOUT_MS,
    });
    const snap = await trusting.registry.refreshNow(org);
    assert.equal(snap.runners.length, 0);
    assert.equal((await trusting.registrationToken(org)).token.length, 29);
    assert.deepEqual(await trusting.removeRunner(org, 12345), { kind: 'notFound' });

    const plain = new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { githubUrl: url },
      clock,
      logger: silentLogger(),
      requestTimeoutMs: NO_TIMEOUT_MS,
      maxRetries: 0,
    });
    await assert.rejects(plain.registry.refreshNow(org), (e: unknown) => {
      assert.ok(e instanceof GitHubApiError);
      assert.equal(e.kind, 'network');
      assert.match(e.message, /certificate/i);
      return true;
    });
    trusting.close();
    plain.close();
  });
});
