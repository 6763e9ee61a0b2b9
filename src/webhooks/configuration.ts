import { createHash } from 'node:crypto';
import { GROUP, VERSION } from '../api/index.ts';
import { isNotFound } from '../runtime/errors.ts';
import { type KubeHttp, PATCH_CONTENT_TYPES } from '../runtime/kube-http.ts';
import { RUNNER_RESOURCE_WEBHOOKS } from './runner-admission.ts';
import { LABEL_INJECT_REGISTRATION_TOKEN, MUTATE_RUNNER_POD_PATH } from './runner-token.ts';

/**
 * The webhook configurations paddock writes itself at start-up (server-side apply, unless current),
 * with its own CA as the caBundle: the MutatingWebhookConfiguration that sends runner pods to paddock
 * as they are created, and the ValidatingWebhookConfiguration of Runners, RunnerReplicaSets and
 * RunnerDeployments. ARC's defaulters of those kinds change nothing, so paddock serves their paths
 * (for an ARC chart's configuration that still points at them) but does not register them: each
 * would cost the API server a call per Runner created, on the way of every replacement.
 */

export const DEFAULT_WEBHOOK_CONFIGURATION_NAME = 'paddock-runner-pod-token';
export const RUNNER_POD_WEBHOOK_NAME = 'mutate-runner-set-pod.actions.summerwind.dev';
export const FIELD_MANAGER = 'paddock';

export const DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME = 'paddock-runner-resources';

const BASE = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';
const VALIDATING_BASE = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations';
/** The API path of the mutating (`BASE`) or validating configuration `name`. */
const configurationPath = (base: string, name: string) => `${base}/${encodeURIComponent(name)}`;

/**
 * A cluster-scoped owner (the release's ClusterRole): the garbage collector deletes the configuration
 * once the owner is gone, so `helm uninstall` leaves no configuration pointing at a missing Service.
 */
