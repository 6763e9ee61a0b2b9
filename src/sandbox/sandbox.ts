import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import {
  HORIZONTAL_RUNNER_AUTOSCALERS,
  RUNNER_DEPLOYMENTS,
  RUNNER_REPLICA_SETS,
  RUNNER_SETS,
  RUNNERS,
} from '../api/index.ts';
import type { FlagSpec } from '../cli/flags.ts';
import { PADDOCK_NODE_FLAGS, PADDOCK_PROCESS_ENV } from '../cli/node-flags.ts';
import { installCrds } from '../cli/run.ts';
import { RUN_FLAGS } from '../cli/run-flags.ts';
import { WEBHOOK_SERVER_FLAGS } from '../cli/webhook-server.ts';
import { type ResourceRef, resourcePath } from '../runtime/informer.ts';
import { KubeHttp } from '../runtime/kube-http.ts';
import { silentLogger } from '../runtime/log.ts';
import { mergePatch } from '../runtime/objects.ts';
import { PODS, SECRETS } from '../runtime/resources.ts';
import type { KubeObject } from '../runtime/store.ts';
import { type ControlPlane, freePort, startControlPlane } from '../testenv/control-plane.ts';
import { GitHubDouble, WebhookSender, type WebhookSenderStats } from '../testenv/github-double/index.ts';
import { ensureHelm } from '../testenv/helm.ts';
import { seededRandom } from '../testenv/seeded-random.ts';
import {
  type ChartRelease,
  chartContainer,
  grantedRules,
  installChart,
  localArgs,
  type RbacFigures,
  rbacFigures,
  serviceAccountKubeconfig,
} from './chart-install.ts';
import { NodeAgent, type NodeAgentEvent } from './node-agent.ts';
import {
  type AutoscaleMode,
  type AutoscalerFigures,
  autoscalerFigures,
  type OwnerFigures,
  ownerFigures,
  type SandboxKind,
  sampleAutoscaler,
  sampleManifest,
  sampleResource,
} from './sample.ts';
import { WorkloadGenerator } from './workload.ts';

/**
 * The whole system on one machine: a real control plane with kube-controller-manager, the GitHub
 * API double, paddock itself (`paddock run` as a child process, so its memory is its own), a
 * RunnerDeployment or RunnerSet, and a simulated node agent with a job workload and optional chaos.
 */

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SANDBOX_NAMESPACE = 'sandbox';
export const SANDBOX_ORG = 'sandbox-org';
/** The sample RunnerDeployment's or RunnerSet's name. */
export const SAMPLE_NAME = 'sandbox-runners';
/** With --helm: the release and its namespace. */
export const CHART_RELEASE = 'paddock';
export const CHART_NAMESPACE = 'paddock-system';
/** With `credentialsSecret`: the Secret the sample owner's githubAPICredentialsFrom names. */
export const CREDENTIALS_SECRET = 'sandbox-github-credentials';

export interface SandboxOptions {
  /** What owns the runners: a RunnerDeployment (default of `paddock sandbox`) or a RunnerSet. */
  kind: SandboxKind;
  runners: number;
  /** Jobs per minute. */
  jobRate: number;
  jobDurationMs: number;
  /**
   * Seeds the workload (arrivals, repositories, durations) so that two runs get the same jobs and
   * figures that depend on demand (API spend per hour) can be compared; default unseeded.
   */
  workloadSeed?: number | undefined;
  ephemeral: boolean;
  /** Simulated start-up of a runner pod (image pull, container start). */
  startupDelayMs: number;
  /** Run the node agent and the workload (off for `make run`: only the control plane, double and paddock). */
  simulate: boolean;
  chaos: {
    /** Runner containers crashed per minute. */
    podKillsPerMinute: number;
    /** Share of GitHub requests answered 502 (0–1). */
    github5xxRate: number;
    /** Primary rate limit per hour for paddock's token (GitHub's is 5,000). */
    rateLimitPerHour: number | undefined;
    /** Lose a node after this long. */
    nodeLossAfterMs: number | undefined;
  };
  log: (line: string) => void;
  /** Extra `paddock run` flags. */
  paddockArgs?: string[];
  /**
   * Profile paddock: a CPU profile written when it exits and heap snapshots on `heapSnapshot()`,
   * in this directory (created).
   */
  profileDir?: string | undefined;
  /** Node/V8 flags for paddock's process instead of the image's (PADDOCK_NODE_FLAGS). */
  nodeFlags?: string[] | undefined;
  /** Drive the owner with a HorizontalRunnerAutoscaler (from zero up to `runners`). */
  autoscale?: AutoscaleMode | undefined;
  /** Deliveries of workflow_job webhooks lost and repeated (webhook autoscaling). */
  webhookChaos?: { dropRate: number; duplicateRate: number } | undefined;
  /**
   * paddock replicas (default 1). With more, each runs with `--leader-elect` and its own metrics
   * port; the first is the one `metricsUrl`, RSS samples and `restartPaddock` refer to.
   */
  replicas?: number | undefined;
  /**
   * The runners' GitHub credentials from a Secret (the owner's `githubAPICredentialsFrom`), holding a
   * token other than paddock's default one; `rotateCredentials()` replaces it.
   */
  credentialsSecret?: boolean | undefined;
  /**
   * Start a replica again 10 s after it exits unexpectedly (a crash, a kill, a lost Lease), as the
   * kubelet restarts a container of a Deployment's pod.
   */
  restartReplicas?: boolean | undefined;
  /** The HRA's minReplicas (default 0). */
  minReplicas?: number | undefined;
  /** Repositories the workload queues jobs in (default 1). */
  repositories?: number | undefined;
  /** The HRA's scaleDownDelaySecondsAfterScaleOut (default 60). */
  scaleDownDelaySeconds?: number | undefined;
  /**
   * Install charts/paddock with Helm and run paddock (and, with webhook autoscaling, its webhook
   * server) with the chart's arguments and ServiceAccounts, every request audited; `sets` are extra
   * `--set key=value`.
   */
  helm?: { sets: string[] } | undefined;
}

/** What `--helm` adds to the summary: the RBAC audit and the documented uninstall. */
export interface ChartFigures {
  release: string;
  /** Every request of the chart's ServiceAccounts, until paddock stopped. */
  rbac: RbacFigures & {
    /** What the release's Roles and ClusterRoles grant those accounts, same form as `used`. */
    granted: string[];
    /** Granted and never used in this run. */
    unused: string[];
  };
  uninstall: {
    /** From scale-to-zero until no runner pod and no Runner was left. */
    drainSeconds: number;
    /** Pods and Runners still carrying a paddock finalizer after the drain (must be 0). */
    finalizersLeft: number;
    /** What was left when the drain gave up: `kind/name phase deleting finalizers`, for a failure message. */
    left: string[];
    /** 137: killed, not stopped 15 s after SIGTERM. */
    exitCodes: Record<string, number | null>;
    /** The end of the log of each process that exited other than 0. */
    logTails: Record<string, string>;
    /** paddock's webhook configurations still present 60 s after `helm uninstall` (must be 0). */
    webhookConfigurationsLeft: string[];
  };
}

