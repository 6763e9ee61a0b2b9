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
