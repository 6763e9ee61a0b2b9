import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { AutoscalerMetrics } from './autoscaler-metrics.ts';

describe('AutoscalerMetrics', () => {
  test("ARC's gauge names and labels; an HRA's series go with it", async () => {
    const registry = new Registry();
    const m = new AutoscalerMetrics(registry);
    const hra = { namespace: 'ns', name: 'ci' };
    const target = { organization: 'acme', kind: 'RunnerDeployment' as const, name: 'ci' };
    m.specReplicas(hra, 1, 5);
    m.desiredReplicas(hra, 3);
    m.busyRatio(hra, target, { desired: 3, runners: 2, registered: 2, busy: 2, terminatingBusy: 0 });
    m.workflowRuns(hra, target, { necessary: 4, completed: 1, inProgress: 1, queued: 3, unknown: 0 });
    const text = await registry.metrics();
    assert.match(
      text,
      /horizontalrunnerautoscaler_spec_max_replicas\{horizontalrunnerautoscaler="ci",namespace="ns"\} 5/,
    );
    assert.match(text, /horizontalrunnerautoscaler_status_desired_replicas\{[^}]*\} 3/);
    assert.match(
      text,
      /horizontalrunnerautoscaler_runners_busy\{horizontalrunnerautoscaler="ci",namespace="ns",enterprise="",organization="acme",repository="",kind="runnerdeployment",name="ci"\} 2/,
    );
    assert.match(text, /horizontalrunnerautoscaler_necessary_replicas\{[^}]*\} 4/);
    // A second instance on the same registry reuses the gauges.
    new AutoscalerMetrics(registry);
    m.forget(hra);
    const after = await registry.metrics();
    assert.doesNotMatch(after, /horizontalrunnerautoscaler="ci"/);
  });
});
