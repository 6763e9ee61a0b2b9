import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, test } from 'node:test';
import {
  assertCredentialsSupportScope,
  credentialId,
  loadCredentialsFromSecret,
  parseCredentialsSecret,
  type SecretObject,
  secretDataHash,
} from './credentials.ts';
import { GitHubConfigError } from './errors.ts';

const pem = generateKeyPairSync('rsa', { modulusLength: 2048 })
  .privateKey.export({ type: 'pkcs1', format: 'pem' })
  .toString();

function expectConfigError(fn: () => unknown, secretName: string, key: string, text: RegExp) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof GitHubConfigError, String(e));
    assert.equal(e.secretName, secretName);
    assert.equal(e.key, key);
    assert.ok(e.message.includes(`"${secretName}"`), e.message);
    assert.ok(e.message.includes(`"${key}"`), e.message);
    assert.match(e.message, text);
    return true;
  });
}

describe('credentials from a Secret (ARC keys)', () => {
  test('token, trimmed; token wins over App keys', () => {
    const parsed = parseCredentialsSecret('ns/creds', {
      github_token: Buffer.from('  ghp_abc123\n'),
      github_app_id: '1',
    });
    assert.deepEqual(parsed.credentials, { kind: 'token', token: 'ghp_abc123' });
    assert.deepEqual(parsed.endpoints, {});
  });

  test('GitHub App, with whitespace and escaped newlines in the key', () => {
    const parsed = parseCredentialsSecret('ns/app', {
      github_app_id: ' 123 ',
      github_app_installation_id: '456\n',
      github_app_private_key: `\n${pem.replace(/\n/g, '\\n')}\n`,
      github_enterprise_url: 'https://ghes.example.com\n',
    });
    assert.equal(parsed.credentials.kind, 'app');
    if (parsed.credentials.kind !== 'app') return;
    assert.equal(parsed.credentials.appId, 123);
    assert.equal(parsed.credentials.installationId, 456);
    assert.match(parsed.credentials.privateKey, /^-----BEGIN RSA PRIVATE KEY-----\n/);
    assert.deepEqual(parsed.endpoints, { githubUrl: 'https://ghes.example.com' });
    assert.equal(credentialId(parsed.credentials), 'app:123/installation:456');
  });

  test('missing and malformed keys name the Secret and the key', () => {
    expectConfigError(
      () => parseCredentialsSecret('ns/empty', {}),
      'ns/empty',
      'github_token',
      /no GitHub credentials/,
    );
    expectConfigError(
      () => parseCredentialsSecret('ns/blank', { github_token: ' \n ' }),
      'ns/blank',
      'github_token',
      /no GitHub credentials/,
    );
    expectConfigError(
      () => parseCredentialsSecret('ns/s', { github_token: 'ghp_a\nghp_b' }),
      'ns/s',
      'github_token',
      /whitespace/,
    );
    const app = { github_app_id: '1', github_app_installation_id: '2', github_app_private_key: pem };
    expectConfigError(
      () => parseCredentialsSecret('ns/s', { ...app, github_app_id: undefined }),
      'ns/s',
      'github_app_id',
      /missing/,
    );
    expectConfigError(
      () => parseCredentialsSecret('ns/s', { ...app, github_app_installation_id: '' }),
      'ns/s',
      'github_app_installation_id',
      /missing/,
    );
    expectConfigError(
      () => parseCredentialsSecret('ns/s', { ...app, github_app_private_key: undefined }),
      'ns/s',
      'github_app_private_key',
      /missing/,
    );
    expectConfigError(
      () => parseCredentialsSecret('ns/s', { ...app, github_app_id: 'abc' }),
      'ns/s',
      'github_app_id',
      /not a positive integer/,
    );
    expectConfigError(
      () => parseCredentialsSecret('ns/s', { ...app, github_app_installation_id: '-4' }),
      'ns/s',
      'github_app_installation_id',
      /not a positive integer/,
    );
    expectConfigError(
      () => parseCredentialsSecret('ns/s', { ...app, github_app_private_key: 'not a key' }),
      'ns/s',
      'github_app_private_key',
      /not a PEM-encoded private key/,
    );
  });

  test('errors never contain the secret values', () => {
    try {
      parseCredentialsSecret('ns/s', {
        github_app_id: '1',
        github_app_installation_id: '2',
        github_app_private_key: 'TOP-SECRET-MATERIAL',
      });
      assert.fail('expected an error');
    } catch (e) {
      assert.ok(!String((e as Error).message).includes('TOP-SECRET-MATERIAL'));
    }
  });

  test('loadCredentialsFromSecret decodes the API’s base64 and reports a missing Secret', async () => {
    const secrets = new Map<string, SecretObject>([
      ['ns/creds', { data: { github_token: Buffer.from('ghp_x\n').toString('base64') } }],
    ]);
    const read = async (ns: string, name: string) => secrets.get(`${ns}/${name}`);
    const loaded = await loadCredentialsFromSecret(read, 'ns', 'creds');
    assert.deepEqual(loaded.credentials, { kind: 'token', token: 'ghp_x' });
    assert.equal(loaded.hash, secretDataHash({ github_token: 'ghp_x\n' }));
    await assert.rejects(
      loadCredentialsFromSecret(read, 'ns', 'nope'),
      (e: unknown) => e instanceof GitHubConfigError && e.message === 'Secret "ns/nope" not found',
    );
  });

  test('credential ids are stable and reveal nothing', () => {
    const a = credentialId({ kind: 'token', token: 'ghp_secret' });
    assert.match(a, /^token:[0-9a-f]{12}$/);
    assert.equal(a, credentialId({ kind: 'token', token: 'ghp_secret' }));
    assert.notEqual(a, credentialId({ kind: 'token', token: 'ghp_other' }));
    assert.ok(!a.includes('secret'));
  });

  test('secret hash: values in key order, keys themselves not hashed (ARC)', () => {
    assert.equal(secretDataHash({ b: '2', a: '1' }), secretDataHash({ a: '1', b: '2' }));
    assert.equal(secretDataHash({ x: '1', y: '2' }), secretDataHash({ a: '1', b: '2' }));
    assert.notEqual(secretDataHash({ a: '2', b: '1' }), secretDataHash({ a: '1', b: '2' }));
  });

  test('enterprise scope accepts tokens only', () => {
    const app = { kind: 'app', appId: 1, installationId: 2, privateKey: pem } as const;
    assert.throws(
      () => assertCredentialsSupportScope(app, { kind: 'enterprise', enterprise: 'big' }),
      /GitHub Apps cannot manage enterprise runners; use a personal access token/,
    );
    assertCredentialsSupportScope(app, { kind: 'organization', org: 'acme' });
    assertCredentialsSupportScope({ kind: 'token', token: 't' }, { kind: 'enterprise', enterprise: 'big' });
  });
});
