import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { GitHubDouble } from '../testenv/github-double/index.ts';
import type { InstallationTokenSource } from './auth.ts';
import { GitHubClient } from './client.ts';
import { GitHubApiError, GitHubConfigError } from './errors.ts';
import type { GitHubScope } from './scope.ts';
import { NO_TIMEOUT_MS, SteppingClock, silentLogger } from './test-support.ts';

const org: GitHubScope = { kind: 'organization', org: 'acme' };
const MINT = 'POST /app/installations/{installation_id}/access_tokens';
const LIST = 'GET /orgs/{org}/actions/runners';

describe('GitHub App credentials', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  let privateKey: string;

  const appClient = (installationId = 4242, key = privateKey) =>
    new GitHubClient({
      credentials: { kind: 'app', appId: 42, installationId, privateKey: key },
      endpoints: { apiUrl: double.apiUrl },
      clock,
      logger: silentLogger(),
      requestTimeoutMs: NO_TIMEOUT_MS,
      installationTokenRenewBeforeMs: 10 * 60_000,
    });
  const mints = () => double.requestCount(MINT);

  before(async () => {
    await double.start();
    double.addOrg('acme');
    double.addEnterprise('big');
    privateKey = double.addApp({ appId: 42 }).privateKeyPem!;
    double.addInstallation({ id: 4242, appId: 42, account: 'acme' });
    double.auth.installationTokenTtlMs = 20 * 60_000;
  });
  after(() => double.stop());

  test('the installation token is minted once, reused, and renewed before it expires', async () => {
    const client = appClient();
    assert.equal(client.credentialId, 'app:42/installation:4242');
    const before = mints();
    await client.registry.refreshNow(org);
    await client.registry.refreshNow(org);
    assert.equal(mints() - before, 1);
    const source = client.transport.tokenSource as InstallationTokenSource;
    const firstExpiry = source.expiresAt!;
    assert.equal(firstExpiry, clock.now() + 20 * 60_000);

    await clock.advance(5 * 60_000);
    await client.registry.refreshNow(org);
    assert.equal(mints() - before, 1, '15 min left: reused');

    await clock.advance(5 * 60_000 + 1000);
    await client.registry.refreshNow(org);
    assert.equal(mints() - before, 2, '9 min 59 s left: renewed');
    assert.ok(clock.now() < firstExpiry, 'renewed before the old token expired');
    assert.equal(source.minted, 2);
    const listed = double.log.filter((e) => e.route === LIST);
    assert.ok(listed.length >= 4);
    assert.ok(listed.every((e) => e.status !== 401 && e.credential === 'installation:4242'));
    client.close();
  });

  test('a revoked installation token: one fresh token, then success', async () => {
    const client = appClient();
    await client.registry.refreshNow(org);
    const before = mints();
    double.auth.installationTokens.clear();
    await client.registry.refreshNow(org);
    assert.equal(mints() - before, 1);
    assert.deepEqual(
      double.log.slice(-3).map((e) => `${e.route} ${e.status}`),
      [`${LIST} 401`, `${MINT} 201`, `${LIST} 304`],
    );
    client.close();
  });

  test('a wrong private key: invalidCredentials, minting tried twice, then held back', async () => {
    const otherKey = generateKeyPairSync('rsa', { modulusLength: 2048 })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString();
    const client = appClient(4242, otherKey);
    const before = mints();
    const outcome = await client.removeRunner(org, 1);
    assert.equal(outcome.kind, 'invalidCredentials');
    assert.equal(mints() - before, 2);
    assert.equal((await client.removeRunner(org, 1)).kind, 'invalidCredentials');
    assert.equal(mints() - before, 2, 'held back');
    await assert.rejects(
      client.registry.get(org),
      (e: unknown) =>
        e instanceof GitHubApiError && e.kind === 'invalidCredentials' && !e.message.includes('BEGIN'),
    );
    client.close();
  });

  test('an unknown installation is invalid credentials too', async () => {
    const client = appClient(999);
    const outcome = await client.removeRunner(org, 1);
    assert.deepEqual(outcome, { kind: 'invalidCredentials', message: 'Not Found' });
    client.close();
  });

  test('enterprise scope with an App: a clear error before anything is sent', async () => {
    const client = appClient();
    const ent: GitHubScope = { kind: 'enterprise', enterprise: 'big' };
    const before = double.log.length;
    const isClear = (e: unknown) =>
      e instanceof GitHubConfigError && /GitHub Apps cannot manage enterprise runners/.test(e.message);
    await assert.rejects(client.registry.get(ent), isClear);
    await assert.rejects(client.removeRunner(ent, 1), isClear);
    await assert.rejects(client.registrationToken(ent), isClear);
    assert.equal(double.log.length, before);
    client.close();
  });
});
