import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import type { Logger } from 'pino';
import { crdManifests, RUNNER_SETS, type RunnerSet } from '../api/index.ts';
import { statefulSetInformer } from '../controllers/cache-shapes.ts';
import { podGitHubClients } from '../controllers/github-clients.ts';
import { HorizontalRunnerAutoscalerReconciler } from '../controllers/horizontal-runner-autoscaler.ts';
import { RunnerReconciler } from '../controllers/runner.ts';
import { RunnerDeploymentReconciler } from '../controllers/runner-deployment.ts';
import { RunnerPodReconciler, type RunnerPodSettings } from '../controllers/runner-pod.ts';
import { DEFAULT_RUNNER_POD_DEFAULTS } from '../controllers/runner-pod-spec.ts';
import { RunnerReplicaSetReconciler } from '../controllers/runner-replica-set.ts';
import { RunnerSetReconciler } from '../controllers/runner-set.ts';
import { VolumeRetentionReconcilers } from '../controllers/volumes.ts';
import { GitHubApiError } from '../github/errors.ts';
import {
  GitHubClient,
  type GitHubCredentials,
  type GitHubEndpoints,
  GitHubMetrics,
  resolveEndpoints,
} from '../github/index.ts';
import { type Clock, realClock } from '../runtime/clock.ts';
import { isNotFound, KubeError, toKubeError } from '../runtime/errors.ts';
import { resourcePath } from '../runtime/informer.ts';
import { type ClusterAccess, type KubeHttp, PATCH_CONTENT_TYPES } from '../runtime/kube-http.ts';
import { type Kubeconfig, loadKubeconfig } from '../runtime/kubeconfig.ts';
import { createLogger } from '../runtime/log.ts';
import { Manager, parseListenAddress } from '../runtime/manager.ts';
import { FIELD_MANAGER } from '../runtime/objects.ts';
import { CUSTOM_RESOURCE_DEFINITIONS } from '../runtime/resources.ts';
import { StartupTimeline } from '../runtime/startup-timeline.ts';
import {
  applyRunnerPodWebhookConfiguration,
  applyRunnerResourceWebhookConfigurations,
  type ConfigurationOwner,
  cachedRunnerPodCluster,
  clusterRoleOwner,
  DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME,
  DEFAULT_WEBHOOK_CONFIGURATION_NAME,
  kubeRunnerPodCluster,
  loadOrCreateWebhookCertificates,
  MUTATE_RUNNER_POD_PATH,
  readingAhead,
  runnerPodAdmissionHandler,
  runnerResourceAdmissionHandlers,
  WebhookCertificateRenewal,
  WebhookServer,
  webhookConfigurationPaths,
} from '../webhooks/index.ts';
import { type FlagValues, parseFlags, renderHelp, UsageError } from './flags.ts';
import { type RunningGitHubWebhook, startGitHubWebhook } from './github-webhook.ts';
import { RUN_FLAGS } from './run-flags.ts';
import { StartupError } from './startup-error.ts';

/** Everything `paddock run` needs, after flags and environment are read and checked. */
export interface RunConfig {
  kubeconfig: string | undefined;
  watchNamespace: string | undefined;
  syncPeriodMs: number;
  defaultScaleDownDelayMs: number;
  leaderElection: { name: string; namespace: string; identity: string } | undefined;
  /** paddock's own namespace (`--leader-election-namespace` / POD_NAMESPACE), with or without leader election: the Lease, the webhook Service and its certificate Secret live there. */
  ownNamespace: string;
  metricsAddr: string | undefined;
  healthProbeAddr: string | undefined;
  credentials: GitHubCredentials | undefined;
  endpoints: GitHubEndpoints;
  caBundle: Buffer | undefined;
  rateLimitReserve: number;
  runnerPod: RunnerPodSettings;
  podDefaults: {
    runnerImage: string;
    dockerImage: string;
    dockerGid: number;
    dockerRegistryMirror: string;
    imagePullSecrets: string[];
    commonRunnerLabels: string[];
    runnerStatusUpdateHook: boolean;
    runnerGitHubUrl: string;
  };
  webhook: {
    addr: string | undefined;
    url: string | undefined;
    service: string;
    jitConfig: boolean;
    /** `--owner-cluster-role`: the ClusterRole whose deletion takes the webhook configurations with it. */
    ownerClusterRole: string | undefined;
    certCheckIntervalMs: number;
    /** PEM of the CA whose client certificates may call the webhook (the API server's). */
    clientCa: string | undefined;
  };
  /** The workflow_job webhook server (`--github-webhook-addr`); off unless an address is given. */
  githubWebhook: GitHubWebhookConfig;
  installCrds: boolean;
  logLevel: string;
}

