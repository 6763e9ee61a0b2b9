import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';
import { FakeClock } from '../runtime/clock.ts';
import { silentLogger } from '../runtime/log.ts';
import {
  generateWebhookCertificates,
  issueServingCertificate,
  type KeyPairPem,
  type WebhookCertificates,
} from './certs.ts';
import { certificateChange, transitionCaBundle, WebhookCertificateRenewal } from './renewal.ts';
import { WebhookServer } from './server.ts';

const names = { ipAddresses: ['127.0.0.1'] };

/** The certificate a new TLS connection is served, trusting only `ca`. */
function servedCertificate(port: number, ca: string): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: undefined }, () => {
      const raw = socket.getPeerCertificate().raw;
      socket.end();
      resolve(new X509Certificate(raw));
    });
    socket.on('error', reject);
  });
}

describe('webhook certificate renewal', () => {
  const original = generateWebhookCertificates(names);
  const reissued: WebhookCertificates = {
    ca: original.ca,
    serving: issueServingCertificate(original.ca, names),
  };
  const newCa = generateWebhookCertificates(names);
  let server: WebhookServer;
  let port: number;

  before(async () => {
    server = new WebhookServer({
      tls: original.serving,
      handlers: {},
      logger: silentLogger(),
      host: '127.0.0.1',
      port: 0,
    });
    port = await server.start();
  });
  after(async () => {
    await server?.stop();
  });

  test('what changed decides what must be published', () => {
    assert.equal(certificateChange(original, original), 'none');
    assert.equal(certificateChange(original, reissued), 'serving');
    assert.equal(certificateChange(original, newCa), 'ca');
    const bundle = transitionCaBundle(original.ca, newCa.ca);
    assert.ok(bundle.startsWith(newCa.ca.cert.trimEnd()));
    assert.ok(bundle.includes(original.ca.cert.trimEnd()), 'the old CA stays trusted meanwhile');
  });

  test('checks on its interval, serves a reissued certificate, and keeps the caBundle when the CA stays', async () => {
    const clock = new FakeClock();
    const published: string[] = [];
    let next: WebhookCertificates = original;
    let loads = 0;
    const renewal = new WebhookCertificateRenewal({
      load: async () => {
        loads++;
        return next;
      },
      current: original,
      serve: (s: KeyPairPem) => server.setCertificate(s),
      publishCaBundle: async (b) => {
        published.push(b);
      },
      clock,
      intervalMs: 3_600_000,
      logger: silentLogger(),
    });
    renewal.start();
    try {
      await clock.advance(3_599_000);
      assert.equal(loads, 0, 'not before the interval');
      await clock.advance(1_000);
      assert.equal(loads, 1);
      assert.equal(renewal.certificates, original, 'nothing to do while the certificates are good');

      next = reissued;
      await clock.advance(3_600_000);
      assert.equal(loads, 2);
      assert.equal(renewal.certificates, reissued);
      const served = await servedCertificate(port, original.ca.cert);
      assert.equal(served.fingerprint256, new X509Certificate(reissued.serving.cert).fingerprint256);
      assert.deepEqual(published, [], 'same CA: the caBundle stays');
    } finally {
      await renewal.stop();
      server.setCertificate(original.serving);
    }
    await clock.advance(10 * 3_600_000);
    assert.equal(loads, 2, 'stopped means no more checks');
  });

  test('a new CA is trusted (both CAs published) before its certificate is served', async () => {
    const clock = new FakeClock();
    const order: string[] = [];
    const renewal = new WebhookCertificateRenewal({
      load: async () => newCa,
      current: original,
      serve: (s) => {
        order.push('serve');
        server.setCertificate(s);
      },
      publishCaBundle: async (b) => {
        assert.equal(b, transitionCaBundle(original.ca, newCa.ca));
        order.push('publish');
      },
      clock,
      intervalMs: 1_000,
      logger: silentLogger(),
    });
    try {
      assert.equal(await renewal.checkNow(), 'ca');
      assert.deepEqual(order, ['publish', 'serve']);
      const served = await servedCertificate(port, newCa.ca.cert);
      assert.equal(served.fingerprint256, new X509Certificate(newCa.serving.cert).fingerprint256);
    } finally {
      server.setCertificate(original.serving);
    }
  });

  test('a failed publish keeps serving the old certificate and retries at the next interval', async () => {
    const clock = new FakeClock();
    let publishAttempts = 0;
    const warnings: string[] = [];
    const logger = silentLogger();
    logger.warn = ((_obj: unknown, msg?: string) => {
      warnings.push(msg ?? '');
    }) as typeof logger.warn;
    const renewal = new WebhookCertificateRenewal({
      load: async () => newCa,
      current: original,
      serve: (s) => server.setCertificate(s),
      publishCaBundle: async () => {
        publishAttempts++;
        if (publishAttempts === 1) throw new Error('apiserver unavailable');
      },
      clock,
      intervalMs: 1_000,
      logger,
    });
    renewal.start();
    try {
      await clock.advance(1_000);
      assert.equal(publishAttempts, 1);
      assert.equal(renewal.certificates, original);
      assert.match(warnings.join('\n'), /renewal check failed/);
      const served = await servedCertificate(port, original.ca.cert);
      assert.equal(served.fingerprint256, new X509Certificate(original.serving.cert).fingerprint256);

      await clock.advance(1_000);
      assert.equal(publishAttempts, 2);
      assert.equal(renewal.certificates, newCa);
    } finally {
      await renewal.stop();
      server.setCertificate(original.serving);
    }
  });
});
