import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, test } from 'node:test';
import { silentLogger } from '../runtime/log.ts';
import {
  generateCertificateAuthority,
  generateWebhookCertificates,
  issueClientCertificate,
  type KeyPairPem,
  type WebhookCertificates,
} from './certs.ts';
import type { AdmissionResult } from './runner-token.ts';
import { type AdmissionHandler, admissionReviewFor, reviewAdmission, WebhookServer } from './server.ts';

function review(request: Record<string, unknown>): string {
  return JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request });
}

const allowWithPatch: AdmissionHandler = async () => ({
  allowed: true,
  patch: [{ op: 'replace', path: '/spec/restartPolicy', value: 'Never' }],
});

describe('AdmissionReview framing', () => {
  test('echoes the uid and base64-encodes the JSON patch', async () => {
    const answer = await reviewAdmission(review({ uid: 'abc-123', operation: 'CREATE' }), allowWithPatch);
    assert.equal(answer.status, 200);
    assert.ok('response' in answer.body);
    const { response } = answer.body;
    assert.equal(answer.body.apiVersion, 'admission.k8s.io/v1');
    assert.equal(answer.body.kind, 'AdmissionReview');
    assert.equal(response.uid, 'abc-123');
    assert.equal(response.allowed, true);
    assert.equal(response.patchType, 'JSONPatch');
    assert.deepEqual(JSON.parse(Buffer.from(response.patch!, 'base64').toString('utf8')), [
      { op: 'replace', path: '/spec/restartPolicy', value: 'Never' },
    ]);
  });

  test('no patch means no patchType; denials carry a Failure status', () => {
    assert.deepEqual(admissionReviewFor('u', { allowed: true, patch: [] }).response, {
      uid: 'u',
      allowed: true,
    });
    const denied = admissionReviewFor('u', {
      allowed: false,
      status: { code: 500, message: 'boom', reason: 'InternalError' },
      warnings: ['w'],
    });
    assert.deepEqual(denied.response, {
      uid: 'u',
      allowed: false,
      status: { status: 'Failure', code: 500, message: 'boom', reason: 'InternalError' },
      warnings: ['w'],
    });
  });

  test('malformed reviews are a 400 with a message', async () => {
    const cases: [string, RegExp][] = [
      ['{not json', /malformed AdmissionReview: .*JSON/],
      ['[]', /not an object/],
      [
        JSON.stringify({
          apiVersion: 'admission.k8s.io/v1beta1',
          kind: 'AdmissionReview',
          request: { uid: 'u' },
        }),
        /expected apiVersion admission.k8s.io\/v1/,
      ],
      [
        JSON.stringify({ apiVersion: { toString: 'v1' }, kind: { toString: 1 }, request: { uid: 'u' } }),
        /got \{"toString":"v1"\} \{"toString":1\}/,
      ],
      [
        JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }),
        /request.uid is missing/,
      ],
      [review({ uid: '' }), /request.uid is missing/],
      // A lone surrogate cannot be URL-encoded: it must never reach a handler that builds a path.
      [
        review({ uid: 'u', namespace: 'ns\ud800x' }),
        /request.namespace "ns\\ud800x" is not a namespace name/,
      ],
      [review({ uid: 'u', namespace: 'Team-A' }), /is not a namespace name/],
      [review({ uid: 'u', namespace: 'a'.repeat(64) }), /is not a namespace name/],
    ];
    let handled = 0;
    const counting: AdmissionHandler = async (request, signal) => {
      handled++;
      return allowWithPatch(request, signal);
    };
    for (const [body, re] of cases) {
      const answer = await reviewAdmission(body, counting);
      assert.equal(answer.status, 400, body);
      assert.ok('message' in answer.body);
      assert.match(answer.body.message, re);
    }
    assert.equal(handled, 0);
    // Cluster-scoped objects come without a namespace; a real one passes.
    for (const namespace of [undefined, '', 'team-a', 'a'.repeat(63)]) {
      const answer = await reviewAdmission(review({ uid: 'u', namespace }), counting);
      assert.equal(answer.status, 200, String(namespace));
    }
    assert.equal(handled, 4);
  });

  test('a throwing handler becomes a 500 denial; a slow one a 504 denial', async () => {
    const thrown = await reviewAdmission(
      review({ uid: 'u', resource: { resource: 'pods' }, namespace: 'n' }),
      async () => {
        throw new Error('kaput');
      },
    );
    assert.ok('response' in thrown.body);
    assert.equal(thrown.body.response.allowed, false);
    assert.equal(thrown.body.response.status?.code, 500);
    assert.match(thrown.body.response.status!.message, /pods n\/<new> failed: kaput/);

    let aborted = false;
    const slow = await reviewAdmission(
      review({ uid: 'u' }),
      (_req, signal) =>
        new Promise<AdmissionResult>((resolve) => {
          signal.addEventListener('abort', () => {
            aborted = true;
          });
          setTimeout(() => resolve({ allowed: true }), 2_000).unref();
        }),
      { timeoutMs: 30 },
    );
    assert.ok('response' in slow.body);
    assert.equal(slow.body.response.allowed, false);
    assert.equal(slow.body.response.status?.code, 504);
    assert.match(slow.body.response.status!.message, /did not finish within 30 ms/);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(aborted, true);
  });
});