export interface GitHubWebhookConfig {
  addr: string | undefined;
  secret: string | undefined;
  queueLimit: number;
  repairIntervalMs: number;
}

const off = (addr: unknown) => (typeof addr !== 'string' || addr === '' || addr === '0' ? undefined : addr);

function readPrivateKey(value: string): string {
  const v = value.trim();
  if (v.startsWith('-----BEGIN')) return v;
  if (!existsSync(v)) {
    throw new UsageError(
      '--github-app-private-key / GITHUB_APP_PRIVATE_KEY: neither a PEM key nor the path of an existing file',
    );
  }
  return readFileSync(v, 'utf8').trim();
}

/** The GitHub part of a configuration (shared by `paddock run` and `paddock webhook-server`). */
export function githubConfig(v: FlagValues): {
  credentials: GitHubCredentials | undefined;
  endpoints: GitHubEndpoints;
  caBundle: Buffer | undefined;
  rateLimitReserve: number;
} {
  let credentials: GitHubCredentials | undefined;
  const tokenFile = v['github-token-file'] as string | undefined;
  const token =
    (v['github-token'] as string | undefined)?.trim() ||
    (tokenFile ? readFileSync(tokenFile, 'utf8').trim() : '');
  const appId = v['github-app-id'] as number | undefined;
  const installationId = v['github-app-installation-id'] as number | undefined;
  const appKey = v['github-app-private-key'] as string | undefined;
  if (token) {
    credentials = { kind: 'token', token };
  } else if (appId !== undefined || installationId !== undefined || appKey) {
    const missing = [
      appId === undefined ? '--github-app-id (GITHUB_APP_ID)' : '',
      installationId === undefined ? '--github-app-installation-id (GITHUB_APP_INSTALLATION_ID)' : '',
      appKey ? '' : '--github-app-private-key (GITHUB_APP_PRIVATE_KEY)',
    ].filter(Boolean);
    if (missing.length > 0)
      throw new UsageError(`GitHub App credentials are incomplete: missing ${missing.join(', ')}`);
    credentials = {
      kind: 'app',
      appId: appId!,
      installationId: installationId!,
      privateKey: readPrivateKey(appKey!),
    };
  }
  const reserve = v['github-rate-limit-reserve'] as number;
  if (reserve < 0 || reserve >= 1)
    throw new UsageError('--github-rate-limit-reserve: must be between 0 and 1 (e.g. 0.1)');
  const caPath = v['github-ca-bundle'] as string | undefined;
  const endpoints = resolveEndpoints({
    githubUrl: (v['github-enterprise-url'] as string) || undefined,
    apiUrl: (v['github-url'] as string) || undefined,
  });
  return {
    credentials,
    endpoints,
    caBundle: caPath ? readFileSync(caPath) : undefined,
    rateLimitReserve: reserve,
  };
}

