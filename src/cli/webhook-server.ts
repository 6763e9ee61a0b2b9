import type { Logger } from 'pino';
import { podGitHubClients } from '../controllers/github-clients.ts';
import { GitHubClient, GitHubMetrics } from '../github/index.ts';
import { toKubeError } from '../runtime/errors.ts';
import type { ClusterAccess } from '../runtime/kube-http.ts';
import { createLogger } from '../runtime/log.ts';
import { Manager } from '../runtime/manager.ts';
import { type FlagSpec, type FlagValues, parseFlags, renderHelp } from './flags.ts';
import { type RunningGitHubWebhook, startGitHubWebhook } from './github-webhook.ts';
import { type GitHubWebhookConfig, githubConfig, githubWebhookConfig, loadKubeConfig } from './run.ts';
import { GITHUB_WEBHOOK_FLAGS, RUN_FLAGS } from './run-flags.ts';
import { StartupError } from './startup-error.ts';

/** `paddock webhook-server` flags: ARC's github-webhook-server names and defaults (spec §8.2). */
export const WEBHOOK_SERVER_FLAGS: FlagSpec[] = [
  {
    group: 'workflow_job webhook',
    name: 'webhook-addr',
    type: 'string',
    env: 'WEBHOOK_ADDR',
    default: ':8000',
    help: 'address GitHub delivers webhooks to (plain HTTP: put TLS in front, e.g. an Ingress)',
  },
  ...GITHUB_WEBHOOK_FLAGS,
  ...RUN_FLAGS.filter((f) => ['kubeconfig', 'watch-namespace', 'log-level'].includes(f.name)),
  {
    group: 'Kubernetes',
    name: 'sync-period',
    type: 'duration',
    env: 'SYNC_PERIOD',
    default: '10m',
    help: 'accepted for ARC compatibility; the caches follow watches and need no periodic resync here (see --reservation-repair-interval)',
  },
  {
    group: 'Kubernetes',
    name: 'metrics-addr',
    type: 'string',
    env: 'METRICS_ADDR',
    default: ':8080',
    help: 'address of /metrics, /healthz and /readyz; "0" disables',
  },
  {
    group: 'Logging',
    name: 'log-format',
    type: 'string',
    env: 'LOG_FORMAT',
    default: 'json',
    help: 'accepted for ARC compatibility; logs are always JSON',
  },
  ...RUN_FLAGS.filter((f) => f.group === 'GitHub' && f.name !== 'runner-github-url'),
];

export const WEBHOOK_SERVER_SUMMARY =
  'Serves the GitHub workflow_job webhook that drives HorizontalRunnerAutoscalers with\n' +
  'scaleUpTriggers (ARC’s github-webhook-server): a queued job adds a capacity reservation to the\n' +
  'autoscaler whose target’s scope and labels fit it, a completed job releases it. GitHub\n' +
  'credentials are optional: with them, runner-group visibility is checked and reservations\n' +
  'that lost deliveries left wrong are repaired. Every flag can also be set by its variable.';

export interface WebhookServerConfig {
  kubeconfig: string | undefined;
  watchNamespace: string | undefined;
  metricsAddr: string | undefined;
  logLevel: string;
  github: ReturnType<typeof githubConfig>;
  webhook: GitHubWebhookConfig & { addr: string };
}

export function webhookServerConfig(v: FlagValues): WebhookServerConfig {
  const webhook = githubWebhookConfig(v, 'webhook-addr');
  const metrics = v['metrics-addr'] as string;
  return {
    kubeconfig: (v.kubeconfig as string | undefined) || undefined,
    watchNamespace: (v['watch-namespace'] as string) || undefined,
    metricsAddr: metrics === '' || metrics === '0' ? undefined : metrics,
    logLevel: v['log-level'] as string,
    github: githubConfig(v),
    webhook: { ...webhook, addr: webhook.addr ?? ':8000' },
  };
}

export interface WebhookServerProcess {
  manager: Manager;
  webhook: RunningGitHubWebhook;
  stop(): Promise<void>;
}

/** Starts the webhook server: caches of HRAs and their targets, the HTTP endpoint, the repair pass. */
export async function startWebhookServer(
  config: WebhookServerConfig,
  deps: { kubeConfig?: ClusterAccess; handleSignals?: boolean; log?: Logger } = {},
): Promise<WebhookServerProcess> {
  const log = deps.log ?? createLogger({ level: config.logLevel });
  const kubeConfig = deps.kubeConfig ?? loadKubeConfig(config.kubeconfig);
  const manager = new Manager({
    kubeConfig,
    log,
    ...(config.metricsAddr ? { probeAddress: config.metricsAddr } : {}),
    handleSignals: deps.handleSignals ?? false,
    controllerName: 'paddock-webhook-server',
  });
  try {
    await manager.http.request('GET', '/apis/actions.summerwind.dev/v1alpha1', { timeoutMs: 10_000 });
  } catch (err) {
    manager.http.close();
    throw new StartupError(
      `cannot read the actions.summerwind.dev/v1alpha1 resources: ${toKubeError(err).message}`,
    );
  }
  const gh = config.github;
  let defaultClient: GitHubClient | undefined;
  if (gh.credentials) {
    defaultClient = new GitHubClient({
      credentials: gh.credentials,
      endpoints: gh.endpoints,
      clock: manager.clock,
      logger: log,
      metrics: new GitHubMetrics(manager.metrics.registry),
      reserveFraction: gh.rateLimitReserve,
      caBundle: gh.caBundle,
    });
  }
  const clients = defaultClient
    ? podGitHubClients({
        http: manager.http,
        clock: manager.clock,
        log,
        metrics: new GitHubMetrics(manager.metrics.registry),
        defaultClient,
        defaultEndpoints: gh.endpoints,
        reserveFraction: gh.rateLimitReserve,
        ...(gh.caBundle ? { caBundle: gh.caBundle } : {}),
      })
    : undefined;
  const webhook = await startGitHubWebhook({
    config: config.webhook,
    manager,
    github: clients,
    namespace: config.watchNamespace,
    log,
  });
  await manager.start();
  log.info(
    { url: webhook.url, namespace: config.watchNamespace ?? '(all)', probes: manager.probeUrls },
    'paddock webhook-server started',
  );
  return {
    manager,
    webhook,
    async stop() {
      await webhook.stop();
      await manager.stop();
      clients?.pool.close();
      defaultClient?.close();
    },
  };
}

export async function webhookServerCommand(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const { values, help } = parseFlags(WEBHOOK_SERVER_FLAGS, argv, env);
  if (help) {
    process.stdout.write(renderHelp('webhook-server', WEBHOOK_SERVER_SUMMARY, WEBHOOK_SERVER_FLAGS));
    return 0;
  }
  const server = await startWebhookServer(webhookServerConfig(values), { handleSignals: true });
  await new Promise<void>(() => undefined); // runs until a signal stops the manager
  await server.stop();
  return 0;
}
