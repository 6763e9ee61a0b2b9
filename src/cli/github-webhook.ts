import type { Logger } from 'pino';
import type { GitHubClientSource } from '../controllers/runner-pod.ts';
import { WorkflowJobScaler } from '../controllers/workflow-job-scaler.ts';
import { type Manager, parseListenAddress } from '../runtime/manager.ts';
import { GitHubWebhookServer } from '../webhooks/github-webhook-server.ts';
import type { GitHubWebhookConfig } from './run.ts';
import { StartupError } from './startup-error.ts';

export interface RunningGitHubWebhook {
  scaler: WorkflowJobScaler;
  server: GitHubWebhookServer;
  /** Where GitHub should send deliveries (loopback when listening on every interface). */
  url: string;
  stop(): Promise<void>;
}

/**
 * Serves the workflow_job webhook (spec §7.5) for `paddock webhook-server` and `paddock run
 * --github-webhook-addr`. The repair pass starts with it and runs only while `manager` leads.
 */
export async function startGitHubWebhook(input: {
  config: GitHubWebhookConfig & { addr: string };
  manager: Manager;
  github: GitHubClientSource | undefined;
  namespace: string | undefined;
  log: Logger;
}): Promise<RunningGitHubWebhook> {
  let listen: ReturnType<typeof parseListenAddress>;
  try {
    listen = parseListenAddress(input.config.addr);
  } catch (err) {
    throw new StartupError(`webhook address ${input.config.addr}: ${(err as Error).message}`);
  }
  const scaler = new WorkflowJobScaler({
    manager: input.manager,
    namespace: input.namespace,
    github: input.github,
    queueLimit: input.config.queueLimit,
    repairIntervalMs: input.config.repairIntervalMs,
  });
  const server = new GitHubWebhookServer({
    host: listen.host ?? '0.0.0.0',
    port: listen.port,
    secret: input.config.secret,
    handle: (event, payload, signal) => scaler.handle(event, payload, signal),
    ready: () => input.manager.ready,
    log: input.log.child({ component: 'github-webhook' }),
    registry: input.manager.metrics.registry,
    now: () => input.manager.clock.now(),
  });
  try {
    await server.start();
  } catch (err) {
    throw new StartupError(`cannot listen on ${input.config.addr}: ${(err as Error).message}`);
  }
  scaler.start();
  if (!input.github) {
    input.log.warn(
      'the workflow_job webhook has no GitHub credentials: every runner group counts as visible, and lost deliveries are not repaired',
    );
  }
  return {
    scaler,
    server,
    url: server.url,
    async stop() {
      await server.stop();
      await scaler.stop();
    },
  };
}
