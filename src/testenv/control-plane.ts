import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, rmSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { runBuildScript } from './build-script.ts';
import { type ManagedProcess, startManagedProcess } from './processes.ts';

/**
 * A real etcd + kube-apiserver (+ kube-controller-manager) on loopback, for tests and the sandbox.
 * Binaries come from TEST_ASSET_* / KUBEBUILDER_ASSETS / paddock's cache, or are built once
 * from the Go module proxy by hack/build-control-plane.sh.
 */

export const KUBERNETES_VERSION = 'v1.36.3';
export const ETCD_VERSION = 'v3.6.16';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface ControlPlaneBinaries {
  kubeApiserver: string;
  etcd: string;
  /** Absent when only envtest assets without a controller-manager were found and no build was allowed. */
  kubeControllerManager?: string;
  /** For tests that run documented commands as written; built with the others. */
  kubectl?: string;
}

export interface ControlPlaneOptions {
  /** Also run kube-controller-manager (workload controllers, garbage collection, namespaces). */
  controllerManager?: boolean;
  /** Spawn-to-ready limit per component. */
  startTimeoutMs?: number;
  /** Extra kube-apiserver flags, e.g. `--watch-cache=false` so old resourceVersions hit etcd. */
  apiServerArgs?: string[];
  /** Progress lines (binary build, start-up); defaults to stderr. */
  log?: (line: string) => void;
  /**
   * Audit every request of service accounts outside kube-system (verb, resource, response code) to
   * `auditLogPath`, as JSON lines: what a test needs to prove a role grants enough and no more.
   */
  auditServiceAccounts?: boolean;
}

/** One line of the API server's audit log (the fields tests read). */
export interface AuditEvent {
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: {
    resource?: string;
    subresource?: string;
    apiGroup?: string;
    namespace?: string;
    name?: string;
  };
  responseStatus?: { code?: number; reason?: string; message?: string };
}

const AUDIT_POLICY = [
  'apiVersion: audit.k8s.io/v1',
  'kind: Policy',
  'omitStages: [RequestReceived, ResponseStarted]',
  'rules:',
  '- level: None',
  '  userGroups: ["system:serviceaccounts:kube-system"]',
  '- level: Metadata',
  '  userGroups: ["system:serviceaccounts"]',
  '- level: None',
  '',
].join('\n');

export interface ControlPlane {
  readonly kubeconfigPath: string;
  readonly kubeConfig: KubeConfig;
  readonly server: string;
  readonly dataDir: string;
  readonly controllerManager: boolean;
  /** With `auditServiceAccounts`: the audit log (JSON lines, written as requests complete). */
  readonly auditLogPath?: string;
  /**
   * Compacts etcd's history up to now, as the API server does every few minutes; watches from an
   * older resourceVersion then end in 410 Gone. Returns the compacted revision.
   */
  compactEtcd(): Promise<number>;
  /** Process IDs of the running components (for leak checks). */
  pids(): number[];
  /**
   * Stops kube-apiserver and starts it again on the same port with the same certificates, keeping
   * etcd (for reconnect tests); resolves once it answers /readyz again. On failure (it exits, or is
   * not ready within the time limit) it rejects quoting the end of its log, and kube-apiserver is
   * left stopped: another restart may bring it back, and stop() ends everything either way.
   */
  restartApiServer(opts?: RestartOptions): Promise<void>;
  /**
   * Stops etcd and starts it again on the same ports and data directory while kube-apiserver keeps
   * running; resolves once etcd answers /health and kube-apiserver, reconnected, answers /readyz.
   * Failures are reported as for restartApiServer (a failed etcd start leaves etcd stopped).
   */
  restartEtcd(opts?: RestartOptions): Promise<void>;
  /** Stops every component, also after a failed or unfinished restart; safe to call again. */
  stop(): Promise<void>;
}

export interface RestartOptions {
  /** Limit from the spawn to serving again (default: the plane's `startTimeoutMs`). */
  timeoutMs?: number;
  /** kill -9 the component (a crash) instead of SIGTERM (a clean shutdown). */
  kill?: boolean;
  /** Extra flags for this start only (e.g. a bad one, to see a failing restart). */
  extraArgs?: string[];
  /** Keep the component stopped this long before starting it again: an outage, not just a restart. */
  downMs?: number;
}

type Component = 'etcd' | 'kube-apiserver' | 'kube-controller-manager';
/** Stop order: clients before what they talk to. */
const STOP_ORDER: readonly Component[] = ['kube-controller-manager', 'kube-apiserver', 'etcd'];