export interface ConfigurationOwner {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

function configurationMetadata(
  name: string,
  options: { labels?: Record<string, string> | undefined; owner?: ConfigurationOwner | undefined },
) {
  return {
    name,
    labels: { 'app.kubernetes.io/managed-by': 'paddock', ...options.labels },
    ...(options.owner ? { ownerReferences: [{ ...options.owner }] } : {}),
  };
}

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
  /** The cluster-scoped object whose deletion should take the configuration with it. */
  owner?: ConfigurationOwner | undefined;
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
    metadata: configurationMetadata(options.name ?? DEFAULT_WEBHOOK_CONFIGURATION_NAME, options),
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

/** On each configuration: the digest of what paddock last applied to it (see applyUnlessCurrent). */
export const ANNOTATION_APPLIED_DIGEST = 'paddock.dev/applied-digest';

/** Whether `actual` has every field of `wanted` with the same value; arrays must match in length. */
export function holdsFields(actual: unknown, wanted: unknown): boolean {
  if (Array.isArray(wanted)) {
    return (
      Array.isArray(actual) &&
      actual.length === wanted.length &&
      wanted.every((w, i) => holdsFields(actual[i], w))
    );
  }
  if (wanted !== null && typeof wanted === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
    const fields = actual as Record<string, unknown>;
    return Object.entries(wanted).every(([k, w]) => Object.hasOwn(fields, k) && holdsFields(fields[k], w));
  }
  return Object.is(actual, wanted);
}

/**
 * Server-side applies `body` (forcing our fields) unless the object holds it already, which a restart
 * with the same CA and flags finds: one GET instead of a write. The API server takes 100–150 ms to
 * admit the validating configuration (it compiles the CEL match conditions), on the way to /readyz,
 * and each write has every API server reload its webhooks.
 *
 * "Holds it": the digest of the last apply is the digest of `body` (a field a newer paddock no longer
 * sets is dropped by applying again), and each field of `body` has its value (a hand edit is undone).
 * A GET that fails for any reason (say, a role without `get` from an older chart) means apply.
 * A write waits for `writesAfter` (paddock's start-up checks); the GET does not.
 */
async function applyUnlessCurrent(
  http: KubeRequests,
  path: string,
  body: Record<string, unknown>,
  writesAfter?: Promise<unknown>,
): Promise<Record<string, unknown>> {
  const digest = `sha256:${createHash('sha256').update(JSON.stringify(body)).digest('hex')}`;
  const existing = await http.request<Record<string, unknown>>('GET', path).catch(() => undefined);
  const annotations = (existing?.metadata as { annotations?: Record<string, string> } | undefined)
    ?.annotations;
  if (existing && annotations?.[ANNOTATION_APPLIED_DIGEST] === digest && holdsFields(existing, body)) {
    return existing;
  }
  await writesAfter;
  const metadata = body.metadata as Record<string, unknown>;
  return http.request<Record<string, unknown>>('PATCH', path, {
    body: {
      ...body,
      metadata: {
        ...metadata,
        annotations: { ...(metadata.annotations as object | undefined), [ANNOTATION_APPLIED_DIGEST]: digest },
      },
    },
    contentType: PATCH_CONTENT_TYPES.apply,
    query: { fieldManager: FIELD_MANAGER, force: true },
  });
}

/** What applying a configuration needs of the API client. */
export type KubeRequests = Pick<KubeHttp, 'request'>;

/**
 * The paths the apply functions below GET for the configurations named `podName` and
 * `resourcesName`: sent early with `readingAhead`, they need not wait for the CA.
 */
export function webhookConfigurationPaths(podName: string, resourcesName: string): string[] {
  return [
    configurationPath(BASE, podName),
    configurationPath(VALIDATING_BASE, resourcesName),
    configurationPath(BASE, resourcesName),
  ];
}

/**
 * `http`, with the GETs of `paths` sent now: the first GET of each is answered from that request,
 * any other request goes to the server when made. At start-up the configurations can be read while
 * the certificates load, so that a restart has nothing left to do once they have.
 */
export function readingAhead(http: KubeRequests, paths: readonly string[]): KubeRequests {
  const early = new Map<string, Promise<unknown>>();
  for (const path of paths) {
    const read = http.request('GET', path);
    read.catch(() => undefined); // handled by the request that takes it, if any
    early.set(path, read);
  }
  return {
    request: ((method: string, path: string, opts?: object) => {
      const read = method === 'GET' && opts === undefined ? early.get(path) : undefined;
      if (!read) return http.request(method as never, path, opts as never);
      early.delete(path);
      return read;
    }) as KubeHttp['request'],
  };
}

/** Creates or updates the configuration (server-side apply, forcing our fields) unless it is current. */
export async function applyRunnerPodWebhookConfiguration(
  http: KubeRequests,
  options: RunnerPodWebhookOptions,
  writesAfter?: Promise<unknown>,
): Promise<Record<string, unknown>> {
  const body = runnerPodWebhookConfiguration(options);
  const name = (body.metadata as { name: string }).name;
  return applyUnlessCurrent(http, configurationPath(BASE, name), body, writesAfter);
}

/** Deletes the configuration; absent is fine. */
export async function deleteRunnerPodWebhookConfiguration(
  http: KubeHttp,
  name = DEFAULT_WEBHOOK_CONFIGURATION_NAME,
): Promise<void> {
  try {
    await http.request('DELETE', configurationPath(BASE, name));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

/** Where the API server reaches paddock, for configurations with several paths. */
export type WebhookEndpoint =
  /** Development and tests: scheme, host and port, e.g. `https://127.0.0.1:9443`; paths are appended. */
  | { baseUrl: string }
  /** In-cluster: the Service in front of paddock. */
  | { service: { namespace: string; name: string; port?: number | undefined } };

export interface RunnerResourceWebhookOptions {
  /** Name of the validating configuration (default `paddock-runner-resources`). */
  name?: string | undefined;
  endpoint: WebhookEndpoint;
  /** PEM of the CA that signed the serving certificate. */
  caBundle: string;
  /** `--watch-namespace`: only objects of this namespace are sent. */
  namespace?: string | undefined;
  /** Default 10. */
  timeoutSeconds?: number | undefined;
  labels?: Record<string, string> | undefined;
  /** The cluster-scoped object whose deletion should take the configuration with it. */
  owner?: ConfigurationOwner | undefined;
}

function clientConfigFor(endpoint: WebhookEndpoint, path: string, caBundle: string): Record<string, unknown> {
  const base64 = Buffer.from(caBundle, 'utf8').toString('base64');
  if ('baseUrl' in endpoint)
    return { url: `${endpoint.baseUrl.replace(/\/+$/, '')}${path}`, caBundle: base64 };
  const { namespace, name, port } = endpoint.service;
  return { service: { namespace, name, path, port: port ?? 443 }, caBundle: base64 };
}

/** CEL: a CREATE, or an UPDATE whose spec differs (guarded: a CEL error would fail the request). */
export const SPEC_CREATED_OR_CHANGED =
  "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec";

/**
 * CEL: not a Runner a RunnerReplicaSet controls. Such a Runner is its set's template, which the set's
 * own webhook validated; one made by anyone else with a made-up owner is deleted by the garbage
 * collector, and the Runner controller still refuses to build a pod from a spec it cannot use.
 */
export const NOT_A_REPLICA_SET_RUNNER =
  "!has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists(r, r.kind == 'RunnerReplicaSet' && has(r.controller) && r.controller)";

/**
 * The ValidatingWebhookConfiguration of Runners, RunnerReplicaSets and RunnerDeployments, one
 * webhook per kind at the names and paths of ARC's Helm chart.
 */
export function runnerResourceWebhookConfiguration(
  options: RunnerResourceWebhookOptions,
): Record<string, unknown> {
  const metadata = configurationMetadata(options.name ?? DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME, options);
  const common = (resource: string) => ({
    admissionReviewVersions: ['v1'],
    rules: [
      {
        operations: ['CREATE', 'UPDATE'],
        apiGroups: [GROUP],
        apiVersions: [VERSION],
        resources: [resource],
        scope: 'Namespaced',
      },
    ],
    ...(options.namespace
      ? { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': options.namespace } } }
      : {}),
    // Fail, as ARC: an object admitted while paddock is down would skip validation for good. The
    // rules cover only the three runner kinds (never pods or anything else in the namespace) and not
    // DELETE. Removing a finalizer is an UPDATE, but the finalizers are paddock's own, removed while
    // it runs; whoever uninstalls paddock deletes these configurations first (as with ARC).
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    // Defaulting and validation are about the spec: an UPDATE that leaves it alone (a finalizer
    // removed, an annotation, a label) is not sent. That is most of paddock's own writes, each of
    // which would cost a webhook call, and it lets finalizers go while paddock is down.
    matchConditions: [
      { name: 'spec-created-or-changed', expression: SPEC_CREATED_OR_CHANGED },
      // A replica set creates a Runner for every replacement: a webhook call on the way of each.
      ...(resource === 'runners'
        ? [{ name: 'not-a-replica-set-runner', expression: NOT_A_REPLICA_SET_RUNNER }]
        : []),
    ],
    // The handlers only read the request.
    sideEffects: 'None',
    timeoutSeconds: options.timeoutSeconds ?? 10,
  });
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata,
    webhooks: RUNNER_RESOURCE_WEBHOOKS.map((w) => ({
      name: w.validateName,
      clientConfig: clientConfigFor(options.endpoint, w.validatePath, options.caBundle),
      ...common(w.resource),
    })),
  };
}

/**
 * Creates or updates the configuration (server-side apply, forcing our fields) unless it is current,
 * and removes the mutating one of the same name that earlier versions of paddock registered.
 */
export async function applyRunnerResourceWebhookConfigurations(
  http: KubeRequests,
  options: RunnerResourceWebhookOptions,
  writesAfter?: Promise<unknown>,
): Promise<void> {
  const validating = runnerResourceWebhookConfiguration(options);
  const name = (validating.metadata as { name: string }).name;
  await Promise.all([
    applyUnlessCurrent(http, configurationPath(VALIDATING_BASE, name), validating, writesAfter),
    deleteIfPresent(http, configurationPath(BASE, name), writesAfter),
  ]);
}

/** Looks first, so that only a configuration that is there waits for `writesAfter` to be deleted. */
async function deleteIfPresent(
  http: KubeRequests,
  path: string,
  writesAfter?: Promise<unknown>,
): Promise<void> {
  try {
    await http.request('GET', path);
  } catch (err) {
    if (isNotFound(err)) return;
    // Unreadable (a role without `get`): delete as before, which says whether it was there.
  }
  await writesAfter;
  await deleteIgnoringNotFound(http, path);
}

async function deleteIgnoringNotFound(http: KubeRequests, path: string): Promise<void> {
  try {
    await http.request('DELETE', path);
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

/** Deletes the configuration (and a mutating one an earlier version left); absent is fine. */
export async function deleteRunnerResourceWebhookConfigurations(
  http: KubeHttp,
  name = DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME,
): Promise<void> {
  // The validating one first: it is the one that turns requests away.
  await deleteIgnoringNotFound(http, configurationPath(VALIDATING_BASE, name));
  await deleteIgnoringNotFound(http, configurationPath(BASE, name));
}

/**
 * The owner reference of `--owner-cluster-role`. A reference to an object that does not exist would
 * have the garbage collector delete the configuration at once, so a missing role is an error.
 */
export async function clusterRoleOwner(http: KubeHttp, name: string): Promise<ConfigurationOwner> {
  const role = await http.request<{ metadata: { uid: string } }>(
    'GET',
    `/apis/rbac.authorization.k8s.io/v1/clusterroles/${encodeURIComponent(name)}`,
  );
  return { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name, uid: role.metadata.uid };
}
