import assert from 'node:assert/strict';
import { test } from 'node:test';
import { invalidSubdomainReason, isDns1123Subdomain } from './names.ts';

test('DNS-1123 subdomains: valid names pass, path tricks and odd characters do not', () => {
  for (const ok of ['a', 'github-creds', 'my.secret-1', '0abc', 'a'.repeat(253)]) {
    assert.equal(isDns1123Subdomain(ok), true, ok);
  }
  for (const bad of [
    '',
    '../../other-namespace/secrets/x',
    '..',
    'a/b',
    'A',
    '-a',
    'a-',
    'a..b',
    'a b',
    'a%2Fb',
    'a\n',
    'a'.repeat(254),
  ]) {
    assert.equal(isDns1123Subdomain(bad), false, JSON.stringify(bad));
  }
  assert.match(invalidSubdomainReason('Secret', '../x') ?? '', /Secret "\.\.\/x" is not a valid name/);
  assert.equal(invalidSubdomainReason('Secret', 'ok'), undefined);
});
