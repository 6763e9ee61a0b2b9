import type { Logger } from 'pino';
import type { Clock } from '../runtime/clock.ts';
import { realClock } from '../runtime/clock.ts';
import * as z from '../runtime/zod.ts';
import type { RateLimitBudget } from './budget.ts';
import { assertCredentialsSupportScope, credentialId, type GitHubCredentials } from './credentials.ts';
import { GitHubApiError, GitHubConfigError, type RateLimitCause } from './errors.ts';
import type { GitHubMetrics } from './metrics.ts';
import { type RegistrationToken, RegistrationTokenCache, registrationToken } from './registration-tokens.ts';
import {
  type GitHubRunner,
  type ListOptions,
  type RunnerPage,
  type RunnerPageLister,
  RunnerRegistry,
} from './registry.ts';
import {
  type GitHubEndpointOptions,
  type GitHubEndpoints,
  type GitHubScope,
  resolveEndpoints,
  scopeKey,
  scopeRouteParams,
  scopeRoutePrefix,
} from './scope.ts';
import { GitHubTransport, type GitHubTransportOptions, maxAgeFromCacheControl } from './transport.ts';

/**
 * The GitHub client of one credential: typed runner operations, the shared runner registry, the
 * registration-token cache and the rate-limit budget. Operations that a reconciler acts on return
 * outcomes instead of throwing, so every answer GitHub can give has a name.
 */

/** Paths that must never reach logs. Add them to the root logger's `redact` as well. */
export const GITHUB_LOG_REDACT_PATHS = [
  'token',
  '*.token',
  'privateKey',
  '*.privateKey',
  'encodedJitConfig',
  '*.encodedJitConfig',
  'encoded_jit_config',
  '*.encoded_jit_config',
  'authorization',
  'headers.authorization',
  '*.headers.authorization',
];

/** Failures every operation can end in. */
export type CallFailure =
  /** Not sent or refused for rate limits; call again at `resetAt` (epoch ms). */
  | { kind: 'rateLimited'; resetAt: number; cause: RateLimitCause; message: string }
  | { kind: 'forbidden'; message: string }
  | { kind: 'invalidCredentials'; message: string }
  /** `status` null: no answer (network, timeout) after the retries. */
  | { kind: 'failed'; status: number | null; message: string };

export type RemoveRunnerOutcome =
  | { kind: 'removed' }
  | { kind: 'notFound' }
  /** GitHub's 422: the runner is running a job; keep its pod. */
  | { kind: 'busy'; message: string }
  | CallFailure;

export type JitConfigOutcome =
  | { kind: 'created'; runner: GitHubRunner; encodedJitConfig: string }
  /** 409 "already exists": a runner of that name is registered in the scope. */
  | { kind: 'nameTaken'; message: string }
  /** 422: GitHub rejected the input (labels, group ID...). */
  | { kind: 'invalid'; message: string; details: unknown[] }
  /** 404: scope or runner group not found (or not visible to these credentials). */
  | { kind: 'notFound'; message: string }
  | CallFailure;

export interface JitConfigInput {
  name: string;
  runnerGroupId: number;
  /** 1–100 labels. */
  labels: string[];
  workFolder?: string | undefined;
}

export interface CallOptions {
  /** Wait for the budget or a rate limit to reset (on the clock) instead of answering rateLimited. */
  waitForBudget?: boolean | undefined;
  signal?: AbortSignal | undefined;
}

export interface GitHubClientOptions
  extends Omit<GitHubTransportOptions, 'endpoints' | 'clock' | 'logger' | 'metrics'> {
  endpoints?: GitHubEndpoints | GitHubEndpointOptions | undefined;
  clock?: Clock | undefined;
  logger: Logger;
  metrics?: GitHubMetrics | undefined;
  /** Registry max-age when GitHub sends none (default 60 s). */
  registryDefaultMaxAgeMs?: number | undefined;
}

