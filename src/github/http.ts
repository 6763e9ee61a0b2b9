import http from 'node:http';
import https from 'node:https';

/**
 * A `fetch` for Octokit that trusts an extra CA bundle (GitHub Enterprise Server with a private CA)
 * without touching process-wide TLS settings. Built on node:https with one keep-alive agent, and
 * only as much of fetch as @octokit/request uses: method, headers, string/buffer body, signal.
 */
export function fetchWithCaBundle(caBundle: string | Buffer): typeof fetch {
  const agent = new https.Agent({ ca: caBundle, keepAlive: true });
  return (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((value, key) => {
      headers[key] = value;
    });
    const body = init?.body;
    if (body !== undefined && body !== null && typeof body !== 'string' && !(body instanceof Uint8Array)) {
      throw new TypeError('fetchWithCaBundle supports string and Uint8Array bodies only');
    }
    const lib = url.protocol === 'https:' ? https : http;
    return await new Promise<Response>((resolve, reject) => {
      const req = lib.request(
        url,
        {
          method: init?.method ?? 'GET',
          headers,
          ...(url.protocol === 'https:' ? { agent } : {}),
          ...(init?.signal ? { signal: init.signal } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', (err) => reject(new TypeError('fetch failed', { cause: err })));
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            const responseHeaders = new Headers();
            for (const [key, value] of Object.entries(res.headers)) {
              if (Array.isArray(value)) for (const v of value) responseHeaders.append(key, v);
              else if (value !== undefined) responseHeaders.set(key, value);
            }
            const nullBody = status === 204 || status === 205 || status === 304 || status < 200;
            resolve(
              new Response(nullBody ? null : Buffer.concat(chunks), {
                status,
                statusText: res.statusMessage ?? '',
                headers: responseHeaders,
              }),
            );
          });
        },
      );
      req.on('error', (err) => {
        if (err.name === 'AbortError') reject(err);
        else reject(new TypeError('fetch failed', { cause: err }));
      });
      req.end(body ?? undefined);
    });
  }) as typeof fetch;
}
