import { randomBytes, randomUUID } from 'node:crypto';

/**
 * In-memory state of the GitHub API double: scopes, runners, tokens, workflow runs and jobs.
 * Shapes follow GitHub's REST documentation; the HTTP layer (server.ts) only translates.
 */

export type ScopeRef =
  | { kind: 'enterprise'; enterprise: string }
  | { kind: 'organization'; org: string }
  | { kind: 'repository'; owner: string; repo: string };

export function scopeKey(s: ScopeRef): string {
  switch (s.kind) {
    case 'enterprise':
      return `enterprises/${s.enterprise}`;
    case 'organization':
      return `orgs/${s.org}`;
    case 'repository':
      return `repos/${s.owner}/${s.repo}`;
  }
}

export function parseScopeKey(key: string): ScopeRef {
  const [kind, a, b] = key.split('/');
  if (kind === 'enterprises' && a) return { kind: 'enterprise', enterprise: a };
  if (kind === 'orgs' && a) return { kind: 'organization', org: a };
  if (kind === 'repos' && a && b) return { kind: 'repository', owner: a, repo: b };
  throw new Error(`not a scope key: ${key}`);
}

export interface RunnerLabel {
  id: number;
  name: string;
  type: 'read-only' | 'custom';
}

export interface RunnerRecord {
  id: number;
  name: string;
  os: string;
  status: 'online' | 'offline';
  busy: boolean;
  ephemeral: boolean;
  labels: RunnerLabel[];
  runner_group_id: number;
  scope: string;
  /** Set for runners created by generate-jitconfig until their agent connects. */
  jit: boolean;
  createdAt: number;
}

export interface IssuedToken {
  token: string;
  scope: string;
  expiresAt: number;
  kind: 'registration' | 'remove';
}

export type JobStatus = 'queued' | 'in_progress' | 'completed' | 'waiting';
export type JobConclusion = 'success' | 'failure' | 'cancelled' | 'skipped' | 'timed_out' | 'neutral' | null;

export interface JobRecord {
  id: number;
  run_id: number;
  owner: string;
  repo: string;
  name: string;
  status: JobStatus;
  conclusion: JobConclusion;
  labels: string[];
  runner_id: number | null;
  runner_name: string | null;
  runner_group_id: number | null;
  runner_group_name: string | null;
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
}

export interface RunRecord {
  id: number;
  owner: string;
  repo: string;
  name: string;
  head_sha: string;
  head_branch: string;
  run_attempt: number;
  created_at: number;
  updated_at: number;
}

const READ_ONLY_LABELS = ['self-hosted', 'Linux', 'X64'];

export class DoubleError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export interface RegisterRunnerInput {
  /** A registration token from `POST …/registration-token` (the runner's `config.sh --token`). */
  registrationToken?: string;
  /** An `encoded_jit_config` from `generate-jitconfig` (the runner's `run.sh --jitconfig`). */
  jitConfig?: string;
  name?: string;
  labels?: string[];
  ephemeral?: boolean;
  /** config.sh --replace: take over an existing runner with the same name. */
  replace?: boolean;
  runnerGroupId?: number;
}

export class GitHubModel {
  readonly now: () => number;
  private nextRunnerId = 1;
  private nextLabelId = 1;
  private nextJobId = 1000;
  private nextRunId = 500;
  readonly runners = new Map<number, RunnerRecord>();
  readonly tokens = new Map<string, IssuedToken>();
  readonly jitConfigs = new Map<string, number>();
  /** Every registration or remove token and JIT config ever issued, used or not (leak checks grep for them). */
  readonly secretsIssued = new Set<string>();
  /** Runner groups; `repositories` set: visible only to those repositories (`owner/repo`), else to all. */
  readonly runnerGroups = new Map<number, { id: number; name: string; repositories?: string[] }>([
    [1, { id: 1, name: 'Default' }],
  ]);
  readonly runs = new Map<number, RunRecord>();
  readonly jobs = new Map<number, JobRecord>();
  /** Scopes that exist; unknown scopes answer 404 as GitHub does for missing orgs/repos. */
  readonly scopes = new Set<string>();
  private readonly listeners = new Set<(e: ModelEvent) => void>();
  /** When each offline runner went offline (epoch ms). */
  private readonly offlineSince = new Map<number, number>();

  constructor(now: () => number) {
    this.now = now;
  }