const labelSchema = z.object({ id: z.optional(z.number()), name: z.string(), type: z.optional(z.string()) });
const runnerSchema = z.object({
  id: z.int(),
  name: z.string(),
  os: z.optional(z.string()),
  status: z.string(),
  busy: z.boolean(),
  ephemeral: z.optional(z.boolean()),
  runner_group_id: z.optional(z.int()),
  labels: z.array(labelSchema),
});
const runnerListSchema = z.object({ total_count: z.int(), runners: z.array(runnerSchema) });
const tokenSchema = z.object({ token: z.string().check(z.minLength(1)), expires_at: z.string() });
const workflowRunListSchema = z.object({
  workflow_runs: z.array(
    z.object({ id: z.int(), status: z.nullish(z.string()), updated_at: z.nullish(z.string()) }),
  ),
});
const jobListSchema = z.object({
  jobs: z.array(
    z.object({ id: z.int(), status: z.nullish(z.string()), labels: z.nullish(z.array(z.string())) }),
  ),
});

const runnerGroupListSchema = z.object({
  runner_groups: z.array(
    z.object({
      name: z.string(),
      default: z.nullish(z.boolean()),
      inherited: z.nullish(z.boolean()),
    }),
  ),
});

/** A runner group a repository may use (spec §7.5.3 step 4). */
export interface VisibleRunnerGroup {
  name: string;
  default: boolean;
  /** Shared with the organization by its enterprise. */
  inherited: boolean;
}

export interface WorkflowRunSummary {
  id: number;
  status: string;
  /** Changes whenever one of its jobs does. */
  updatedAt: string;
}

export interface WorkflowJobSummary {
  id: number;
  status: string;
  labels: string[];
}

/** For the ETag cache: only what `schema` reads of an answer; nothing of an unreadable one. */
function kept(schema: z.ZodMiniType): (data: unknown) => unknown {
  return (data) => {
    const parsed = schema.safeParse(data);
    return parsed.success ? parsed.data : undefined;
  };
}

function unreadable(route: string, status: number, what: string, error: z.core.$ZodError): GitHubApiError {
  return new GitHubApiError({
    kind: 'unexpected',
    endpoint: route,
    status,
    githubMessage: `unreadable ${what}: ${z.prettifyError(error).slice(0, 300)}`,
  });
}
const jitSchema = z.object({ runner: runnerSchema, encoded_jit_config: z.string().check(z.minLength(1)) });

function toRunner(r: z.infer<typeof runnerSchema>): GitHubRunner {
  return {
    id: r.id,
    name: r.name,
    os: r.os ?? '',
    status: r.status,
    busy: r.busy,
    ephemeral: r.ephemeral ?? false,
    runnerGroupId: r.runner_group_id,
    labels: r.labels.map((l) => ({ id: l.id, name: l.name, type: l.type })),
  };
}

function isEndpoints(e: GitHubEndpoints | GitHubEndpointOptions): e is GitHubEndpoints {
  return typeof (e as GitHubEndpoints).apiBaseUrl === 'string';
}

export class GitHubClient implements RunnerPageLister {
  readonly credentialId: string;
  readonly endpoints: GitHubEndpoints;
  readonly registry: RunnerRegistry;
  readonly transport: GitHubTransport;
  private readonly credentials: GitHubCredentials;
  private readonly clock: Clock;
  private readonly tokens: RegistrationTokenCache;

  constructor(options: GitHubClientOptions) {
    this.credentials = options.credentials;
    this.credentialId = credentialId(options.credentials);
    this.clock = options.clock ?? realClock;
    const e = options.endpoints ?? {};
    this.endpoints = isEndpoints(e) ? e : resolveEndpoints(e);
    const logger = options.logger.child(
      { component: 'github', credential: this.credentialId },
      { redact: GITHUB_LOG_REDACT_PATHS },
    );
    this.transport = new GitHubTransport({
      ...options,
      endpoints: this.endpoints,
      clock: this.clock,
      logger,
      metrics: options.metrics,
    });
    this.tokens = new RegistrationTokenCache(this.clock);
    this.registry = new RunnerRegistry({
      lister: this,
      clock: this.clock,
      logger: logger.child({ module: 'runner-registry' }),
      metrics: options.metrics,
      defaultMaxAgeMs: options.registryDefaultMaxAgeMs,
    });
  }

