import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fleetRuns } from './fleet-runs.ts';

test('fleet runs: the default, an explicit list, and kinds × sizes', () => {
  assert.deepEqual(fleetRuns({}), [
    { kind: 'RunnerDeployment', runners: 100 },
    { kind: 'RunnerSet', runners: 100 },
    { kind: 'RunnerDeployment', runners: 1000 },
  ]);
  assert.deepEqual(fleetRuns({ runs: 'runnerset:1000' }), [{ kind: 'RunnerSet', runners: 1000 }]);
  assert.deepEqual(fleetRuns({ runners: '100' }), [
    { kind: 'RunnerDeployment', runners: 100 },
    { kind: 'RunnerSet', runners: 100 },
  ]);
  assert.deepEqual(fleetRuns({ kinds: 'runnerset', runners: '10,20' }), [
    { kind: 'RunnerSet', runners: 10 },
    { kind: 'RunnerSet', runners: 20 },
  ]);
  assert.throws(() => fleetRuns({ runs: 'deployment:100' }), /unknown kind/);
  assert.throws(() => fleetRuns({ runners: '0' }), /not a fleet size/);
});
