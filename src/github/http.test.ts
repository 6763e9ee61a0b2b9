import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { BufferedResponse, MAX_UNPACKED_BYTES, nodeFetch, ResponseHeaderList } from './http.ts';

interface Seen {
  method: string;
  url: string;
  host: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** Two origins on 127.0.0.1 (two ports) that record what reaches them and answer by path. */
function origin(seen: Seen[], answer: (req: IncomingMessage, res: ServerResponse, body: string) => void) {
  const server = http.createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    seen.push({
      method: req.method ?? '',
      url: req.url ?? '',
      host: req.headers.host ?? '',
      headers: req.headers,
      body,
    });
    answer(req, res, body);
  });
  return {
    server,
    async start() {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const bomb = gzipSync(Buffer.alloc(MAX_UNPACKED_BYTES + 1), { level: 9 });

describe('nodeFetch (the fetch paddock gives Octokit)', () => {
  const seen: Seen[] = [];
  let home = '';
  let elsewhere = '';
  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(JSON.stringify(body));
  };
  const a = origin(seen, (req, res, body) => {
    const path = req.url ?? '';
    if (path === '/json') return json(res, 200, { ok: true }, { etag: 'W/"1"', link: '<x>; rel="next"' });
    if (path === '/echo') return json(res, 201, { method: req.method, body });
    if (path === '/gzip' || path === '/deflate' || path === '/br') {
      const raw = Buffer.from(JSON.stringify({ packed: path.slice(1) }));
      const packed = { '/gzip': gzipSync, '/deflate': deflateSync, '/br': brotliCompressSync }[path](raw);
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': path.slice(1) });
      return res.end(packed);
    }
    if (path === '/bomb') {
      // About 64 KiB on the wire, past MAX_UNPACKED_BYTES unpacked.
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      return res.end(bomb);
    }
    if (path === '/not-modified') {
      res.writeHead(304, { etag: 'W/"1"' });
      return res.end();
    }
    if (path.startsWith('/moved/')) {
      const [, , status, where] = path.split('/');
      const target = where === 'away' ? `${elsewhere}/echo` : '/echo';
      res.writeHead(Number(status), { location: target });
      return res.end();
    }
    if (path === '/loop') {
      res.writeHead(302, { location: '/loop' });
      return res.end();
    }
    if (path === '/slow-body') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"partial":');
      return; // never ends
    }
    if (path === '/cut') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"cut":');
      setTimeout(() => res.socket?.destroy(), 20);
      return;
    }
    json(res, 404, { message: 'Not Found' });
  });
  const b = origin(seen, (req, res, body) => json(res, 200, { elsewhere: true, method: req.method, body }));
  const fetch = nodeFetch();

  before(async () => {
    home = await a.start();
    elsewhere = await b.start();
  });
  after(async () => {
    await a.stop();
    await b.stop();
  });

  test('a JSON answer: status, headers as fetch reads them, url, body; compression asked for', async () => {
    seen.length = 0;
    const res = await fetch(`${home}/json`, { headers: { Accept: 'application/json', 'X-Custom': 'y' } });
    assert.equal(res.status, 200);
    assert.equal(res.ok, true);
    assert.equal(res.url, `${home}/json`);
    assert.equal(res.headers.get('ETag'), 'W/"1"');
    assert.equal(res.headers.get('missing'), null);
    const names = [...res.headers].map(([k]) => k);
    assert.deepEqual(names, [...names].sort(), 'iterated in name order, as Headers is');
    assert.ok(names.includes('link') && names.every((n) => n === n.toLowerCase()));
    assert.deepEqual(await res.json(), { ok: true });
    assert.equal(seen[0]?.headers.accept, 'application/json');
    assert.equal(seen[0]?.headers['x-custom'], 'y');
    assert.equal(seen[0]?.headers['accept-encoding'], 'gzip, deflate, br');
  });

  test('gzip, deflate and brotli answers are unpacked; a compression bomb is refused', async () => {
    for (const enc of ['gzip', 'deflate', 'br']) {
      const res = await fetch(`${home}/${enc}`);
      assert.deepEqual(JSON.parse(await res.text()), { packed: enc }, enc);
    }
    assert.ok(bomb.length < 1024 * 1024);
    await assert.rejects(fetch(`${home}/bomb`), (err: unknown) => {
      assert.ok(err instanceof TypeError);
      assert.equal(err.message, 'fetch failed');
      return true;
    });
  });

  test('a body is sent; 304 and 404 are answers, not errors', async () => {
    const posted = await fetch(`${home}/echo`, { method: 'post', body: '{"a":1}' });
    assert.deepEqual(await posted.json(), { method: 'POST', body: '{"a":1}' });
    const bytes = await fetch(`${home}/echo`, { method: 'PUT', body: new TextEncoder().encode('raw') });
    assert.deepEqual(await bytes.json(), { method: 'PUT', body: 'raw' });
    const notModified = await fetch(`${home}/not-modified`);
    assert.equal(notModified.status, 304);
    assert.equal(await notModified.text(), '');
    const missing = await fetch(`${home}/nowhere`);
    assert.equal(missing.status, 404);
    assert.equal(missing.ok, false);
    assert.deepEqual(await missing.json(), { message: 'Not Found' });
    await assert.rejects(
      fetch(`${home}/echo`, { method: 'POST', body: new Blob(['x']) as unknown as string }),
      TypeError,
    );
  });

  test('redirects: followed; 303 (and 301/302 of a POST) become GET; Authorization never leaves the origin', async () => {
    seen.length = 0;
    const kept = await fetch(`${home}/moved/307/here`, {
      method: 'POST',
      body: 'payload',
      headers: { authorization: 'Bearer secret', 'content-type': 'text/plain' },
    });
    assert.deepEqual(await kept.json(), { method: 'POST', body: 'payload' });
    assert.equal(kept.url, `${home}/echo`);
    assert.equal(seen.at(-1)?.headers.authorization, 'Bearer secret', 'same origin: kept');

    for (const status of [303, 301, 302]) {
      const res = await fetch(`${home}/moved/${status}/here`, { method: 'POST', body: 'payload' });
      assert.deepEqual(await res.json(), { method: 'GET', body: '' }, String(status));
    }
    const del = await fetch(`${home}/moved/302/here`, { method: 'DELETE' });
    assert.deepEqual(await del.json(), { method: 'DELETE', body: '' }, 'only a POST becomes a GET on 302');

    seen.length = 0;
    const away = await fetch(`${home}/moved/308/away`, { headers: { authorization: 'Bearer secret' } });
    assert.deepEqual(await away.json(), { elsewhere: true, method: 'GET', body: '' });
    assert.equal(away.url, `${elsewhere}/echo`);
    assert.equal(seen.length, 2);
    assert.equal(seen[0]?.headers.authorization, 'Bearer secret');
    assert.equal(seen[1]?.headers.authorization, undefined, 'another origin never sees the token');

    const manual = await fetch(`${home}/moved/301/here`, { redirect: 'manual' });
    assert.equal(manual.status, 301);
    assert.equal(manual.headers.get('location'), '/echo');
    await assert.rejects(fetch(`${home}/moved/301/here`, { redirect: 'error' }), TypeError);
    await assert.rejects(fetch(`${home}/loop`), (err: unknown) => {
      assert.ok(err instanceof TypeError);
      assert.match(String((err as { cause?: Error }).cause?.message), /too many redirects/);
      return true;
    });
  });

  test('an abort rejects with the signal’s reason, also while the body arrives; network errors are TypeErrors', async () => {
    const reason = new DOMException('no answer within 50 ms', 'TimeoutError');
    await assert.rejects(fetch(`${home}/slow-body`, { signal: AbortSignal.timeout(50) }), {
      name: 'TimeoutError',
    });
    const controller = new AbortController();
    setTimeout(() => controller.abort(reason), 50);
    await assert.rejects(fetch(`${home}/slow-body`, { signal: controller.signal }), (err) => err === reason);

    await assert.rejects(
      fetch(`${home}/cut`),
      (err: unknown) => err instanceof TypeError && err.message === 'fetch failed',
    );
    const closed = origin([], () => undefined);
    const url = await closed.start();
    await closed.stop();
    await assert.rejects(fetch(`${url}/json`), (err: unknown) => {
      assert.ok(err instanceof TypeError);
      assert.equal(err.message, 'fetch failed');
      assert.match(String((err.cause as Error).message), /ECONNREFUSED/);
      return true;
    });
  });

  test('loading it does not load undici (the global fetch, 30–50 ms of a start)', async () => {
    const script = `
      const { nodeFetch } = await import(${JSON.stringify(new URL('./http.ts', import.meta.url).href)});
      const res = await nodeFetch()(${JSON.stringify(`${home}/gzip`)});
      await res.json();
      process.stdout.write(JSON.stringify(process.moduleLoadList.filter((m) => m.includes('undici'))));`;
    // Not spawnSync: the child asks this process's server.
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
    assert.deepEqual(JSON.parse(stdout), []);
  });
});

describe('BufferedResponse and ResponseHeaderList', () => {
  test('a fetch Response is read whole into one', async () => {
    const res = new Response('{"x":1}', { status: 201, statusText: 'Created', headers: { ETag: '"e"' } });
    const copy = await BufferedResponse.read(res);
    assert.equal(copy.status, 201);
    assert.equal(copy.statusText, 'Created');
    assert.equal(copy.headers.get('etag'), '"e"');
    assert.deepEqual(await copy.json(), { x: 1 });
    assert.equal(await BufferedResponse.read(copy as unknown as Response), copy, 'already read: itself');
    assert.equal(new TextDecoder().decode(await copy.arrayBuffer()), '{"x":1}');
  });

  test('repeated headers are joined as fetch joins them', () => {
    const h = new ResponseHeaderList({ 'set-cookie': ['a=1', 'b=2'], Link: 'x' });
    assert.equal(h.get('Set-Cookie'), 'a=1, b=2');
    assert.equal(h.has('LINK'), true);
    const seen: string[] = [];
    h.forEach((v, k) => {
      seen.push(`${k}=${v}`);
    });
    assert.deepEqual(seen, ['link=x', 'set-cookie=a=1, b=2']);
  });
});
