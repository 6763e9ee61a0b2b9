import { existsSync, readFileSync, statSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import type https from 'node:https';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { ClusterAccess, CurrentCluster } from './kube-http.ts';

/**
 * paddock's own kubeconfig loader, so that `paddock run` need not load @kubernetes/client-node (about
 * 87 MiB of resident memory) only to read one file. It covers what a controller meets in practice:
 *
 * - where: `--kubeconfig`, else the files in KUBECONFIG (merged as kubectl merges them: the first file
 *   that names a cluster, user or context wins it, the first that sets current-context wins that),
 *   else ~/.kube/config, else the pod's service account (in-cluster);
 * - clusters: server, certificate-authority(-data), insecure-skip-tls-verify, tls-server-name;
 * - users: token, tokenFile, client-certificate(-data) + client-key(-data), username + password,
 *   impersonation (as, as-groups, as-uid, as-user-extra), and exec credential plugins
 *   (client.authentication.k8s.io/v1 and v1beta1).
 *
 * Token files (tokenFile, the in-cluster token) are read again whenever they change on disk, since
 * projected service account tokens rotate. Relative paths are relative to the kubeconfig file that
 * holds them. proxy-url and the legacy auth-provider plugins are refused with a clear error. Only the
 * current context, its cluster and its user are validated; other entries may hold anything.
 *
 * No error message ever holds a token, password, key or plugin output.
 */

/** The default service account directory of a pod. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Exec plugins still running after this long are killed, and their run fails. */
const DEFAULT_EXEC_TIMEOUT_MS = 60_000;
const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'];
const EXEC_OUTPUT_LIMIT = 1024 * 1024;
/** The cluster extension whose content an exec plugin gets as spec.cluster.config. */
const EXEC_CLUSTER_EXTENSION = 'client.authentication.k8s.io/exec';

export class KubeconfigError extends Error {
  override name = 'KubeconfigError';
}

export interface KubeconfigOptions {
  /** An explicit kubeconfig file (`--kubeconfig`); without one, KUBECONFIG, ~/.kube/config, in-cluster. */
  path?: string | undefined;
  /** Where KUBECONFIG, HOME, KUBERNETES_SERVICE_HOST/PORT are read, and the base of exec plugins' environment. */
  env?: NodeJS.ProcessEnv;
  /** The home directory holding `.kube/config` (default: env.HOME, else the OS's). */
  home?: string;
  /** The service account directory for in-cluster use (default SERVICE_ACCOUNT_DIR). */
  serviceAccountDir?: string;
  /** Epoch ms, for exec credential expiry (default Date.now). */
  now?: () => number;
  /** How long an exec plugin may run (default 60 s). */
  execTimeoutMs?: number;
}

type Obj = Record<string, unknown>;

/** A named entry of one of a kubeconfig's lists, with the directory of the file it came from. */
interface Entry {
  name: string;
  body: Obj;
  dir: string;
  file: string;
}

interface Merged {
  clusters: Map<string, Entry>;
  users: Map<string, Entry>;
  contexts: Map<string, Entry>;
  currentContext: string | undefined;
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * JSON (what `kubectl config view -o json` and many tools write) is YAML too, and needs no YAML
 * parser; the parser (about 70 modules, tens of milliseconds at start) loads only for a YAML file,
 * and never in a cluster, where paddock reads its service account instead.
 */
function parseKubeconfigText(text: string): unknown {
  if (text.trimStart().startsWith('{')) {
    try {
      return JSON.parse(text);
    } catch {
      // Flow-style YAML can start with a brace too: the YAML parser decides.
    }
  }
  const yaml = createRequire(import.meta.url)('yaml') as typeof import('yaml');
  return yaml.parse(text);
}

function parseFile(file: string): { doc: Obj; dir: string } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new KubeconfigError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  let doc: unknown;
  try {
    doc = parseKubeconfigText(text);
  } catch (err) {
    // YAML errors quote a line and column, never the text; still, keep only their first line.
    throw new KubeconfigError(`${file} is not valid YAML: ${String((err as Error).message).split('\n')[0]}`);
  }
  if (doc === null || doc === undefined) doc = {};
  if (!isObj(doc)) throw new KubeconfigError(`${file} is not a kubeconfig (not a mapping)`);
  return { doc, dir: path.dirname(path.resolve(file)) };
}

/** Adds one file's entries where their names are still free (kubectl's merge: the first file wins). */
function mergeFile(into: Merged, file: string): void {
  const { doc, dir } = parseFile(file);
  const lists = [
    ['clusters', 'cluster', into.clusters],
    ['users', 'user', into.users],
    ['contexts', 'context', into.contexts],
  ] as const;
  for (const [list, key, map] of lists) {
    const items = doc[list];
    if (items === undefined || items === null) continue;
    if (!Array.isArray(items)) throw new KubeconfigError(`${file}: ${list} is not a list`);
    items.forEach((item, i) => {
      if (!isObj(item) || typeof item.name !== 'string' || item.name === '') {
        throw new KubeconfigError(`${file}: ${list}[${i}] has no name`);
      }
      const body = item[key] ?? {};
      if (!isObj(body)) throw new KubeconfigError(`${file}: ${list}[${i}].${key} is not a mapping`);
      if (!map.has(item.name)) map.set(item.name, { name: item.name, body, dir, file });
    });
  }
  const current = doc['current-context'];
  if (into.currentContext === undefined && typeof current === 'string' && current !== '') {
    into.currentContext = current;
  }
}

/** A string field (numbers too: YAML reads an unquoted `123` as one), or undefined when absent or empty. */
function str(o: Obj, key: string, where: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return String(v);
  throw new KubeconfigError(`${where}: ${key} must be a string`);
}

function bool(o: Obj, key: string, where: string): boolean {
  const v = o[key];
  if (v === undefined || v === null) return false;
  if (typeof v === 'boolean') return v;
  throw new KubeconfigError(`${where}: ${key} must be true or false`);
}

function stringList(o: Obj, key: string, where: string): string[] {
  const v = o[key];
  if (v === undefined || v === null) return [];
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v;
  throw new KubeconfigError(`${where}: ${key} must be a list of strings`);
}

const resolveIn = (dir: string, p: string) => path.resolve(dir, p);

function readBytes(file: string, what: string, where: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new KubeconfigError(
      `${where}: cannot read the ${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
    );
  }
}

/** PEM bytes from `<key>-data` (base64) or the file `<key>` (relative to the kubeconfig), data first. */
function pemField(entry: Entry, key: string, what: string, where: string): Buffer | undefined {
  const data = str(entry.body, `${key}-data`, where);
  if (data !== undefined) return Buffer.from(data, 'base64');
  const file = str(entry.body, key, where);
  if (file !== undefined) return readBytes(resolveIn(entry.dir, file), what, where);
  return undefined;
}

/**
 * A token kept in a file, read again whenever the file changes (its inode, size or times): projected
 * service account tokens are rewritten about hourly. A file that vanishes for a moment keeps the last
 * token in use.
 */
class FileToken {
  readonly file: string;
  private version = '';
  private token = '';

  constructor(file: string, where: string) {
    this.file = file;
    let text: string;
    try {
      const st = statSync(file);
      text = readFileSync(file, 'utf8').trim();
      this.version = fileVersion(st);
    } catch (err) {
      throw new KubeconfigError(
        `${where}: cannot read the token file ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
      );
    }
    if (text === '') throw new KubeconfigError(`${where}: the token file ${file} is empty`);
    this.token = text;
  }

  async current(): Promise<string> {
    const st = await stat(this.file).catch(() => undefined);
    if (!st) return this.token;
    const version = fileVersion(st);
    if (version !== this.version) {
      const text = (await readFile(this.file, 'utf8').catch(() => '')).trim();
      // Caught half-written: keep the last token and look again on the next request.
      if (text === '') return this.token;
      this.token = text;
      this.version = version;
    }
    return this.token;
  }
}

