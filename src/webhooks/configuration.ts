import { isNotFound } from '../runtime/errors.ts';
import { type KubeHttp, PATCH_CONTENT_TYPES } from '../runtime/kube-http.ts';
import { LABEL_INJECT_REGISTRATION_TOKEN, MUTATE_RUNNER_POD_PATH } from './runner-token.ts';

/**
 * The MutatingWebhookConfiguration that sends runner pods to paddock as they are created. paddock
 * writes it itself at start-up (server-side apply), with its own CA as the caBundle.
 */

export const DEFAULT_WEBHOOK_CONFIGURATION_NAME = 'paddock-runner-pod-token';
export const RUNNER_POD_WEBHOOK_NAME = 'mutate-runner-set-pod.actions.summerwind.dev';
export const FIELD_MANAGER = 'paddock';

const BASE = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';

export type WebhookClientConfig =
  /** Development and tests: the server's address, e.g. `https://127.0.0.1:9443/mutate-runner-set-pod`. */
  | { url: string }
  /** In-cluster: the Service in front of paddock; the path is the runner-pod path. */
  | { service: { namespace: string; name: string; port?: number | undefined } };

export interface RunnerPodWebhookOptions {
  /** Object name (default `paddock-runner-pod-token`). */
  name?: string | undefined;
  clientConfig: WebhookClientConfig;
  /** PEM of the CA that signed the serving certificate. */
  caBundle: string;
  /** `--watch-namespace`: only pods of this namespace are sent. */
  namespace?: string | undefined;
  /** Default 10. */
  timeoutSeconds?: number | undefined;
  labels?: Record<string, string> | undefined;
}

/** The MutatingWebhookConfiguration object. */
export function runnerPodWebhookConfiguration(options: RunnerPodWebhookOptions): Record<string, unknown> {
  const clientConfig =
    'url' in options.clientConfig
      ? { url: options.clientConfig.url }
      : {
          service: {
            namespace: options.clientConfig.service.namespace,
            name: options.clientConfig.service.name,
            path: MUTATE_RUNNER_POD_PATH,
            port: options.clientConfig.service.port ?? 443,
          },
        };
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: {
      name: options.name ?? DEFAULT_WEBHOOK_CONFIGURATION_NAME,
      labels: { 'app.kubernetes.io/managed-by': 'paddock', ...options.labels },
    },
    webhooks: [
      {
        name: RUNNER_POD_WEBHOOK_NAME,
        admissionReviewVersions: ['v1'],
        clientConfig: { ...clientConfig, caBundle: Buffer.from(options.caBundle, 'utf8').toString('base64') },
        rules: [
          {
            operations: ['CREATE'],
            apiGroups: [''],
            apiVersions: ['v1'],
            resources: ['pods'],
            scope: 'Namespaced',
          },
        ],
        // Only runner pods carry this label, so no other pod is ever sent here, and none can be
        // blocked by an outage of paddock.
        objectSelector: { matchLabels: { [LABEL_INJECT_REGISTRATION_TOKEN]: 'true' } },
        ...(options.namespace
          ? { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': options.namespace } } }
          : {}),
        // Fail, as ARC's Helm chart: a runner pod admitted without a token only crash-loops
        // ("RUNNER_TOKEN must be set") and never registers, whereas a denied creation is retried by
        // its StatefulSet (with back-off) until paddock answers. Thanks to the object selector, the
        // only pods an outage holds back are runner pods, which could not have worked anyway.
        failurePolicy: 'Fail',
        matchPolicy: 'Equivalent',
        // The webhook writes the pod's token Secret (and, in JIT mode, creates the runner on
        // GitHub); a dry run does neither.
        sideEffects: 'NoneOnDryRun',
        timeoutSeconds: options.timeoutSeconds ?? 10,
        reinvocationPolicy: 'Never',
      },
    ],
  };
}

/** Creates or updates the configuration (server-side apply, forcing our fields). */
export async function applyRunnerPodWebhookConfiguration(
  http: KubeHttp,
  options: RunnerPodWebhookOptions,
): Promise<Record<string, unknown>> {
  const body = runnerPodWebhookConfiguration(options);
  const name = (body.metadata as { name: string }).name;
  return http.request<Record<string, unknown>>('PATCH', `${BASE}/${encodeURIComponent(name)}`, {
    body,
    contentType: PATCH_CONTENT_TYPES.apply,
    query: { fieldManager: FIELD_MANAGER, force: true },
  });
}

/** Deletes the configuration; absent is fine. */
export async function deleteRunnerPodWebhookConfiguration(
  http: KubeHttp,
  name = DEFAULT_WEBHOOK_CONFIGURATION_NAME,
): Promise<void> {
  try {
    await http.request('DELETE', `${BASE}/${encodeURIComponent(name)}`);
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
