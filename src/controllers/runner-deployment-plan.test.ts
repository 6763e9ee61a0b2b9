import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { RunnerDeployment, RunnerReplicaSet } from '../api/index.ts';
import { desiredReplicaSet, planRunnerDeployment, sameTemplate } from './runner-deployment-plan.ts';

const rd = (spec: Partial<RunnerDeployment['spec']> = {}): RunnerDeployment => ({
  metadata: { name: 'ci', namespace: 'ns', uid: 'rd-uid' },
  spec: { replicas: 2, template: { spec: { organization: 'acme', labels: ['linux'] } }, ...spec },
});

let seq = 0;
function set(
  d: RunnerDeployment,
  o: {
    hash?: string;
    replicas?: number;
    status?: RunnerReplicaSet['status'];
    age?: number;
    common?: string[];
  } = {},
): RunnerReplicaSet {
  const desired = desiredReplicaSet(d, o.common ?? [], o.hash);
  return {
    metadata: {
      name: `ci-${++seq}`,
      namespace: 'ns',
      creationTimestamp: new Date(Date.parse('2026-12-03T10:00:00Z') + (o.age ?? 0) * 1000).toISOString(),
      labels: { ...desired.template.metadata?.labels },
    },
    spec: {
      replicas: o.replicas ?? desired.replicas,
      selector: desired.selector,
      template: desired.template,
    },
    ...(o.status ? { status: o.status } : {}),
  };
}

describe('desiredReplicaSet', () => {
  test('hash over the template with the common labels; labels and selector carry it and the deployment name', () => {
    const a = desiredReplicaSet(rd(), []);
    const b = desiredReplicaSet(rd(), ['gpu']);
    assert.notEqual(a.hash, b.hash, 'common labels are part of the template');
    assert.deepEqual(b.template.spec.labels, ['linux', 'gpu']);
    assert.deepEqual(a.template.metadata?.labels, {
      'runner-template-hash': a.hash,
      'runner-deployment-name': 'ci',
    });
    assert.deepEqual(a.selector, {
      matchLabels: { 'runner-deployment-name': 'ci', 'runner-template-hash': a.hash },
    });
    assert.equal(
      desiredReplicaSet(rd({ replicas: 5 }), []).hash,
      a.hash,
      'replicas are not part of the hash',
    );
    assert.equal(desiredReplicaSet(rd({ replicas: null }), []).replicas, 1);
    const custom = desiredReplicaSet(
      rd({ selector: { matchLabels: { team: 'x' }, matchExpressions: [{ key: 'k', operator: 'Exists' }] } }),
      [],
    );
    assert.deepEqual(custom.selector.matchLabels, { team: 'x', 'runner-template-hash': custom.hash });
    assert.equal(custom.selector.matchExpressions?.length, 1);
  });
});

describe('sameTemplate', () => {
  test('ignores the hash label and serialisation noise, not content', () => {
    const d = desiredReplicaSet(rd(), []);
    const arc = structuredClone(d.template);
    arc.metadata!.labels!['runner-template-hash'] = 'arcs-own';
    (arc.metadata as Record<string, unknown>).creationTimestamp = null;
    (arc.spec as Record<string, unknown>).image = '';
    assert.ok(sameTemplate(arc, d.template));
    const other = structuredClone(arc);
    other.spec.labels = ['linux', 'v2'];
    assert.ok(!sameTemplate(other, d.template));
    const flag = structuredClone(arc);
    flag.spec.ephemeral = false;
    assert.ok(!sameTemplate(flag, d.template), 'false is content, not noise');
  });
});