const fileVersion = (st: { ino: number; size: number; mtimeMs: number; ctimeMs: number }) =>
  `${st.ino}/${st.size}/${st.mtimeMs}/${st.ctimeMs}`;

interface ExecSpec {
  command: string;
  args: string[];
  env: { name: string; value: string }[];
  apiVersion: string;
  installHint: string | undefined;
  provideClusterInfo: boolean;
}

interface ExecResult {
  token?: string;
  cert?: string;
  key?: string;
  /** Epoch ms; absent: valid as long as the process runs. */
  expiresAt?: number;
}

/**
 * An exec credential plugin: run on first use, its credential kept until its expirationTimestamp,
 * run again after that. Concurrent callers share one run.
 */
class ExecPlugin {
  private readonly spec: ExecSpec;
  private readonly execInfo: string;
  private readonly env: NodeJS.ProcessEnv;
  private readonly now: () => number;
  private readonly timeoutMs: number;
  private cached: ExecResult | undefined;
  private running: Promise<ExecResult> | undefined;
  /** How many times the plugin ran (tests). */
  runs = 0;

  constructor(o: {
    spec: ExecSpec;
    execInfo: string;
    env: NodeJS.ProcessEnv;
    now: () => number;
    timeoutMs: number;
  }) {
    this.spec = o.spec;
    this.execInfo = o.execInfo;
    this.env = o.env;
    this.now = o.now;
    this.timeoutMs = o.timeoutMs;
  }

