import {
  createHash,
  createPrivateKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
  X509Certificate,
} from 'node:crypto';
import net from 'node:net';
import { isNotFound, KubeError } from '../runtime/errors.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';

/**
 * paddock's own webhook TLS, with no cert-manager: a self-signed CA and a serving certificate it
 * signs, as PEM, made with node:crypto (ECDSA P-256) and a small DER writer. Optionally kept in a
 * Secret so that every replica serves a certificate of the same CA, i.e. of the same caBundle.
 */

export interface KeyPairPem {
  /** PEM certificate. */
  cert: string;
  /** PEM PKCS#8 private key. */
  key: string;
}

export interface WebhookCertificates {
  ca: KeyPairPem;
  serving: KeyPairPem;
}

export interface CertificateAuthorityOptions {
  commonName?: string | undefined;
  /** Epoch ms (default now). */
  now?: number | undefined;
  /** Default 10 years. */
  validityMs?: number | undefined;
}

export interface ServingCertificateOptions {
  /** DNS subject alternative names, e.g. `paddock-webhook.paddock-system.svc`. */
  dnsNames?: string[] | undefined;
  /** IP subject alternative names, e.g. `127.0.0.1`. */
  ipAddresses?: string[] | undefined;
  commonName?: string | undefined;
  now?: number | undefined;
  /** Default 1 year. */
  validityMs?: number | undefined;
}

const DAY_MS = 24 * 3600_000;
export const DEFAULT_CA_VALIDITY_MS = 3650 * DAY_MS;
export const DEFAULT_SERVING_VALIDITY_MS = 365 * DAY_MS;
/** Back-dating of notBefore, for clocks slightly behind ours. */
const BACKDATE_MS = 3600_000;

// ---- DER ----

function der(tag: number, content: Buffer): Buffer {
  const n = content.length;
  let len: Buffer;
  if (n < 0x80) len = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
    len = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), len, content]);
}

const seq = (...items: Buffer[]) => der(0x30, Buffer.concat(items));
const set = (...items: Buffer[]) => der(0x31, Buffer.concat(items));
const explicit = (n: number, content: Buffer) => der(0xa0 + n, content);
const octets = (b: Buffer) => der(0x04, b);
const bool = (b: boolean) => der(0x01, Buffer.from([b ? 0xff : 0x00]));
const utf8 = (s: string) => der(0x0c, Buffer.from(s, 'utf8'));