describe('planRunnerDeployment', () => {
  test('no set: create one', () => {
    const plan = planRunnerDeployment({ rd: rd(), sets: [], commonRunnerLabels: [] });
    assert.equal(plan.actions.length, 1);
    assert.equal(plan.actions[0]!.kind, 'create-set');
  });

  test('steady state: nothing to do, status summed over the sets', () => {
    const d = rd();
    const s = set(d, { status: { replicas: 2, readyReplicas: 2, availableReplicas: 2 } });
    const plan = planRunnerDeployment({ rd: d, sets: [s], commonRunnerLabels: [] });
    assert.deepEqual(plan.actions, []);
    assert.deepEqual(plan.status, {
      replicas: 2,
      availableReplicas: 2,
      readyReplicas: 2,
      updatedReplicas: 2,
      desiredReplicas: 2,
    });
  });

  test('replicas and effectiveTime follow the deployment', () => {
    const d = rd({ replicas: 4, effectiveTime: '2026-12-03T10:05:00Z' });
    const s = set(rd(), { replicas: 2 });
    const plan = planRunnerDeployment({ rd: d, sets: [s], commonRunnerLabels: [] });
    assert.deepEqual(plan.actions, [
      { kind: 'scale-set', set: s.metadata.name, replicas: 4, effectiveTime: '2026-12-03T10:05:00Z' },
    ]);
  });

  test('a new template rolls out a new set; the old one stays until the new one is ready', () => {
    const old = set(rd(), { status: { replicas: 2, readyReplicas: 2, availableReplicas: 2 } });
    const d2 = rd({ template: { spec: { organization: 'acme', labels: ['linux', 'v2'] } } });
    const plan = planRunnerDeployment({ rd: d2, sets: [old], commonRunnerLabels: [] });
    assert.equal(plan.actions[0]?.kind, 'create-set');
    assert.equal(plan.requeueAfterMs, 5_000);

    const fresh = set(d2, { age: 60, status: { replicas: 2, readyReplicas: 1, availableReplicas: 1 } });
    const waiting = planRunnerDeployment({ rd: d2, sets: [old, fresh], commonRunnerLabels: [] });
    assert.deepEqual(waiting.actions, [], 'the new set is not fully ready');
    assert.match(waiting.note ?? '', /fully ready/);
    assert.equal(waiting.status?.replicas, 4);
    assert.equal(waiting.status?.updatedReplicas, 2);

    const ready = set(d2, { age: 60, status: { replicas: 2, readyReplicas: 2, availableReplicas: 2 } });
    const retire = planRunnerDeployment({ rd: d2, sets: [old, ready], commonRunnerLabels: [] });
    assert.deepEqual(retire.actions, [{ kind: 'scale-set', set: old.metadata.name, replicas: 0 }]);

    const draining = {
      ...old,
      spec: { ...old.spec, replicas: 0 },
      status: { replicas: 1, readyReplicas: 0, availableReplicas: 0 },
    };
    assert.deepEqual(
      planRunnerDeployment({ rd: d2, sets: [draining, ready], commonRunnerLabels: [] }).actions,
      [],
    );
    const empty = { ...draining, status: { replicas: 0, readyReplicas: 0, availableReplicas: 0 } };
    assert.deepEqual(planRunnerDeployment({ rd: d2, sets: [empty, ready], commonRunnerLabels: [] }).actions, [
      { kind: 'delete-set', set: old.metadata.name },
    ]);
  });

  test('a set ARC made with its own hash but the same template is adopted, not rolled out', () => {
    const d = rd();
    const arc = set(d, { hash: 'arc-hash', status: { replicas: 2, readyReplicas: 2, availableReplicas: 2 } });
    const plan = planRunnerDeployment({ rd: d, sets: [arc], commonRunnerLabels: [] });
    assert.deepEqual(plan.actions, []);
    // ... while a real template change under ARC's hash still rolls out.
    const changed = rd({ template: { spec: { organization: 'acme', labels: ['gpu'] } } });
    assert.equal(
      planRunnerDeployment({ rd: changed, sets: [arc], commonRunnerLabels: [] }).actions[0]?.kind,
      'create-set',
    );
  });

  test('common runner labels are part of the template: changing them rolls out', () => {
    const d = rd();
    const s = set(d);
    assert.equal(
      planRunnerDeployment({ rd: d, sets: [s], commonRunnerLabels: ['gpu'] }).actions[0]?.kind,
      'create-set',
    );
  });

  test('a set whose selector is not the desired one gets its spec replaced (sets from before ARC 0.18)', () => {
    const d = rd();
    const s = set(d);
    s.spec.selector = null;
    const plan = planRunnerDeployment({ rd: d, sets: [s], commonRunnerLabels: [] });
    assert.equal(plan.actions[0]?.kind, 'replace-spec');
  });

  test('a newest set without a hash label is left alone with a note', () => {
    const d = rd();
    const s = set(d);
    delete s.metadata.labels!['runner-template-hash'];
    const plan = planRunnerDeployment({ rd: d, sets: [s], commonRunnerLabels: [] });
    assert.deepEqual(plan.actions, []);
    assert.match(plan.note ?? '', /no template hash/);
  });
});