  /** Names the plugin in errors: the command only, never its arguments (they may carry secrets). */
  private get label(): string {
    return `exec credential plugin "${this.spec.command}"`;
  }

  async credential(): Promise<ExecResult> {
    const c = this.cached;
    if (c && (c.expiresAt === undefined || this.now() < c.expiresAt)) return c;
    this.running ??= this.run().finally(() => {
      this.running = undefined;
    });
    return await this.running;
  }

  private async run(): Promise<ExecResult> {
    this.runs++;
    const env: NodeJS.ProcessEnv = { ...this.env };
    for (const e of this.spec.env) env[e.name] = e.value;
    env.KUBERNETES_EXEC_INFO = this.execInfo;
    // Loaded on the first run: most kubeconfigs (in-cluster, tokens, certificates) run no plugin, and
    // child_process is otherwise paid at every start.
    const { spawn } = await import('node:child_process');
    const { code, signal, stdout, stderr, spawnError, timedOut, overflow } = await new Promise<{
      code: number | null;
      signal: NodeJS.Signals | null;
      stdout: string;
      stderr: string;
      spawnError?: NodeJS.ErrnoException;
      timedOut: boolean;
      overflow: boolean;
    }>((resolve) => {
      const child = spawn(this.spec.command, this.spec.args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let size = 0;
      let timedOut = false;
      let overflow = false;
      let spawnError: NodeJS.ErrnoException | undefined;
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, this.timeoutMs);
      child.stdout.on('data', (d: Buffer) => {
        size += d.length;
        if (size > EXEC_OUTPUT_LIMIT) {
          overflow = true;
          child.kill('SIGKILL');
        } else out.push(d);
      });
      child.stderr.on('data', (d: Buffer) => {
        if (err.reduce((n, b) => n + b.length, 0) < 64 * 1024) err.push(d);
      });
      child.on('error', (e) => {
        spawnError = e;
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        resolve({
          code,
          signal,
          stdout: Buffer.concat(out).toString('utf8'),
          stderr: Buffer.concat(err).toString('utf8'),
          timedOut,
          overflow,
          ...(spawnError ? { spawnError } : {}),
        });
      });
    });
    if (spawnError) {
      const hint = this.spec.installHint ? `; ${this.spec.installHint.trim()}` : '';
      throw new KubeconfigError(
        spawnError.code === 'ENOENT'
          ? `${this.label} not found${hint}`
          : `${this.label} cannot be started: ${spawnError.code ?? spawnError.message}`,
      );
    }
    if (timedOut) throw new KubeconfigError(`${this.label} did not finish within ${this.timeoutMs} ms`);
    if (overflow) throw new KubeconfigError(`${this.label} printed more than ${EXEC_OUTPUT_LIMIT} bytes`);
    if (code !== 0) {
      // What the plugin told its user on stderr (its last lines), never what it printed on stdout.
      const said = stderr.trim().split('\n').slice(-3).join(' | ').slice(-500);
      throw new KubeconfigError(
        `${this.label} failed with ${code === null ? `signal ${signal}` : `exit code ${code}`}${said ? `: ${said}` : ''}`,
      );
    }
    this.cached = this.parse(stdout);
    return this.cached;
  }

