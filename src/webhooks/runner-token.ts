import type { Logger } from 'pino';
import { z } from 'zod';
import {
  ANNOTATION_CREDS_SECRET,
  ENV_ENTERPRISE,
  ENV_LABELS,
  ENV_ORG,
  ENV_REPO,
  ENV_RUNNER_NAME,
  ENV_RUNNER_TOKEN,
  LABEL_INJECT_REGISTRATION_TOKEN,
  RUNNER_CONTAINER,
  rfc3339,
} from '../controllers/constants.ts';
import { ENV_GROUP } from '../controllers/runner-pod-spec.ts';
import type { GitHubClient, GitHubScope } from '../github/index.ts';
import { GitHubApiError, GitHubConfigError, resolveScope, scopeKey } from '../github/index.ts';
import { diffJson, type JsonPatchOp } from './json-patch.ts';
import type { AdmissionHandler } from './server.ts';

/**
 * The runner-pod mutating webhook: as Kubernetes creates a runner pod (a RunnerSet's StatefulSet
 * pod, or a Runner's pod), it gives the runner container what it needs to register: a registration
 * token (or, when enabled, a just-in-time runner configuration), its runner name, and
 * `restartPolicy: Never` (StatefulSets can only ask for Always).
 */

export const MUTATE_RUNNER_POD_PATH = '/mutate-runner-set-pod';
export { LABEL_INJECT_REGISTRATION_TOKEN };
export const ANNOTATION_TOKEN_EXPIRES_AT = 'actions-runner-controller/token-expires-at';

const ENV_RUNNER_LABELS = ENV_LABELS;
export const ENV_RUNNER_WORKDIR = 'RUNNER_WORKDIR';
export const ENV_RUNNER_EPHEMERAL = 'RUNNER_EPHEMERAL';
/** The actions/runner binary reads any `--<arg>` from `ACTIONS_RUNNER_INPUT_<ARG>`; `run.sh --jitconfig`. */
export const ENV_JIT_CONFIG = 'ACTIONS_RUNNER_INPUT_JITCONFIG';

/** Below the webhook's 10 s timeout, so the API server gets our explanation rather than its own. */
export const DEFAULT_GITHUB_TIMEOUT_MS = 8_000;

/** What the webhook needs of a GitHub client. */
export type RunnerTokenClient = Pick<GitHubClient, 'registrationToken' | 'generateJitConfig'>;

/** Picks the client for a pod (its credentials Secret, or the controller's default); a GitHubClientSource fits. */
export interface RunnerTokenClientSource {
  clientFor(pod: {
    namespace: string;
    name: string;
    credentialsSecret: string | undefined;
  }): Promise<RunnerTokenClient>;
}

/** Just-in-time runner configuration instead of registration tokens (organization and repository scopes). */
export interface JitSettings {
  /** GitHub runner group ID for the runners (default 1, the "Default" group). */
  runnerGroupId?: number | undefined;
  /** Labels every runner gets before the pod's `RUNNER_LABELS` (default `['self-hosted']`). */
  defaultLabels?: string[] | undefined;
}

export interface RunnerTokenInjectorDeps {
  github: RunnerTokenClientSource;
  logger: Logger;
  /** Off (undefined) by default: inject registration tokens. */
  jit?: JitSettings | undefined;
  githubTimeoutMs?: number | undefined;
}

export interface AdmissionContext {
  /** The request's namespace (pods under creation may not carry it yet). */
  namespace: string;
  dryRun?: boolean | undefined;
  /** Aborted when the API server gives up on the request. */
  signal?: AbortSignal | undefined;
}

export interface AdmissionStatus {
  code: number;
  message: string;
  reason?: string | undefined;
}

/** The verdict part of an `admission.k8s.io/v1` AdmissionResponse. */
export interface AdmissionResult {
  allowed: boolean;
  patch?: JsonPatchOp[] | undefined;
  status?: AdmissionStatus | undefined;
  warnings?: string[] | undefined;
}

interface EnvVar {
  name: string;
  value?: string | undefined;
  valueFrom?: unknown;
}

interface Container {
  name: string;
  env?: EnvVar[] | null | undefined;
}

interface Pod {
  kind?: string | undefined;
  metadata?: {
    name?: string | undefined;
    generateName?: string | undefined;
    annotations?: Record<string, string> | null | undefined;
  };
  spec: { containers: Container[]; restartPolicy?: string | undefined };
}

const envSchema = z.looseObject({
  name: z.string(),
  value: z.string().nullish(),
  valueFrom: z.unknown().optional(),
});
const podSchema = z.looseObject({
  kind: z.string().optional(),
  metadata: z
    .looseObject({
      name: z.string().nullish(),
      generateName: z.string().nullish(),
      annotations: z.record(z.string(), z.string()).nullish(),
    })
    .optional(),
  spec: z.looseObject({
    containers: z.array(z.looseObject({ name: z.string(), env: z.array(envSchema).nullish() })),
    restartPolicy: z.string().optional(),
  }),
});