  get budget(): RateLimitBudget {
    return this.transport.budget;
  }

  /** One page of a scope's runners, sent as a conditional request. Used by the registry. */
  async listRunnerPage(scope: GitHubScope, page: number, options: ListOptions = {}): Promise<RunnerPage> {
    const { list, res } = await this.requestRunnerList(scope, { page }, options, true);
    return {
      runners: list.runners.map(toRunner),
      totalCount: list.total_count,
      hasNext: /rel="next"/.test(res.headers.link ?? ''),
      maxAgeMs: maxAgeFromCacheControl(res.headers['cache-control']),
      notModified: res.notModified,
    };
  }

  /**
   * The scope's runner named `name`, asked with the list's `name` filter: one request that answers
   * for one runner however many pages the scope lists, and whose pages cannot disagree. `filtered`
   * is false when the answer held other runners (a server that ignores the filter, as older GitHub
   * Enterprise Server releases may): it then says nothing about `name`. Not conditional: an ETag per
   * pod name would only fill the cache.
   */
  async findRunnerByName(
    scope: GitHubScope,
    name: string,
    options: ListOptions = {},
  ): Promise<{ filtered: boolean; runner: GitHubRunner | undefined }> {
    const { list } = await this.requestRunnerList(scope, { name }, options, false);
    // Whether the filter ignores case is not documented: either way the answer was filtered.
    const wanted = name.toLowerCase();
    const runners = list.runners.map(toRunner);
    const filtered = runners.every((r) => r.name.toLowerCase() === wanted);
    return { filtered, runner: filtered ? runners[0] : undefined };
  }

  /** `GET …/actions/runners` (100 a page) with these query parameters, its answer checked. */
  private async requestRunnerList(
    scope: GitHubScope,
    query: { page?: number; name?: string },
    options: ListOptions,
    conditional: boolean,
  ) {
    assertCredentialsSupportScope(this.credentials, scope);
    const route = `GET ${scopeRoutePrefix(scope)}/actions/runners`;
    const res = await this.transport.request<unknown>({
      kind: 'read',
      route,
      params: { ...scopeRouteParams(scope), per_page: 100, ...query },
      ...(conditional ? { conditional: true, keep: kept(runnerListSchema) } : {}),
      waitForBudget: options.waitForBudget,
      signal: options.signal,
    });
    const parsed = runnerListSchema.safeParse(res.data);
    if (!parsed.success) throw unreadable(route, res.status, 'runner list', parsed.error);
    return { list: parsed.data, res };
  }

  /**
   * Unregisters a runner. Spends the removal reserve, so it still works when reads are held back.
   * On removed/notFound the registry drops the runner without listing.
   */
  async removeRunner(
    scope: GitHubScope,
    runnerId: number,
    options: CallOptions = {},
  ): Promise<RemoveRunnerOutcome> {
    assertCredentialsSupportScope(this.credentials, scope);
    try {
      await this.transport.request({
        kind: 'removal',
        route: `DELETE ${scopeRoutePrefix(scope)}/actions/runners/{runner_id}`,
        params: { ...scopeRouteParams(scope), runner_id: runnerId },
        waitForBudget: options.waitForBudget,
        signal: options.signal,
      });
      this.registry.recordRemoved(scope, runnerId);
      return { kind: 'removed' };
    } catch (err) {
      const e = asApiError(err);
      if (e.kind === 'notFound') {
        this.registry.recordRemoved(scope, runnerId);
        return { kind: 'notFound' };
      }
      if (e.kind === 'validation') {
        return { kind: 'busy', message: e.githubMessage ?? 'the runner is running a job' };
      }
      return callFailure(e, this.clock.now());
    }
  }

