import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { checkDelivery, MAX_DELIVERY_BYTES, signatureProblem } from './github-delivery.ts';

const SECRET = 'it-is-a-secret';
const sign = (body: Buffer | string, alg = 'sha256', secret = SECRET) =>
  `${alg}=${createHmac(alg, secret).update(body).digest('hex')}`;
const json = (o: unknown) => Buffer.from(JSON.stringify(o));
const headers = (body: Buffer, extra: Record<string, string> = {}) => ({
  'content-type': 'application/json',
  'x-github-event': 'workflow_job',
  'x-github-delivery': 'd-1',
  'x-hub-signature-256': sign(body),
  ...extra,
});

describe('GitHub delivery checks', () => {
  test('a signed JSON delivery is accepted, with its event and delivery ID', () => {
    const body = json({ action: 'queued' });
    assert.deepEqual(checkDelivery({ secret: SECRET, headers: headers(body), body }), {
      ok: true,
      payload: { action: 'queued' },
      event: 'workflow_job',
      delivery: 'd-1',
    });
  });

  test('sha1 fallback, sha512, form bodies, no secret configured', () => {
    const body = json({ zen: 'x' });
    const h = headers(body);
    delete (h as Record<string, string>)['x-hub-signature-256'];
    assert.equal(
      checkDelivery({ secret: SECRET, headers: { ...h, 'x-hub-signature': sign(body, 'sha1') }, body }).ok,
      true,
    );
    assert.equal(signatureProblem(SECRET, sign(body, 'sha512'), body), undefined);
    const form = Buffer.from(`payload=${encodeURIComponent('{"a":1}')}`);
    const formCheck = checkDelivery({
      secret: SECRET,
      headers: headers(form, { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }),
      body: form,
    });
    assert.deepEqual(formCheck.ok && formCheck.payload, { a: 1 });
    assert.equal(checkDelivery({ secret: undefined, headers: { ...h }, body }).ok, true);
  });

  test('each bad input has its own status, and no message carries the secret or the signature', () => {
    const body = json({ action: 'queued' });
    const wrongSig = sign(body, 'sha256', 'another-secret');
    const cases: [Parameters<typeof checkDelivery>[0], number, RegExp][] = [
      [
        { secret: SECRET, headers: headers(body, { 'x-hub-signature-256': wrongSig }), body },
        401,
        /signature check failed/,
      ],
      [
        { secret: SECRET, headers: { ...headers(body), 'x-hub-signature-256': '' }, body },
        401,
        /missing signature/,
      ],
      [
        { secret: SECRET, headers: headers(body, { 'x-hub-signature-256': 'md5=abcd' }), body },
        401,
        /unknown signature algorithm/,
      ],
      [
        { secret: SECRET, headers: headers(body, { 'x-hub-signature-256': 'sha256=zz' }), body },
        401,
        /not hexadecimal/,
      ],
      [
        { secret: SECRET, headers: headers(body, { 'x-hub-signature-256': 'sha256' }), body },
        401,
        /malformed/,
      ],
      [
        { secret: SECRET, headers: headers(body, { 'content-type': 'text/plain' }), body },
        415,
        /Content-Type/,
      ],
      [{ secret: SECRET, headers: headers(body), body, truncated: true }, 413, /larger than/],
      [
        { secret: SECRET, headers: headers(Buffer.from('{"a":')), body: Buffer.from('{"a":') },
        400,
        /not valid JSON/,
      ],
      [
        { secret: SECRET, headers: headers(Buffer.from('[1]')), body: Buffer.from('[1]') },
        400,
        /not a JSON object/,
      ],
      [{ secret: SECRET, headers: headers(body, { 'x-github-event': '' }), body }, 400, /X-GitHub-Event/],
    ];
    for (const [input, status, re] of cases) {
      const r = checkDelivery(input);
      assert.equal(r.ok, false, re.source);
      if (r.ok) continue;
      assert.equal(r.status, status, r.message);
      assert.match(r.message, re);
      assert.ok(!r.message.includes(SECRET) && !r.message.includes(wrongSig.slice(7, 20)), r.message);
    }
    // A signature that was valid for a different body (a replayed header) does not pass.
    assert.equal(
      signatureProblem(SECRET, sign(json({ action: 'completed' })), body),
      'payload signature check failed',
    );
  });

  test('fuzz: random, truncated and oversized bodies never throw', () => {
    const valid = json({ action: 'queued', workflow_job: { id: 1, labels: ['self-hosted'] } });
    for (let i = 0; i < 2000; i++) {
      const kind = i % 4;
      const body =
        kind === 0
          ? randomBytes(Math.floor(Math.random() * 300))
          : kind === 1
            ? valid.subarray(0, Math.floor(Math.random() * valid.length))
            : kind === 2
              ? Buffer.from(JSON.stringify([null, 1, 'x', { a: [] }][i % 4]))
              : valid;
      const signed = i % 3 === 0 ? sign(body) : sign(randomBytes(8));
      const r = checkDelivery({
        secret: i % 5 === 0 ? undefined : SECRET,
        headers: headers(body, { 'x-hub-signature-256': signed }),
        body,
      });
      assert.ok(r.ok || [400, 401, 413, 415].includes(r.status));
    }
    const huge = Buffer.alloc(MAX_DELIVERY_BYTES + 1, 0x20);
    const r = checkDelivery({ secret: SECRET, headers: headers(huge), body: huge });
    assert.equal(!r.ok && r.status, 413);
  });
});
