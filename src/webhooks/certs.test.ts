import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { describe, test } from 'node:test';
import { KubeError } from '../runtime/errors.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import {
  certificatesUsable,
  generateCertificateAuthority,
  generateWebhookCertificates,
  issueServingCertificate,
  loadOrCreateWebhookCertificates,
} from './certs.ts';

const DAY = 24 * 3600_000;
const NAMES = {
  dnsNames: ['paddock-webhook.paddock-system.svc', 'paddock-webhook'],
  ipAddresses: ['127.0.0.1'],
};

describe('webhook certificates', () => {
  test('the serving certificate verifies against the CA and carries the SANs', () => {
    const now = Date.parse('2026-03-01T00:00:00Z');
    const certs = generateWebhookCertificates({
      ...NAMES,
      ipAddresses: ['127.0.0.1', '::1', '2001:db8::7'],
      now,
    });
    const ca = new X509Certificate(certs.ca.cert);
    const serving = new X509Certificate(certs.serving.cert);

    assert.equal(ca.ca, true);
    assert.equal(ca.verify(ca.publicKey), true, 'CA is self-signed');
    assert.equal(serving.ca, false);
    assert.equal(serving.verify(ca.publicKey), true);
    assert.equal(serving.checkIssued(ca), true);
    assert.equal(serving.issuer, ca.subject);
    assert.equal(serving.checkPrivateKey(createPrivateKey(certs.serving.key)), true);
    assert.equal(ca.checkPrivateKey(createPrivateKey(certs.ca.key)), true);

    assert.equal(
      serving.subjectAltName,
      'DNS:paddock-webhook.paddock-system.svc, DNS:paddock-webhook, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, IP Address:2001:DB8:0:0:0:0:0:7',
    );
    assert.equal(
      serving.checkHost('paddock-webhook.paddock-system.svc'),
      'paddock-webhook.paddock-system.svc',
    );
    assert.equal(serving.checkIP('127.0.0.1'), '127.0.0.1');
    assert.equal(serving.checkHost('other.svc'), undefined);
    assert.deepEqual(serving.keyUsage, ['1.3.6.1.5.5.7.3.1']); // serverAuth

    // One year for the serving certificate, ten for the CA, both back-dated an hour.
    assert.equal(Date.parse(serving.validTo), now + 365 * DAY);
    assert.equal(Date.parse(serving.validFrom), now - 3600_000);
    assert.equal(Date.parse(ca.validTo), now + 3650 * DAY);
    assert.match(certs.ca.key, /^-----BEGIN PRIVATE KEY-----/);
    assert.notEqual(ca.serialNumber, serving.serialNumber);
  });

  test('validity past 2049 is encoded as GeneralizedTime', () => {
    const now = Date.parse('2049-06-01T00:00:00Z');
    const certs = generateWebhookCertificates({ ipAddresses: ['127.0.0.1'], now });
    assert.equal(new X509Certificate(certs.serving.cert).validTo, 'Jun  1 00:00:00 2050 GMT');
    assert.equal(new X509Certificate(certs.ca.cert).validTo, 'May 30 00:00:00 2059 GMT');
  });

  test('a serving certificate never outlives its CA', () => {
    const now = Date.now();
    const ca = generateCertificateAuthority({ now, validityMs: 10 * DAY });
    const serving = issueServingCertificate(ca, { ipAddresses: ['127.0.0.1'], now });
    assert.equal(new X509Certificate(serving.cert).validTo, new X509Certificate(ca.cert).validTo);
  });

  test('a certificate needs a name', () => {
    assert.throws(() => generateWebhookCertificates({}), /needs a DNS name or an IP/);
  });

  test('usable: same CA, names covered, enough validity left', () => {
    const now = Date.now();
    const certs = generateWebhookCertificates({ ...NAMES, now });
    assert.equal(certificatesUsable(certs, { ...NAMES, now }), true);
    assert.equal(certificatesUsable(certs, { dnsNames: ['elsewhere.svc'], now }), false);
    assert.equal(certificatesUsable(certs, { ipAddresses: ['10.0.0.1'], now }), false);
    assert.equal(certificatesUsable(certs, { ...NAMES, now: now + 340 * DAY }), false);
    const other = generateWebhookCertificates({ ...NAMES, now });
    assert.equal(certificatesUsable({ ca: other.ca, serving: certs.serving }, { ...NAMES, now }), false);
    assert.equal(
      certificatesUsable(
        { ca: certs.ca, serving: { ...certs.serving, key: other.serving.key } },
        { ...NAMES, now },
      ),
      false,
    );
    assert.equal(certificatesUsable({ ca: certs.ca, serving: { cert: 'junk', key: 'junk' } }, NAMES), false);
  });
});

