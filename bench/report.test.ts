import assert from 'node:assert/strict';
import { test } from 'node:test';
import { evaluate, FIGURES } from './report.ts';

test('each figure is read from its own line, compared with its target, and a missing run says so', () => {
  const rows = evaluate([
    {
      kind: 'RunnerDeployment',
      runners: 100,
      controllerRssSteadyMiB: 70,
      githubRateLimitedRequestsPerRunnerHour: 1.2,
    },
    { kind: 'RunnerDeployment', runners: 1000, controllerRssPeakMiB: 150, replacementLatencyMsP99: 999 },
    { bench: 'cold-start', kind: 'RunnerDeployment', runners: 100, startToReadyMs: 250 },
  ]);
  const row = (prefix: string) => rows.find((r) => r.figure.startsWith(prefix))!;
  assert.equal(rows.length, FIGURES.length);
  assert.equal(row('controller RSS, steady, 100').met, true, '≤ 70 includes 70');
  assert.equal(row('controller peak RSS, 1,000').met, false, '< 150 excludes 150');
  assert.equal(row('replacement p99, 1,000').met, true);
  assert.equal(row('cold start, 100').value, 250);
  assert.equal(
    row('GitHub rate-limited requests per runner-hour, 100 runners (RunnerDeployment)').met,
    false,
  );
  const missing = row('cold start, 1,000');
  assert.equal(missing.ran, false);
  assert.equal(missing.met, null);
  assert.equal(row('replacement p99, 100 runners (RunnerSet)').target, undefined, 'measured only');
});

test('an unmet target says why from what was measured; a met one says nothing', () => {
  const rows = evaluate([
    { bench: 'startup', idleRssMiB: 98, nodeFloorRssMiB: 64.6 },
    {
      kind: 'RunnerDeployment',
      runners: 100,
      controllerRssSteadyMiB: 116.6,
      githubRateLimitedRequestsPerRunnerHour: 0.5,
      controllerRssAnonMiB: 60.2,
      controllerRssFileMiB: 56.4,
    },
    {
      kind: 'RunnerDeployment',
      runners: 1000,
      controllerRssPeakMiB: 180,
      githubRateLimitedRequestsPerRunnerHour: 1.23,
      githubRequestsByRoute: { 'GET /orgs/{org}/actions/runners': 40, 'GET /rate_limit': 1 },
      replacementLatencyMsP99: 1686,
      loadAverage1m: 3.5,
      cpus: 2,
      controllerCpuSeconds: 40,
      measuredSeconds: 300,
    },
    {
      bench: 'cold-start',
      kind: 'RunnerDeployment',
      runners: 100,
      startToReadyMs: 350,
      startToReadyMsSamples: [280, 350, 420],
      loadAverage1m: 0.5,
      cpus: 2,
    },
    {
      bench: 'cold-start',
      kind: 'RunnerSet',
      runners: 1000,
      startToReadyMs: 2400,
      startToReadyMsSamples: [2400],
      startupStepsMs: {
        'node.js bootstrapped': 50,
        'code loaded': 170,
        'caches started': 190,
        'cache synced: pods (actions-runner)': 2100,
        'cache synced: statefulsets': 2250,
        'caches synced': 2250,
        'gate open: webhook': 2300,
        ready: 2300,
      },
      loadAverage1m: 0.5,
      cpus: 2,
    },
  ]);
  const row = (prefix: string) => rows.find((r) => r.figure.startsWith(prefix))!;
  const steady = row('controller RSS, steady, 100').why ?? '';
  assert.match(steady, /64\.6 MiB on this machine, which leaves 5\.4 MiB/);
  assert.match(steady, /60\.2 MiB were anonymous .* 56\.4 MiB file-backed/);
  assert.match(steady, /needs a runtime with a smaller resident base/);
  const peak = row('controller peak RSS, 1,000').why ?? '';
  assert.match(peak, /own share, 115\.4 MiB over the floor, is 30 MiB more than the target allows/);
  assert.doesNotMatch(peak, /smaller resident base/);
  const spend = row('GitHub rate-limited requests per runner-hour, 100 runners (RunnerDeployment)');
  assert.equal(spend.met, true);
  assert.equal(spend.why, undefined, 'met: no explanation');
  assert.match(
    row('replacement p99, 1,000').why ?? '',
    /load average of 3\.5 on 2 cores.*40 s of CPU in 300 s/,
  );
  assert.match(row('cold start, 100').why ?? '', /Samples: 280, 350, 420 ms\. The machine was quiet/);
  const cold = row('cold start, 1,000').why ?? '';
  assert.match(
    cold,
    /Node\.js was up at 50 ms, paddock's code had loaded at 170 ms \(120 ms of loading\), the caches started listing at 190 ms and had all synced at 2,250 ms \(2,060 ms; the last: statefulsets\), the webhook at 2,300 ms; ready at 2,300 ms, last waiting for the webhook\./,
  );
  assert.match(cold, /190 ms pass before the first list is sent, leaving 1,810 ms of the 2,000 ms/);
  assert.match(cold, /meeting it needs less work at start or a faster machine\./);
  assert.doesNotMatch(row('cold start, 100').why ?? '', /first list/, 'no steps recorded: no split');
  assert.match(
    row('replacement p99, 1,000').why ?? '',
    /load average of 3\.5 on 2 cores.*ask for more CPU than the machine has/,
  );
  assert.match(
    row('GitHub rate-limited requests per runner-hour, 1,000').why ?? '',
    /The requests in 300 s: 40 × GET \/orgs\/\{org\}\/actions\/runners, 1 × GET \/rate_limit\./,
  );
});

test("each row names its own line's commit and day; a line from before they were recorded says so", () => {
  const rows = evaluate([
    {
      kind: 'RunnerDeployment',
      runners: 100,
      controllerRssSteadyMiB: 90,
      commit: 'abc1234+changes',
      measuredAt: '2026-12-06 07:10',
      machine: 'Linux 6.1, Node.js 24.22.3',
    },
    { bench: 'cold-start', kind: 'RunnerDeployment', runners: 100, startToReadyMs: 250 },
  ]);
  const row = (prefix: string) => rows.find((r) => r.figure.startsWith(prefix))!;
  assert.equal(row('controller RSS, steady, 100').measured, 'abc1234+changes, 2026-12-06');
  assert.equal(row('controller RSS, steady, 100').machine, 'Linux 6.1, Node.js 24.22.3');
  assert.equal(row('cold start, 100').measured, 'unrecorded');
  assert.equal(row('cold start, 1,000').measured, undefined, 'not run');
});
