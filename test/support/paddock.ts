import type { KubeConfig } from '@kubernetes/client-node';
import { parseFlags } from '../../src/cli/flags.ts';
import { type Paddock, runConfig, startPaddock } from '../../src/cli/run.ts';
import { RUN_FLAGS } from '../../src/cli/run-flags.ts';
import { resourcePath } from '../../src/runtime/informer.ts';
import { KubeHttp } from '../../src/runtime/kube-http.ts';
import { createLogger } from '../../src/runtime/log.ts';
import { PODS } from '../../src/runtime/resources.ts';
import {
  DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME,
  DEFAULT_WEBHOOK_CONFIGURATION_NAME,
  deleteRunnerPodWebhookConfiguration,
  deleteRunnerResourceWebhookConfigurations,
} from '../../src/webhooks/configuration.ts';

/**
 * `paddock run` inside the test process, for one namespace: everything on 127.0.0.1 (probes, metrics
 * and the webhook on free ports), timings short enough for tests, the CRDs installed, and every log
 * line kept in `logLines` for failure messages. `flags` come last and win.
 */
export async function startTestPaddock(opts: {
  kubeConfig: KubeConfig;
  namespace: string;
  /** GITHUB_TOKEN, GITHUB_URL, … as the environment of `paddock run`. */
  env: Record<string, string>;
  flags?: string[];
  logLevel?: string;
  logLines?: string[];
}): Promise<{ paddock: Paddock; logLines: string[] }> {
  const logLines = opts.logLines ?? [];
  const { values } = parseFlags(
    RUN_FLAGS,
    [
      '--watch-namespace',
      opts.namespace,
      '--metrics-addr',
      '0',
      '--health-probe-addr',
      '0',
      '--webhook-addr',
      '127.0.0.1:0',
      '--webhook-url',
      'https://127.0.0.1:0',
      '--leader-election-namespace',
      opts.namespace,
      '--registration-recheck-interval',
      '1s',
      '--registration-recheck-jitter',
      '100ms',
      '--unregistration-retry-delay',
      '1s',
      '--sync-period',
      '5s',
      '--install-crds',
      ...(opts.flags ?? []),
    ],
    opts.env,
  );
  const paddock = await startPaddock(runConfig(values), {
    kubeConfig: opts.kubeConfig,
    log: createLogger({
      level: opts.logLevel ?? 'debug',
      destination: { write: (line: string) => logLines.push(line) } as never,
    }),
  });
  return { paddock, logLines };
}

/**
 * Deletes the webhook configurations `paddock run --watch-namespace <namespace>` registered: the
 * runner pod one, and the Fail-closed ones of Runners, RunnerReplicaSets and RunnerDeployments, which
 * would otherwise turn away every later write of those kinds in the namespace.
 */
export async function deleteTestWebhookConfiguration(
  kubeConfig: KubeConfig,
  namespace: string,
): Promise<void> {
  // Its own client: paddock's may be closed already.
  const http = new KubeHttp(kubeConfig);
  try {
    // Settled, not all: the client must stay open until both are done.
    await Promise.allSettled([
      deleteRunnerResourceWebhookConfigurations(
        http,
        `${DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME}-${namespace}`,
      ),
      deleteRunnerPodWebhookConfiguration(http, `${DEFAULT_WEBHOOK_CONFIGURATION_NAME}-${namespace}`),
    ]);
  } finally {
    http.close();
  }
}

/**
 * Stops what a fleet test started, in order, whatever of it did start: the simulated kubelet,
 * paddock, its webhook configurations, the pods (no kubelet will ever finish them, and the namespace
 * cannot go while they stay), the API client and the GitHub double.
 */
export async function stopTestFleet(parts: {
  kubeConfig: KubeConfig;
  namespace: string;
  agent?: { stop(): Promise<void> } | undefined;
  paddock?: Paddock | undefined;
  http?: KubeHttp | undefined;
  double: { stop(): Promise<void> };
}): Promise<void> {
  await parts.agent?.stop();
  await parts.paddock?.stop();
  await deleteTestWebhookConfiguration(parts.kubeConfig, parts.namespace);
  await parts.http
    ?.request('DELETE', resourcePath(PODS, parts.namespace), { query: { gracePeriodSeconds: 0 } })
    .catch(() => undefined);
  parts.http?.close();
  await parts.double.stop();
}
