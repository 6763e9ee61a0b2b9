import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { GitHubDouble } from '../testenv/github-double/index.ts';
import { GitHubClient } from './client.ts';
import type { SecretObject } from './credentials.ts';
import { GitHubConfigError } from './errors.ts';
import { GitHubClientPool } from './pool.ts';
import type { GitHubScope } from './scope.ts';
import { NO_TIMEOUT_MS, SteppingClock, silentLogger } from './test-support.ts';

const org: GitHubScope = { kind: 'organization', org: 'acme' };
const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('per-resource credentials (githubAPICredentialsFrom)', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  const secrets = new Map<string, SecretObject>();
  const reads: string[] = [];
  const created: GitHubClient[] = [];
  const closed: string[] = [];
  let pool: GitHubClientPool;
  let defaultClient: GitHubClient;
  let teamToken: string;

  const build = (token: string) =>
    new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { apiUrl: double.apiUrl },
      clock,
      logger: silentLogger(),
      requestTimeoutMs: NO_TIMEOUT_MS,
    });

  before(async () => {
    await double.start();
    double.addOrg('acme');
    defaultClient = build(double.addToken({ login: 'controller' }).token);
    teamToken = double.addToken({ login: 'team' }).token;
    secrets.set('team-a/creds', {
      data: { github_token: b64(`${teamToken}\n`), github_url: b64(double.apiUrl) },
    });
    secrets.set('team-b/same', { data: { github_token: b64(teamToken), github_url: b64(double.apiUrl) } });
    secrets.set('team-a/broken', { data: { github_app_id: b64('12x') } });
    pool = new GitHubClientPool({
      readSecret: async (ns, name) => {
        reads.push(`${ns}/${name}`);
        return secrets.get(`${ns}/${name}`);
      },
      defaultClient,
      createClient: (credentials, endpoints) => {
        const c = new GitHubClient({
          credentials,
          endpoints,
          clock,
          logger: silentLogger(),
          requestTimeoutMs: NO_TIMEOUT_MS,
        });
        const close = c.close.bind(c);
        c.close = () => {
          closed.push(c.credentialId);
          close();
        };
        created.push(c);
        return c;
      },
    });
  });
  after(async () => {
    pool.close();
    await double.stop();
  });

  test('no secret name: the controller’s default client', async () => {
    const ref = { kind: 'Runner', namespace: 'team-a', name: 'r0' };
    assert.equal(await pool.clientFor(ref, undefined), defaultClient);
    assert.equal(await pool.clientFor(ref, ''), defaultClient);
    const bare = new GitHubClientPool({
      readSecret: async () => undefined,
      createClient: () => defaultClient,
    });
    await assert.rejects(bare.clientFor(ref, undefined), /Runner team-a\/r0: no GitHub credentials/);
  });

  test('a Secret’s token (trimmed) drives the calls; resources with the same credentials share one client', async () => {
    const a1 = await pool.clientFor({ kind: 'Runner', namespace: 'team-a', name: 'r1' }, 'creds');
    const a2 = await pool.clientFor({ kind: 'RunnerSet', namespace: 'team-a', name: 's1' }, 'creds');
    const b1 = await pool.clientFor({ kind: 'Runner', namespace: 'team-b', name: 'r1' }, 'same');
    assert.equal(a1, a2);
    assert.equal(a1, b1, 'two Secrets, same token: one client, one budget, one registry');
    assert.equal(pool.clientCount, 1);
    assert.notEqual(a1, defaultClient);
    await a1.registry.refreshNow(org);
    assert.equal(double.log.at(-1)?.credential, 'token:team');
    assert.equal(double.log.at(-1)?.status, 200);
  });

  test('changed Secret data rebuilds the client; releasing every resource closes it', async () => {
    const ref = { kind: 'Runner', namespace: 'team-c', name: 'r1' };
    const other = double.addToken({ login: 'rotated' }).token;
    secrets.set('team-c/rot', { data: { github_token: b64(teamToken), github_url: b64(double.apiUrl) } });
    const first = await pool.clientFor(ref, 'rot');
    assert.equal(await pool.clientFor(ref, 'rot'), first, 'unchanged data: same client');
    secrets.set('team-c/rot', { data: { github_token: b64(other), github_url: b64(double.apiUrl) } });
    const second = await pool.clientFor(ref, 'rot');
    assert.notEqual(second, first);
    assert.equal(pool.clientCount, 2);
    pool.release(ref);
    assert.ok(closed.includes(second.credentialId));
    assert.equal(pool.clientCount, 1, 'the shared team client is still used by team-a and team-b');
    for (const r of [
      { kind: 'Runner', namespace: 'team-a', name: 'r1' },
      { kind: 'RunnerSet', namespace: 'team-a', name: 's1' },
      { kind: 'Runner', namespace: 'team-b', name: 'r1' },
    ]) {
      pool.release(r);
    }
    assert.equal(pool.clientCount, 0);
    assert.ok(closed.includes(first.credentialId));
  });

  test('missing Secret or bad keys: errors naming the Secret and key', async () => {
    const ref = { kind: 'Runner', namespace: 'team-a', name: 'r9' };
    await assert.rejects(
      pool.clientFor(ref, 'absent'),
      (e: unknown) => e instanceof GitHubConfigError && e.message === 'Secret "team-a/absent" not found',
    );
    await assert.rejects(pool.clientFor(ref, 'broken'), (e: unknown) => {
      assert.ok(e instanceof GitHubConfigError);
      assert.equal(e.secretName, 'team-a/broken');
      assert.equal(e.key, 'github_app_installation_id');
      return true;
    });
    assert.ok(reads.includes('team-a/broken'));
  });

  test('a rotated App private key gets a new client although the App and installation IDs are the same', async () => {
    const { privateKey: k1 } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const { privateKey: k2 } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = (k: KeyObject) => k.export({ type: 'pkcs8', format: 'pem' }).toString();
    const app = (key: string) => ({
      data: {
        github_app_id: b64('7'),
        github_app_installation_id: b64('8'),
        github_app_private_key: b64(key),
        github_url: b64(double.apiUrl),
      },
    });
    const ref = { kind: 'Pod', namespace: 'team-e', name: 'p' };
    secrets.set('team-e/app', app(pem(k1)));
    const first = await pool.clientFor(ref, 'app');
    secrets.set('team-e/app', app(pem(k2)));
    const second = await pool.clientFor(ref, 'app');
    assert.notEqual(second, first, 'the new key is used from the next call on');
    assert.equal(second.credentialId, first.credentialId, 'same non-secret name in logs and metrics');
    assert.ok(closed.includes(first.credentialId), 'the client with the old key is closed');
    pool.release(ref);
  });

  test('a Secret name that is not a DNS-1123 subdomain is refused before anything is read', async () => {
    const ref = { kind: 'Pod', namespace: 'team-a', name: 'p' };
    const before = reads.length;
    for (const name of ['../../other-namespace/secrets/x', 'a/b', 'Upper', 'a%2Fb']) {
      await assert.rejects(pool.clientFor(ref, name), (e: unknown) => {
        assert.ok(e instanceof GitHubConfigError);
        assert.match(e.message, /is not a valid name/);
        return true;
      });
    }
    assert.equal(reads.length, before, 'no Secret read for an invalid name');
  });

  test('lastKnown: a deleted Secret still yields the client built from it, for cleanup only', async () => {
    const ref = { kind: 'Pod', namespace: 'team-f', name: 'p' };
    secrets.set('team-f/gone', { data: { github_token: b64(teamToken), github_url: b64(double.apiUrl) } });
    const client = await pool.clientFor(ref, 'gone');
    secrets.delete('team-f/gone');
    await assert.rejects(pool.clientFor(ref, 'gone'), /not found/, 'not for normal use');
    assert.equal(await pool.clientFor(ref, 'gone', { lastKnown: true }), client);
    pool.release(ref);
    await assert.rejects(
      pool.clientFor(ref, 'gone', { lastKnown: true }),
      /not found/,
      'once released, nothing is kept',
    );
  });

  test('concurrent lookups of one Secret share one entry: releasing every resource closes the client', async () => {
    secrets.set('team-g/shared', { data: { github_token: b64(teamToken), github_url: b64(double.apiUrl) } });
    const refs = Array.from({ length: 16 }, (_, i) => ({ kind: 'Pod', namespace: 'team-g', name: `p${i}` }));
    const got = await Promise.all(refs.map((r) => pool.clientFor(r, 'shared')));
    assert.equal(new Set(got).size, 1);
    for (const r of refs) pool.release(r);
    assert.deepEqual(pool.usage, { clients: 0, secrets: 0, resources: 0 });
  });

  test('a Secret naming a GHES address gets /api/v3 endpoints', async () => {
    secrets.set('team-d/ghes', {
      data: { github_token: b64('ghp_x'), github_enterprise_url: b64('https://ghes.example.com') },
    });
    const c = await pool.clientFor({ kind: 'Runner', namespace: 'team-d', name: 'r' }, 'ghes');
    assert.deepEqual(c.endpoints, {
      apiBaseUrl: 'https://ghes.example.com/api/v3',
      serverUrl: 'https://ghes.example.com/',
      enterpriseServer: true,
    });
    pool.release({ kind: 'Runner', namespace: 'team-d', name: 'r' });
  });
});
