import assert from 'node:assert/strict';
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
