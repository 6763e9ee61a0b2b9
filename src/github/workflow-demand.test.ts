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
