import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { generateCertificateAuthority } from '../webhooks/certs.ts';
import { parseFlags, UsageError } from './flags.ts';
import { runConfig } from './run.ts';
import { RUN_FLAGS } from './run-flags.ts';
import { WEBHOOK_SERVER_FLAGS, webhookServerConfig } from './webhook-server.ts';

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

describe('paddock webhook-server flags', () => {
  const config = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
    webhookServerConfig(parseFlags(WEBHOOK_SERVER_FLAGS, argv, env).values);

  test("ARC's defaults: :8000, queue limit 100, no secret; the flag beats GITHUB_WEBHOOK_SECRET_TOKEN", () => {
    const c = config([]);
    assert.equal(c.webhook.addr, ':8000');
    assert.equal(c.webhook.queueLimit, 100);
    assert.equal(c.webhook.secret, undefined);
    assert.equal(c.webhook.repairIntervalMs, 60_000);
    assert.equal(config([], { GITHUB_WEBHOOK_SECRET_TOKEN: 'env' }).webhook.secret, 'env');
    assert.equal(
      config(['--github-webhook-secret-token', 'flag'], { GITHUB_WEBHOOK_SECRET_TOKEN: 'env' }).webhook
        .secret,
      'flag',
    );
    // ARC's other flags are accepted.
    const arc = config(['--sync-period', '10m', '--log-format', 'text', '--watch-namespace', 'ci']);
    assert.equal(arc.watchNamespace, 'ci');
  });

  test('a negative queue limit is a usage error naming the flag', () => {
    assert.throws(
      () => config(['--queue-limit', '-1']),
      (e: unknown) => e instanceof UsageError && /--queue-limit/.test(e.message),
    );
  });

  test('paddock run serves it only when --github-webhook-addr is set', () => {
    assert.equal(runConfig(parseFlags(RUN_FLAGS, [], {}).values).githubWebhook.addr, undefined);
    const on = runConfig(parseFlags(RUN_FLAGS, ['--github-webhook-addr', ':8000'], {}).values).githubWebhook;
    assert.equal(on.addr, ':8000');
  });
});