export function defaultCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'paddock', 'k8s', `${KUBERNETES_VERSION}-etcd-${ETCD_VERSION}`);
}

function firstExisting(...candidates: (string | undefined)[]): string | undefined {
  return candidates.find((c) => c !== undefined && c !== '' && existsSync(c));
}

/** Finds binaries without building anything. */
export function findBinaries(): Partial<ControlPlaneBinaries> {
  const assets = process.env.KUBEBUILDER_ASSETS;
  const cache = process.env.K8S_BIN_DIR || defaultCacheDir();
  const inDir = (dir: string | undefined, name: string) => (dir ? path.join(dir, name) : undefined);
  const found: Partial<ControlPlaneBinaries> = {};
  const apiserver = firstExisting(
    process.env.TEST_ASSET_KUBE_APISERVER,
    inDir(assets, 'kube-apiserver'),
    inDir(cache, 'kube-apiserver'),
  );
  const etcd = firstExisting(process.env.TEST_ASSET_ETCD, inDir(assets, 'etcd'), inDir(cache, 'etcd'));
  const kcm = firstExisting(
    process.env.TEST_ASSET_KUBE_CONTROLLER_MANAGER,
    inDir(assets, 'kube-controller-manager'),
    inDir(cache, 'kube-controller-manager'),
  );
  const kubectl = firstExisting(
    process.env.TEST_ASSET_KUBECTL,
    inDir(assets, 'kubectl'),
    inDir(cache, 'kubectl'),
  );
  if (kubectl) found.kubectl = kubectl;
  if (apiserver) found.kubeApiserver = apiserver;
  if (etcd) found.etcd = etcd;
  if (kcm) found.kubeControllerManager = kcm;
  return found;
}

/**
 * Returns usable binaries, building the missing ones from the Go module proxy (minutes, once).
 * The build script skips binaries whose `--version` already matches the pinned one.
 */
export async function ensureBinaries(opts: { needControllerManager: boolean; log?: (l: string) => void }) {
  const found = findBinaries();
  if (
    found.kubeApiserver &&
    found.etcd &&
    found.kubectl &&
    (found.kubeControllerManager || !opts.needControllerManager)
  ) {
    return found as ControlPlaneBinaries;
  }
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const script = path.join(repoRoot, 'hack', 'build-control-plane.sh');
  const dir = await runBuildScript(script, log);
  return {
    kubeApiserver: found.kubeApiserver ?? path.join(dir, 'kube-apiserver'),
    etcd: found.etcd ?? path.join(dir, 'etcd'),
    kubeControllerManager: found.kubeControllerManager ?? path.join(dir, 'kube-controller-manager'),
    kubectl: found.kubectl ?? path.join(dir, 'kubectl'),
  };
}

export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface ProbeResult {
  status: number;
  body: string;
}