/** The workflow_job webhook part of a configuration. */
export function githubWebhookConfig(v: FlagValues, addrFlag: string): GitHubWebhookConfig {
  const queueLimit = v['queue-limit'] as number;
  if (queueLimit < 0) throw new UsageError('--queue-limit / QUEUE_LIMIT: must not be negative');
  return {
    addr: off(v[addrFlag]),
    secret: ((v['github-webhook-secret-token'] as string | undefined) ?? '') || undefined,
    queueLimit,
    repairIntervalMs: v['reservation-repair-interval'] as number,
  };
}

/** Turns flag values into a checked configuration; every problem names the flag and variable. */
export function runConfig(v: FlagValues): RunConfig {
  const { credentials, endpoints, caBundle, rateLimitReserve: reserve } = githubConfig(v);
  const leaderElect = v['leader-elect'] === true;
  const clientCaPath = (v['webhook-client-ca'] as string | undefined) || undefined;
  if (clientCaPath && !existsSync(clientCaPath)) {
    throw new UsageError(`--webhook-client-ca / WEBHOOK_CLIENT_CA: no file ${clientCaPath}`);
  }
  return {
    kubeconfig: (v.kubeconfig as string | undefined) || undefined,
    watchNamespace: (v['watch-namespace'] as string) || undefined,
    syncPeriodMs: v['sync-period'] as number,
    defaultScaleDownDelayMs: v['default-scale-down-delay'] as number,
    ownNamespace: v['leader-election-namespace'] as string,
    leaderElection: leaderElect
      ? {
          name: v['leader-election-id'] as string,
          namespace: v['leader-election-namespace'] as string,
          identity: `${os.hostname()}_${process.pid}`,
        }
      : undefined,
    metricsAddr: off(v['metrics-addr']),
    healthProbeAddr: off(v['health-probe-addr']),
    credentials,
    endpoints,
    caBundle,
    rateLimitReserve: reserve,
    runnerPod: {
      registrationRecheckIntervalMs: v['registration-recheck-interval'] as number,
      registrationRecheckJitterMs: v['registration-recheck-jitter'] as number,
      registrationTimeoutMs: v['registration-timeout'] as number,
      unregistrationRetryDelayMs: v['unregistration-retry-delay'] as number,
      forceDeleteTimeoutMs: v['force-delete-timeout'] as number,
      githubUnavailableTimeoutMs: v['github-unavailable-timeout'] as number,
    },
    podDefaults: {
      runnerImage: v['runner-image'] as string,
      dockerImage: v['docker-image'] as string,
      dockerGid: v['docker-gid'] as number,
      dockerRegistryMirror: v['docker-registry-mirror'] as string,
      imagePullSecrets: (v['runner-image-pull-secret'] as string[] | undefined) ?? [],
      commonRunnerLabels: (v['common-runner-labels'] as string[] | undefined) ?? [],
      runnerStatusUpdateHook: v['runner-status-update-hook'] === true,
      runnerGitHubUrl: (v['runner-github-url'] as string) || endpoints.serverUrl,
    },
    webhook: {
      addr: off(v['webhook-addr']),
      url: (v['webhook-url'] as string) || undefined,
      service: v['webhook-service'] as string,
      jitConfig: v['webhook-jit-config'] === true,
      ownerClusterRole: (v['owner-cluster-role'] as string) || undefined,
      certCheckIntervalMs: v['webhook-cert-check-interval'] as number,
      clientCa: clientCaPath ? readFileSync(clientCaPath, 'utf8') : undefined,
    },
    githubWebhook: githubWebhookConfig(v, 'github-webhook-addr'),
    installCrds: v['install-crds'] === true,
    logLevel: v['log-level'] as string,
  };
}