  /**
   * A registration token for the scope: the cached one while more than 30 minutes of validity
   * remain, else a new one. Throws GitHubApiError (rateLimited, invalidCredentials, ...).
   */
  async registrationToken(scope: GitHubScope, options: CallOptions = {}): Promise<RegistrationToken> {
    assertCredentialsSupportScope(this.credentials, scope);
    return this.tokens.get(scopeKey(scope), async () => {
      const route = `POST ${scopeRoutePrefix(scope)}/actions/runners/registration-token`;
      const res = await this.transport.request<unknown>({
        kind: 'write',
        route,
        params: scopeRouteParams(scope),
        waitForBudget: options.waitForBudget,
        signal: options.signal,
      });
      const parsed = tokenSchema.safeParse(res.data);
      const expiresAt = parsed.success ? Date.parse(parsed.data.expires_at) : Number.NaN;
      if (!parsed.success || Number.isNaN(expiresAt)) {
        throw new GitHubApiError({
          kind: 'unexpected',
          endpoint: route,
          status: res.status,
          githubMessage: 'answer has no token or no readable expires_at',
        });
      }
      return registrationToken(parsed.data.token, expiresAt);
    });
  }

  /**
   * Creates a just-in-time runner configuration (organization and repository scopes). Not retried
   * automatically: a repeated POST after a lost answer would report the name as taken.
   */
  async generateJitConfig(
    scope: GitHubScope,
    input: JitConfigInput,
    options: CallOptions = {},
  ): Promise<JitConfigOutcome> {
    if (scope.kind === 'enterprise') {
      throw new GitHubConfigError(
        `enterprise "${scope.enterprise}": JIT runner configuration is available for organization and repository scopes only`,
      );
    }
    assertCredentialsSupportScope(this.credentials, scope);
    const route = `POST ${scopeRoutePrefix(scope)}/actions/runners/generate-jitconfig`;
    let data: unknown;
    try {
      const res = await this.transport.request<unknown>({
        kind: 'write',
        route,
        params: {
          ...scopeRouteParams(scope),
          name: input.name,
          runner_group_id: input.runnerGroupId,
          labels: input.labels,
          ...(input.workFolder === undefined ? {} : { work_folder: input.workFolder }),
        },
        maxRetries: 0,
        waitForBudget: options.waitForBudget,
        signal: options.signal,
      });
      data = res.data;
    } catch (err) {
      const e = asApiError(err);
      const message = e.githubMessage ?? e.message;
      if (e.kind === 'conflict' && /already exists/i.test(message)) return { kind: 'nameTaken', message };
      if (e.kind === 'validation') return { kind: 'invalid', message, details: e.details };
      if (e.kind === 'notFound') return { kind: 'notFound', message };
      return callFailure(e, this.clock.now());
    }
    const parsed = jitSchema.safeParse(data);
    if (!parsed.success) {
      return { kind: 'failed', status: 201, message: 'answer has no runner or no encoded_jit_config' };
    }
    const runner = toRunner(parsed.data.runner);
    this.registry.recordCreated(scope, runner);
    const outcome = { kind: 'created' as const, runner, encodedJitConfig: parsed.data.encoded_jit_config };
    Object.defineProperty(outcome, 'toJSON', {
      enumerable: false,
      value: () => ({ kind: 'created', runner, encodedJitConfig: '[redacted]' }),
    });
    return outcome;
  }

