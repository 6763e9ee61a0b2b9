import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ChartFigures, SandboxSummary } from '../src/sandbox/sandbox.ts';
import { runSandbox } from './support/sandbox.ts';

/**
 * The chart's RBAC is exactly what paddock needs (issue 13): `paddock sandbox --helm` installs
 * charts/paddock and runs paddock and its webhook server as the chart's ServiceAccounts (their own
 * tokens, every request in the API server's audit log) through the RunnerDeployment + HRA and the
 * RunnerSet scenarios, then drains and uninstalls the release as the README says. No request may be
 * refused, and every granted rule must have been used by some scenario or be listed below with the
 * reason no scenario here can use it.
 */

/**
 * Granted rules the scenarios here need not exercise, and the code paths that need them. Every
 * entry must still be granted, so the list cannot go stale.
 */
const GRANTED_UNUSED: Record<string, string> = {
  // Authorisation checks of blockOwnerDeletion owner references, never requests of their own.
  'actions.summerwind.dev/runners/finalizers update': 'pods owned by a Runner',
  'actions.summerwind.dev/runnerreplicasets/finalizers update': 'Runners owned by a RunnerReplicaSet',
  'actions.summerwind.dev/runnerdeployments/finalizers update':
    'RunnerReplicaSets owned by a RunnerDeployment',
  'actions.summerwind.dev/runnersets/finalizers update': 'StatefulSets owned by a RunnerSet',
  // Server-side apply creates the configuration the first time, and is audited as a patch.
  'admissionregistration.k8s.io/mutatingwebhookconfigurations create': 'first apply of the pod webhook',
  'admissionregistration.k8s.io/validatingwebhookconfigurations create': 'first apply of the runner webhooks',
  // Looked up at start-up (get), deleted only when an earlier paddock build left it.
  'admissionregistration.k8s.io/mutatingwebhookconfigurations delete':
    'the mutating runner resources configuration of an earlier build',
  // Reads outside the caches: a re-read after a conflicting write (runtime/objects.ts), the pod
  // webhook's owner chain when the cache has not seen a new StatefulSet yet, the reservation writer's
  // re-read of an HRA after a conflict.
  'actions.summerwind.dev/horizontalrunnerautoscalers get': 'reservation writer after a conflict',
  'actions.summerwind.dev/runnerdeployments get': 'finalizer re-read after a conflict',
  'actions.summerwind.dev/runnerreplicasets get': 'finalizer re-read after a conflict',
  'actions.summerwind.dev/runners get': 'finalizer re-read after a conflict',
  'actions.summerwind.dev/runnersets get': 'pod webhook owner chain, cache miss',
  'apps/statefulsets get': 'pod webhook owner chain, cache miss',
  'core/pods get': 'finalizer re-read after a conflict',
  // A RunnerDeployment whose template changed replaces its RunnerReplicaSet.
  'actions.summerwind.dev/runnerreplicasets delete': 'rollout of a new template',
  // Volume retention of RunnerSets with volumeClaimTemplates (the sandbox's has none).
  'core/persistentvolumeclaims get': 'volume retention',
  'core/persistentvolumeclaims patch': 'volume retention',
  'core/persistentvolumeclaims delete': 'volume retention',
  'core/persistentvolumes get': 'volume retention',
  'core/persistentvolumes patch': 'volume retention',
  // Token Secrets of Runners and pods whose owner is gone, and JIT Secrets of a StatefulSet's pods.
  'core/secrets delete': 'token Secret clean-up',
  'core/secrets deletecollection': 'JIT Secrets of a deleted pod',
  // The webhook certificate Secret in paddock's namespace, rewritten when it is renewed.
  'core/secrets update': 'certificate renewal',
  // An Event that repeats becomes a series, counted by patching it; whether one repeats within a run
  // depends on timing.
  'events.k8s.io/events patch': 'Event series',
};

function assertChart(summary: SandboxSummary): ChartFigures {
  const chart = summary.chart;
  assert.ok(chart, 'the summary has the chart figures');
  assert.ok(chart.rbac.requests > 100, `requests audited: ${chart.rbac.requests}`);
  assert.equal(
    chart.rbac.forbidden,
    0,
    `requests refused by the chart's RBAC:\n${chart.rbac.forbiddenExamples.join('\n')}`,
  );
  assert.ok(chart.rbac.granted.length > 10, `granted: ${chart.rbac.granted.join(', ')}`);
  assert.equal(
    chart.uninstall.finalizersLeft,
    0,
    `the drain left no paddock finalizer; left:\n${chart.uninstall.left.join('\n')}`,
  );
  assert.deepEqual(
    chart.uninstall.webhookConfigurationsLeft,
    [],
    'helm uninstall took the webhook configurations',
  );
  for (const [name, code] of Object.entries(chart.uninstall.exitCodes))
    assert.equal(code, 0, `${name} exit code`);
  assert.ok(summary.pods.started >= 1, `pods started: ${summary.pods.started}`);
  assert.ok(summary.jobs.completed >= 1, `jobs completed: ${summary.jobs.completed}`);
  assert.equal(summary.jobs.cancelledByController, 0);
  assert.equal(summary.leakedRunners, 0);
  return chart;
}

describe('the chart’s RBAC, proved by running paddock with it', () => {
  const unusedBy: string[][] = [];
  const grantedBy: string[][] = [];

  test('cluster-wide: a RunnerDeployment scaled by workflow_job webhooks, with the status update hook', async () => {
    const summary = await runSandbox([
      '--helm',
      '--autoscale',
      'webhook',
      '--helm-set',
      'runner.statusUpdateHook.enabled=true',
    ]);
    assert.equal(summary.kind, 'RunnerDeployment');
    assert.equal(summary.autoscale?.deliveries?.failed, 0);
    const chart = assertChart(summary);
    assert.ok(
      chart.rbac.used.includes('rbac.authorization.k8s.io/rolebindings create'),
      'the status update hook created its RoleBindings',
    );
    unusedBy.push(chart.rbac.unused);
    grantedBy.push(chart.rbac.granted);
  });

  test('namespaced (scope.watchNamespace): a RunnerSet scaled by pull metrics', async () => {
    const summary = await runSandbox([
      '--helm',
      '--kind',
      'runnerset',
      '--autoscale',
      'pull',
      '--helm-set',
      'scope.watchNamespace=sandbox',
      // Pull metrics are read once a sync period (ARC's default 1m is longer than the run).
      '--helm-set',
      'syncPeriod=5s',
    ]);
    assert.equal(summary.kind, 'RunnerSet');
    const chart = assertChart(summary);
    unusedBy.push(chart.rbac.unused);
    grantedBy.push(chart.rbac.granted);
  });

  test('every rule granted was used by a scenario or is justified', () => {
    assert.equal(unusedBy.length, 2, 'both scenarios ran');
    const neverUsed = unusedBy[0]!.filter((r) => unusedBy.slice(1).every((u) => u.includes(r)));
    const unjustified = neverUsed.filter((r) => !(r in GRANTED_UNUSED));
    assert.deepEqual(
      unjustified,
      [],
      'rules the chart grants that no scenario used: trim them or justify them',
    );
    // Some entries are used now and then (after a conflict, for a repeated Event): only a rule no
    // longer granted makes an entry stale.
    const stale = Object.keys(GRANTED_UNUSED).filter((r) => !grantedBy.some((g) => g.includes(r)));
    assert.deepEqual(stale, [], 'justified as unused, but no longer granted: drop them from GRANTED_UNUSED');
  });
});