  on(listener: (e: ModelEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(e: ModelEvent): void {
    for (const l of this.listeners) l(e);
  }

  addScope(scope: ScopeRef): string {
    const key = scopeKey(scope);
    this.scopes.add(key);
    return key;
  }

  hasScope(key: string): boolean {
    return this.scopes.has(key);
  }

  addRunnerGroup(name: string, id?: number, repositories?: string[]): number {
    const gid = id ?? Math.max(...this.runnerGroups.keys()) + 1;
    this.runnerGroups.set(gid, { id: gid, name, ...(repositories ? { repositories } : {}) });
    return gid;
  }

  runnersIn(scope: string): RunnerRecord[] {
    return [...this.runners.values()].filter((r) => r.scope === scope).sort((a, b) => a.id - b.id);
  }

  findRunnerByName(scope: string, name: string): RunnerRecord | undefined {
    return this.runnersIn(scope).find((r) => r.name === name);
  }

  issueToken(scope: string, kind: IssuedToken['kind']): IssuedToken {
    // Registration tokens are opaque 29-character upper-case strings on GitHub.
    const token = randomBytes(24)
      .toString('base64url')
      .toUpperCase()
      .replace(/[^A-Z0-9]/g, 'A')
      .slice(0, 29);
    const t: IssuedToken = { token, scope, kind, expiresAt: this.now() + 3600_000 };
    this.tokens.set(token, t);
    this.secretsIssued.add(token);
    return t;
  }

  private makeLabels(custom: string[]): RunnerLabel[] {
    const labels: RunnerLabel[] = READ_ONLY_LABELS.map((name) => ({
      id: this.nextLabelId++,
      name,
      type: 'read-only',
    }));
    for (const name of custom) {
      if (!labels.some((l) => l.name.toLowerCase() === name.toLowerCase())) {
        labels.push({ id: this.nextLabelId++, name, type: 'custom' });
      }
    }
    return labels;
  }

  private createRunner(
    scope: string,
    input: { name: string; labels: string[]; ephemeral: boolean; group: number },
  ) {
    const r: RunnerRecord = {
      id: this.nextRunnerId++,
      name: input.name,
      os: 'Linux',
      status: 'offline',
      busy: false,
      ephemeral: input.ephemeral,
      labels: this.makeLabels(input.labels),
      runner_group_id: input.group,
      scope,
      jit: false,
      createdAt: this.now(),
    };
    this.runners.set(r.id, r);
    return r;
  }

  /** `generate-jitconfig`: GitHub creates the (offline, ephemeral) runner record immediately. */
  generateJitConfig(
    scope: string,
    input: { name: string; runnerGroupId: number; labels: string[]; workFolder?: string },
  ): { runner: RunnerRecord; encoded: string } {
    if (this.findRunnerByName(scope, input.name)) {
      throw new DoubleError(409, `Already exists - A runner with the name ${input.name} already exists.`);
    }
    if (!this.runnerGroups.has(input.runnerGroupId)) {
      throw new DoubleError(404, 'Not Found');
    }
    const runner = this.createRunner(scope, {
      name: input.name,
      labels: input.labels,
      ephemeral: true,
      group: input.runnerGroupId,
    });
    runner.jit = true;
    const payload = {
      '.runner': Buffer.from(
        JSON.stringify({
          agentId: runner.id,
          agentName: runner.name,
          workFolder: input.workFolder ?? '_work',
        }),
      ).toString('base64'),
      '.credentials': Buffer.from(JSON.stringify({ scheme: 'OAuth', nonce: randomUUID() })).toString(
        'base64',
      ),
    };
    const encoded = Buffer.from(JSON.stringify(payload)).toString('base64');
    this.jitConfigs.set(encoded, runner.id);
    this.secretsIssued.add(encoded);
    this.emit({ type: 'runner-created', runner });
    return { runner, encoded };
  }

  /** What the runner's configuration step does: turns a token or JIT config into an online runner. */
  registerRunner(input: RegisterRunnerInput): RunnerRecord {
    if (input.jitConfig !== undefined) {
      const id = this.jitConfigs.get(input.jitConfig);
      const runner = id === undefined ? undefined : this.runners.get(id);
      if (!runner) throw new DoubleError(401, 'JIT configuration is not valid or its runner was removed');
      this.jitConfigs.delete(input.jitConfig);
      runner.jit = false;
      runner.status = 'online';
      this.emit({ type: 'runner-registered', runner });
      return runner;
    }
    const issued = input.registrationToken ? this.tokens.get(input.registrationToken) : undefined;
    if (issued?.kind !== 'registration') {
      throw new DoubleError(404, 'Registration token is not valid');
    }
    if (issued.expiresAt <= this.now()) throw new DoubleError(401, 'Registration token has expired');
    const name = input.name ?? `runner-${randomBytes(3).toString('hex')}`;
    const existing = this.findRunnerByName(issued.scope, name);
    if (existing) {
      if (!input.replace) {
        throw new DoubleError(409, `A runner exists with the same name ${name}.`);
      }
      this.runners.delete(existing.id);
      this.emit({ type: 'runner-removed', runner: existing, reason: 'replaced' });
    }
    const runner = this.createRunner(issued.scope, {
      name,
      labels: input.labels ?? [],
      ephemeral: input.ephemeral ?? false,
      group: input.runnerGroupId ?? 1,
    });
    runner.status = 'online';
    this.emit({ type: 'runner-registered', runner });
    return runner;
  }

  /** `config.sh remove --token`: a remove token deletes the named runner of its scope. */
  removeRunnerWithToken(removeToken: string, name: string): void {
    const issued = this.tokens.get(removeToken);
    if (issued?.kind !== 'remove' || issued.expiresAt <= this.now()) {
      throw new DoubleError(401, 'Remove token is not valid');
    }
    const runner = this.findRunnerByName(issued.scope, name);
    if (!runner) throw new DoubleError(404, 'Not Found');
    this.deleteRunner(issued.scope, runner.id);
  }

  /** `DELETE …/actions/runners/{id}`: refuses busy runners with GitHub's 422 message. */
  deleteRunner(scope: string, id: number): void {
    const runner = this.runners.get(id);
    if (!runner || runner.scope !== scope) throw new DoubleError(404, 'Not Found');
    if (runner.busy) {
      throw new DoubleError(422, `Bad request - Runner "${runner.name}" is still running a job`);
    }
    this.runners.delete(id);
    this.emit({ type: 'runner-removed', runner, reason: 'deleted' });
  }

  setRunnerState(id: number, state: { status?: 'online' | 'offline'; busy?: boolean }): RunnerRecord {
    const runner = this.runners.get(id);
    if (!runner) throw new DoubleError(404, `runner ${id} does not exist`);
    if (state.status === 'offline' && runner.status !== 'offline') this.offlineSince.set(id, this.now());
    if (state.status === 'online') this.offlineSince.delete(id);
    if (state.status !== undefined) runner.status = state.status;
    if (state.busy !== undefined) runner.busy = state.busy;
    this.emit({ type: 'runner-changed', runner });
    return runner;
  }

  /**
   * GitHub fails the job of a runner that lost communication mid-job (its node died): after
   * `timeoutMs` offline, the job completes as `failure` and the runner is no longer busy (an
   * ephemeral one is removed, its job done). Returns the jobs failed.
   */
  failJobsOfLostRunners(timeoutMs: number): number[] {
    const failed: number[] = [];
    const now = this.now();
    for (const [id, since] of this.offlineSince) {
      const runner = this.runners.get(id);
      if (!runner) {
        this.offlineSince.delete(id);
        continue;
      }
      if (!runner.busy || now - since < timeoutMs) continue;
      const job = [...this.jobs.values()].find((j) => j.runner_id === id && j.status === 'in_progress');
      if (job) {
        this.completeJob(job.id, 'failure');
        failed.push(job.id);
      } else {
        this.setRunnerState(id, { busy: false });
      }
    }
    return failed;
  }

  /** The runner disappears from GitHub without anyone asking (cleanup, manual removal in the UI). */
  vanishRunner(id: number): void {
    const runner = this.runners.get(id);
    if (!runner) throw new DoubleError(404, `runner ${id} does not exist`);
    this.runners.delete(id);
    this.emit({ type: 'runner-removed', runner, reason: 'vanished' });
  }

  createJob(input: {
    owner: string;
    repo: string;
    labels: string[];
    name?: string;
    runId?: number;
    status?: JobStatus;
  }): JobRecord {
    const t = this.now();
    let runId = input.runId;
    if (runId === undefined || !this.runs.has(runId)) {
      runId = this.nextRunId++;
      this.runs.set(runId, {
        id: runId,
        owner: input.owner,
        repo: input.repo,
        name: 'CI',
        head_sha: randomBytes(20).toString('hex'),
        head_branch: 'main',
        run_attempt: 1,
        created_at: t,
        updated_at: t,
      });
    }
    const job: JobRecord = {
      id: this.nextJobId++,
      run_id: runId,
      owner: input.owner,
      repo: input.repo,
      name: input.name ?? 'build',
      status: 'queued',
      conclusion: null,
      labels: input.labels,
      runner_id: null,
      runner_name: null,
      runner_group_id: null,
      runner_group_name: null,
      created_at: t,
      started_at: null,
      completed_at: null,
    };
    this.jobs.set(job.id, job);
    this.touchRun(runId);
    this.emit({ type: 'job-changed', job });
    if (input.status === 'in_progress' || input.status === 'completed') this.startJob(job.id);
    if (input.status === 'completed') this.completeJob(job.id, 'success');
    return job;
  }

  /** Assigns a queued job to a runner (or to nobody for a job created already in progress). */
  startJob(jobId: number, runnerId?: number): JobRecord {
    const job = this.jobs.get(jobId);
    if (!job) throw new DoubleError(404, `job ${jobId} does not exist`);
    if (job.status !== 'queued' && job.status !== 'waiting') {
      throw new DoubleError(409, `job ${jobId} is ${job.status}, not queued`);
    }
    if (runnerId !== undefined) {
      const runner = this.runners.get(runnerId);
      if (!runner) throw new DoubleError(404, `runner ${runnerId} does not exist`);
      if (runner.busy) throw new DoubleError(409, `runner ${runner.name} is already busy`);
      runner.busy = true;
      job.runner_id = runner.id;
      job.runner_name = runner.name;
      job.runner_group_id = runner.runner_group_id;
      job.runner_group_name = this.runnerGroups.get(runner.runner_group_id)?.name ?? null;
      this.emit({ type: 'runner-changed', runner });
    }
    job.status = 'in_progress';
    job.started_at = this.now();
    this.touchRun(job.run_id);
    this.emit({ type: 'job-changed', job });
    return job;
  }

  /** Completes a job; its runner goes idle, and an ephemeral runner is removed as GitHub does. */
  completeJob(jobId: number, conclusion: Exclude<JobConclusion, null> = 'success'): JobRecord {
    const job = this.jobs.get(jobId);
    if (!job) throw new DoubleError(404, `job ${jobId} does not exist`);
    job.status = 'completed';
    job.conclusion = conclusion;
    job.completed_at = this.now();
    if (job.started_at === null) job.started_at = job.completed_at;
    const runner = job.runner_id === null ? undefined : this.runners.get(job.runner_id);
    if (runner) {
      runner.busy = false;
      if (runner.ephemeral) {
        this.runners.delete(runner.id);
        this.emit({ type: 'runner-removed', runner, reason: 'ephemeral-finished' });
      } else {
        this.emit({ type: 'runner-changed', runner });
      }
    }
    this.touchRun(job.run_id);
    this.emit({ type: 'job-changed', job });
    return job;
  }

  private touchRun(runId: number): void {
    const run = this.runs.get(runId);
    if (run) run.updated_at = this.now();
  }

  jobsOfRun(runId: number): JobRecord[] {
    return [...this.jobs.values()].filter((j) => j.run_id === runId).sort((a, b) => a.id - b.id);
  }

  /** A run's status is derived from its jobs, as GitHub reports it. */
  runStatus(runId: number): { status: JobStatus; conclusion: JobConclusion } {
    const jobs = this.jobsOfRun(runId);
    if (jobs.length > 0 && jobs.every((j) => j.status === 'completed')) {
      const failed = jobs.find((j) => j.conclusion !== 'success' && j.conclusion !== 'skipped');
      return { status: 'completed', conclusion: failed ? (failed.conclusion ?? 'failure') : 'success' };
    }
    if (jobs.some((j) => j.status === 'in_progress' || j.status === 'completed')) {
      return { status: 'in_progress', conclusion: null };
    }
    if (jobs.some((j) => j.status === 'waiting')) return { status: 'waiting', conclusion: null };
    return { status: 'queued', conclusion: null };
  }

  runsOf(owner: string, repo: string): RunRecord[] {
    return [...this.runs.values()]
      .filter((r) => r.owner === owner && r.repo === repo)
      .sort((a, b) => b.created_at - a.created_at || b.id - a.id);
  }
}

export type ModelEvent =
  | { type: 'runner-created'; runner: RunnerRecord }
  | { type: 'runner-registered'; runner: RunnerRecord }
  | { type: 'runner-changed'; runner: RunnerRecord }
  | {
      type: 'runner-removed';
      runner: RunnerRecord;
      reason: 'deleted' | 'vanished' | 'replaced' | 'ephemeral-finished';
    }
  | { type: 'job-changed'; job: JobRecord };