export interface SandboxSummary {
  kind: SandboxKind;
  durationSeconds: number;
  runners: number;
  ephemeral: boolean;
  jobs: {
    created: number;
    started: number;
    completed: number;
    cancelled: number;
    cancelledByController: number;
  };
  leakedRunners: number;
  replacementLatencyMs: { count: number; p50: number | null; p99: number | null };
  github: {
    requests: number;
    rateLimitedRequests: number;
    notModified: number;
    rateLimitedRequestsPerRunnerHour: number;
    byRoute: Record<string, number>;
    /** paddock's runner listings by why they started (its github_runner_registry_listings_total). */
    listingsByReason?: Record<string, number>;
  };
  controller: {
    /** Peak of the RSS samples (every 2 s). */
    rssMiB: number | null;
    /** Median RSS over the second half of the run: the steady state after start-up. */
    rssSteadyMiB?: number | null;
    /** The kernel's peak resident set (VmHWM), including start-up. */
    rssPeakMiB?: number | null;
    /** Resident now, anonymous (V8 heap, caches) and file-backed (the node binary's pages). */
    rssAnonMiB?: number | null;
    rssFileMiB?: number | null;
    /** CPU time paddock used since it started (user + system). */
    cpuSeconds?: number | null;
    exitCode: number | null;
  };
  pods: { seen: number; started: number };
  chaos: { podKills: number; nodesLost: number };
  /** With --autoscale: the HRA's figures, the deliveries, and how well supply followed demand. */
  autoscale?: {
    mode: AutoscaleMode;
    desired: number | null;
    reservations: number;
    deliveries: WebhookSenderStats | null;
    /** Σ over time of registered runners without a job. */
    idleRunnerMinutes: number;
    /** Σ over jobs of the time from queued to started (or to now). */
    queuedJobMinutes: number;
  };
  /** The sample owner's own figures (filled in by `summarize()`, which asks the API server). */
  owner?: OwnerFigures;
  /** With `--helm`. */
  chart?: ChartFigures;
}

/** The last lines of a log file, for an error message. */
/** The runner annotations that say where an object is in its unregistration (for a drain's report). */
/** The graceful-stop and wait annotations of a runner pod, `key=value` without their prefixes. */
export function drainAnnotations(o: KubeObject): string {
  const a = o.metadata.annotations ?? {};
  const prefixes = ['actions-runner/', 'paddock.dev/'];
  return Object.keys(a)
    .flatMap((k) => {
      const prefix = prefixes.find((x) => k.startsWith(x));
      return prefix ? [`${k.slice(prefix.length)}=${a[k]}`] : [];
    })
    .join(' ');
}

function logTail(file: string, lines = 40): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return `(no log at ${file})`;
  }
}

function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? null;
}

function rssMiB(
  pid: number | undefined,
  field: 'VmRSS' | 'VmHWM' | 'RssAnon' | 'RssFile' = 'VmRSS',
): number | null {
  if (!pid) return null;
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round((Number(m[1]) / 1024) * 10) / 10 : null;
  } catch {
    return null;
  }
}

/** CPU time (user + system) the process has used, from /proc/PID/stat. */
function cpuSecondsOf(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) in parentheses; utime and stime are 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? Math.round((ticks / 100) * 10) / 10 : null;
  } catch {
    return null;
  }
}

/**
 * An HTTP server on `port` that hands each request to the first of `targets` that accepts a
 * connection, as a Service in front of several replicas would; 503 when none does.
 */
async function forwardToFirstListening(port: number, targets: readonly number[]): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const attempt = (i: number) => {
        if (i >= targets.length) {
          res.writeHead(503).end('no replica is listening');
          return;
        }
        const out = httpRequest(
          { host: '127.0.0.1', port: targets[i], method: req.method, path: req.url, headers: req.headers },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        out.on('error', () => attempt(i + 1));
        out.end(body);
      };
      attempt(0);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return server;
}

export class Sandbox {
  readonly opts: SandboxOptions;
  plane: ControlPlane | undefined;
  readonly double = new GitHubDouble();
  http: KubeHttp | undefined;
  agent: NodeAgent | undefined;
  workload: WorkloadGenerator | undefined;
  paddock: ChildProcess | undefined;
  paddockExit: Promise<number> | undefined;
  /** Where each spawned process logs. */
  private readonly logFiles = new Map<ChildProcess, string>();
  metricsUrl: string | undefined;
  token = '';
  startedAt = 0;
  readonly events: NodeAgentEvent[] = [];
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly rssSamples: { at: number; mib: number }[] = [];
  /** How paddock (`paddock run`) was last started, to start it again. */
  private paddockSpawn: { args: string[]; env: Record<string, string>; logFile: string } | undefined;
  private readonly exitsAwaitingReplacement: number[] = [];
  readonly replacementLatencies: number[] = [];
  private podKills = 0;
  private nodesLost = 0;
  /** Pods whose runner chaos killed, and nodes chaos took away: their cancelled jobs are not paddock's. */
  private readonly chaosPods = new Set<string>();
  private readonly lostNodes = new Set<string>();
  private cancelledByController = 0;
  private peakRss = 0;
  private readonly log: Logger = silentLogger();
  webhooks: WebhookSender | undefined;
  webhookServer: ChildProcess | undefined;
  webhookServerExit: Promise<number> | undefined;
  private chartRelease: ChartRelease | undefined;
  /** Replicas after the first (`replicas` > 1), by name (`paddock-1`, …). */
  private readonly standbys = new Map<
    string,
    {
      child: ChildProcess;
      exit: Promise<number>;
      args: string[];
      env: Record<string, string>;
      logFile: string;
    }
  >();
  private respawns = 0;
  /** Replicas restarted after an unexpected exit (`restartReplicas`). */
  replicaRestarts = 0;
  private stopping = false;
  private restartingPrimary = false;
  /** With several replicas: each one's workflow_job port, and what forwards deliveries to them. */
  private readonly replicaWebhookPorts: number[] = [];
  private webhookForwarder: Server | undefined;
  /** The runners' credentials Secret's current token (with `credentialsSecret`). */
  credentialsToken: string | undefined;
  /** Every token the credentials Secret has held. */
  private readonly credentialsTokens: string[] = [];
  private webhookSecret = '';
  private readonly chartUsers = new Set<string>();
  private idleRunnerMs = 0;
  private lastIdleSample = 0;

  constructor(opts: SandboxOptions) {
    this.opts = opts;
  }