/** Server-side applies the CRDs and waits until the API server serves them. */
export async function installCrds(http: Manager['http']): Promise<void> {
  // Parsed once: the five manifests are about 1 MB of YAML.
  const crds = await crdManifests();
  for (const crd of crds) {
    const name = (crd.metadata as { name: string }).name;
    await http.request('PATCH', resourcePath(CUSTOM_RESOURCE_DEFINITIONS, undefined, name), {
      body: crd,
      contentType: PATCH_CONTENT_TYPES.apply,
      query: { fieldManager: FIELD_MANAGER, force: 'true' },
    });
  }
  for (const crd of crds) {
    const name = (crd.metadata as { name: string }).name;
    for (let i = 0; ; i++) {
      const got = await http.request<{ status?: { conditions?: { type: string; status: string }[] } }>(
        'GET',
        resourcePath(CUSTOM_RESOURCE_DEFINITIONS, undefined, name),
      );
      if (got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (i > 100) throw new StartupError(`CRD ${name} did not become Established`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  // Established can come a moment before the API server serves the resources; informers started
  // in that moment would back off on 404s.
  const plurals = crds.map((c) => (c.spec as { names: { plural: string } }).names.plural);
  for (let i = 0; ; i++) {
    const served = await http
      .request<{ resources?: { name: string }[] }>('GET', '/apis/actions.summerwind.dev/v1alpha1')
      .then((l) => new Set((l.resources ?? []).map((r) => r.name)))
      .catch(() => new Set<string>());
    if (plurals.every((p) => served.has(p))) return;
    if (i > 100) throw new StartupError('the actions.summerwind.dev/v1alpha1 resources are not served');
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface Paddock {
  manager: Manager;
  defaultClient: GitHubClient | undefined;
  webhookUrl: string | undefined;
  /** The workflow_job webhook, when `--github-webhook-addr` is set. */
  githubWebhook: RunningGitHubWebhook | undefined;
  stop(): Promise<void>;
}

/**
 * The kubeconfig at `path`, else the default (KUBECONFIG, ~/.kube/config, in-cluster). paddock's own
 * loader: @kubernetes/client-node is never loaded by `paddock run`, `webhook-server` or `uninstall`.
 */
export function loadKubeConfig(path: string | undefined, env: NodeJS.ProcessEnv = process.env): Kubeconfig {
  try {
    return loadKubeconfig({ path, env });
  } catch (err) {
    // The loader's messages name the file(s) themselves.
    throw new StartupError(`cannot load the kubeconfig: ${(err as Error).message}`);
  }
}

/**
 * One `GET /rate_limit` with the default credentials: the message to stop the start with when GitHub
 * refuses them, or undefined. GitHub down or rate limiting us says nothing of the credentials: then
 * paddock starts, and every call backs off until GitHub answers (a controller that exits and restarts
 * into the same limit helps no one). Never rejects.
 */
async function checkGitHubCredentials(
  client: GitHubClient,
  apiBaseUrl: string,
  log: Logger,
): Promise<string | undefined> {
  try {
    await client.transport.request({ kind: 'read', route: 'GET /rate_limit' });
    return undefined;
  } catch (err) {
    if (err instanceof GitHubApiError && err.retryable) {
      log.warn(
        { err: err.message, endpoint: err.endpoint },
        'cannot check the GitHub credentials now; starting anyway, GitHub calls back off until it answers',
      );
      return undefined;
    }
    return `GitHub credentials do not work against ${apiBaseUrl}: ${(err as Error).message}`;
  }
}

/**
 * Whether the cluster answers, has the CRDs (unless paddock installs them) and the default GitHub
 * credentials work: a misconfiguration ends the start with one clear message.
 */
async function preflightChecks(
  manager: Manager,
  config: RunConfig,
  server: string,
  credentialsChecked: Promise<string | undefined>,
): Promise<StartupError | undefined> {
  try {
    await manager.http.request('GET', '/version', { timeoutMs: 10_000 });
    manager.startup.mark('kubernetes api answered');
  } catch (err) {
    return new StartupError(`cannot reach the Kubernetes API at ${server}: ${toKubeError(err).message}`);
  }
  if (!config.installCrds) {
    try {
      await manager.http.request('GET', '/apis/actions.summerwind.dev/v1alpha1');
      manager.startup.mark('crds found');
    } catch (err) {
      return new StartupError(
        `the actions.summerwind.dev/v1alpha1 CRDs are not installed in ${server} (${toKubeError(err).message}); apply config/crd/ or start with --install-crds`,
      );
    }
  }
  const credentialsRefused = await credentialsChecked;
  return credentialsRefused ? new StartupError(credentialsRefused) : undefined;
}

/**
 * Starts the controllers for a configuration. Checks first that the cluster answers and that the
 * default GitHub credentials work (while the caches list), so a misconfiguration fails fast with one
 * clear message.
 */
export async function startPaddock(
  config: RunConfig,
  deps: {
    kubeConfig?: ClusterAccess;
    log?: Logger;
    clock?: Clock;
    handleSignals?: boolean;
    /** The start's steps so far (runCommand marks when paddock's code had loaded). */
    startup?: StartupTimeline;
  } = {},
): Promise<Paddock> {
  const log = deps.log ?? createLogger({ level: config.logLevel });
  const clock = deps.clock ?? realClock;
  const kubeConfig = deps.kubeConfig ?? loadKubeConfig(config.kubeconfig);
  const addresses = [
    ...new Set([config.metricsAddr, config.healthProbeAddr].filter((a): a is string => a !== undefined)),
  ];
  const manager = new Manager({
    kubeConfig,
    log,
    clock,
    ...(addresses.length > 0 ? { probeAddress: addresses } : {}),
    ...(config.leaderElection ? { leaderElection: config.leaderElection } : {}),
    handleSignals: deps.handleSignals ?? false,
    ...(deps.startup ? { startup: deps.startup } : {}),
    onReady: () => log.info({ startupMs: Object.fromEntries(manager.startup.entries()) }, 'paddock ready'),
  });
  const server = kubeConfig.getCurrentCluster()?.server ?? '(none)';
  const metrics = new GitHubMetrics(manager.metrics.registry);
  const defaultClient = config.credentials
    ? new GitHubClient({
        credentials: config.credentials,
        endpoints: config.endpoints,
        clock,
        logger: log, // binds component and credential itself
        metrics,
        reserveFraction: config.rateLimitReserve,
        caBundle: config.caBundle,
      })
    : undefined;
  // GitHub is a round trip away (a few hundred ms from most clusters): its check runs while the
  // Kubernetes API is checked, and is awaited before any controller starts.
  const credentialsChecked = defaultClient
    ? checkGitHubCredentials(defaultClient, config.endpoints.apiBaseUrl, log).finally(() =>
        manager.startup.mark('github credentials checked'),
      )
    : Promise.resolve(undefined);
  const clients = podGitHubClients({
    http: manager.http,
    clock,
    log, // for GitHubClients, which bind component and credential themselves
    metrics,
    ...(defaultClient ? { defaultClient } : {}),
    defaultEndpoints: config.endpoints,
    reserveFraction: config.rateLimitReserve,
    ...(config.caBundle ? { caBundle: config.caBundle } : {}),
  });
  const runnerPods = new RunnerPodReconciler({
    manager,
    github: clients,
    ...(config.watchNamespace ? { namespace: config.watchNamespace } : {}),
    settings: config.runnerPod,
  });
  const podDefaults = {
    ...DEFAULT_RUNNER_POD_DEFAULTS,
    runnerImage: config.podDefaults.runnerImage,
    dockerImage: config.podDefaults.dockerImage,
    dockerGID: String(config.podDefaults.dockerGid),
    dockerRegistryMirror: config.podDefaults.dockerRegistryMirror,
    runnerImagePullSecrets: config.podDefaults.imagePullSecrets,
    useRunnerStatusUpdateHook: config.podDefaults.runnerStatusUpdateHook,
  };
  const watched = config.watchNamespace ? { namespace: config.watchNamespace } : {};
  new RunnerReconciler({
    manager,
    github: clients,
    podDefaults,
    githubBaseUrl: config.podDefaults.runnerGitHubUrl,
    ...watched,
  });
  new RunnerReplicaSetReconciler({
    manager,
    github: clients,
    registrationTimeoutMs: config.runnerPod.registrationTimeoutMs,
    ...watched,
  });
  new RunnerDeploymentReconciler({
    manager,
    commonRunnerLabels: config.podDefaults.commonRunnerLabels,
    ...watched,
  });
  new RunnerSetReconciler({
    manager,
    github: clients,
    podDefaults,
    githubBaseUrl: config.podDefaults.runnerGitHubUrl,
    registrationTimeoutMs: config.runnerPod.registrationTimeoutMs,
    ...(config.watchNamespace ? { namespace: config.watchNamespace } : {}),
  });
  new HorizontalRunnerAutoscalerReconciler({
    manager,
    github: clients,
    defaultScaleDownDelayMs: config.defaultScaleDownDelayMs,
    workflowMetricIntervalMs: config.syncPeriodMs,
    ...watched,
  });
  new VolumeRetentionReconcilers({
    manager,
    ...(config.watchNamespace ? { namespace: config.watchNamespace } : {}),
  });

  // The caches list while the cluster and GitHub are checked: at start-up the lists are most of the
  // wait, and they cost nothing if a check fails (stop() ends them). With --install-crds they wait
  // for the CRDs.
  if (!config.installCrds) manager.startCaches();
  // The checks passed (their refusal is thrown) and the CRDs are installed: what the controllers,
  // and the webhook's configuration writes, wait for.
  const cleared = preflightChecks(manager, config, server, credentialsChecked).then(async (refused) => {
    if (refused) throw refused;
    if (config.installCrds) await installCrds(manager.http);
  });
  // Awaited below; until then a refusal must not count as unhandled.
  cleared.catch(() => undefined);
  let webhook: RunningWebhook | undefined;
  let githubWebhook: RunningGitHubWebhook | undefined;
  const starting: Promise<void>[] = [];
  if (config.webhook.addr) {
    // Its certificates and server start while the checks run: on a restart they were the last
    // step before ready. Only its configurations, which the cluster acts on, wait for them.
    const openWebhookGate = manager.addReadinessGate('webhook');
    const started = startWebhook(config, manager, clients, log, clock, cleared).then((w) => {
      webhook = w;
      openWebhookGate();
    });
    // Awaited below; until then a failure must not count as unhandled.
    started.catch(() => undefined);
    starting.push(started);
  }
  try {
    await cleared;
    if (!defaultClient) {
      log.warn(
        'no default GitHub credentials: only runners whose resources name a githubAPICredentialsFrom Secret can be managed',
      );
    }
    for (const c of manager.allControllers) c.resyncEvery(config.syncPeriodMs);

    // The servers start while the caches list (neither waits for the other); /readyz waits for all.
    const { addr: githubWebhookAddr } = config.githubWebhook;
    if (githubWebhookAddr) {
      const openGitHubWebhookGate = manager.addReadinessGate('github-webhook');
      starting.push(
        startGitHubWebhook({
          config: { ...config.githubWebhook, addr: githubWebhookAddr },
          manager,
          github: clients,
          namespace: config.watchNamespace,
          log,
        }).then((w) => {
          githubWebhook = w;
          openGitHubWebhookGate();
        }),
      );
    }
    await Promise.all([...starting, manager.start()]);
  } catch (err) {
    // Nothing may keep the process alive after a failed start: it must exit with the reason.
    runnerPods.stop();
    await manager.stop().catch(() => undefined);
    // A server still starting is stopped once it has started (or failed to). A webhook whose
    // configurations needed a write stops itself on a refusal; one that needed none is serving.
    await Promise.allSettled(starting);
    await githubWebhook?.stop().catch(() => undefined);
    await webhook?.stop().catch(() => undefined);
    clients.pool.close();
    defaultClient?.close();
    throw startupErrorOf(err);
  }
  log.info(
    {
      kubernetes: server,
      github: config.endpoints.apiBaseUrl,
      namespace: config.watchNamespace ?? '(all)',
      leaderElection: Boolean(config.leaderElection),
      probes: manager.probeUrls,
    },
    'paddock started',
  );
  return {
    manager,
    defaultClient,
    webhookUrl: webhook ? webhook.server.url(MUTATE_RUNNER_POD_PATH) : undefined,
    githubWebhook,
    async stop() {
      runnerPods.stop();
      await githubWebhook?.stop();
      await webhook?.stop();
      await manager.stop();
      clients.pool.close();
      defaultClient?.close();
    },
  };
}

interface RunningWebhook {
  server: WebhookServer;
  stop(): Promise<void>;
}

/**
 * Serves /mutate-runner-set-pod and the Runner, RunnerReplicaSet and RunnerDeployment webhooks over
 * TLS with certificates paddock makes itself (kept in a Secret so replicas share them), and registers
 * the webhook configurations with their CA.
 */
async function startWebhook(
  config: RunConfig,
  manager: Manager,
  clients: ReturnType<typeof podGitHubClients>,
  log: Logger,
  clock: Clock,
  cleared: Promise<void>,
): Promise<RunningWebhook> {
  let listen: ReturnType<typeof parseListenAddress>;
  try {
    listen = parseListenAddress(config.webhook.addr!);
  } catch (err) {
    throw new StartupError(`--webhook-addr: ${(err as Error).message}`);
  }
  const namespace = config.ownNamespace;
  const url = config.webhook.url ? new URL(config.webhook.url) : undefined;
  const ipHost = url && /^[\d.]+$|^\[/.test(url.hostname) ? url.hostname.replace(/^\[|\]$/g, '') : undefined;
  const loadCertificates = () =>
    loadOrCreateWebhookCertificates({
      http: manager.http,
      namespace,
      dnsNames: [
        `${config.webhook.service}.${namespace}.svc`,
        `${config.webhook.service}.${namespace}.svc.cluster.local`,
        ...(url && !ipHost ? [url.hostname] : []),
      ],
      ...(ipHost ? { ipAddresses: [ipHost] } : {}),
    });
  const watched = config.watchNamespace ? { namespace: config.watchNamespace } : {};
  // The RunnerSet controller's informers (the manager shares one per resource and namespace), taken
  // before the first await: the manager starts its informers while this runs.
  const cluster = cachedRunnerPodCluster(kubeRunnerPodCluster(manager.http), {
    statefulSets: statefulSetInformer(manager, config.watchNamespace).store,
    runnerSets: manager.informer<RunnerSet>(RUNNER_SETS, watched).store,
  });
  // One set of configurations per watched namespace, so several paddocks can share a cluster.
  const suffix = config.watchNamespace ? `-${config.watchNamespace}` : '';
  const podConfiguration = `${DEFAULT_WEBHOOK_CONFIGURATION_NAME}${suffix}`;
  const resourceConfiguration = `${DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME}${suffix}`;
  // Read while the certificates load: on a restart they are current and nothing is left to do.
  const kube = readingAhead(manager.http, webhookConfigurationPaths(podConfiguration, resourceConfiguration));
  const [certs, owner] = await Promise.all([
    loadCertificates(),
    ownerOfConfigurations(manager.http, config.webhook.ownerClusterRole),
  ]);
  const server = new WebhookServer({
    tls: certs.serving,
    handlers: {
      [MUTATE_RUNNER_POD_PATH]: runnerPodAdmissionHandler({
        github: clients,
        cluster,
        logger: log.child({ component: 'webhook' }),
        ...(config.webhook.jitConfig ? { jit: {} } : {}),
      }),
      ...runnerResourceAdmissionHandlers(),
    },
    logger: log, // binds component itself
    // ':9443' (ARC's default) listens on every interface.
    host: listen.host ?? '0.0.0.0',
    port: listen.port,
    clientCa: config.webhook.clientCa,
  });
  const port = await server.start();
  const baseUrl = url ? `${url.protocol}//${url.host.replace(/:0$/, `:${port}`)}` : undefined;
  const service = { namespace, name: config.webhook.service, port: 443 };
  // Every configuration carries the CA, so a renewal republishes them all.
  const publishCaBundle = (caBundle: string, writesAfter?: Promise<void>) =>
    Promise.all([
      applyRunnerPodWebhookConfiguration(
        kube,
        {
          name: podConfiguration,
          clientConfig: baseUrl ? { url: `${baseUrl}${MUTATE_RUNNER_POD_PATH}` } : { service },
          caBundle,
          owner,
          ...watched,
        },
        writesAfter,
      ),
      applyRunnerResourceWebhookConfigurations(
        kube,
        {
          name: resourceConfiguration,
          endpoint: baseUrl ? { baseUrl } : { service },
          caBundle,
          owner,
          ...watched,
        },
        writesAfter,
      ),
    ]);
  try {
    // Read now, written (when not current) only once the start-up checks pass; a refusal stops
    // the server. Current ones (a restart) need no wait: nothing is written.
    await publishCaBundle(certs.ca.cert, cleared);
  } catch (err) {
    await server.stop();
    throw err;
  }
  const renewal = new WebhookCertificateRenewal({
    load: loadCertificates,
    current: certs,
    serve: (serving) => server.setCertificate(serving),
    publishCaBundle,
    clock,
    intervalMs: config.webhook.certCheckIntervalMs,
    logger: log.child({ component: 'webhook' }),
  });
  renewal.start();
  return {
    server,
    async stop() {
      await renewal.stop();
      await server.stop();
    },
  };
}

/** A request the API server refused at start-up is a configuration problem, not a crash. */
function startupErrorOf(err: unknown): unknown {
  if (err instanceof StartupError) return err;
  if (err instanceof KubeError && err.code === 403)
    return new StartupError(
      `the API server refused a request paddock needs at start-up: ${err.message}. Grant it to paddock's ServiceAccount (the chart's ClusterRole and Roles do; see charts/paddock/templates/rbac.yaml)`,
    );
  return err;
}

async function ownerOfConfigurations(
  http: KubeHttp,
  name: string | undefined,
): Promise<ConfigurationOwner | undefined> {
  if (!name) return undefined;
  try {
    return await clusterRoleOwner(http, name);
  } catch (err) {
    if (isNotFound(err))
      throw new StartupError(
        `--owner-cluster-role: ClusterRole "${name}" does not exist (the webhook configurations it would own would be deleted at once)`,
      );
    throw err;
  }
}

export const RUN_SUMMARY =
  'Runs the paddock controller manager for ARC manifests (actions.summerwind.dev/v1alpha1): Runner,\n' +
  'RunnerReplicaSet, RunnerDeployment and RunnerSet controllers, the runner pod controller (registration\n' +
  'checks, graceful unregistration, replacement of finished pods, forced deletion of pods on lost nodes),\n' +
  'PVC/PV retention and the admission webhooks. Every flag can also be set by its environment variable.';

export async function runCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const codeLoadedMs = performance.now();
  const { values, help } = parseFlags(RUN_FLAGS, argv, env);
  if (help) {
    process.stdout.write(renderHelp('run', RUN_SUMMARY, RUN_FLAGS));
    return 0;
  }
  const config = runConfig(values);
  const startup = new StartupTimeline();
  startup.mark('node.js bootstrapped', performance.nodeTiming.bootstrapComplete);
  startup.mark('code loaded', codeLoadedMs);
  const paddock = await startPaddock(config, { handleSignals: true, startup });
  await new Promise<void>(() => undefined); // runs until a signal stops the manager
  await paddock.stop();
  return 0;
}
