import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Checking a GitHub webhook delivery before anything reads it (spec §7.5.2, issue 12): size,
 * content type, signature, JSON. Each failure is an HTTP status a sender can act on (ARC answers
 * 500 to all of them) and a message that never quotes the secret or a signature back.
 */

/** GitHub caps payloads at 25 MiB. */
export const MAX_DELIVERY_BYTES = 25 * 1024 * 1024;

export type DeliveryCheck =
  | { ok: true; payload: unknown; event: string; delivery: string | undefined }
  | { ok: false; status: 400 | 401 | 413 | 415; message: string };

const ALGORITHMS: Record<string, 'sha1' | 'sha256' | 'sha512'> = {
  sha1: 'sha1',
  sha256: 'sha256',
  sha512: 'sha512',
};

/** Header lookup that tolerates Node's lower-cased names and repeated headers. */
function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Whether `signature` (`sha256=<hex>`, or `sha1=`/`sha512=`) is the HMAC of `body` under `secret`,
 * compared in constant time. Returns the reason when it is not.
 */
export function signatureProblem(
  secret: string,
  signature: string | undefined,
  body: Buffer,
): string | undefined {
  if (!signature) return 'missing signature';
  const eq = signature.indexOf('=');
  if (eq <= 0) return 'malformed signature: expected <algorithm>=<hex>';
  const alg = ALGORITHMS[signature.slice(0, eq)];
  if (!alg) return 'unknown signature algorithm (sha256, sha1 or sha512)';
  const hex = signature.slice(eq + 1);
  if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length % 2 !== 0) return 'malformed signature: not hexadecimal';
  const given = Buffer.from(hex, 'hex');
  const expected = createHmac(alg, secret).update(body).digest();
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return 'payload signature check failed';
  }
  return undefined;
}

/**
 * Checks one delivery: `body` is the raw request body (already cut at MAX_DELIVERY_BYTES + 1 by the
 * reader; `truncated` says it was longer). With a secret, `X-Hub-Signature-256` (else
 * `X-Hub-Signature`) must sign the raw body. JSON bodies and form bodies (`payload=`) are accepted.
 */
export function checkDelivery(input: {
  secret: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  truncated?: boolean;
}): DeliveryCheck {
  if (input.truncated || input.body.length > MAX_DELIVERY_BYTES) {
    return { ok: false, status: 413, message: `payload larger than GitHub's ${MAX_DELIVERY_BYTES} bytes` };
  }
  const contentType = (header(input.headers, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  const form = contentType === 'application/x-www-form-urlencoded';
  if (contentType !== 'application/json' && !form) {
    return {
      ok: false,
      status: 415,
      message: 'unsupported Content-Type: application/json or application/x-www-form-urlencoded expected',
    };
  }
  if (input.secret) {
    const signature =
      header(input.headers, 'x-hub-signature-256') ?? header(input.headers, 'x-hub-signature');
    const problem = signatureProblem(input.secret, signature, input.body);
    if (problem) return { ok: false, status: 401, message: problem };
  }
  const event = header(input.headers, 'x-github-event');
  if (!event) return { ok: false, status: 400, message: 'missing X-GitHub-Event header' };
  let text = input.body.toString('utf8');
  if (form) {
    const payload = new URLSearchParams(text).get('payload');
    if (payload === null) return { ok: false, status: 400, message: 'form body without a payload field' };
    text = payload;
  }
  let payload: unknown;
  try {
    payload = JSON.parse(text);
  } catch {
    return { ok: false, status: 400, message: 'payload is not valid JSON' };
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    return { ok: false, status: 400, message: 'payload is not a JSON object' };
  }
  return { ok: true, payload, event, delivery: header(input.headers, 'x-github-delivery') };
}