  /**
   * One page of a repository's workflow runs in `status` (queued, in_progress), sent as a
   * conditional request: an unchanged page costs no budget. Throws GitHubApiError.
   */
  async listWorkflowRunsPage(
    owner: string,
    repo: string,
    status: string,
    page: number,
    options: CallOptions = {},
  ): Promise<{ runs: WorkflowRunSummary[]; hasNext: boolean; notModified: boolean }> {
    const route = 'GET /repos/{owner}/{repo}/actions/runs';
    const res = await this.transport.request<unknown>({
      kind: 'read',
      route,
      params: { owner, repo, status, per_page: 100, page },
      conditional: true,
      keep: kept(workflowRunListSchema),
      waitForBudget: options.waitForBudget,
      signal: options.signal,
    });
    const parsed = workflowRunListSchema.safeParse(res.data);
    if (!parsed.success) throw unreadable(route, res.status, 'workflow run list', parsed.error);
    return {
      runs: parsed.data.workflow_runs.map((r) => ({
        id: r.id,
        status: r.status ?? '',
        updatedAt: r.updated_at ?? '',
      })),
      hasNext: /rel="next"/.test(res.headers.link ?? ''),
      notModified: res.notModified,
    };
  }

  /**
   * The organization's runner groups that `repo` may use (`visible_to_repository`), conditionally
   * (an unchanged page costs no budget). Throws GitHubApiError.
   */
  async listRunnerGroupsVisibleTo(
    org: string,
    repo: string,
    options: CallOptions = {},
  ): Promise<VisibleRunnerGroup[]> {
    const route = 'GET /orgs/{org}/actions/runner-groups';
    const groups: VisibleRunnerGroup[] = [];
    for (let page = 1; page <= 100; page++) {
      const res = await this.transport.request<unknown>({
        kind: 'read',
        route,
        params: { org, visible_to_repository: repo, per_page: 100, page },
        conditional: true,
        keep: kept(runnerGroupListSchema),
        waitForBudget: options.waitForBudget,
        signal: options.signal,
      });
      const parsed = runnerGroupListSchema.safeParse(res.data);
      if (!parsed.success) throw unreadable(route, res.status, 'runner group list', parsed.error);
      for (const g of parsed.data.runner_groups) {
        groups.push({ name: g.name, default: g.default === true, inherited: g.inherited === true });
      }
      if (!/rel="next"/.test(res.headers.link ?? '')) break;
    }
    return groups;
  }

  /** One page of a workflow run's jobs, conditionally. Throws GitHubApiError. */
  async listRunJobsPage(
    owner: string,
    repo: string,
    runId: number,
    page: number,
    options: CallOptions = {},
  ): Promise<{ jobs: WorkflowJobSummary[]; hasNext: boolean }> {
    const route = 'GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs';
    const res = await this.transport.request<unknown>({
      kind: 'read',
      route,
      params: { owner, repo, run_id: runId, per_page: 100, page },
      conditional: true,
      keep: kept(jobListSchema),
      waitForBudget: options.waitForBudget,
      signal: options.signal,
    });
    const parsed = jobListSchema.safeParse(res.data);
    if (!parsed.success) throw unreadable(route, res.status, 'job list', parsed.error);
    return {
      jobs: parsed.data.jobs.map((j) => ({ id: j.id, status: j.status ?? '', labels: j.labels ?? [] })),
      hasNext: /rel="next"/.test(res.headers.link ?? ''),
    };
  }

  /** Stops registry keepers and metrics of this client. */
  close(): void {
    this.registry.close();
  }
}

function asApiError(err: unknown): GitHubApiError {
  if (err instanceof GitHubApiError) return err;
  throw err; // configuration mistakes and bugs are not outcomes
}

function callFailure(e: GitHubApiError, now: number): CallFailure {
  const message = e.githubMessage ?? e.message;
  switch (e.kind) {
    case 'rateLimited':
      return {
        kind: 'rateLimited',
        resetAt: e.rateLimitResetAt ?? now + 60_000,
        cause: e.rateLimitCause ?? 'primary',
        message,
      };
    case 'forbidden':
      return { kind: 'forbidden', message };
    case 'invalidCredentials':
      return { kind: 'invalidCredentials', message };
    default:
      return { kind: 'failed', status: e.status ?? null, message };
  }
}