  private parse(stdout: string): ExecResult {
    let doc: unknown;
    try {
      doc = JSON.parse(stdout);
    } catch {
      throw new KubeconfigError(`${this.label} did not print an ExecCredential (not JSON)`);
    }
    if (!isObj(doc) || doc.kind !== 'ExecCredential') {
      throw new KubeconfigError(`${this.label} did not print an ExecCredential`);
    }
    if (doc.apiVersion !== this.spec.apiVersion) {
      throw new KubeconfigError(
        `${this.label} printed an ExecCredential of apiVersion ${JSON.stringify(String(doc.apiVersion))}, expected ${this.spec.apiVersion}`,
      );
    }
    const status = doc.status;
    if (!isObj(status)) throw new KubeconfigError(`${this.label} printed an ExecCredential without status`);
    const where = `${this.label}'s ExecCredential status`;
    const token = str(status, 'token', where);
    const cert = str(status, 'clientCertificateData', where);
    const key = str(status, 'clientKeyData', where);
    if ((cert === undefined) !== (key === undefined)) {
      throw new KubeconfigError(
        `${where} must hold both clientCertificateData and clientKeyData, or neither`,
      );
    }
    if (token === undefined && cert === undefined) {
      throw new KubeconfigError(`${where} holds neither a token nor a client certificate`);
    }
    const expiry = str(status, 'expirationTimestamp', where);
    let expiresAt: number | undefined;
    if (expiry !== undefined) {
      expiresAt = Date.parse(expiry);
      if (Number.isNaN(expiresAt)) throw new KubeconfigError(`${where}: expirationTimestamp is not a time`);
    }
    return {
      ...(token !== undefined ? { token } : {}),
      ...(cert !== undefined && key !== undefined ? { cert, key } : {}),
      ...(expiresAt !== undefined ? { expiresAt } : {}),
    };
  }
}

interface ResolvedCluster {
  name: string;
  server: string;
  ca: Buffer | undefined;
  insecureSkipTLSVerify: boolean;
  tlsServerName: string | undefined;
}

interface ResolvedUser {
  token: string | undefined;
  tokenFile: FileToken | undefined;
  basic: string | undefined;
  cert: Buffer | undefined;
  key: Buffer | undefined;
  exec: ExecPlugin | undefined;
  headers: Record<string, string | string[]>;
}

/**
 * A loaded kubeconfig's current context: what KubeHttp needs (the server, and every request's TLS
 * options and credentials) and the context's namespace.
 */
export class Kubeconfig implements ClusterAccess {
  /** Where the configuration came from: file path(s), or `in-cluster`. */
  readonly source: string;
  readonly currentContext: string;
  /** The current context's namespace, if it sets one (in-cluster: the pod's namespace). */
  readonly namespace: string | undefined;
  private readonly cluster: ResolvedCluster;
  private readonly user: ResolvedUser;

  constructor(parts: {
    source: string;
    currentContext: string;
    namespace: string | undefined;
    cluster: ResolvedCluster;
    user: ResolvedUser;
  }) {
    this.source = parts.source;
    this.currentContext = parts.currentContext;
    this.namespace = parts.namespace;
    this.cluster = parts.cluster;
    this.user = parts.user;
  }

  getCurrentCluster(): CurrentCluster {
    return {
      name: this.cluster.name,
      server: this.cluster.server,
      skipTLSVerify: this.cluster.insecureSkipTLSVerify,
      ...(this.cluster.tlsServerName ? { tlsServerName: this.cluster.tlsServerName } : {}),
    };
  }

  /** Times the exec plugin ran (0 without one), for tests. */
  get execRuns(): number {
    return this.user.exec?.runs ?? 0;
  }

  /**
   * Sets the TLS options and the authentication headers of one request. Asked before every request:
   * token files and exec plugins may have a new credential.
   */
  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    const c = this.cluster;
    const u = this.user;
    if (c.insecureSkipTLSVerify) opts.rejectUnauthorized = false;
    else if (c.ca) opts.ca = c.ca;
    if (c.tlsServerName) opts.servername = c.tlsServerName;