interface HttpAnswer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

function call(
  port: number,
  ca: string,
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {},
  clientCert?: KeyPairPem,
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        ca,
        agent: false,
        ...(clientCert ? { cert: clientCert.cert, key: clientCert.key } : {}),
        headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            headers: res.headers,
          }),
        );
      },
    );
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

describe('webhook HTTPS server', () => {
  let certs: WebhookCertificates;
  let server: WebhookServer;
  let port: number;
  const seen: string[] = [];

  before(async () => {
    certs = generateWebhookCertificates({
      dnsNames: ['paddock-webhook.test.svc'],
      ipAddresses: ['127.0.0.1'],
    });
    server = new WebhookServer({
      tls: certs.serving,
      host: '127.0.0.1',
      port: 0,
      logger: silentLogger(),
      maxBodyBytes: 64 * 1024,
      handlers: {
        '/mutate-runner-set-pod': async (req) => {
          seen.push(req.uid);
          return { allowed: true, patch: [{ op: 'add', path: '/metadata/labels', value: { a: 'b' } }] };
        },
      },
    });
    port = await server.start();
  });
  after(() => server.stop());

  test('serves AdmissionReviews over TLS trusted through our CA', async () => {
    const res = await call(
      port,
      certs.ca.cert,
      'POST',
      '/mutate-runner-set-pod',
      review({ uid: 'x1', object: {} }),
    );
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /application\/json/);
    const body = JSON.parse(res.body);
    assert.equal(body.response.uid, 'x1');
    assert.equal(body.response.patchType, 'JSONPatch');
    assert.deepEqual(seen, ['x1']);
    assert.equal(server.requestCount('/mutate-runner-set-pod'), 1);
    assert.equal(server.url('/mutate-runner-set-pod'), `https://127.0.0.1:${port}/mutate-runner-set-pod`);
  });

  test('a client not trusting our CA cannot connect', async () => {
    const other = generateWebhookCertificates({ ipAddresses: ['127.0.0.1'] });
    await assert.rejects(
      call(port, other.ca.cert, 'GET', '/healthz'),
      /self-signed|unable to verify|certificate/i,
    );
  });

  test('healthz', async () => {
    const res = await call(port, certs.ca.cert, 'GET', '/healthz');
    assert.equal(res.status, 200);
    assert.equal(res.body, 'ok');
  });

  test('HTTP errors: malformed review, unknown path, wrong method, content type, size', async () => {
    const malformed = await call(port, certs.ca.cert, 'POST', '/mutate-runner-set-pod', '{"apiVersion":');
    assert.equal(malformed.status, 400);
    assert.match(JSON.parse(malformed.body).message, /malformed AdmissionReview/);

    assert.equal((await call(port, certs.ca.cert, 'POST', '/nope', review({ uid: 'u' }))).status, 404);
    assert.equal((await call(port, certs.ca.cert, 'GET', '/mutate-runner-set-pod')).status, 405);
    const text = await call(port, certs.ca.cert, 'POST', '/mutate-runner-set-pod', 'x', {
      'content-type': 'text/plain',
    });
    assert.equal(text.status, 415);

    const big = review({ uid: 'big', object: { pad: 'x'.repeat(70 * 1024) } });
    const tooLarge = await call(port, certs.ca.cert, 'POST', '/mutate-runner-set-pod', big);
    assert.equal(tooLarge.status, 413);
    assert.match(JSON.parse(tooLarge.body).message, /larger than 65536 bytes/);
    assert.ok(!seen.includes('big'));
  });

  test('a body larger than the cap without content-length is cut off too', async () => {
    const res = await new Promise<number>((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/mutate-runner-set-pod',
          ca: certs.ca.cert,
          headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        },
        (r) => {
          r.resume();
          resolve(r.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      for (let i = 0; i < 10; i++) req.write('x'.repeat(10 * 1024));
      req.end();
    });
    assert.equal(res, 413);
  });

  test('a renewed certificate is served to new connections', async () => {
    const renewed = generateWebhookCertificates({ ipAddresses: ['127.0.0.1'] });
    server.setCertificate(renewed.serving);
    try {
      assert.equal(
        (await call(port, renewed.ca.cert, 'GET', '/healthz', undefined, { connection: 'close' })).status,
        200,
      );
    } finally {
      server.setCertificate(certs.serving);
    }
  });
});

