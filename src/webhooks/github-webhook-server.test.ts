import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { planWorkflowJob } from '../controllers/workflow-job-plan.ts';
import { signWebhookBody } from '../testenv/github-double/webhook.ts';
import { type DeliveryAnswer, GitHubWebhookServer } from './github-webhook-server.ts';

const SECRET = 'wh-secret-0123456789';

/** One raw HTTP exchange (fetch would refuse some of the malformed requests sent here). */
function send(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: Buffer | string; chunked?: boolean },
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: '/any/path',
        method: init.method ?? 'POST',
        headers: init.headers ?? {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            headers: res.headers,
          }),
        );
      },
    );
    req.on('error', reject);
    if (init.body !== undefined) {
      if (init.chunked) {
        const b = Buffer.from(init.body);
        for (let i = 0; i < b.length; i += 1 << 20) req.write(b.subarray(i, i + (1 << 20)));
      } else req.write(init.body);
    }
    req.end();
  });
}

function signed(payload: unknown, event = 'workflow_job', delivery?: string) {
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  return {
    headers: {
      'content-type': 'application/json',
      'x-github-event': event,
      ...(delivery ? { 'x-github-delivery': delivery } : {}),
      'x-hub-signature-256': signWebhookBody(SECRET, body),
    },
    body,
  };
}

const queued = (id: number) => ({
  action: 'queued',
  workflow_job: { id, labels: ['self-hosted'] },
  repository: { name: 'app', owner: { login: 'acme', type: 'Organization' } },
});

describe('GitHubWebhookServer', () => {
  const handled: { event: string; payload: unknown }[] = [];
  let answer: (event: string, payload: unknown) => DeliveryAnswer = () => ({ status: 200, body: 'ok' });
  let ready = true;
  const server = new GitHubWebhookServer({
    host: '127.0.0.1',
    port: 0,
    secret: SECRET,
    handle: async (event, payload) => {
      handled.push({ event, payload });
      return answer(event, payload);
    },
    ready: () => ready,
    log: pino({ level: 'silent' }),
  });
  let url = '';
  before(async () => {
    await server.start();
    url = server.url;
  });
  after(() => server.stop());

  test('GET on any path says it runs; other methods are refused', async () => {
    assert.deepEqual((await send(url, { method: 'GET' })).body, 'webhook server is running\n');
    const put = await send(url, { method: 'PUT', body: 'x' });
    assert.equal(put.status, 405);
    assert.equal(put.headers.allow, 'GET, HEAD, POST');
  });

  test('bad input is answered with its status and reason, and never reaches the handler', async () => {
    handled.length = 0;
    const good = signed(queued(1));
    const cases: [string, Parameters<typeof send>[1], number, RegExp][] = [
      [
        'no signature',
        { headers: { ...good.headers, 'x-hub-signature-256': '' }, body: good.body },
        401,
        /missing signature/,
      ],
      [
        'wrong secret',
        {
          headers: { ...good.headers, 'x-hub-signature-256': signWebhookBody('other', good.body) },
          body: good.body,
        },
        401,
        /signature check failed/,
      ],
      [
        'tampered body',
        { headers: good.headers, body: good.body.replace('1', '2') },
        401,
        /signature check failed/,
      ],
      [
        'content type',
        { headers: { ...good.headers, 'content-type': 'text/plain' }, body: good.body },
        415,
        /Content-Type/,
      ],
      ['not JSON', signed('{"action":'), 400, /not valid JSON/],
      [
        'no event header',
        { headers: { ...good.headers, 'x-github-event': '' }, body: good.body },
        400,
        /X-GitHub-Event/,
      ],
    ];
    for (const [what, init, status, reason] of cases) {
      const res = await send(url, init);
      assert.equal(res.status, status, what);
      assert.match(res.body, reason, what);
      assert.ok(!res.body.includes(SECRET), what);
    }
    assert.equal(handled.length, 0);
  });

  test('over 25 MiB is 413, whether declared up front or streamed', async () => {
    const big = Buffer.alloc(25 * 1024 * 1024 + 10, 0x20);
    // Declared too large: answered from the headers, before any of the body is read.
    const declared = await send(url, {
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'ping',
        'content-length': String(big.length),
      },
      body: '{',
    });
    assert.equal(declared.status, 413);
    const streamed = await send(url, {
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'ping',
        'transfer-encoding': 'chunked',
      },
      body: big,
      chunked: true,
    });
    assert.equal(streamed.status, 413);
    assert.match(streamed.body, /larger than GitHub's/);
  });

  test('a delivery ID is handled once; one that was turned away can be redelivered', async () => {
    handled.length = 0;
    answer = () => ({ status: 200, body: 'scaled hra by 1' });
    const first = await send(url, signed(queued(2), 'workflow_job', 'd-1'));
    const again = await send(url, signed(queued(2), 'workflow_job', 'd-1'));
    assert.equal(first.body, 'scaled hra by 1\n');
    assert.equal(again.status, 200);
    assert.match(again.body, /handled already/);
    assert.equal(handled.length, 1);

    answer = () => ({ status: 200, body: 'scaled hra by 1', queueFull: true });
    const full = await send(url, signed(queued(3), 'workflow_job', 'd-2'));
    assert.equal(full.status, 503);
    assert.equal(full.headers['retry-after'], '5');
    answer = () => ({ status: 200, body: 'scaled hra by 1' });
    assert.equal((await send(url, signed(queued(3), 'workflow_job', 'd-2'))).status, 200);
    assert.equal(handled.length, 3);
  });

  test('before the caches have synced, deliveries are refused with 503 (not a wrong "no autoscaler")', async () => {
    handled.length = 0;
    ready = false;
    const res = await send(url, signed(queued(4), 'workflow_job', 'd-3'));
    ready = true;
    assert.equal(res.status, 503);
    assert.equal(handled.length, 0);
    assert.equal((await send(url, signed(queued(4), 'workflow_job', 'd-3'))).status, 200);
  });

  test('fuzz: random, truncated and type-confused signed bodies are 200 or 400, never a crash or a scale', async () => {
    answer = (event, payload) => planWorkflowJob({ event, payload, hras: [] });
    const base = JSON.stringify(queued(5));
    const bodies: string[] = [];
    for (let i = 0; i < 40; i++) bodies.push(base.slice(0, Math.floor((base.length * i) / 40)));
    for (let i = 0; i < 40; i++)
      bodies.push(randomBytes(1 + (i % 64) * 7).toString(i % 2 ? 'latin1' : 'base64'));
    const confused: unknown[] = [
      null,
      [],
      1,
      '"x"',
      { action: 5 },
      { action: 'queued', workflow_job: 'x' },
      { action: 'queued', workflow_job: { id: '5' }, repository: {} },
      {
        action: 'queued',
        workflow_job: { id: -1, labels: [1] },
        repository: { name: 'a', owner: { login: 'b' } },
      },
      { action: 'completed', workflow_job: { id: 1e308 }, repository: { name: '', owner: null } },
      { __proto__: { action: 'queued' } },
    ];
    for (const c of confused) bodies.push(typeof c === 'string' ? c : JSON.stringify(c));
    for (const [i, body] of bodies.entries()) {
      const res = await send(url, signed(body, i % 3 === 0 ? 'ping' : 'workflow_job', `f-${i}`));
      assert.ok(
        res.status === 200 || res.status === 400,
        `${res.status} for ${JSON.stringify(body).slice(0, 80)}`,
      );
      assert.doesNotMatch(res.body, /^scaled/);
    }
    const alive = await send(url, { method: 'GET' });
    assert.equal(alive.status, 200);
  });
});