    let token = u.token;
    let cert: Buffer | string | undefined = u.cert;
    let key: Buffer | string | undefined = u.key;
    if (u.tokenFile) token = await u.tokenFile.current();
    if (u.exec) {
      const got = await u.exec.credential();
      if (got.token !== undefined) token = got.token;
      if (got.cert !== undefined) {
        cert = got.cert;
        key = got.key;
      }
    }
    if (cert !== undefined && key !== undefined) {
      opts.cert = cert;
      opts.key = key;
    }
    const headers: Record<string, string | string[] | number> = {
      ...(isObj(opts.headers) ? (opts.headers as Record<string, string | string[] | number>) : {}),
      ...u.headers,
    };
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    else if (u.basic !== undefined) headers.authorization = `Basic ${u.basic}`;
    opts.headers = headers;
  }
}

function resolveCluster(entry: Entry): ResolvedCluster {
  const where = `cluster "${entry.name}" (${entry.file})`;
  const b = entry.body;
  const server = str(b, 'server', where);
  if (server === undefined) throw new KubeconfigError(`${where} has no server`);
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new KubeconfigError(`${where}: server is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new KubeconfigError(`${where}: server is ${url.protocol}//…, neither https:// nor http://`);
  }
  if (str(b, 'proxy-url', where) !== undefined) {
    throw new KubeconfigError(
      `${where} sets proxy-url, which paddock does not support: let it reach the API server directly`,
    );
  }
  return {
    name: entry.name,
    server,
    ca: pemField(entry, 'certificate-authority', 'certificate authority', where),
    insecureSkipTLSVerify: bool(b, 'insecure-skip-tls-verify', where),
    tlsServerName: str(b, 'tls-server-name', where),
  };
}

function execSpec(entry: Entry, exec: unknown, where: string): ExecSpec {
  if (!isObj(exec)) throw new KubeconfigError(`${where}: exec is not a mapping`);
  const w = `${where}, exec`;
  let command = str(exec, 'command', w);
  if (command === undefined) throw new KubeconfigError(`${w}: command is missing`);
  // As kubectl: a relative command with a directory part is relative to the kubeconfig; a bare name
  // is looked up on PATH.
  if (!path.isAbsolute(command) && command.includes('/')) command = resolveIn(entry.dir, command);
  const apiVersion = str(exec, 'apiVersion', w);
  if (apiVersion === undefined || !EXEC_API_VERSIONS.includes(apiVersion)) {
    throw new KubeconfigError(
      `${w}: apiVersion ${apiVersion === undefined ? 'is missing' : JSON.stringify(apiVersion)}; paddock supports ${EXEC_API_VERSIONS.join(' and ')}`,
    );
  }
  if (str(exec, 'interactiveMode', w) === 'Always') {
    throw new KubeconfigError(
      `${w}: interactiveMode is Always, but paddock never has a terminal for the plugin to ask on`,
    );
  }
  const rawEnv = exec.env ?? [];
  if (!Array.isArray(rawEnv)) throw new KubeconfigError(`${w}: env is not a list`);
  const env = rawEnv.map((e, i) => {
    if (!isObj(e) || typeof e.name !== 'string' || e.name === '') {
      throw new KubeconfigError(`${w}: env[${i}] has no name`);
    }
    return { name: e.name, value: str(e, 'value', `${w}, env ${e.name}`) ?? '' };
  });
  return {
    command,
    args: stringList(exec, 'args', w),
    env,
    apiVersion,
    installHint: str(exec, 'installHint', w),
    provideClusterInfo: bool(exec, 'provideClusterInfo', w),
  };
}