/** An in-memory Secret API with resourceVersions, for the persistence logic. */
function fakeSecrets() {
  const store = new Map<
    string,
    { metadata: { name: string; resourceVersion: string }; type?: string; data: Record<string, string> }
  >();
  let rv = 1;
  const calls: string[] = [];
  let beforeWrite: (() => void) | undefined;
  const notFound = () => new KubeError({ code: 404, reason: 'NotFound', message: 'not found' });
  const conflict = () => new KubeError({ code: 409, reason: 'Conflict', message: 'conflict' });
  const http = {
    async request(method: string, path: string, opts: { body?: unknown } = {}) {
      calls.push(`${method} ${path}`);
      const name = path.split('/').at(-1)!;
      const body = structuredClone(opts.body) as {
        metadata: { name: string; resourceVersion?: string };
        type?: string;
        data: Record<string, string>;
      };
      if (method !== 'GET') {
        const hook = beforeWrite;
        beforeWrite = undefined;
        hook?.();
      }
      switch (method) {
        case 'GET': {
          const s = store.get(name);
          if (!s) throw notFound();
          return structuredClone(s);
        }
        case 'POST':
          if (store.has(body.metadata.name)) {
            throw new KubeError({ code: 409, reason: 'AlreadyExists', message: 'exists' });
          }
          store.set(body.metadata.name, {
            ...body,
            metadata: { name: body.metadata.name, resourceVersion: String(rv++) },
          });
          return body;
        case 'PUT': {
          const s = store.get(name);
          if (!s) throw notFound();
          if (body.metadata.resourceVersion !== s.metadata.resourceVersion) throw conflict();
          store.set(name, { ...body, metadata: { name, resourceVersion: String(rv++) } });
          return body;
        }
        default:
          throw new Error(`unexpected ${method}`);
      }
    },
  };
  return {
    http: http as unknown as KubeHttp,
    store,
    calls,
    raceOnNextWrite(fn: () => void) {
      beforeWrite = fn;
    },
  };
}

function stored(fake: ReturnType<typeof fakeSecrets>, name = 'paddock-webhook-tls') {
  const s = fake.store.get(name)!;
  const dec = (k: string) => Buffer.from(s.data[k]!, 'base64').toString('utf8');
  return { type: s.type, ca: dec('ca.crt'), caKey: dec('ca.key'), cert: dec('tls.crt'), key: dec('tls.key') };
}

describe('webhook certificates in a Secret', () => {
  test('created once, then reused', async () => {
    const fake = fakeSecrets();
    const first = await loadOrCreateWebhookCertificates({ http: fake.http, namespace: 'ps', ...NAMES });
    const s = stored(fake);
    assert.equal(s.type, 'kubernetes.io/tls');
    assert.equal(s.ca, first.ca.cert);
    assert.equal(s.cert, first.serving.cert);
    const again = await loadOrCreateWebhookCertificates({ http: fake.http, namespace: 'ps', ...NAMES });
    assert.deepEqual(again, first);
    assert.deepEqual(fake.calls, [
      'GET /api/v1/namespaces/ps/secrets/paddock-webhook-tls',
      'POST /api/v1/namespaces/ps/secrets',
      'GET /api/v1/namespaces/ps/secrets/paddock-webhook-tls',
    ]);
  });

  test('a new name or near expiry reissues the serving certificate from the same CA', async () => {
    const fake = fakeSecrets();
    const now = Date.now();
    const first = await loadOrCreateWebhookCertificates({ http: fake.http, namespace: 'ps', ...NAMES, now });
    const more = await loadOrCreateWebhookCertificates({
      http: fake.http,
      namespace: 'ps',
      ...NAMES,
      ipAddresses: ['127.0.0.1', '10.0.0.9'],
      now,
    });
    assert.equal(more.ca.cert, first.ca.cert);
    assert.notEqual(more.serving.cert, first.serving.cert);
    assert.equal(new X509Certificate(more.serving.cert).checkIP('10.0.0.9'), '10.0.0.9');
    assert.equal(stored(fake).cert, more.serving.cert);

    const later = await loadOrCreateWebhookCertificates({
      http: fake.http,
      namespace: 'ps',
      ...NAMES,
      now: now + 350 * DAY,
    });
    assert.equal(later.ca.cert, first.ca.cert);
    assert.notEqual(later.serving.cert, more.serving.cert);
  });

  test('an expiring CA is replaced with everything', async () => {
    const fake = fakeSecrets();
    const now = Date.now();
    const first = await loadOrCreateWebhookCertificates({ http: fake.http, namespace: 'ps', ...NAMES, now });
    const renewed = await loadOrCreateWebhookCertificates({
      http: fake.http,
      namespace: 'ps',
      ...NAMES,
      now: now + 3640 * DAY,
    });
    assert.notEqual(renewed.ca.cert, first.ca.cert);
  });

  test("a replica that loses the race takes the winner's certificates", async () => {
    const fake = fakeSecrets();
    const winner = generateWebhookCertificates(NAMES);
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    fake.raceOnNextWrite(() => {
      fake.store.set('paddock-webhook-tls', {
        metadata: { name: 'paddock-webhook-tls', resourceVersion: '99' },
        type: 'kubernetes.io/tls',
        data: {
          'ca.crt': b64(winner.ca.cert),
          'ca.key': b64(winner.ca.key),
          'tls.crt': b64(winner.serving.cert),
          'tls.key': b64(winner.serving.key),
        },
      });
    });
    const got = await loadOrCreateWebhookCertificates({ http: fake.http, namespace: 'ps', ...NAMES });
    assert.deepEqual(got, winner);
  });

  test('a Secret of another type is not overwritten', async () => {
    const fake = fakeSecrets();
    fake.store.set('paddock-webhook-tls', {
      metadata: { name: 'paddock-webhook-tls', resourceVersion: '1' },
      type: 'Opaque',
      data: { other: 'eA==' },
    });
    await assert.rejects(
      loadOrCreateWebhookCertificates({ http: fake.http, namespace: 'ps', ...NAMES }),
      /exists with type Opaque/,
    );
  });
});