describe('webhook HTTPS server with --webhook-client-ca', () => {
  const certs = generateWebhookCertificates({ ipAddresses: ['127.0.0.1'] });
  const apiServerCa = generateCertificateAuthority({ commonName: 'kube-apiserver webhook clients' });
  const apiServer = issueClientCertificate(apiServerCa, { commonName: 'kube-apiserver' });
  const strangerCa = generateCertificateAuthority({ commonName: 'someone else' });
  const stranger = issueClientCertificate(strangerCa, { commonName: 'kube-apiserver' });
  let server: WebhookServer;
  let port: number;
  let handled = 0;

  before(async () => {
    server = new WebhookServer({
      tls: certs.serving,
      host: '127.0.0.1',
      port: 0,
      logger: silentLogger(),
      clientCa: apiServerCa.cert,
      handlers: {
        '/mutate-runner-set-pod': async () => {
          handled++;
          return { allowed: true };
        },
      },
    });
    port = await server.start();
  });
  after(() => server.stop());

  const post = (clientCert?: KeyPairPem) =>
    call(
      port,
      certs.ca.cert,
      'POST',
      '/mutate-runner-set-pod',
      review({ uid: 'm1', object: {} }),
      {},
      clientCert,
    );

  test('a client presenting a certificate of that CA is served', async () => {
    const res = await post(apiServer);
    assert.equal(res.status, 200);
    assert.equal(JSON.parse(res.body).response.uid, 'm1');
  });

  test('a client without a certificate cannot complete a request', async () => {
    const before = handled;
    await assert.rejects(post(), /certificate required/);
    assert.equal(handled, before);
  });

  test('a client certificate of another CA is refused in the handshake', async () => {
    const before = handled;
    // TLS 1.3: the server's "unknown CA" alert arrives after the client's handshake finished.
    await assert.rejects(post(stranger), /unknown ca|socket hang up|ECONNRESET/i);
    assert.equal(handled, before);
  });

  test('a renewed serving certificate still asks for the client certificate', async () => {
    const renewed = generateWebhookCertificates({ ipAddresses: ['127.0.0.1'] });
    server.setCertificate(renewed.serving);
    try {
      const ok = await call(port, renewed.ca.cert, 'GET', '/healthz', undefined, {}, apiServer);
      assert.equal(ok.status, 200);
      await assert.rejects(call(port, renewed.ca.cert, 'GET', '/healthz'), /certificate required/);
    } finally {
      server.setCertificate(certs.serving);
    }
  });
});