/** KUBERNETES_EXEC_INFO: what the plugin may know of the request (and, if asked for, the cluster). */
function execInfo(spec: ExecSpec, clusterEntry: Entry, cluster: ResolvedCluster): string {
  const info: Obj = { interactive: false };
  if (spec.provideClusterInfo) {
    const extensions = Array.isArray(clusterEntry.body.extensions) ? clusterEntry.body.extensions : [];
    const config = extensions.find((e) => isObj(e) && e.name === EXEC_CLUSTER_EXTENSION) as Obj | undefined;
    info.cluster = {
      server: cluster.server,
      ...(cluster.tlsServerName ? { 'tls-server-name': cluster.tlsServerName } : {}),
      ...(cluster.insecureSkipTLSVerify ? { 'insecure-skip-tls-verify': true } : {}),
      ...(cluster.ca ? { 'certificate-authority-data': cluster.ca.toString('base64') } : {}),
      ...(config?.extension !== undefined ? { config: config.extension } : {}),
    };
  }
  return JSON.stringify({ apiVersion: spec.apiVersion, kind: 'ExecCredential', spec: info });
}

function resolveUser(
  entry: Entry | undefined,
  clusterEntry: Entry,
  cluster: ResolvedCluster,
  options: KubeconfigOptions,
): ResolvedUser {
  const user: ResolvedUser = {
    token: undefined,
    tokenFile: undefined,
    basic: undefined,
    cert: undefined,
    key: undefined,
    exec: undefined,
    headers: {},
  };
  if (!entry) return user;
  const where = `user "${entry.name}" (${entry.file})`;
  const b = entry.body;
  const provider = b['auth-provider'];
  if (provider !== undefined && provider !== null) {
    const name = isObj(provider) && typeof provider.name === 'string' ? ` "${provider.name}"` : '';
    throw new KubeconfigError(
      `${where} uses the auth-provider${name}, which paddock does not support: use an exec credential plugin instead (e.g. gke-gcloud-auth-plugin, kubelogin)`,
    );
  }
  user.token = str(b, 'token', where);
  // kubectl's field is tokenFile; client-node also read token-file.
  const tokenFile = str(b, 'tokenFile', where) ?? str(b, 'token-file', where);
  if (tokenFile !== undefined) user.tokenFile = new FileToken(resolveIn(entry.dir, tokenFile), where);
  const username = str(b, 'username', where);
  const password = str(b, 'password', where);
  if (username !== undefined || password !== undefined) {
    if (user.token !== undefined || user.tokenFile) {
      throw new KubeconfigError(`${where} sets both a token and a username/password; keep one`);
    }
    user.basic = Buffer.from(`${username ?? ''}:${password ?? ''}`).toString('base64');
  }
  user.cert = pemField(entry, 'client-certificate', 'client certificate', where);
  user.key = pemField(entry, 'client-key', 'client key', where);
  if ((user.cert === undefined) !== (user.key === undefined)) {
    throw new KubeconfigError(
      `${where} sets a client ${user.cert ? 'certificate without a key' : 'key without a certificate'}`,
    );
  }
  if (b.exec !== undefined && b.exec !== null) {
    const spec = execSpec(entry, b.exec, where);
    user.exec = new ExecPlugin({
      spec,
      execInfo: execInfo(spec, clusterEntry, cluster),
      env: options.env ?? process.env,
      now: options.now ?? Date.now,
      timeoutMs: options.execTimeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS,
    });
  }
  const as = str(b, 'as', where);
  if (as !== undefined) user.headers['impersonate-user'] = as;
  const groups = stringList(b, 'as-groups', where);
  if (groups.length > 0) user.headers['impersonate-group'] = groups;
  const uid = str(b, 'as-uid', where);
  if (uid !== undefined) user.headers['impersonate-uid'] = uid;
  const extra = b['as-user-extra'];
  if (isObj(extra)) {
    for (const k of Object.keys(extra)) {
      user.headers[`impersonate-extra-${encodeURIComponent(k)}`] = stringList(
        extra,
        k,
        `${where}, as-user-extra`,
      );
    }
  }
  return user;
}