/** A non-negative INTEGER from big-endian bytes. */
function unsignedInt(bytes: Buffer): Buffer {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  const b = bytes.subarray(i);
  return der(0x02, b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
}

const smallInt = (n: number) => unsignedInt(Buffer.from([n]));

function oid(dotted: string): Buffer {
  const parts = dotted.split('.').map(Number);
  const out: number[] = [40 * parts[0]! + parts[1]!];
  for (const p of parts.slice(2)) {
    const groups: number[] = [];
    let v = p;
    do {
      groups.unshift(v & 0x7f);
      v = Math.floor(v / 128);
    } while (v > 0);
    for (let i = 0; i < groups.length - 1; i++) groups[i]! |= 0x80;
    out.push(...groups);
  }
  return der(0x06, Buffer.from(out));
}

/** BIT STRING of named bits (bit 0 = most significant bit of the first byte), trailing zeros dropped. */
function namedBits(bits: number[]): Buffer {
  const top = Math.max(...bits);
  const bytes = Buffer.alloc(Math.floor(top / 8) + 1);
  for (const b of bits) bytes[Math.floor(b / 8)]! |= 0x80 >> (b % 8);
  const unused = 7 - (top % 8);
  return der(0x03, Buffer.concat([Buffer.from([unused]), bytes]));
}

const bitString = (b: Buffer) => der(0x03, Buffer.concat([Buffer.from([0]), b]));

/** UTCTime through 2049, GeneralizedTime after (RFC 5280 §4.1.2.5). */
function time(ms: number): Buffer {
  const iso = new Date(Math.floor(ms / 1000) * 1000).toISOString(); // 2025-01-02T03:04:05.000Z
  const digits = iso.slice(0, 19).replace(/[-:T]/g, ''); // 20250102030405
  const year = Number(iso.slice(0, 4));
  return year < 2050
    ? der(0x17, Buffer.from(`${digits.slice(2)}Z`, 'ascii'))
    : der(0x18, Buffer.from(`${digits}Z`, 'ascii'));
}

function ipBytes(ip: string): Buffer {
  if (net.isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  if (!net.isIPv6(ip)) throw new Error(`not an IP address: ${ip}`);
  let text = ip;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const b = ipBytes(v4[1]!);
    text =
      text.slice(0, -v4[1]!.length) + `${b.readUInt16BE(0).toString(16)}:${b.readUInt16BE(2).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  for (const [i, g] of groups.entries()) out.writeUInt16BE(Number.parseInt(g, 16), i * 2);
  return out;
}

const OID = {
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
};

const KEY_USAGE = { digitalSignature: 0, keyCertSign: 5, cRLSign: 6 };

function name(commonName: string): Buffer {
  return seq(
    set(seq(oid(OID.organization), utf8('paddock'))),
    set(seq(oid(OID.commonName), utf8(commonName))),
  );
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return seq(oid(id), ...(critical ? [bool(true)] : []), octets(value));
}

function spkiDer(key: KeyObject): Buffer {
  return key.export({ type: 'spki', format: 'der' });
}

/** A key identifier from the public key (RFC 7093 method 1: leftmost 160 bits of SHA-256). */
function keyId(spki: Buffer): Buffer {
  return createHash('sha256').update(spki).digest().subarray(0, 20);
}

function serialNumber(): Buffer {
  const b = randomBytes(16);
  b[0] = (b[0]! & 0x7f) | 0x01; // positive and exactly 16 bytes
  return b;
}

/** The DER of the subject Name of a certificate (for the issuer field of what it signs). */
function subjectNameDer(certDer: Buffer): Buffer {
  const tlv = (buf: Buffer, at: number) => {
    const first = buf[at + 1]!;
    let len = first;
    let header = 2;
    if (first & 0x80) {
      len = 0;
      for (let i = 0; i < (first & 0x7f); i++) len = len * 256 + buf[at + 2 + i]!;
      header += first & 0x7f;
    }
    return { tag: buf[at]!, start: at + header, end: at + header + len };
  };
  const cert = tlv(certDer, 0);
  const tbs = tlv(certDer, cert.start);
  let at = tbs.start;
  const fields: { tag: number; from: number; end: number }[] = [];
  while (at < tbs.end && fields.length < 6) {
    const f = tlv(certDer, at);
    fields.push({ tag: f.tag, from: at, end: f.end });
    at = f.end;
  }
  // [0] version (optional), serial, signature algorithm, issuer, validity, subject
  const subject = fields[0]?.tag === 0xa0 ? fields[5] : fields[4];
  if (subject?.tag !== 0x30) throw new Error('unreadable CA certificate');
  return certDer.subarray(subject.from, subject.end);
}

interface CertificateInput {
  subject: string;
  issuer: Buffer;
  subjectPublicKey: KeyObject;
  issuerPublicKey: KeyObject;
  signingKey: KeyObject;
  notBefore: number;
  notAfter: number;
  extensions: Buffer[];
}

function certificatePem(input: CertificateInput): string {
  const algorithm = seq(oid(OID.ecdsaWithSha256));
  const subjectSpki = spkiDer(input.subjectPublicKey);
  const tbs = seq(
    explicit(0, smallInt(2)), // v3
    unsignedInt(serialNumber()),
    algorithm,
    input.issuer,
    seq(time(input.notBefore), time(input.notAfter)),
    name(input.subject),
    subjectSpki,
    explicit(
      3,
      seq(
        extension(OID.subjectKeyIdentifier, false, octets(keyId(subjectSpki))),
        extension(OID.authorityKeyIdentifier, false, seq(der(0x80, keyId(spkiDer(input.issuerPublicKey))))),
        ...input.extensions,
      ),
    ),
  );
  const signature = sign('sha256', tbs, input.signingKey); // DER ECDSA-Sig-Value
  const cert = seq(tbs, algorithm, bitString(signature));
  const b64 = cert
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}

function newKeyPair(): { publicKey: KeyObject; privateKey: KeyObject } {
  return generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
}

function keyPem(key: KeyObject): string {
  return key.export({ type: 'pkcs8', format: 'pem' }).toString();
}

/** A self-signed CA that may sign end-entity certificates only. */
export function generateCertificateAuthority(options: CertificateAuthorityOptions = {}): KeyPairPem {
  const now = options.now ?? Date.now();
  const cn = options.commonName ?? 'paddock-webhook-ca';
  const { publicKey, privateKey } = newKeyPair();
  const cert = certificatePem({
    subject: cn,
    issuer: name(cn),
    subjectPublicKey: publicKey,
    issuerPublicKey: publicKey,
    signingKey: privateKey,
    notBefore: now - BACKDATE_MS,
    notAfter: now + (options.validityMs ?? DEFAULT_CA_VALIDITY_MS),
    extensions: [
      extension(OID.basicConstraints, true, seq(bool(true), smallInt(0))),
      extension(
        OID.keyUsage,
        true,
        namedBits([KEY_USAGE.digitalSignature, KEY_USAGE.keyCertSign, KEY_USAGE.cRLSign]),
      ),
    ],
  });
  return { cert, key: keyPem(privateKey) };
}

/** A TLS server certificate for the given names, signed by `ca`. */
export function issueServingCertificate(ca: KeyPairPem, options: ServingCertificateOptions): KeyPairPem {
  const dnsNames = options.dnsNames ?? [];
  const ips = options.ipAddresses ?? [];
  if (dnsNames.length + ips.length === 0) throw new Error('a serving certificate needs a DNS name or an IP');
  const san = seq(
    ...dnsNames.map((d) => der(0x82, Buffer.from(d, 'ascii'))),
    ...ips.map((ip) => der(0x87, ipBytes(ip))),
  );
  return issueLeaf(ca, {
    subject: options.commonName ?? dnsNames[0] ?? ips[0]!,
    usage: OID.serverAuth,
    san,
    now: options.now,
    validityMs: options.validityMs ?? DEFAULT_SERVING_VALIDITY_MS,
  });
}

/**
 * A TLS client certificate signed by `ca`, e.g. for the API server to present to the webhook when
 * paddock runs with `--webhook-client-ca`.
 */
export function issueClientCertificate(
  ca: KeyPairPem,
  options: { commonName: string; now?: number | undefined; validityMs?: number | undefined },
): KeyPairPem {
  return issueLeaf(ca, {
    subject: options.commonName,
    usage: OID.clientAuth,
    san: undefined,
    now: options.now,
    validityMs: options.validityMs ?? DEFAULT_SERVING_VALIDITY_MS,
  });
}

function issueLeaf(
  ca: KeyPairPem,
  o: { subject: string; usage: string; san: Buffer | undefined; now: number | undefined; validityMs: number },
): KeyPairPem {
  const now = o.now ?? Date.now();
  const caCert = new X509Certificate(ca.cert);
  const caKey = createPrivateKey(ca.key);
  if (caKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new Error('the CA key must be an ECDSA P-256 key');
  }
  const notAfter = Math.min(now + o.validityMs, Date.parse(caCert.validTo));
  const { publicKey, privateKey } = newKeyPair();
  const cert = certificatePem({
    subject: o.subject,
    issuer: subjectNameDer(caCert.raw),
    subjectPublicKey: publicKey,
    issuerPublicKey: caCert.publicKey,
    signingKey: caKey,
    notBefore: now - BACKDATE_MS,
    notAfter,
    extensions: [
      extension(OID.basicConstraints, true, seq()),
      extension(OID.keyUsage, true, namedBits([KEY_USAGE.digitalSignature])),
      extension(OID.extKeyUsage, false, seq(oid(o.usage))),
      ...(o.san ? [extension(OID.subjectAltName, false, o.san)] : []),
    ],
  });
  return { cert, key: keyPem(privateKey) };
}

/** A new CA and a serving certificate it signed. */
export function generateWebhookCertificates(
  options: ServingCertificateOptions & { caValidityMs?: number | undefined },
): WebhookCertificates {
  const ca = generateCertificateAuthority({ now: options.now, validityMs: options.caValidityMs });
  return { ca, serving: issueServingCertificate(ca, options) };
}

/**
 * Whether `serving` is a certificate of `ca` that covers every name and stays valid for more than
 * `minRemainingMs` after `now`, and the CA too.
 */
export function certificatesUsable(
  certs: WebhookCertificates,
  options: ServingCertificateOptions & { minRemainingMs?: number },
): boolean {
  try {
    const now = options.now ?? Date.now();
    const min = options.minRemainingMs ?? 30 * DAY_MS;
    const ca = new X509Certificate(certs.ca.cert);
    const serving = new X509Certificate(certs.serving.cert);
    if (!ca.ca || !serving.verify(ca.publicKey) || !serving.checkIssued(ca)) return false;
    if (!serving.checkPrivateKey(createPrivateKey(certs.serving.key))) return false;
    for (const c of [ca, serving]) {
      if (Date.parse(c.validTo) - now <= min || Date.parse(c.validFrom) > now) return false;
    }
    return (
      (options.dnsNames ?? []).every((d) => serving.checkHost(d, { wildcards: false }) === d) &&
      (options.ipAddresses ?? []).every((ip) => serving.checkIP(ip) !== undefined)
    );
  } catch {
    return false;
  }
}

function caUsable(ca: KeyPairPem, now: number, minRemainingMs: number): boolean {
  try {
    const c = new X509Certificate(ca.cert);
    const key = createPrivateKey(ca.key);
    return (
      c.ca &&
      key.asymmetricKeyDetails?.namedCurve === 'prime256v1' &&
      c.checkPrivateKey(key) &&
      Date.parse(c.validTo) - now > minRemainingMs
    );
  } catch {
    return false;
  }
}

// ---- persistence in a Secret ----

const SECRET_KEYS = { caCert: 'ca.crt', caKey: 'ca.key', cert: 'tls.crt', key: 'tls.key' } as const;

interface SecretBody {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
  type?: string;
  data?: Record<string, string>;
}

function fromSecret(secret: SecretBody): WebhookCertificates | undefined {
  const d = secret.data ?? {};
  const get = (k: string) => (d[k] ? Buffer.from(d[k], 'base64').toString('utf8') : undefined);
  const caCert = get(SECRET_KEYS.caCert);
  const caKey = get(SECRET_KEYS.caKey);
  const cert = get(SECRET_KEYS.cert);
  const key = get(SECRET_KEYS.key);
  if (!caCert || !caKey || !cert || !key) return undefined;
  return { ca: { cert: caCert, key: caKey }, serving: { cert, key } };
}

function toSecretData(c: WebhookCertificates): Record<string, string> {
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  return {
    [SECRET_KEYS.caCert]: b64(c.ca.cert),
    [SECRET_KEYS.caKey]: b64(c.ca.key),
    [SECRET_KEYS.cert]: b64(c.serving.cert),
    [SECRET_KEYS.key]: b64(c.serving.key),
  };
}

export interface PersistedCertificatesOptions extends ServingCertificateOptions {
  http: KubeHttp;
  namespace: string;
  /** Default `paddock-webhook-tls`. */
  secretName?: string | undefined;
  /** Renew certificates with less validity left than this (default 30 days). */
  minRemainingMs?: number | undefined;
}

/**
 * The webhook certificates kept in a `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`, `ca.crt`,
 * `ca.key`), shared by every replica. Reused while usable; a serving certificate that is near
 * expiry or lacks a name is reissued by the same CA (the caBundle stays); a missing or expiring CA
 * is replaced with everything. Replicas racing to write get a conflict and take the winner's.
 */
export async function loadOrCreateWebhookCertificates(
  options: PersistedCertificatesOptions,
): Promise<WebhookCertificates> {
  const { http, namespace } = options;
  const secretName = options.secretName ?? 'paddock-webhook-tls';
  const minRemainingMs = options.minRemainingMs ?? 30 * DAY_MS;
  const base = `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`;
  for (let attempt = 0; ; attempt++) {
    const now = options.now ?? Date.now();
    let existing: SecretBody | undefined;
    try {
      existing = await http.request<SecretBody>('GET', `${base}/${encodeURIComponent(secretName)}`);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const stored = existing && fromSecret(existing);
    if (stored && certificatesUsable(stored, { ...options, now, minRemainingMs })) return stored;

    const serving: ServingCertificateOptions = { ...options, now };
    const certs =
      stored && caUsable(stored.ca, now, minRemainingMs)
        ? { ca: stored.ca, serving: issueServingCertificate(stored.ca, serving) }
        : generateWebhookCertificates(serving);
    const body = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'kubernetes.io/tls',
      metadata: {
        name: secretName,
        namespace,
        labels: { 'app.kubernetes.io/managed-by': 'paddock' },
        ...(existing?.metadata?.resourceVersion
          ? { resourceVersion: existing.metadata.resourceVersion }
          : {}),
      },
      data: toSecretData(certs),
    };
    try {
      if (existing) {
        // A Secret of another type cannot change type in place.
        if (existing.type !== undefined && existing.type !== 'kubernetes.io/tls') {
          throw new Error(
            `secret ${namespace}/${secretName} exists with type ${existing.type}; expected kubernetes.io/tls`,
          );
        }
        await http.request('PUT', `${base}/${encodeURIComponent(secretName)}`, { body });
      } else {
        await http.request('POST', base, { body });
      }
      return certs;
    } catch (err) {
      const lostRace = err instanceof KubeError && (err.code === 409 || err.reason === 'AlreadyExists');
      if (!lostRace || attempt >= 4) throw err;
    }
  }
}
