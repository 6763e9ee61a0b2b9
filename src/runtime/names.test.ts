import assert from 'node:assert/strict';
import { test } from 'node:test';
import { invalidNamespaceReason, invalidSubdomainReason, isDns1123Subdomain } from './names.ts';

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

test('namespace names: RFC 1123 labels; the reason quotes the value escaped and cut', () => {
  assert.equal(invalidNamespaceReason('request.namespace', 'team-a'), undefined);
  assert.equal(invalidNamespaceReason('request.namespace', 'a'.repeat(63)), undefined);
  for (const bad of ['Team-A', 'a.b', 'a'.repeat(64), '-a', '']) {
    assert.match(invalidNamespaceReason('ns', bad) ?? '', /is not a namespace name/, JSON.stringify(bad));
  }
  assert.match(
    invalidNamespaceReason('request.namespace', 'ns\ud800x') ?? '',
    /request\.namespace "ns\\ud800x"/,
  );
  assert.match(invalidNamespaceReason('ns', 'x'.repeat(200)) ?? '', /"x{80}…"/);
});