/** Decodes an admission request's pod; the error names the first problem. */
export function decodePod(raw: unknown): { ok: true; pod: Pod } | { ok: false; message: string } {
  const parsed = podSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : 'object';
    return { ok: false, message: `cannot decode the pod: ${where}: ${issue?.message ?? 'invalid'}` };
  }
  if (parsed.data.kind !== undefined && parsed.data.kind !== 'Pod') {
    return { ok: false, message: `cannot decode the pod: kind is ${parsed.data.kind}, expected Pod` };
  }
  return { ok: true, pod: raw as Pod };
}

function envEntries(c: Container, name: string): EnvVar[] {
  return (c.env ?? []).filter((e) => e.name === name);
}

/** The effective entry of a variable (Kubernetes uses the last one of a name). */
function envEntry(c: Container, name: string): EnvVar | undefined {
  return envEntries(c, name).at(-1);
}

function envValue(c: Container, name: string): string {
  return envEntry(c, name)?.value ?? '';
}

/** Unset for our purposes: absent, or an empty value with no `valueFrom`. */
function envIsEmpty(c: Container, name: string): boolean {
  const e = envEntry(c, name);
  return e === undefined || ((e.value ?? '') === '' && e.valueFrom == null);
}

function setEnv(c: Container, name: string, value: string): void {
  const e = envEntry(c, name);
  if (e) e.value = value;
  else {
    c.env ??= [];
    c.env.push({ name, value });
  }
}

function podRef(namespace: string, pod: Pod): string {
  const name =
    pod.metadata?.name || (pod.metadata?.generateName ? `${pod.metadata.generateName}<generated>` : '');
  return `${namespace}/${name}`;
}

function denied(code: number, message: string, reason?: string): AdmissionResult {
  return { allowed: false, status: { code, message, ...(reason ? { reason } : {}) } };
}

function isAbort(err: unknown, signal: AbortSignal): boolean {
  return (
    signal.aborted && (err === signal.reason || (err instanceof Error && /abort|timeout/i.test(err.name)))
  );
}

/** Why a GitHub call failed, in words for whoever reads the StatefulSet's events. */
function causeOf(err: unknown, signal: AbortSignal, timeoutMs: number): string {
  if (isAbort(err, signal)) return `GitHub did not answer within ${Math.round(timeoutMs / 1000)} s`;
  // The error's own message names the limit and when it resets.
  if (err instanceof GitHubApiError && err.kind === 'rateLimited')
    return `GitHub API rate limit exceeded: ${err.message}`;
  if (err instanceof GitHubApiError || err instanceof GitHubConfigError) return err.message;
  return err instanceof Error ? err.message : String(err);
}

const RETRY_NOTE = 'its owner (e.g. a StatefulSet) retries the creation';

/**
 * Decides what to change on a runner pod under creation and answers with the JSON patch that does
 * it. Pods it does not recognise (no `runner` container, no scope variables) pass unchanged.
 * GitHub failures deny the creation with a message naming the pod and the cause.
 */