  async start(): Promise<void> {
    const { log } = this.opts;
    this.plane = await startControlPlane({
      controllerManager: true,
      log,
      auditServiceAccounts: this.opts.helm !== undefined,
    });
    this.http = new KubeHttp(this.plane.kubeConfig);
    await this.double.start();
    this.double.addOrg(SANDBOX_ORG);
    for (const repo of this.repositories) this.double.addRepo(SANDBOX_ORG, repo);
    this.token = this.double.addToken({ login: 'paddock-sandbox' }).token;
    if (this.opts.chaos.rateLimitPerHour !== undefined) {
      this.double.setRateLimit(this.token, {
        limit: this.opts.chaos.rateLimitPerHour,
        remaining: this.opts.chaos.rateLimitPerHour,
      });
    }
    log(`[sandbox] GitHub API double at ${this.double.apiUrl} (organization ${SANDBOX_ORG})`);
    log(`[sandbox] export KUBECONFIG=${this.plane.kubeconfigPath}`);

    await installCrds(this.http);
    await this.http.request('POST', '/api/v1/namespaces', {
      body: { metadata: { name: SANDBOX_NAMESPACE } },
    });

    const metricsPort = await freePort();
    this.metricsUrl = `http://127.0.0.1:${metricsPort}`;
    if (this.opts.credentialsSecret) {
      this.credentialsToken = this.double.addToken({ login: 'paddock-sandbox-runners' }).token;
      this.credentialsTokens.push(this.credentialsToken);
      await this.http.request('POST', resourcePath(SECRETS, SANDBOX_NAMESPACE), {
        body: { metadata: { name: CREDENTIALS_SECRET }, stringData: { github_token: this.credentialsToken } },
      });
    }
    const replicas = Math.max(1, this.opts.replicas ?? 1);
    const webhookSecret = randomBytes(20).toString('hex');
    this.webhookSecret = webhookSecret;
    const webhookPort = this.opts.autoscale === 'webhook' ? await freePort() : undefined;
    // Several replicas each listen on their own port; a forwarder on webhookPort stands for the Service.
    if (webhookPort && replicas > 1 && !this.opts.helm) this.replicaWebhookPorts.push(await freePort());
    const logFile = path.join(this.plane.dataDir, 'paddock.log');
    // Only addresses differ from a cluster: no Service routes to a process here. The admission
    // webhook keeps its port across restarts, as a Service keeps its address.
    const admissionPort = await freePort();
    const local = [
      '--metrics-addr',
      `127.0.0.1:${metricsPort}`,
      '--health-probe-addr',
      '0',
      '--webhook-addr',
      `127.0.0.1:${admissionPort}`,
      '--webhook-url',
      `https://127.0.0.1:${admissionPort}`,
      '--unregistration-retry-delay',
      '10s',
    ];
    if (this.opts.helm) {
      const chart = await this.installChart(webhookSecret);
      const manager = await this.chartProcess(chart, 'run', RUN_FLAGS, local, 'paddock.log');
      this.paddock = manager.child;
      this.paddockExit = manager.exit;
      if (webhookPort) {
        const whs = await this.chartProcess(
          chart,
          'webhook-server',
          WEBHOOK_SERVER_FLAGS,
          ['--webhook-addr', `127.0.0.1:${webhookPort}`, '--metrics-addr', `127.0.0.1:${await freePort()}`],
          'webhook-server.log',
        );
        this.webhookServer = whs.child;
        this.webhookServerExit = whs.exit;
      }
    } else {
      const child = this.spawnPaddock(
        [
          'run',
          '--watch-namespace',
          SANDBOX_NAMESPACE,
          '--leader-election-namespace',
          SANDBOX_NAMESPACE,
          ...(replicas > 1 ? ['--leader-elect'] : []),
          ...local,
          ...(webhookPort
            ? ['--github-webhook-addr', `127.0.0.1:${this.replicaWebhookPorts[0] ?? webhookPort}`]
            : []),
          ...(this.opts.paddockArgs ?? []),
        ],
        {
          KUBECONFIG: this.plane.kubeconfigPath,
          GITHUB_TOKEN: this.token,
          GITHUB_URL: this.double.apiUrl,
          GITHUB_WEBHOOK_SECRET_TOKEN: webhookSecret,
        },
        logFile,
      );
      this.paddock = child.child;
      this.paddockExit = child.exit;
    }
    await this.untilPaddockReady(logFile, 60_000, 200);
    log(`[sandbox] paddock running (metrics ${this.metricsUrl}/metrics, log ${logFile})`);
    for (let i = 1; i < replicas && !this.opts.helm; i++) {
      const primary = this.paddockSpawn!;
      const args = [...primary.args];
      args[args.indexOf('--metrics-addr') + 1] = `127.0.0.1:${await freePort()}`;
      const replicaAdmissionPort = await freePort();
      args[args.indexOf('--webhook-addr') + 1] = `127.0.0.1:${replicaAdmissionPort}`;
      args[args.indexOf('--webhook-url') + 1] = `https://127.0.0.1:${replicaAdmissionPort}`;
      if (webhookPort) {
        const port = await freePort();
        this.replicaWebhookPorts.push(port);
        args[args.indexOf('--github-webhook-addr') + 1] = `127.0.0.1:${port}`;
      }
      const standbyLog = path.join(this.plane.dataDir, `paddock-${i}.log`);
      const standby = this.spawnPaddock(args, primary.env, standbyLog, `paddock-${i}`);
      this.standbys.set(`paddock-${i}`, { ...standby, args, env: primary.env, logFile: standbyLog });
      log(`[sandbox] paddock-${i} started as a standby replica (log ${standbyLog})`);
    }

    if (this.opts.chaos.github5xxRate > 0) this.scheduleGitHubFaults();

    await this.http.request('POST', resourcePath(sampleResource(this.opts.kind), SANDBOX_NAMESPACE), {
      body: sampleManifest(this.opts.kind, {
        name: SAMPLE_NAME,
        organization: SANDBOX_ORG,
        replicas: this.opts.autoscale ? (this.opts.minReplicas ?? 0) : this.opts.runners,
        ephemeral: this.opts.ephemeral,
        labels: ['sandbox'],
        ...(this.opts.credentialsSecret ? { credentialsSecret: CREDENTIALS_SECRET } : {}),
      }),
    });
    log(
      `[sandbox] ${this.opts.kind} ${SANDBOX_NAMESPACE}/${SAMPLE_NAME} applied with ${this.opts.autoscale ? (this.opts.minReplicas ?? 0) : this.opts.runners} runners`,
    );
    const mode = this.opts.autoscale;
    if (mode) {
      await this.http.request('POST', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, SANDBOX_NAMESPACE), {
        body: sampleAutoscaler(this.opts.kind, {
          name: SAMPLE_NAME,
          mode,
          minReplicas: this.opts.minReplicas ?? 0,
          maxReplicas: this.opts.runners,
          repositories: this.repositories,
          scaleDownDelaySeconds: this.opts.scaleDownDelaySeconds ?? 60,
        }),
      });
      log(
        `[sandbox] HorizontalRunnerAutoscaler ${SAMPLE_NAME} (${mode}): ${this.opts.minReplicas ?? 0} to ${this.opts.runners} runners`,
      );
    }
    if (webhookPort && this.replicaWebhookPorts.length > 0) {
      this.webhookForwarder = await forwardToFirstListening(webhookPort, this.replicaWebhookPorts);
    }
    if (webhookPort) {
      this.webhooks = new WebhookSender({
        double: this.double,
        url: `http://127.0.0.1:${webhookPort}/`,
        secret: webhookSecret,
        dropRate: this.opts.webhookChaos?.dropRate ?? 0,
        duplicateRate: this.opts.webhookChaos?.duplicateRate ?? 0,
        maxDelayMs: this.opts.webhookChaos ? 500 : 0,
      });
      this.webhooks.start();
      log(`[sandbox] the GitHub double delivers signed workflow_job webhooks to 127.0.0.1:${webhookPort}`);
    }