function fromMerged(merged: Merged, source: string, options: KubeconfigOptions): Kubeconfig {
  const name = merged.currentContext;
  if (name === undefined) throw new KubeconfigError(`no current-context is set in ${source}`);
  const ctx = merged.contexts.get(name);
  if (!ctx) throw new KubeconfigError(`the current-context "${name}" is not among the contexts of ${source}`);
  const where = `context "${name}" (${ctx.file})`;
  const clusterName = str(ctx.body, 'cluster', where);
  if (clusterName === undefined) throw new KubeconfigError(`${where} names no cluster`);
  const clusterEntry = merged.clusters.get(clusterName);
  if (!clusterEntry) throw new KubeconfigError(`${where}: cluster "${clusterName}" is not defined`);
  const userName = str(ctx.body, 'user', where);
  const userEntry = userName === undefined ? undefined : merged.users.get(userName);
  if (userName !== undefined && !userEntry)
    throw new KubeconfigError(`${where}: user "${userName}" is not defined`);
  const cluster = resolveCluster(clusterEntry);
  return new Kubeconfig({
    source,
    currentContext: name,
    namespace: str(ctx.body, 'namespace', where),
    cluster,
    user: resolveUser(userEntry, clusterEntry, cluster, options),
  });
}

/** Loads and merges kubeconfig files in order (kubectl's rules: the first definition of a name wins). */
export function loadKubeconfigFiles(files: string[], options: KubeconfigOptions = {}): Kubeconfig {
  const merged: Merged = {
    clusters: new Map(),
    users: new Map(),
    contexts: new Map(),
    currentContext: undefined,
  };
  for (const f of files) mergeFile(merged, f);
  return fromMerged(merged, files.join(path.delimiter), options);
}

/**
 * The pod's own service account: the API server from KUBERNETES_SERVICE_HOST/PORT, its CA, its token
 * (read again when the kubelet rotates it) and its namespace.
 */
export function inClusterKubeconfig(options: KubeconfigOptions = {}): Kubeconfig {
  const env = options.env ?? process.env;
  const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  const where = 'in-cluster configuration';
  if (!host || !port) {
    throw new KubeconfigError(
      `${where}: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set`,
    );
  }
  const caFile = path.join(dir, 'ca.crt');
  const nsFile = path.join(dir, 'namespace');
  const namespace = existsSync(nsFile) ? readFileSync(nsFile, 'utf8').trim() || undefined : undefined;
  return new Kubeconfig({
    source: 'in-cluster',
    currentContext: 'in-cluster',
    namespace,
    cluster: {
      name: 'in-cluster',
      server: `https://${net.isIPv6(host) ? `[${host}]` : host}:${port}`,
      ca: existsSync(caFile) ? readBytes(caFile, 'certificate authority', where) : undefined,
      insecureSkipTLSVerify: false,
      tlsServerName: undefined,
    },
    user: {
      token: undefined,
      tokenFile: new FileToken(path.join(dir, 'token'), where),
      basic: undefined,
      cert: undefined,
      key: undefined,
      exec: undefined,
      headers: {},
    },
  });
}

/**
 * The kubeconfig to use, in the order kubectl users expect: `options.path`; else every file of
 * KUBECONFIG (those that exist; at least one must); else ~/.kube/config if it exists; else the
 * pod's service account if its token exists.
 */
export function loadKubeconfig(options: KubeconfigOptions = {}): Kubeconfig {
  if (options.path) {
    if (!existsSync(options.path)) throw new KubeconfigError(`${options.path} does not exist`);
    return loadKubeconfigFiles([options.path], options);
  }
  const env = options.env ?? process.env;
  const list = env.KUBECONFIG;
  if (list) {
    const named = [...new Set(list.split(path.delimiter).filter((f) => f !== ''))];
    // kubectl skips the files of KUBECONFIG that do not exist.
    const files = named.filter((f) => existsSync(f));
    if (files.length === 0) throw new KubeconfigError(`none of the files in KUBECONFIG exists (${list})`);
    return loadKubeconfigFiles(files, options);
  }
  const home = options.home ?? (env.HOME || os.homedir());
  const file = path.join(home, '.kube', 'config');
  if (existsSync(file)) return loadKubeconfigFiles([file], options);
  const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  if (existsSync(path.join(dir, 'token'))) return inClusterKubeconfig(options);
  throw new KubeconfigError(
    `no kubeconfig: neither --kubeconfig nor KUBECONFIG is set, ${file} does not exist, and there is no service account token at ${path.join(dir, 'token')} (not in a pod)`,
  );
}