export async function mutateRunnerPod(
  raw: unknown,
  ctx: AdmissionContext,
  deps: RunnerTokenInjectorDeps,
): Promise<AdmissionResult> {
  const decoded = decodePod(raw);
  if (!decoded.ok) return denied(400, decoded.message, 'BadRequest');
  const original = decoded.pod;
  const pod = structuredClone(original);

  const runner = pod.spec.containers.find((c) => c.name === RUNNER_CONTAINER);
  if (!runner) return { allowed: true };
  // Presence is what counts; empty values are fine (ARC's pods carry all three).
  if (![ENV_ENTERPRISE, ENV_REPO, ENV_ORG].every((n) => envEntry(runner, n) !== undefined)) {
    return { allowed: true };
  }

  const ref = podRef(ctx.namespace, original);
  const log = deps.logger.child({ pod: ref });
  const timeoutMs = deps.githubTimeoutMs ?? DEFAULT_GITHUB_TIMEOUT_MS;
  const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), ...(ctx.signal ? [ctx.signal] : [])]);
  const podName = pod.metadata?.name ?? '';
  const warnings: string[] = [];

  // Pods created with generateName have no name yet; the runner then names itself after its host.
  if (podName !== '' && envIsEmpty(runner, ENV_RUNNER_NAME)) setEnv(runner, ENV_RUNNER_NAME, podName);
  const runnerName = envValue(runner, ENV_RUNNER_NAME) || podName;
  const needsCredential = envIsEmpty(runner, ENV_RUNNER_TOKEN) && envIsEmpty(runner, ENV_JIT_CONFIG);

  let scope: GitHubScope;
  let client: RunnerTokenClient;
  try {
    scope = resolveScope({
      enterprise: envValue(runner, ENV_ENTERPRISE),
      organization: envValue(runner, ENV_ORG),
      repository: envValue(runner, ENV_REPO),
    });
    client = await deps.github.clientFor({
      namespace: ctx.namespace,
      name: podName || (pod.metadata?.generateName ?? ''),
      credentialsSecret: pod.metadata?.annotations?.[ANNOTATION_CREDS_SECRET] || undefined,
    });
  } catch (err) {
    const message = `paddock: runner pod ${ref}: ${causeOf(err, signal, timeoutMs)}`;
    log.warn({ err: message }, 'runner pod webhook: no GitHub client for the pod');
    return denied(500, message, 'InternalError');
  }

  const useJit =
    deps.jit !== undefined &&
    needsCredential &&
    scope.kind !== 'enterprise' &&
    envValue(runner, ENV_RUNNER_EPHEMERAL) !== 'false' &&
    // A JIT config names its group by ID; a group named in the pod is honoured by the runner's own
    // registration instead of silently landing in the default group.
    envValue(runner, ENV_GROUP) === '' &&
    runnerName !== '';

  if (useJit) {
    if (ctx.dryRun) {
      // Creating a JIT runner is a side effect on GitHub; a dry run must not leave one behind.
      warnings.push('dry run: no just-in-time runner configuration was generated');
    } else {
      const jit = deps.jit!;
      const labels = [
        ...(jit.defaultLabels ?? ['self-hosted']),
        ...envValue(runner, ENV_RUNNER_LABELS)
          .split(',')
          .map((l) => l.trim())
          .filter((l) => l !== ''),
      ];
      const workFolder = envValue(runner, ENV_RUNNER_WORKDIR) || undefined;
      let failure: string | undefined;
      try {
        const outcome = await client.generateJitConfig(
          scope,
          {
            name: runnerName,
            runnerGroupId: jit.runnerGroupId ?? 1,
            labels: [...new Set(labels)],
            workFolder,
          },
          { signal },
        );
        switch (outcome.kind) {
          case 'created':
            setEnv(runner, ENV_JIT_CONFIG, outcome.encodedJitConfig);
            log.info(
              { scope: scopeKey(scope), runner: runnerName, runnerId: outcome.runner.id },
              'runner pod webhook: injected a just-in-time runner configuration',
            );
            break;
          case 'nameTaken':
            failure = `a runner named "${runnerName}" is already registered in ${scopeKey(scope)}: ${outcome.message}`;
            break;
          case 'rateLimited':
            failure = `GitHub API rate limit exceeded (${outcome.cause} limit until ${new Date(outcome.resetAt).toISOString()}): ${outcome.message}`;
            break;
          case 'failed':
            failure = `GitHub answered ${outcome.status ?? 'nothing'}: ${outcome.message}`;
            break;
          default:
            failure = `GitHub refused (${outcome.kind}): ${outcome.message}`;
        }
      } catch (err) {
        failure = causeOf(err, signal, timeoutMs);
      }
      if (failure !== undefined) {
        const message = `paddock: cannot create a just-in-time runner configuration for runner pod ${ref} (${scopeKey(scope)}): ${failure}; ${RETRY_NOTE}`;
        log.warn({ err: message }, 'runner pod webhook: denied');
        return denied(500, message, 'InternalError');
      }
    }
  } else if (!envIsEmpty(runner, ENV_JIT_CONFIG)) {
    // Configured by someone else: a runner with a JIT config needs no token.
  } else {
    try {
      // Cached by the client: one GitHub call per scope per half hour however many pods start.
      const token = await client.registrationToken(scope, { signal });
      if (envIsEmpty(runner, ENV_RUNNER_TOKEN)) setEnv(runner, ENV_RUNNER_TOKEN, token.token);
      pod.metadata ??= {};
      pod.metadata.annotations = {
        ...(pod.metadata.annotations ?? {}),
        [ANNOTATION_TOKEN_EXPIRES_AT]: rfc3339(token.expiresAt),
      };
      log.info(
        {
          scope: scopeKey(scope),
          expiresAt: new Date(token.expiresAt).toISOString(),
          injected: needsCredential,
        },
        'runner pod webhook: registration token',
      );
    } catch (err) {
      const cause = causeOf(err, signal, timeoutMs);
      if (needsCredential) {
        const message = `paddock: cannot get a runner registration token for runner pod ${ref} (${scopeKey(scope)}): ${cause}; ${RETRY_NOTE}`;
        log.warn({ err: message }, 'runner pod webhook: denied');
        return denied(500, message, 'InternalError');
      }
      // The pod brought its own token (a Runner's pod): only the informational annotation is lost.
      warnings.push(`paddock: registration token expiry unknown: ${cause}`);
      log.warn({ err: cause }, 'runner pod webhook: token expiry annotation skipped');
    }
  }

  pod.spec.restartPolicy = 'Never';
  const patch = diffJson(original, pod);
  return {
    allowed: true,
    ...(patch.length > 0 ? { patch } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

/** The `/mutate-runner-set-pod` handler for the webhook server. */
export function runnerPodAdmissionHandler(deps: RunnerTokenInjectorDeps): AdmissionHandler {
  return async (request, signal) => {
    if (request.operation !== undefined && request.operation !== 'CREATE') return { allowed: true };
    const object = request.object as { metadata?: { namespace?: unknown } } | undefined;
    const namespace =
      request.namespace || (typeof object?.metadata?.namespace === 'string' ? object.metadata.namespace : '');
    return mutateRunnerPod(request.object, { namespace, dryRun: request.dryRun === true, signal }, deps);
  };
}