    if (this.opts.simulate) {
      // jobRate 0: runners that start and register but get no jobs (an idle fleet).
      if (this.opts.jobRate > 0)
        this.workload = new WorkloadGenerator({
          double: this.double,
          ratePerMinute: this.opts.jobRate,
          duration: {
            kind: 'uniform',
            minMs: this.opts.jobDurationMs * 0.5,
            maxMs: this.opts.jobDurationMs * 1.5,
          },
          target: { owner: SANDBOX_ORG, repo: this.repositories },
          labels: [{ labels: ['self-hosted', 'sandbox'], weight: 1 }],
          ...(this.opts.workloadSeed !== undefined ? { random: seededRandom(this.opts.workloadSeed) } : {}),
        });
      this.agent = new NodeAgent({
        http: this.http,
        namespace: SANDBOX_NAMESPACE,
        double: this.double,
        log: this.log,
        startupDelayMs: this.opts.startupDelayMs,
        jobDurationMs: (job) => this.workload?.durationOf(job.id),
        onEvent: (e) => this.onAgentEvent(e),
      });
      await this.agent.start();
      this.workload?.start();
      if (this.opts.chaos.podKillsPerMinute > 0) {
        this.timers.push(
          setInterval(() => this.killRandomRunner(), 60_000 / this.opts.chaos.podKillsPerMinute),
        );
      }
      const loss = this.opts.chaos.nodeLossAfterMs;
      if (loss !== undefined) {
        this.timers.push(
          setTimeout(() => {
            const node = this.agent?.nodeNames[0];
            if (node) {
              this.nodesLost++;
              this.lostNodes.add(node);
              void this.agent?.loseNode(node);
              this.opts.log(`[sandbox] chaos: node ${node} lost`);
            }
          }, loss),
        );
      }
    }
    this.timers.push(setInterval(() => this.sampleRss(), 2000));
    this.startedAt = Date.now();
    this.lastIdleSample = this.startedAt;
    this.timers.push(setInterval(() => this.sampleIdle(), 1000));
  }

  private spawnPaddock(
    args: string[],
    env: Record<string, string>,
    logFile: string,
    replica = 'paddock-0',
  ): { child: ChildProcess; exit: Promise<number> } {
    const primary = replica === 'paddock-0';
    const dir = this.opts.profileDir;
    if (dir) mkdirSync(dir, { recursive: true });
    const profiling = dir
      ? [`--cpu-prof`, `--cpu-prof-dir=${dir}`, '--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`]
      : [];
    if (args[0] === 'run' && primary) this.paddockSpawn = { args, env, logFile };
    const flags = [...(this.opts.nodeFlags ?? PADDOCK_NODE_FLAGS), ...profiling];
    const child = spawn(process.execPath, [...flags, path.join(repoRoot, 'bin/paddock.js'), ...args], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
        ...PADDOCK_PROCESS_ENV,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = createWriteStream(logFile);
    // Both streams end the file only once both have closed: the first to end would otherwise cut
    // off what the other still had to say.
    child.stdout?.pipe(out, { end: false });
    child.stderr?.pipe(out, { end: false });
    // Killed by a signal: 128 + its number, as a shell reports it (137: SIGKILL), not a bare 1.
    // Resolved once the log file holds all the output (logTail reads it right after).
    const exit = new Promise<number>((resolve) =>
      child.on('close', (code, signal) =>
        out.end(() => resolve(code ?? (signal ? 128 + (os.constants.signals[signal] ?? 0) : 1))),
      ),
    );
    this.logFiles.set(child, logFile);
    if (args[0] === 'run') {
      void exit.then((code) => {
        if (!this.opts.restartReplicas || this.stopping || this.restartingPrimary) return;
        this.replicaRestarts++;
        this.opts.log(`[sandbox] ${replica} exited with ${code}; restarting it in 10 s`);
        this.timers.push(
          setTimeout(() => {
            if (!this.stopping) this.respawnReplica(replica);
          }, 10_000),
        );
      });
    }
    return { child, exit };
  }

  /**
   * What a platform engineer does: the GitHub credentials in ARC's Secret `controller-manager`, then
   * `helm install` of charts/paddock pointing at the GitHub double.
   */
  private async installChart(webhookSecret: string): Promise<ChartRelease> {
    const plane = this.plane!;
    const http = this.http!;
    await http.request('POST', '/api/v1/namespaces', { body: { metadata: { name: CHART_NAMESPACE } } });
    await http.request('POST', resourcePath(SECRETS, CHART_NAMESPACE), {
      body: {
        metadata: { name: 'controller-manager' },
        stringData: { github_token: this.token },
      },
    });
    const helmBinary = await ensureHelm({ log: this.opts.log });
    const release = await installChart({
      helmBinary,
      chartDir: path.join(repoRoot, 'charts/paddock'),
      kubeconfigPath: plane.kubeconfigPath,
      workDir: path.join(plane.dataDir, 'helm'),
      release: CHART_RELEASE,
      namespace: CHART_NAMESPACE,
      sets: [
        `githubURL=${this.double.apiUrl}`,
        ...(this.opts.autoscale === 'webhook'
          ? [
              'githubWebhookServer.enabled=true',
              'githubWebhookServer.secret.create=true',
              `githubWebhookServer.secret.github_webhook_secret_token=${webhookSecret}`,
            ]
          : []),
        ...(this.opts.helm?.sets ?? []),
      ],
    });
    this.chartRelease = release;
    this.opts.log(`[sandbox] helm install ${CHART_RELEASE} charts/paddock --namespace ${CHART_NAMESPACE}`);
    return release;
  }

  /** A Deployment of the release as a local process, with its ServiceAccount's token. */
  private async chartProcess(
    release: ChartRelease,
    command: 'run' | 'webhook-server',
    specs: FlagSpec[],
    local: string[],
    logName: string,
  ): Promise<{ child: ChildProcess; exit: Promise<number> }> {
    const plane = this.plane!;
    const workDir = path.join(plane.dataDir, 'helm');
    const c = await chartContainer(release, command, this.http!, workDir);
    if (!c) throw new Error(`the chart rendered no Deployment that runs \`paddock ${command}\``);
    const kubeconfig = path.join(workDir, `${c.deployment}.kubeconfig`);
    const user = await serviceAccountKubeconfig({
      http: this.http!,
      server: plane.server,
      caPath: path.join(plane.dataDir, 'pki', 'apiserver.crt'),
      namespace: release.namespace,
      serviceAccount: c.serviceAccountName,
      file: kubeconfig,
    });
    this.chartUsers.add(user);
    const args = localArgs(c.args, specs, local);
    this.opts.log(`[sandbox] ${c.deployment}: paddock ${args.join(' ')} (as ${user})`);
    return this.spawnPaddock(args, { ...c.env, KUBECONFIG: kubeconfig }, path.join(plane.dataDir, logName));
  }

  /**
   * The documented removal (README): no new jobs, the HorizontalRunnerAutoscaler deleted and the
   * owner scaled to zero, until every runner pod and Runner is gone; then paddock stopped, and
   * `helm uninstall`, after which nothing paddock registered may remain.
   */
  async uninstallChart(): Promise<ChartFigures> {
    const http = this.http!;
    const release = this.chartRelease!;
    this.workload?.stop();
    const started = Date.now();
    if (this.opts.autoscale) {
      await http
        .request('DELETE', resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, SANDBOX_NAMESPACE, SAMPLE_NAME))
        .catch(() => undefined);
    }
    await mergePatch(
      http,
      sampleResource(this.opts.kind),
      { metadata: { namespace: SANDBOX_NAMESPACE, name: SAMPLE_NAME } },
      { spec: { replicas: 0 } },
    );
    const list = async (ref: ResourceRef) =>
      (await http.request<{ items: KubeObject[] }>('GET', resourcePath(ref, SANDBOX_NAMESPACE))).items;
    const paddockFinalizer = (o: KubeObject) =>
      (o.metadata.finalizers ?? []).some((f) => f.includes('actions.summerwind.dev'));
    let left: KubeObject[] = [];
    for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
      // List items carry no kind: name it, for the report.
      left = [
        ...(await list(PODS)).map((o) => ({ ...o, kind: 'Pod' })),
        ...(await list(RUNNERS)).map((o) => ({ ...o, kind: 'Runner' })),
      ];
      if (left.length === 0) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const drainSeconds = Math.round((Date.now() - started) / 100) / 10;
    const leftLines = left.map(
      (o) =>
        `${o.kind}/${o.metadata.name} ${
          (o as { status?: { phase?: string } }).status?.phase ?? ''
        } ${o.metadata.deletionTimestamp ? `deleting since ${o.metadata.deletionTimestamp}` : 'not deleting'} [${(o.metadata.finalizers ?? []).join(',')}] ${drainAnnotations(o)}`,
    );
    if (left.length > 0) {
      // What the owner asked for at the end: a drain that did not finish says whether scale-down was undone.
      const owner = await http
        .request<{ spec?: { replicas?: number }; status?: unknown }>(
          'GET',
          resourcePath(sampleResource(this.opts.kind), SANDBOX_NAMESPACE, SAMPLE_NAME),
        )
        .then((o) => ({ replicas: o.spec?.replicas, status: o.status }))
        .catch((err: Error) => ({ error: err.message }));
      leftLines.push(`${this.opts.kind}/${SAMPLE_NAME}: ${JSON.stringify(owner)}`);
      // What paddock last said about them (its log goes with the control plane's directory).
      const names = left.map((o) => o.metadata.name).filter((n): n is string => Boolean(n));
      leftLines.push(...this.paddockLinesNaming(names, 15));
    }
    this.stopping = true;
    const exitCodes: Record<string, number | null> = {};
    const logTails: Record<string, string> = {};
    for (const [name, child, exit] of [
      ['paddock', this.paddock, this.paddockExit],
      ['webhook-server', this.webhookServer, this.webhookServerExit],
    ] as const) {
      if (!child || !exit) continue;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      exitCodes[name] = await exit;
      clearTimeout(killer);
      // The reason, while the log is still there (stop() removes the control plane's directory).
      if (exitCodes[name] !== 0) logTails[name] = logTail(this.logFiles.get(child) ?? '', 30);
    }
    const audited = await rbacFigures(this.plane!.auditLogPath!, [...this.chartUsers]);
    const granted = grantedRules(release.objects, [...this.chartUsers]);
    const rbac = { ...audited, granted, unused: granted.filter((g) => !audited.used.includes(g)) };
    await release.helm(['uninstall', release.name, '--namespace', release.namespace]);
    const configurations = async () => {
      const names: string[] = [];
      for (const kind of ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations']) {
        const l = await http.request<{ items: KubeObject[] }>(
          'GET',
          `/apis/admissionregistration.k8s.io/v1/${kind}`,
          { query: { labelSelector: 'app.kubernetes.io/managed-by=paddock' } },
        );
        names.push(...l.items.map((o) => `${kind}/${o.metadata.name}`));
      }
      return names;
    };
    let remaining = await configurations();
    for (const deadline = Date.now() + 60_000; remaining.length > 0 && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 500));
      remaining = await configurations();
    }
    return {
      release: release.name,
      rbac,
      uninstall: {
        drainSeconds,
        finalizersLeft: left.filter(paddockFinalizer).length,
        left: leftLines,
        exitCodes,
        logTails,
        webhookConfigurationsLeft: remaining,
      },
    };
  }

  /** `app`, or `app-1` … `app-n` with several. */
  get repositories(): string[] {
    const n = this.opts.repositories ?? 1;
    return n <= 1 ? ['app'] : Array.from({ length: n }, (_, i) => `app-${i + 1}`);
  }

  private sampleIdle(): void {
    const now = Date.now();
    this.idleRunnerMs += (this.agent?.stats().idleRunners ?? 0) * (now - this.lastIdleSample);
    this.lastIdleSample = now;
  }

  /** Σ over the workload's jobs of the time from queued to started (or to now, if still waiting). */
  queuedJobMs(now = Date.now()): number {
    let total = 0;
    for (const j of this.double.model.jobs.values()) {
      if (j.created_at < this.startedAt) continue;
      total += (j.started_at ?? (j.status === 'completed' ? j.created_at : now)) - j.created_at;
    }
    return total;
  }

  /** The HRA's figures, as the API server has them now. */
  async autoscalerFigures(): Promise<AutoscalerFigures | undefined> {
    if (!this.opts.autoscale) return undefined;
    const obj = await this.http
      ?.request<Parameters<typeof autoscalerFigures>[0]>(
        'GET',
        resourcePath(HORIZONTAL_RUNNER_AUTOSCALERS, SANDBOX_NAMESPACE, SAMPLE_NAME),
      )
      .catch(() => undefined);
    return autoscalerFigures(obj, Date.now());
  }

  private onAgentEvent(e: NodeAgentEvent): void {
    this.events.push(e);
    if (this.events.length > 5000) this.events.splice(0, 1000);
    if (e.type === 'runner-exited' && e.reason === 'job-finished') this.exitsAwaitingReplacement.push(e.at);
    if (e.type === 'job-cancelled' && !this.chaosPods.has(e.pod) && !(e.node && this.lostNodes.has(e.node))) {
      this.cancelledByController++;
      this.opts.log(
        `[sandbox] job ${e.jobId} on ${e.pod} was cancelled (${e.message ?? e.reason ?? 'pod or runner removed mid-job'})`,
      );
    }
    if (e.type === 'pod-seen') {
      const exitedAt = this.exitsAwaitingReplacement.shift();
      if (exitedAt !== undefined) this.replacementLatencies.push(e.at - exitedAt);
    }
  }

  /** Crashes up to `count` live runners at random; returns how many. */
  crashRunners(count: number): number {
    let n = 0;
    for (let i = 0; i < count; i++) if (this.killRandomRunner()) n++;
    return n;
  }

  /**
   * Loses the node with the most pods (it stops responding: its pods freeze and stay Terminating
   * once deleted), and adds a fresh node in its place; returns the lost node's name.
   */
  async loseBusiestNode(): Promise<string | undefined> {
    const agent = this.agent;
    if (!agent) return undefined;
    const counts = new Map<string, number>();
    for (const e of this.events)
      if (e.type === 'pod-started' && e.node) counts.set(e.node, (counts.get(e.node) ?? 0) + 1);
    const node = agent.nodeNames
      .filter((n) => !this.lostNodes.has(n))
      .sort((a, b) => (counts.get(b) ?? 0) - (counts.get(a) ?? 0))[0];
    if (!node) return undefined;
    this.nodesLost++;
    this.lostNodes.add(node);
    await agent.loseNode(node);
    const fresh = await agent.addNode();
    this.opts.log(`[sandbox] chaos: node ${node} lost; ${fresh} added`);
    return node;
  }

  /** Whether a job cancelled on this pod (and node) is explained by chaos: a crashed runner or a lost node. */
  isChaos(pod: string, node?: string): boolean {
    return this.chaosPods.has(pod) || (node !== undefined && this.lostNodes.has(node));
  }

  private killRandomRunner(): boolean {
    const pods = (this.agent?.stats().busyRunners ?? 0) + (this.agent?.stats().idleRunners ?? 0);
    if (pods === 0 || !this.agent) return false;
    // Live runners only: the event list also names pods long gone.
    const candidates = [
      ...new Set(this.events.filter((e) => e.type === 'runner-registered').map((e) => e.pod)),
    ].filter((p) => {
      const sim = this.agent?.pod(p);
      return sim !== undefined && !sim.gone && !sim.lost && sim.runner === 'listening';
    });
    const pod = candidates[Math.floor(Math.random() * candidates.length)];
    if (!pod || this.chaosPods.has(pod)) return false;
    try {
      this.agent.crashRunner(pod);
      this.chaosPods.add(pod);
      this.podKills++;
      return true;
    } catch {
      // already gone
      return false;
    }
  }

  private scheduleGitHubFaults(): void {
    // A rolling share of 502s: re-armed every second for about rate × requests of the last second.
    let lastCount = this.double.log.length;
    this.timers.push(
      setInterval(() => {
        const recent = this.double.log.length - lastCount;
        lastCount = this.double.log.length;
        const times = Math.round(Math.max(1, recent) * this.opts.chaos.github5xxRate);
        this.double.clearFaults();
        if (times > 0) this.double.injectFault({ status: 502, times });
      }, 1000),
    );
  }

  private sampleRss(): void {
    const rss = rssMiB(this.paddock?.pid);
    if (rss === null) return;
    this.peakRss = Math.max(this.peakRss, rss);
    this.rssSamples.push({ at: Date.now(), mib: rss });
  }

  /** Waits for paddock's first 200 on /readyz; its exit or the timeout is an error quoting its log. */
  private async untilPaddockReady(logFile: string, timeoutMs: number, pollMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (
      !(await fetch(`${this.metricsUrl}/readyz`).then(
        (r) => r.ok,
        () => false,
      ))
    ) {
      const exited = await Promise.race([
        this.paddockExit,
        new Promise((r) => setTimeout(() => r(undefined), pollMs)),
      ]);
      // The control plane's directory goes with the sandbox: quote the log rather than point at it.
      if (exited !== undefined) throw new Error(`paddock exited with ${exited}:\n${logTail(logFile)}`);
      if (Date.now() > deadline) throw new Error(`paddock did not become ready:\n${logTail(logFile)}`);
    }
  }

  /**
   * The last `limit` lines any paddock process (every replica, each restart) logged that name one
   * of `names`, oldest first, each prefixed with its log file's name: what paddock said about an
   * object a check found wrong, while the control plane's directory (where the logs are) still exists.
   */
  paddockLinesNaming(names: readonly string[], limit: number): string[] {
    if (names.length === 0) return [];
    const lines: { time: string; text: string }[] = [];
    for (const file of this.logFiles.values()) {
      const source = path.basename(file, '.log');
      for (const line of logTail(file, Number.POSITIVE_INFINITY).split('\n')) {
        if (!names.some((n) => line.includes(n))) continue;
        // pino's ISO times sort as strings.
        const time = /"time":"([^"]+)"/.exec(line)?.[1] ?? '';
        lines.push({ time, text: `${source}: ${line.slice(0, 600)}` });
      }
    }
    return lines
      .sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0))
      .slice(-limit)
      .map((l) => l.text);
  }

  /** The live paddock replicas, the first one first. */
  replicaProcesses(): { name: string; pid: number }[] {
    const all: { name: string; pid: number }[] = [];
    if (this.paddock?.pid && this.paddock.exitCode === null)
      all.push({ name: 'paddock-0', pid: this.paddock.pid });
    for (const [name, r] of this.standbys) {
      if (r.child.pid && r.child.exitCode === null) all.push({ name, pid: r.child.pid });
    }
    return all;
  }

  /** `kill -9` of one replica, as a crash or an OOM kill would end it; resolves once it is gone. */
  async killReplica(name: string): Promise<void> {
    const r =
      name === 'paddock-0' ? { child: this.paddock, exit: this.paddockExit } : this.standbys.get(name);
    if (!r?.child || !r.exit) throw new Error(`no paddock replica ${name}`);
    r.child.kill('SIGKILL');
    await r.exit;
  }

  /** Starts a killed replica again with its arguments, as its Deployment would. */
  respawnReplica(name: string): void {
    const n = ++this.respawns;
    if (name === 'paddock-0') {
      const spawned = this.paddockSpawn!;
      const next = this.spawnPaddock(spawned.args, spawned.env, `${spawned.logFile}.respawn-${n}`);
      this.paddock = next.child;
      this.paddockExit = next.exit;
      return;
    }
    const r = this.standbys.get(name);
    if (!r) throw new Error(`no paddock replica ${name}`);
    const next = this.spawnPaddock(r.args, r.env, `${r.logFile}.respawn-${n}`, name);
    this.standbys.set(name, { ...r, ...next });
  }

  /**
   * A new GitHub token for the runners' credentials Secret: added to GitHub, written to the Secret,
   * and the old one revoked after `revokeAfterMs` (by then paddock must have moved to the new one).
   */
  async rotateCredentials(revokeAfterMs: number): Promise<void> {
    const old = this.credentialsToken;
    if (!old) throw new Error('the sandbox has no credentials Secret (credentialsSecret)');
    const next = this.double.addToken({ login: 'paddock-sandbox-runners' }).token;
    await mergePatch(
      this.http!,
      SECRETS,
      { metadata: { namespace: SANDBOX_NAMESPACE, name: CREDENTIALS_SECRET } },
      { stringData: { github_token: next } },
    );
    this.credentialsToken = next;
    this.credentialsTokens.push(next);
    this.timers.push(setTimeout(() => this.double.auth.tokens.delete(old), revokeAfterMs));
  }

  /**
   * Where a credential shows up that must not: paddock's logs, Events, the annotations and labels
   * of every object paddock reads or writes, and each replica's /metrics. The credentials are every
   * GitHub token paddock was given, the workflow_job webhook secret, and every registration token,
   * remove token and JIT config GitHub issued. Each finding names the kind of secret and the place,
   * never the secret.
   */
  async secretExposures(): Promise<string[]> {
    const secrets = new Map<string, string>();
    for (const t of [this.token, ...this.credentialsTokens]) secrets.set(t, 'a GitHub token');
    if (this.webhookSecret) secrets.set(this.webhookSecret, 'the webhook secret');
    for (const t of this.double.model.secretsIssued) {
      secrets.set(t, t.length > 100 ? 'a JIT config' : 'a registration or remove token');
    }
    const places: { where: string; text: string }[] = [];
    const dir = this.plane?.dataDir;
    if (dir) {
      for (const f of readdirSync(dir).filter(
        (f) => f.startsWith('paddock') || f.startsWith('webhook-server'),
      )) {
        places.push({ where: f, text: readFileSync(path.join(dir, f), 'utf8') });
      }
    }
    const http = this.http!;
    const all = async (p: string) =>
      JSON.stringify(await http.request<unknown>('GET', p).catch((err) => ({ unreadable: String(err) })));
    places.push({ where: 'Events (events.k8s.io)', text: await all('/apis/events.k8s.io/v1/events') });
    places.push({ where: 'Events (core)', text: await all('/api/v1/events') });
    for (const ref of [
      PODS,
      RUNNERS,
      RUNNER_DEPLOYMENTS,
      RUNNER_REPLICA_SETS,
      RUNNER_SETS,
      HORIZONTAL_RUNNER_AUTOSCALERS,
    ]) {
      const list = await http
        .request<{ items: KubeObject[] }>('GET', resourcePath(ref))
        .catch(() => ({ items: [] as KubeObject[] }));
      places.push({
        where: `${ref.plural} metadata`,
        text: JSON.stringify(list.items.map((o) => [o.metadata.annotations, o.metadata.labels])),
      });
    }
    const metricsUrls = [
      this.metricsUrl,
      ...[...this.standbys.values()].map((r) => `http://${r.args[r.args.indexOf('--metrics-addr') + 1]}`),
    ];
    for (const url of metricsUrls) {
      if (!url) continue;
      const text = await fetch(`${url}/metrics`).then(
        (r) => r.text(),
        () => '',
      );
      places.push({ where: `${url}/metrics`, text });
    }
    const found = new Set<string>();
    for (const { where, text } of places) {
      // Credentials are runs of token characters: look each run up instead of searching every secret.
      for (const word of text.split(/[^A-Za-z0-9_+/=.-]+/)) {
        const what =
          word.length >= 16 ? (secrets.get(word) ?? secrets.get(word.replace(/[.=]+$/, ''))) : undefined;
        if (what) found.add(`${what} in ${where}`);
      }
    }
    return [...found];
  }

  /** Rate-limited requests of paddock's credentials: its own token and the runners' Secret's (one GitHub user, every rotation). */
  rateLimitedRequests(): number {
    return (
      this.double.rateLimitedRequestCount(this.token) +
      (this.credentialsToken ? this.double.rateLimitedRequestCount(this.credentialsToken) : 0)
    );
  }

  /**
   * Cold start on a live fleet: stops paddock (SIGTERM), starts it again with the same arguments,
   * and measures from the spawn to its first 200 on /readyz (caches synced) and the GitHub requests
   * of its first `settleMs` after that. RSS samples restart with it.
   */
  async restartPaddock(settleMs = 10_000): Promise<{
    readyMs: number;
    startupStepsMs: Record<string, number>;
    githubRequests: number;
    githubRequestsByRoute: Record<string, number>;
    rssAfterSettleMiB: number | null;
  }> {
    const spawned = this.paddockSpawn;
    if (!spawned || !this.paddock) throw new Error('paddock is not running');
    this.restartingPrimary = true;
    this.paddock.kill('SIGTERM');
    await this.paddockExit;
    this.restartingPrimary = false;
    const logBefore = this.double.log.length;
    const started = performance.now();
    const next = this.spawnPaddock(spawned.args, spawned.env, `${spawned.logFile}.restart`);
    this.paddock = next.child;
    this.paddockExit = next.exit;
    this.rssSamples.length = 0;
    // Polled often: the time to ready is the figure.
    await this.untilPaddockReady(`${spawned.logFile}.restart`, 120_000, 10);
    const readyMs = Math.round(performance.now() - started);
    await new Promise((r) => setTimeout(r, settleMs));
    const entries = this.double.log.slice(logBefore);
    const byRoute: Record<string, number> = {};
    for (const e of entries) byRoute[e.route] = (byRoute[e.route] ?? 0) + 1;
    return {
      readyMs,
      startupStepsMs: await this.startupStepsMs(),
      githubRequests: entries.length,
      githubRequestsByRoute: byRoute,
      rssAfterSettleMiB: rssMiB(next.child.pid),
    };
  }

  /**
   * paddock's own record of its start (`process_startup_step_seconds`): milliseconds from its
   * process start to each step; empty when unreadable.
   */
  private async startupStepsMs(): Promise<Record<string, number>> {
    const steps: Record<string, number> = {};
    for (const line of ((await this.scrapeMetrics()) ?? '').split('\n')) {
      const m = /^process_startup_step_seconds\{step="([^"]+)"\} ([\d.e+-]+)$/.exec(line);
      if (m) steps[m[1]!] = Math.round(Number(m[2]) * 1000);
    }
    return steps;
  }

  /** Median of the RSS samples of the run's second half. */
  private steadyRssMiB(): number | null {
    const first = this.rssSamples[0];
    if (!first) return null;
    const half = first.at + (Date.now() - first.at) / 2;
    return percentile(
      this.rssSamples.filter((x) => x.at >= half).map((x) => x.mib),
      50,
    );
  }

  /**
   * With `profileDir`: a heap snapshot of paddock now (node's --heapsnapshot-signal), written to
   * that directory; resolves with its path once it is complete.
   */
  async heapSnapshot(timeoutMs = 120_000): Promise<string> {
    const dir = this.opts.profileDir;
    const pid = this.paddock?.pid;
    if (!dir || !pid) throw new Error('heap snapshots need profileDir and a running paddock');
    const before = new Set(readdirSync(dir));
    process.kill(pid, 'SIGUSR2');
    let last = -1;
    for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 500));
      const file = readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
      if (!file) continue;
      // Node writes the snapshot in one go; a size that stopped growing means it is done.
      const size = statSync(path.join(dir, file)).size;
      if (size > 0 && size === last) return path.join(dir, file);
      last = size;
    }
    throw new Error(`no heap snapshot from paddock in ${dir} after ${timeoutMs} ms`);
  }

  controllerRssMiB(): number | null {
    return rssMiB(this.paddock?.pid);
  }

  summary(): SandboxSummary {
    const seconds = (Date.now() - this.startedAt) / 1000;
    const stats = this.agent?.stats();
    const counted = this.rateLimitedRequests();
    const hours = Math.max(seconds, 1) / 3600;
    return {
      kind: this.opts.kind,
      durationSeconds: Math.round(seconds),
      runners: this.opts.runners,
      ephemeral: this.opts.ephemeral,
      jobs: {
        created: this.workload?.stats().created ?? 0,
        started: stats?.jobsStarted ?? 0,
        completed: stats?.jobsCompleted ?? 0,
        cancelled: stats?.jobsCancelled ?? 0,
        // Jobs lost to chaos (crashed runners, lost nodes) are not the controller's doing.
        cancelledByController: this.cancelledByController,
      },
      leakedRunners: stats?.leakedRunners ?? 0,
      replacementLatencyMs: {
        count: this.replacementLatencies.length,
        p50: percentile(this.replacementLatencies, 50),
        p99: percentile(this.replacementLatencies, 99),
      },
      github: {
        requests: this.double.log.length,
        rateLimitedRequests: counted,
        notModified: this.double.log.filter((e) => e.notModified).length,
        byRoute: this.requestsByRoute(),
        rateLimitedRequestsPerRunnerHour:
          Math.round((counted / hours / Math.max(1, this.opts.runners)) * 100) / 100,
      },
      controller: {
        rssMiB: this.peakRss || this.controllerRssMiB(),
        rssSteadyMiB: this.steadyRssMiB(),
        rssPeakMiB: rssMiB(this.paddock?.pid, 'VmHWM'),
        // Where the resident memory is now: node's own binary and libraries (file) or heap and caches.
        rssAnonMiB: rssMiB(this.paddock?.pid, 'RssAnon'),
        rssFileMiB: rssMiB(this.paddock?.pid, 'RssFile'),
        cpuSeconds: cpuSecondsOf(this.paddock?.pid),
        exitCode: null,
      },
      pods: { seen: stats?.podsSeen ?? 0, started: stats?.podsStarted ?? 0 },
      chaos: { podKills: this.podKills, nodesLost: this.nodesLost },
    };
  }

  /** The sample owner's desired/current/ready figures, as the API server has them now. */
  async ownerFigures(): Promise<OwnerFigures> {
    const obj = await this.http
      ?.request<Parameters<typeof ownerFigures>[2]>(
        'GET',
        resourcePath(sampleResource(this.opts.kind), SANDBOX_NAMESPACE, SAMPLE_NAME),
      )
      .catch(() => undefined);
    return ownerFigures(this.opts.kind, SAMPLE_NAME, obj);
  }

  /** `summary()` with the owner's figures. */
  async summarize(): Promise<SandboxSummary> {
    const s = this.summary();
    s.owner = await this.ownerFigures();
    const listings = await this.listingsByReason();
    if (listings) s.github.listingsByReason = listings;
    const hra = await this.autoscalerFigures();
    if (hra && this.opts.autoscale) {
      s.autoscale = {
        mode: this.opts.autoscale,
        ...hra,
        deliveries: this.webhooks ? { ...this.webhooks.stats } : null,
        idleRunnerMinutes: Math.round((this.idleRunnerMs / 60_000) * 10) / 10,
        queuedJobMinutes: Math.round((this.queuedJobMs() / 60_000) * 10) / 10,
      };
    }
    return s;
  }

  /** paddock's /metrics now; undefined when it does not answer. */
  private async scrapeMetrics(): Promise<string | undefined> {
    if (!this.metricsUrl) return undefined;
    return fetch(`${this.metricsUrl}/metrics`, { signal: AbortSignal.timeout(5000) })
      .then((r) => (r.ok ? r.text() : undefined))
      .catch(() => undefined);
  }

  /** paddock's own count of runner listings by reason, summed over credentials; undefined when unreadable. */
  private async listingsByReason(): Promise<Record<string, number> | undefined> {
    const text = await this.scrapeMetrics();
    if (text === undefined) return undefined;
    const counts: Record<string, number> = {};
    for (const line of text.split('\n')) {
      const m = /^github_runner_registry_listings_total\{.*reason="([^"]+)".*\} (\d+)/.exec(line);
      if (m) counts[m[1]!] = (counts[m[1]!] ?? 0) + Number(m[2]);
    }
    return counts;
  }

  /** Requests per route (`GET /orgs/{org}/actions/runners`: 12), where the API spend went. */
  private requestsByRoute(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const e of this.double.log) counts[e.route] = (counts[e.route] ?? 0) + 1;
    return counts;
  }

  async stop(): Promise<{ paddockExitCode: number | null }> {
    this.stopping = true;
    for (const t of this.timers) clearTimeout(t);
    this.workload?.stop();
    // A step that cannot finish must not keep the processes below running: it is named and skipped.
    const bounded = async (what: string, p: Promise<unknown> | undefined, ms = 30_000) => {
      if (!p) return;
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((r) => {
        timer = setTimeout(() => r('late'), ms);
      });
      const outcome = await Promise.race([
        p.then(
          () => 'done',
          () => 'done',
        ),
        late,
      ]);
      clearTimeout(timer);
      if (outcome === 'late')
        this.opts.log(`[sandbox] stop: ${what} did not finish in ${ms / 1000} s; going on`);
    };
    await bounded('the webhook deliveries', this.webhooks?.stop());
    await bounded('the node agent', this.agent?.stop());
    let code: number | null = null;
    if (this.webhookServer && this.webhookServer.exitCode === null) {
      this.webhookServer.kill('SIGTERM');
      await this.webhookServerExit;
    }
    for (const r of this.standbys.values()) {
      if (r.child.exitCode !== null) continue;
      r.child.kill('SIGTERM');
      const killer = setTimeout(() => r.child.kill('SIGKILL'), 15_000);
      await r.exit;
      clearTimeout(killer);
    }
    if (this.paddock && this.paddock.exitCode === null) {
      this.paddock.kill('SIGTERM');
      const killer = setTimeout(() => this.paddock?.kill('SIGKILL'), 15_000);
      code = await this.paddockExit!;
      clearTimeout(killer);
    }
    await this.double.stop();
    const forwarder = this.webhookForwarder;
    if (forwarder) {
      forwarder.closeAllConnections();
      await bounded('the webhook forwarder', new Promise((r) => forwarder.close(r)));
    }
    this.http?.close();
    await this.plane?.stop();
    return { paddockExitCode: code };
  }
}
