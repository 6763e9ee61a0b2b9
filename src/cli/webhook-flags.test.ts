import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { generateCertificateAuthority } from '../webhooks/certs.ts';
import { parseFlags, UsageError } from './flags.ts';
import { runConfig } from './run.ts';
import { RUN_FLAGS } from './run-flags.ts';

describe('paddock run: --webhook-client-ca', () => {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-client-ca-'));
  const caFile = join(dir, 'ca.pem');
  const ca = generateCertificateAuthority().cert;
  writeFileSync(caFile, ca);
  after(() => rmSync(dir, { recursive: true, force: true }));

  const config = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
    runConfig(parseFlags(RUN_FLAGS, argv, env).values).webhook.clientCa;

  test('off by default: any TLS client may call the webhook', () => {
    assert.equal(config([]), undefined);
  });

  test('the flag or WEBHOOK_CLIENT_CA names the PEM file that is read', () => {
    assert.equal(config(['--webhook-client-ca', caFile]), ca);
    assert.equal(config([], { WEBHOOK_CLIENT_CA: caFile }), ca);
  });

  test('a missing file is a usage error naming the flag', () => {
    assert.throws(
      () => config(['--webhook-client-ca', join(dir, 'nope.pem')]),
      (err: unknown) =>
        err instanceof UsageError && /--webhook-client-ca \/ WEBHOOK_CLIENT_CA/.test(err.message),
    );
  });
});
