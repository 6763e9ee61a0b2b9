import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { GitHubDouble } from '../testenv/github-double/index.ts';
import { GitHubClient } from './client.ts';
import { NO_TIMEOUT_MS, SteppingClock, silentLogger } from './test-support.ts';
import { jobCountsFor, WorkflowDemand } from './workflow-demand.ts';

const RUNS = 'GET /repos/{owner}/{repo}/actions/runs';
const JOBS = 'GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs';

describe('WorkflowDemand: TotalNumberOfQueuedAndInProgressWorkflowRuns against the GitHub double', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  let client: GitHubClient;

  before(async () => {
    await double.start();
    double.addRepo('acme', 'app');
    double.addRepo('acme', 'web');
    client = new GitHubClient({
      credentials: { kind: 'token', token: double.addToken().token },
      endpoints: { apiUrl: double.apiUrl },
      clock,
      logger: silentLogger(),
      requestTimeoutMs: NO_TIMEOUT_MS,
    });
  });
  after(async () => {
    client.close();
    await double.stop();
  });

  const calls = (route: string) => double.log.filter((e) => e.route === route);
  const spent = () => double.log.filter((e) => e.status === 200).length;

  test('counts fitting queued and in-progress jobs; unchanged runs cost no budget and no job lists', async () => {
    const demand = new WorkflowDemand(client, clock);
    const repos = [
      { owner: 'acme', repo: 'app' },
      { owner: 'acme', repo: 'web' },
    ];
    const a = double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted', 'linux'] });
    double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted', 'linux'], runId: a.run_id });
    double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted', 'gpu'], runId: a.run_id });
    const w = double.createJob({ owner: 'acme', repo: 'web', labels: ['self-hosted', 'linux'] });
    double.startJob(w.id);
    double.createJob({ owner: 'acme', repo: 'web', labels: ['self-hosted', 'linux'], status: 'completed' });
    await clock.advance(10_000);

    assert.deepEqual(await demand.count(repos, ['linux']), {
      necessary: 3,
      queued: 2,
      inProgress: 1,
      completed: 0,
      unknown: 0,
    });
    const jobLists = calls(JOBS).length;
    const paid = spent();
    assert.equal((await demand.count(repos, ['linux'])).necessary, 3);
    assert.equal(calls(JOBS).length, jobLists, 'no run changed: no job list');
    assert.equal(spent(), paid, 'the run lists answered 304: nothing paid');

    // One job of run a starts: that run's jobs are listed again, the other run's are not.
    double.startJob(a.id);
    // Within the second of a change, a listing cannot be trusted to have seen it: listed every time.
    assert.equal((await demand.count(repos, ['linux'])).inProgress, 2);
    await clock.advance(10_000);
    const before = calls(JOBS).length;
    assert.deepEqual(await demand.count(repos, ['linux']), {
      necessary: 3,
      queued: 1,
      inProgress: 2,
      completed: 0,
      unknown: 0,
    });
    assert.equal(
      calls(JOBS).length - before,
      1,
      'run a once more (listed right after its change before), nothing else',
    );
    const settled = calls(JOBS).length;
    await demand.count(repos, ['linux']);
    assert.equal(calls(JOBS).length, settled, 'settled: no job list');
    assert.ok(calls(RUNS).length >= 8);
  });

  test("ARC's label rule for the pull metric: case-sensitive, and a job without labels never counts", () => {
    assert.equal(jobCountsFor(['self-hosted', 'linux'], ['linux']), true);
    assert.equal(jobCountsFor(['self-hosted', 'Linux'], ['linux']), false);
    assert.equal(jobCountsFor([], ['linux']), false);
    assert.equal(jobCountsFor(['self-hosted'], []), true);
  });
});

describe('the ETag cache keeps what the client reads of an answer, not the whole answer', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  let client: GitHubClient;

  before(async () => {
    await double.start();
    double.addRepo('acme', 'app');
    client = new GitHubClient({
      credentials: { kind: 'token', token: double.addToken().token },
      endpoints: { apiUrl: double.apiUrl },
      clock,
      logger: silentLogger(),
      requestTimeoutMs: NO_TIMEOUT_MS,
    });
  });
  after(async () => {
    client.close();
    await double.stop();
  });

  const list = (keep?: (d: unknown) => unknown) =>
    client.transport.request<{ workflow_runs: Record<string, unknown>[] }>({
      kind: 'read',
      route: RUNS,
      params: { owner: 'acme', repo: 'app', status: 'queued', per_page: 100, page: 1 },
      conditional: true,
      keep,
    });

  test('a 304 answers with the stored projection', async () => {
    double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted'] });
    const keep = (d: unknown) => ({
      workflow_runs: (d as { workflow_runs: { id: number }[] }).workflow_runs.map((r) => ({ id: r.id })),
    });
    const fresh = await list(keep);
    assert.equal(fresh.notModified, false);
    assert.ok('html_url' in fresh.data.workflow_runs[0]!, 'the first answer is GitHub’s whole page');
    const again = await list(keep);
    assert.equal(again.notModified, true);
    assert.deepEqual(again.data, { workflow_runs: [{ id: fresh.data.workflow_runs[0]!.id }] });
  });

  test('an answer the projection cannot read is not stored: the next request is not conditional', async () => {
    double.createJob({ owner: 'acme', repo: 'app', labels: ['self-hosted'] });
    assert.equal((await list(() => undefined)).notModified, false);
    assert.equal((await list(() => undefined)).notModified, false);
  });

  test('the client’s run listing stores only the fields it parses', async () => {
    const before = double.log.filter((e) => e.route === RUNS && e.status === 304).length;
    const first = await client.listWorkflowRunsPage('acme', 'app', 'queued', 1);
    const second = await client.listWorkflowRunsPage('acme', 'app', 'queued', 1);
    assert.equal(second.notModified, true);
    assert.deepEqual(second.runs, first.runs);
    assert.equal(double.log.filter((e) => e.route === RUNS && e.status === 304).length, before + 1);
    const cached = await list();
    assert.equal(cached.notModified, true);
    assert.deepEqual(Object.keys(cached.data.workflow_runs[0]!).sort(), ['id', 'status', 'updated_at']);
  });
});