function httpsGet(url: string, token: string, ca?: Buffer): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      url,
      {
        headers: { authorization: `Bearer ${token}` },
        ...(ca ? { ca } : { rejectUnauthorized: false }),
        timeout: 5_000,
      },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => {
          body += d.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

async function httpGetStatus(url: string): Promise<number> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

interface WaitOptions {
  what: string;
  proc: ManagedProcess;
  logFile: string;
  /** Where this start's lines begin in `logFile` (restarts append to the same file). */
  logFrom: number;
  timeoutMs: number;
  check: () => Promise<boolean>;
  /** Why to give up at once, if there is a reason (e.g. the plane is being stopped). */
  cancelled?: () => string | undefined;
}

async function waitFor(o: WaitOptions): Promise<void> {
  const deadline = Date.now() + o.timeoutMs;
  const logTail = async () => `last lines of ${o.logFile}:\n${await tail(o.logFile, o.logFrom)}`;
  while (Date.now() < deadline) {
    const why = o.cancelled?.();
    if (why) throw new Error(`${o.what}: ${why}`);
    if (!o.proc.running()) {
      throw new Error(`${o.what} exited (${await o.proc.exited}) before it was ready; ${await logTail()}`);
    }
    // A check that answers only after the deadline is late: under load one check can take longer
    // than a short limit, and the limit must still hold.
    if ((await o.check().catch(() => false)) && Date.now() <= deadline) return;
    await sleep(100);
  }
  throw new Error(`${o.what} not ready after ${o.timeoutMs} ms; ${await logTail()}`);
}

/** SIGKILL to the process group (a crash), then waits for the exit. */
async function killNow(p: ManagedProcess): Promise<void> {
  if (!p.running()) return;
  for (const target of [-p.pid, p.pid]) {
    try {
      process.kill(target, 'SIGKILL');
      break;
    } catch {
      // No such group (or already gone): try the process itself.
    }
  }
  // The child is unref'd: without a timer of ours the event loop could end while we wait.
  const keepAlive = setInterval(() => undefined, 1000);
  await p.exited.finally(() => clearInterval(keepAlive));
}

/** The last lines of a log from byte `from` on. */
async function tail(file: string, from = 0, lines = 30): Promise<string> {
  try {
    const text = (await readFile(file)).subarray(from).toString('utf8').trimEnd();
    return text === '' ? '(nothing logged)' : text.split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

const CONTROLLERS = [
  'garbage-collector-controller',
  'namespace-controller',
  'replicaset-controller',
  'deployment-controller',
  'statefulset-controller',
  'serviceaccount-controller',
  'job-controller',
  'endpointslice-controller',
  'disruption-controller',
  'root-ca-certificate-publisher-controller',
  'persistentvolume-binder-controller',
  'persistentvolumeclaim-protection-controller',
  'persistentvolume-protection-controller',
].join(',');

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const log = options.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const withKcm = options.controllerManager ?? false;
  const timeout = options.startTimeoutMs ?? 60_000;
  const bins = await ensureBinaries({ needControllerManager: withKcm, log });
  if (withKcm && !bins.kubeControllerManager) throw new Error('kube-controller-manager binary not available');

  const commandOf = (component: Component): string =>
    component === 'etcd'
      ? bins.etcd
      : component === 'kube-apiserver'
        ? bins.kubeApiserver
        : (bins.kubeControllerManager ?? '');

  const dir = await mkdtemp(path.join(os.tmpdir(), 'paddock-cp-'));
  const pki = path.join(dir, 'pki');
  await mkdir(pki, { recursive: true });
  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];

  const adminToken = randomBytes(24).toString('hex');
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const saKey = path.join(dir, 'sa.key');
  await writeFile(saKey, privateKey, { mode: 0o600 });
  await writeFile(
    path.join(dir, 'tokens.csv'),
    `${adminToken},paddock-test-admin,paddock-test-admin,system:masters\n`,
    {
      mode: 0o600,
    },
  );

  /** The current process of each component, and every process ever started (restarts included). */
  const current = new Map<Component, ManagedProcess>();
  const everStarted: ManagedProcess[] = [];
  /** Where each process's lines begin in its component's log. */
  const logFrom = new Map<ManagedProcess, number>();
  let stopping = false;
  // If nobody calls stop(), the processes die with us (processes.ts) and the data goes too.
  const removeDataOnExit = () => rmSync(dir, { recursive: true, force: true });
  process.once('exit', removeDataOnExit);
  const stoppedWhileWaiting = () =>
    stopping ? 'the control plane was stopped while waiting for it' : undefined;
  /** Starts a component's process, unless the plane is stopping (then nothing may be left behind). */
  const spawnComponent = (component: Component, args: string[], logFile: string): ManagedProcess => {
    if (stopping) throw new Error(`the control plane is stopping: ${component} not started`);
    const from = sizeOf(logFile);
    const p = startManagedProcess({ name: component, command: commandOf(component), logFile, args });
    everStarted.push(p);
    logFrom.set(p, from);
    current.set(component, p);
    return p;
  };
  /** Waits until `p` serves; if it does not, stops it before rethrowing. */
  const untilServing = async (
    component: Component,
    p: ManagedProcess,
    logFile: string,
    timeoutMs: number,
    check: () => Promise<boolean>,
  ): Promise<void> => {
    try {
      await waitFor({
        what: component,
        proc: p,
        logFile,
        logFrom: logFrom.get(p) ?? 0,
        timeoutMs,
        check,
        cancelled: stoppedWhileWaiting,
      });
    } catch (err) {
      await p.stop();
      if (current.get(component) === p) current.delete(component);
      throw err;
    }
  };
  const stopComponent = async (component: Component, kill = false): Promise<void> => {
    const p = current.get(component);
    if (!p) return;
    await (kill ? killNow(p) : p.stop());
    current.delete(component);
  };
  const stopAll = async () => {
    stopping = true;
    for (const component of STOP_ORDER) await stopComponent(component);
    // Whatever a restart started and lost track of.
    for (const p of everStarted) await p.stop();
    process.off('exit', removeDataOnExit);
  };
  /** One restart at a time: a second waits for the first. */
  let restarts: Promise<unknown> = Promise.resolve();
  const exclusive = (fn: () => Promise<void>): Promise<void> => {
    const run = restarts.then(fn, fn);
    restarts = run.catch(() => undefined);
    return run;
  };

  const auditLogPath = options.auditServiceAccounts ? path.join(dir, 'audit.log') : undefined;
  const auditArgs: string[] = [];
  if (auditLogPath) {
    const policy = path.join(dir, 'audit-policy.yaml');
    await writeFile(policy, AUDIT_POLICY);
    auditArgs.push(
      `--audit-policy-file=${policy}`,
      `--audit-log-path=${auditLogPath}`,
      '--audit-log-format=json',
      '--audit-log-mode=blocking',
    );
  }

  const etcdLog = path.join(dir, 'etcd.log');
  const etcdHealthy = async () => (await httpGetStatus(`http://127.0.0.1:${etcdPort}/health`)) === 200;
  const startEtcd = async (timeoutMs = timeout, extraArgs: string[] = []) => {
    const etcd = spawnComponent(
      'etcd',
      [
        '--name=default',
        `--data-dir=${path.join(dir, 'etcd')}`,
        `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
        `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
        `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
        '--listen-metrics-urls=',
        '--unsafe-no-fsync=true',
        '--log-level=warn',
        ...extraArgs,
      ],
      etcdLog,
    );
    await untilServing('etcd', etcd, etcdLog, timeoutMs, etcdHealthy);
  };

  const apiLog = path.join(dir, 'kube-apiserver.log');
  const server = `https://127.0.0.1:${apiPort}`;
  const apiReady = async () => (await httpsGet(`${server}/readyz`, adminToken)).status === 200;
  const startApiServer = async (timeoutMs = timeout, extraArgs: string[] = []) => {
    const api = spawnComponent(
      'kube-apiserver',
      [
        `--etcd-servers=http://127.0.0.1:${etcdPort}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${apiPort}`,
        '--advertise-address=127.0.0.1',
        `--cert-dir=${pki}`,
        `--token-auth-file=${path.join(dir, 'tokens.csv')}`,
        `--service-account-issuer=${server}`,
        `--service-account-key-file=${saKey}`,
        `--service-account-signing-key-file=${saKey}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        '--authorization-mode=RBAC',
        '--disable-admission-plugins=ServiceAccount',
        '--allow-privileged=true',
        '--endpoint-reconciler-type=none',
        // Without it, SIGTERM leaves open watches (HTTP/1.1, as paddock's) running until the HTTP
        // server's 60 s shutdown timeout: a restart would wait for SIGKILL. With it, they are ended
        // cleanly and the API server is gone in about a second.
        '--shutdown-watch-termination-grace-period=2s',
        '--v=1',
        ...auditArgs,
        ...(options.apiServerArgs ?? []),
        ...extraArgs,
      ],
      apiLog,
    );
    await untilServing('kube-apiserver', api, apiLog, timeoutMs, apiReady);
  };

  try {
    const started = Date.now();
    await startEtcd();
    await startApiServer();
    const caPath = path.join(pki, 'apiserver.crt');
    const ca = await readFile(caPath);
    const deadline = Date.now() + 10_000;
    while ((await httpsGet(`${server}/api/v1/namespaces/default`, adminToken, ca)).status !== 200) {
      if (Date.now() > deadline) throw new Error('namespace "default" never appeared');
      await sleep(50);
    }

    const kubeconfigPath = path.join(dir, 'kubeconfig');
    // JSON, which kubectl and Helm read as YAML: paddock then loads no YAML parser, as in a cluster,
    // where it reads its service account instead of a kubeconfig (the benches measure that start).
    const kubeconfigJson = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'paddock-test', cluster: { server, 'certificate-authority': caPath } }],
      users: [{ name: 'paddock-test-admin', user: { token: adminToken } }],
      contexts: [
        {
          name: 'paddock-test',
          context: { cluster: 'paddock-test', user: 'paddock-test-admin', namespace: 'default' },
        },
      ],
      'current-context': 'paddock-test',
    });
    await writeFile(kubeconfigPath, `${kubeconfigJson}\n`, { mode: 0o600 });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath);

    if (withKcm && bins.kubeControllerManager) {
      const kcmLog = path.join(dir, 'kube-controller-manager.log');
      const kcm = spawnComponent(
        'kube-controller-manager',
        [
          `--kubeconfig=${kubeconfigPath}`,
          '--leader-elect=false',
          '--secure-port=0',
          `--controllers=${CONTROLLERS}`,
          `--service-account-private-key-file=${saKey}`,
          `--root-ca-file=${caPath}`,
          '--use-service-account-credentials=false',
          '--kube-api-qps=200',
          '--kube-api-burst=400',
          '--concurrent-statefulset-syncs=10',
          '--concurrent-gc-syncs=20',
          '--v=1',
          // The volume binder's decisions, for tests that diagnose volume retention.
          '--vmodule=pv_controller*=4',
        ],
        kcmLog,
      );
      // The serviceaccount controller creating `default/default` means KCM is up and syncing.
      await untilServing('kube-controller-manager', kcm, kcmLog, timeout, async () => {
        const r = await httpsGet(
          `${server}/api/v1/namespaces/default/serviceaccounts/default`,
          adminToken,
          ca,
        );
        return r.status === 200;
      });
    }
    const version = JSON.parse((await httpsGet(`${server}/version`, adminToken, ca)).body) as {
      gitVersion?: string;
    };
    log(
      `[control-plane] kube-apiserver ${version.gitVersion ?? '?'} ready at ${server}` +
        `${withKcm ? ' with kube-controller-manager' : ''} in ${Date.now() - started} ms (data ${dir})`,
    );

    return {
      kubeconfigPath,
      kubeConfig,
      server,
      dataDir: dir,
      controllerManager: withKcm,
      ...(auditLogPath ? { auditLogPath } : {}),
      pids: () => everStarted.filter((p) => p.running()).map((p) => p.pid),
      async compactEtcd() {
        const etcdUrl = `http://127.0.0.1:${etcdPort}`;
        const post = async (path: string, body: unknown) => {
          const res = await fetch(`${etcdUrl}${path}`, { method: 'POST', body: JSON.stringify(body) });
          if (!res.ok) throw new Error(`etcd ${path}: HTTP ${res.status} ${await res.text()}`);
          return (await res.json()) as { header?: { revision?: string } };
        };
        const range = await post('/v3/kv/range', {
          key: Buffer.from('/').toString('base64'),
          count_only: true,
        });
        const revision = Number(range.header?.revision ?? 0);
        await post('/v3/kv/compaction', { revision: String(revision), physical: true });
        return revision;
      },
      restartApiServer(opts: RestartOptions = {}) {
        return exclusive(async () => {
          const t0 = Date.now();
          await stopComponent('kube-apiserver', opts.kill);
          if (opts.downMs) await sleep(opts.downMs);
          const t1 = Date.now();
          await startApiServer(opts.timeoutMs ?? timeout, opts.extraArgs);
          log(
            `[control-plane] kube-apiserver restarted: stopped (and down) for ${t1 - t0} ms, ready again ${Date.now() - t1} ms after its start`,
          );
        });
      },
      restartEtcd(opts: RestartOptions = {}) {
        return exclusive(async () => {
          const limit = opts.timeoutMs ?? timeout;
          const t0 = Date.now();
          // What kube-apiserver says from here on (its etcd client's complaints) goes in an error.
          const apiLogFrom = sizeOf(apiLog);
          await stopComponent('etcd', opts.kill);
          if (opts.downMs) await sleep(opts.downMs);
          const t1 = Date.now();
          await startEtcd(limit, opts.extraArgs);
          const t2 = Date.now();
          const api = current.get('kube-apiserver');
          if (api) {
            // Its etcd client reconnects on its own; /readyz includes the etcd check.
            await waitFor({
              what: 'kube-apiserver (reconnecting to the restarted etcd)',
              proc: api,
              logFile: apiLog,
              logFrom: apiLogFrom,
              timeoutMs: limit,
              check: apiReady,
              cancelled: stoppedWhileWaiting,
            });
          }
          log(
            `[control-plane] etcd restarted: stopped (and down) for ${t1 - t0} ms, healthy ${t2 - t1} ms after its start, ` +
              `kube-apiserver ready again ${Date.now() - t2} ms after that`,
          );
        });
      },
      async stop() {
        await stopAll();
        // A restart in progress ends at once now (its process is gone, and nothing new may start).
        await restarts;
        if (!process.env.PADDOCK_KEEP_CONTROL_PLANE_DATA) await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
