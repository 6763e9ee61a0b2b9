import type { Logger } from 'pino';
import {
  ANNOTATION_CREDS_SECRET,
  ANNOTATION_RUNNER_ID,
  ANNOTATION_TOKEN_EXPIRES_AT,
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
import type {
  GitHubClient,
  GitHubScope,
  JitConfigInput,
  JitConfigOutcome,
  RunnerRegistry,
} from '../github/index.ts';
import { GitHubApiError, GitHubConfigError, resolveScope, scopeKey } from '../github/index.ts';
import { toKubeError } from '../runtime/errors.ts';
import { invalidSubdomainReason } from '../runtime/names.ts';
import type { OwnerReference } from '../runtime/store.ts';
import * as z from '../runtime/zod.ts';
import { recordedRunnerFor, staleRunnerVerdict } from './jit-collision.ts';
import { diffJson, type JsonPatchOp } from './json-patch.ts';
import {
  type RunnerPodClaims,
  type RunnerPodCluster,
  type VerifiedOwner,
  verifyRunnerSetPod,
} from './runner-set-owner.ts';
import type { AdmissionHandler } from './server.ts';
import {
  invalidTokenSecretName,
  type RunnerCredential,
  recordedJitRunner,
  tokenSecret,
  tokenSecretKey,
  tokenSecretName,
} from './token-secret.ts';

/**
 * The runner-pod mutating webhook: as Kubernetes creates a RunnerSet's runner pod, it gives the
 * runner container what it needs to register: a registration token (or, when enabled, a
 * just-in-time runner configuration), its runner name, and `restartPolicy: Never` (StatefulSets
 * can only ask for Always).
 *
 * The credential never travels in the admission response: it goes into a Secret paddock owns (see
 * token-secret.ts) and the container's env refers to it. And it is issued only to a pod whose owner
 * chain, as the API server has it, leads to a RunnerSet of the same namespace whose scope and
 * credentials Secret are the ones the pod asks for (see runner-set-owner.ts). A hand-made
 * AdmissionReview sent straight to the webhook's port therefore learns nothing.
 */

export const MUTATE_RUNNER_POD_PATH = '/mutate-runner-set-pod';
export { ANNOTATION_TOKEN_EXPIRES_AT, LABEL_INJECT_REGISTRATION_TOKEN };

const ENV_RUNNER_LABELS = ENV_LABELS;
export const ENV_RUNNER_WORKDIR = 'RUNNER_WORKDIR';
export const ENV_RUNNER_EPHEMERAL = 'RUNNER_EPHEMERAL';
/** The actions/runner binary reads any `--<arg>` from `ACTIONS_RUNNER_INPUT_<ARG>`; `run.sh --jitconfig`. */
export const ENV_JIT_CONFIG = 'ACTIONS_RUNNER_INPUT_JITCONFIG';

/** Below the webhook's 10 s timeout, so the API server gets our explanation rather than its own. */
export const DEFAULT_GITHUB_TIMEOUT_MS = 8_000;

/** What the webhook needs of a GitHub client. */
export type RunnerTokenClient = Pick<
  GitHubClient,
  'registrationToken' | 'generateJitConfig' | 'removeRunner'
> & {
  /** To check, after a JIT name collision, that the runner holding the name is paddock's and offline. */
  registry: Pick<RunnerRegistry, 'refreshNow'>;
};

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
  /** Owner checks and the token Secrets (`kubeRunnerPodCluster(http)`). */
  cluster: RunnerPodCluster;
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
    ownerReferences?: OwnerReference[] | null | undefined;
  };
  spec: { containers: Container[]; restartPolicy?: string | undefined };
}

