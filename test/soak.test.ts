import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SANDBOX_NAMESPACE } from '../src/sandbox/sandbox.ts';
import { Soak } from '../src/sandbox/soak.ts';
import { FAULT_KINDS } from '../src/sandbox/soak-schedule.ts';

/**
 * The short soak of `make test` (issue 15): a few minutes, ten runners, every fault kind once, on a
 * seed that changes per run (printed, to replay with `paddock sandbox --soak --seed N`). The long
 * one is `make soak`.
 */
test('short chaos soak: every kind of fault, zero invariant violations', {
  timeout: 15 * 60_000,
}, async (t) => {
  const seed = Number(process.env.PADDOCK_SOAK_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const lines: string[] = [];
  const soak = new Soak({
    runners: 10,
    durationMs: 4 * 60_000,
    seed,
    // Short enough that pods stuck on a lost node are freed inside the drain.
    forceDeleteTimeoutMs: 30_000,
    registrationTimeoutMs: 2 * 60_000,
    log: (l) => lines.push(l),
  });
  t.after(() => soak.stop());
  const summary = await soak.run();
  const context = `seed ${seed}\n${JSON.stringify(summary, null, 2)}\n${lines.slice(-60).join('\n')}`;

  // CI quotes the end of a failure, where the assertion's actual value is printed: the evidence
  // about the pods a violation names goes there too.
  const violations = summary.violationList.length
    ? [...summary.violationList, { diagnostics: summary.diagnostics }]
    : [];
  assert.deepEqual(violations, [], context);
  assert.deepEqual(summary.skipped, [], `faults not injected; ${context}`);
  for (const kind of FAULT_KINDS) assert.ok((summary.faults[kind] ?? 0) >= 1, `no ${kind}; ${context}`);
  assert.ok(summary.jobs.completed >= 10, `jobs completed: ${summary.jobs.completed}; ${context}`);
  assert.equal(summary.jobs.cancelledByController, 0, context);
  assert.equal(summary.takeoverMs.length >= 1, true, `no takeover measured; ${context}`);
  assert.deepEqual(summary.drain.left, [], context);
  assert.ok(summary.replacementLatencyMs.count >= 5, context);

  // The leak scan finds a credential where one is planted: an Event quoting a registration token.
  const sb = soak.sandbox;
  const issued = [...sb.double.model.secretsIssued].find((s) => s.length < 100);
  assert.ok(issued, 'GitHub issued registration or remove tokens during the soak');
  await sb.http!.request('POST', `/api/v1/namespaces/${SANDBOX_NAMESPACE}/events`, {
    body: {
      metadata: { generateName: 'planted-' },
      involvedObject: { kind: 'Pod', namespace: SANDBOX_NAMESPACE, name: 'planted' },
      reason: 'Planted',
      message: `registration token ${issued} for the test`,
      type: 'Normal',
    },
  });
  // The same Event is listed by both Event APIs.
  assert.deepEqual(await sb.secretExposures(), [
    'a registration or remove token in Events (events.k8s.io)',
    'a registration or remove token in Events (core)',
  ]);
});