const envSchema = z.looseObject({
  name: z.string(),
  value: z.nullish(z.string()),
  valueFrom: z.optional(z.unknown()),
});
const podSchema = z.looseObject({
  kind: z.optional(z.string()),
  metadata: z.optional(
    z.looseObject({
      name: z.nullish(z.string()),
      generateName: z.nullish(z.string()),
      annotations: z.nullish(z.record(z.string(), z.string())),
      ownerReferences: z.nullish(
        z.array(
          z.looseObject({
            apiVersion: z.string(),
            kind: z.string(),
            name: z.string(),
            uid: z.string(),
            controller: z.nullish(z.boolean()),
          }),
        ),
      ),
    }),
  ),
  spec: z.looseObject({
    containers: z.array(z.looseObject({ name: z.string(), env: z.nullish(z.array(envSchema)) })),
    restartPolicy: z.optional(z.string()),
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

function kubeCause(err: unknown): string {
  const e = toKubeError(err);
  return e.code > 0 ? `${e.message} (${e.code} ${e.reason})` : e.message;
}

const RETRY_NOTE = 'its owner (e.g. a StatefulSet) retries the creation';

/** The env value when it is a literal, null when it comes from `valueFrom`; absent reads as empty. */
function literalEnv(c: Container, name: string): string | null {
  const e = envEntry(c, name);
  if (!e) return '';
  return e.valueFrom == null ? (e.value ?? '') : null;
}

function claimsOf(pod: Pod, runner: Container): RunnerPodClaims {
  return {
    ownerReferences: pod.metadata?.ownerReferences ?? [],
    scope: {
      enterprise: literalEnv(runner, ENV_ENTERPRISE),
      organization: literalEnv(runner, ENV_ORG),
      repository: literalEnv(runner, ENV_REPO),
    },
    credentialsSecret: pod.metadata?.annotations?.[ANNOTATION_CREDS_SECRET] || undefined,
  };
}

/** Points the variable at a Secret key; an empty literal value on the entry goes. */
function referSecret(c: Container, name: string, secretName: string, key: string): void {
  const valueFrom = { secretKeyRef: { name: secretName, key } };
  const e = envEntry(c, name);
  if (e) {
    delete e.value;
    e.valueFrom = valueFrom;
  } else {
    c.env ??= [];
    c.env.push({ name, valueFrom });
  }
}

function annotate(pod: Pod, key: string, value: string): void {
  pod.metadata ??= {};
  pod.metadata.annotations = { ...(pod.metadata.annotations ?? {}), [key]: value };
}

/** Allows the creation with what was changed on `pod`, and `restartPolicy: Never`. */
function admit(original: Pod, pod: Pod, warnings: string[]): AdmissionResult {
  pod.spec.restartPolicy = 'Never';
  const patch = diffJson(original, pod);
  return {
    allowed: true,
    ...(patch.length > 0 ? { patch } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

/** One admission of a verified RunnerSet pod, shared by the token and the JIT paths. */
interface VerifiedAdmission {
  ctx: AdmissionContext;
  deps: RunnerTokenInjectorDeps;
  pod: Pod;
  runner: Container;
  ref: string;
  log: Logger;
  signal: AbortSignal;
  timeoutMs: number;
  scope: GitHubScope;
  client: RunnerTokenClient;
  owner: VerifiedOwner;
  runnerName: string;
  needsCredential: boolean;
  warnings: string[];
}

/**
 * Writes the credential into the StatefulSet's token Secret and points the runner container at it.
 * Returns the denial when the Secret cannot be written; the message never carries the credential.
 */
async function storeCredential(
  a: VerifiedAdmission,
  credential: RunnerCredential,
): Promise<string | undefined> {
  const secret = tokenSecret({
    namespace: a.ctx.namespace,
    statefulSet: a.owner.statefulSet,
    runnerSetName: a.owner.runnerSet.metadata.name ?? '',
    credential,
  });
  const secretName = tokenSecretName(a.owner.statefulSet.name);
  if (!a.ctx.dryRun) {
    try {
      await a.deps.cluster.applySecret(secret);
    } catch (err) {
      const value = credential.kind === 'registrationToken' ? credential.token : credential.encodedJitConfig;
      const cause = kubeCause(err).replaceAll(value, '[redacted]');
      return `cannot write the runner's credential into Secret ${a.ctx.namespace}/${secretName}: ${cause}`;
    }
  }
  const env = credential.kind === 'registrationToken' ? ENV_RUNNER_TOKEN : ENV_JIT_CONFIG;
  referSecret(a.runner, env, secretName, tokenSecretKey(credential.kind));
  return undefined;
}

function deny500(a: VerifiedAdmission, what: string, failure: string): AdmissionResult {
  const message = `paddock: ${what} for runner pod ${a.ref} (${scopeKey(a.scope)}): ${failure}; ${RETRY_NOTE}`;
  a.log.warn({ err: message }, 'runner pod webhook: denied');
  return denied(500, message, 'InternalError');
}

/** Registration-token path; undefined means "carry on". */
async function injectRegistrationToken(a: VerifiedAdmission): Promise<AdmissionResult | undefined> {
  let token: Awaited<ReturnType<RunnerTokenClient['registrationToken']>>;
  try {
    // Cached by the client: one GitHub call per scope per half hour however many pods start.
    token = await a.client.registrationToken(a.scope, { signal: a.signal });
  } catch (err) {
    const cause = causeOf(err, a.signal, a.timeoutMs);
    if (a.needsCredential) return deny500(a, 'cannot get a runner registration token', cause);
    // The pod brought its own token: only the informational annotation is lost.
    a.warnings.push(`paddock: registration token expiry unknown: ${cause}`);
    a.log.warn({ err: cause }, 'runner pod webhook: token expiry annotation skipped');
    return undefined;
  }
  if (a.needsCredential) {
    const failure = await storeCredential(a, { kind: 'registrationToken', token: token.token });
    if (failure !== undefined) return deny500(a, 'cannot hand over a runner registration token', failure);
  }
  annotate(a.pod, ANNOTATION_TOKEN_EXPIRES_AT, rfc3339(token.expiresAt));
  a.log.info(
    {
      scope: scopeKey(a.scope),
      expiresAt: new Date(token.expiresAt).toISOString(),
      injected: a.needsCredential,
      dryRun: a.ctx.dryRun === true,
    },
    'runner pod webhook: registration token',
  );
  return undefined;
}

type JitAttempt = JitConfigOutcome | { kind: 'thrown'; cause: string };

async function generateJit(a: VerifiedAdmission, input: JitConfigInput): Promise<JitAttempt> {
  try {
    return await a.client.generateJitConfig(a.scope, input, { signal: a.signal });
  } catch (err) {
    return { kind: 'thrown', cause: causeOf(err, a.signal, a.timeoutMs) };
  }
}

function jitFailure(a: VerifiedAdmission, outcome: Exclude<JitAttempt, { kind: 'created' }>): string {
  switch (outcome.kind) {
    case 'thrown':
      return outcome.cause;
    case 'nameTaken':
      return `a runner named "${a.runnerName}" is already registered in ${scopeKey(a.scope)}: ${outcome.message}`;
    case 'rateLimited':
      return `GitHub API rate limit exceeded (${outcome.cause} limit until ${new Date(outcome.resetAt).toISOString()}): ${outcome.message}`;
    case 'failed':
      return `GitHub answered ${outcome.status ?? 'nothing'}: ${outcome.message}`;
    default:
      return `GitHub refused (${outcome.kind}): ${outcome.message}`;
  }
}

/**
 * After a 409 on the pod's runner name: removes the runner holding it when it provably is the one
 * paddock created for this pod (recorded in the StatefulSet's token Secret) and is offline and idle.
 * Returns why not, or undefined once the name is free.
 */
async function freeRunnerName(a: VerifiedAdmission): Promise<string | undefined> {
  const secretName = tokenSecretName(a.owner.statefulSet.name);
  let recorded: ReturnType<typeof recordedRunnerFor>;
  try {
    const secret = await a.deps.cluster.secret(a.ctx.namespace, secretName, a.signal);
    recorded = recordedRunnerFor(a.runnerName, recordedJitRunner(secret, a.owner.statefulSet.uid));
  } catch (err) {
    return `its token Secret ${a.ctx.namespace}/${secretName} could not be read: ${kubeCause(err)}`;
  }
  if (!recorded.ok) return recorded.reason;
  let verdict: ReturnType<typeof staleRunnerVerdict>;
  try {
    // A conditional listing: free when nothing changed since the last one.
    const runners = await a.client.registry.refreshNow(a.scope, { signal: a.signal });
    verdict = staleRunnerVerdict(a.runnerName, recorded.runnerId, runners.byId(recorded.runnerId));
  } catch (err) {
    return `GitHub's runner list could not be read: ${causeOf(err, a.signal, a.timeoutMs)}`;
  }
  if (!verdict.remove) return verdict.reason;
  try {
    const removed = await a.client.removeRunner(a.scope, verdict.runnerId, { signal: a.signal });
    if (removed.kind !== 'removed' && removed.kind !== 'notFound') {
      return `removing the stale runner ${verdict.runnerId} failed (${removed.kind}): ${removed.message}`;
    }
  } catch (err) {
    return `removing the stale runner ${verdict.runnerId} failed: ${causeOf(err, a.signal, a.timeoutMs)}`;
  }
  a.log.info(
    { scope: scopeKey(a.scope), runner: a.runnerName, runnerId: verdict.runnerId },
    'runner pod webhook: removed the offline runner paddock had created for an earlier pod of this name',
  );
  return undefined;
}

/** Just-in-time configuration path; undefined means "carry on". */
async function injectJitConfig(a: VerifiedAdmission, jit: JitSettings): Promise<AdmissionResult | undefined> {
  const what = 'cannot create a just-in-time runner configuration';
  const labels = [
    ...(jit.defaultLabels ?? ['self-hosted']),
    ...envValue(a.runner, ENV_RUNNER_LABELS)
      .split(',')
      .map((l) => l.trim())
      .filter((l) => l !== ''),
  ];
  const input: JitConfigInput = {
    name: a.runnerName,
    runnerGroupId: jit.runnerGroupId ?? 1,
    labels: [...new Set(labels)],
    workFolder: envValue(a.runner, ENV_RUNNER_WORKDIR) || undefined,
  };
  let outcome = await generateJit(a, input);
  if (outcome.kind === 'nameTaken') {
    const refused = await freeRunnerName(a);
    if (refused !== undefined) {
      return deny500(a, what, `${jitFailure(a, outcome)}; it is not removed because ${refused}`);
    }
    outcome = await generateJit(a, input);
  }
  if (outcome.kind !== 'created') return deny500(a, what, jitFailure(a, outcome));
  const created = outcome.runner;
  const failure = await storeCredential(a, {
    kind: 'jitConfig',
    encodedJitConfig: outcome.encodedJitConfig,
    runnerId: created.id,
    runnerName: created.name,
  });
  if (failure !== undefined) {
    // Nothing records the new runner: remove it now, or its name would stay taken for good.
    await a.client
      .removeRunner(a.scope, created.id, { signal: AbortSignal.timeout(a.timeoutMs) })
      .catch(() => undefined);
    return deny500(a, what, failure);
  }
  annotate(a.pod, ANNOTATION_RUNNER_ID, String(created.id));
  a.log.info(
    { scope: scopeKey(a.scope), runner: a.runnerName, runnerId: created.id },
    'runner pod webhook: injected a just-in-time runner configuration',
  );
  return undefined;
}

/**
 * Decides what to change on a runner pod under creation and answers with the JSON patch that does
 * it. Pods it does not recognise (no `runner` container, no scope variables) pass unchanged. A pod
 * that needs a credential gets one only when it is verified as its RunnerSet's pod; otherwise, and
 * on GitHub failures, the creation is denied with a message naming the pod and the cause.
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

  const claims = claimsOf(pod, runner);
  if (claims.credentialsSecret !== undefined) {
    const invalid = invalidSubdomainReason(
      `the credentials Secret (annotation ${ANNOTATION_CREDS_SECRET})`,
      claims.credentialsSecret,
    );
    if (invalid) return denied(400, `paddock: runner pod ${ref}: ${invalid}`, 'BadRequest');
  }

  let owner: VerifiedOwner;
  try {
    const verdict = await verifyRunnerSetPod(ctx.namespace, claims, deps.cluster, signal);
    if (!verdict.ok) {
      if (needsCredential) {
        const message = `paddock: runner pod ${ref} gets no runner credential: ${verdict.reason}; the webhook serves only pods of a RunnerSet's StatefulSet in the same namespace, with the RunnerSet's scope and credentials Secret`;
        log.warn({ reason: verdict.reason }, 'runner pod webhook: denied an unverified runner pod');
        return denied(403, message, 'Forbidden');
      }
      // It brought its own token or JIT config: nothing to hand out, and no GitHub call for it.
      log.debug(
        { reason: verdict.reason },
        'runner pod webhook: admitted an unverified pod with its own credential',
      );
      return admit(original, pod, warnings);
    }
    owner = verdict.owner;
  } catch (err) {
    const cause = kubeCause(err);
    if (needsCredential) {
      const message = `paddock: cannot check the owner of runner pod ${ref}: ${cause}; ${RETRY_NOTE}`;
      log.warn({ err: message }, 'runner pod webhook: denied');
      return denied(500, message, 'InternalError');
    }
    log.warn(
      { err: cause },
      'runner pod webhook: owner check failed; admitted the pod with its own credential',
    );
    return admit(original, pod, warnings);
  }

  const rsSpec = owner.runnerSet.spec;
  let scope: GitHubScope;
  let client: RunnerTokenClient;
  try {
    // The RunnerSet's fields, not the pod's (they are equal once verified, but only these are ours).
    scope = resolveScope({
      enterprise: rsSpec.enterprise ?? '',
      organization: rsSpec.organization ?? '',
      repository: rsSpec.repository ?? '',
    });
    client = await deps.github.clientFor({
      namespace: ctx.namespace,
      name: podName || (pod.metadata?.generateName ?? ''),
      credentialsSecret: rsSpec.githubAPICredentialsFrom?.secretRef?.name || undefined,
    });
  } catch (err) {
    const message = `paddock: runner pod ${ref}: ${causeOf(err, signal, timeoutMs)}`;
    log.warn({ err: message }, 'runner pod webhook: no GitHub client for the pod');
    return denied(500, message, 'InternalError');
  }
  if (needsCredential) {
    const invalid = invalidTokenSecretName(owner.statefulSet.name);
    if (invalid) return denied(422, `paddock: runner pod ${ref}: ${invalid}`, 'Invalid');
  }

  const a: VerifiedAdmission = {
    ctx,
    deps,
    pod,
    runner,
    ref,
    log,
    signal,
    timeoutMs,
    scope,
    client,
    owner,
    runnerName,
    needsCredential,
    warnings,
  };
  const useJit =
    deps.jit !== undefined &&
    needsCredential &&
    scope.kind !== 'enterprise' &&
    envValue(runner, ENV_RUNNER_EPHEMERAL) !== 'false' &&
    // A JIT config names its group by ID; a group named in the pod is honoured by the runner's own
    // registration instead of silently landing in the default group.
    envValue(runner, ENV_GROUP) === '' &&
    runnerName !== '';

  let denial: AdmissionResult | undefined;
  if (useJit) {
    if (ctx.dryRun) {
      // Creating a JIT runner is a side effect on GitHub; a dry run must not leave one behind.
      warnings.push('dry run: no just-in-time runner configuration was generated');
    } else {
      denial = await injectJitConfig(a, deps.jit!);
    }
  } else if (envIsEmpty(runner, ENV_JIT_CONFIG)) {
    denial = await injectRegistrationToken(a);
  }
  // (A runner configured with a JIT config by someone else needs no token.)
  return denial ?? admit(original, pod, warnings);
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
