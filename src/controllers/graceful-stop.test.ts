import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { rfc3339 } from './constants.ts';
import {
  forceDeleteDecision,
  gracefulStopDecision,
  type PodLike,
  type RemovalAnswer,
  registrationCheckResult,
  registrationCheckStart,
  removalStep,
  runnerFinished,
  runnerPodFacts,
  runnerStopped,
} from './graceful-stop.ts';

const NOW = Date.parse('2026-06-01T12:00:00Z');
const MIN = 60_000;
const RETRY = MIN;
const TIMEOUT = 10 * MIN;

interface PodOpts {
  phase?: string;
  annotations?: Record<string, string>;
  ephemeral?: boolean;
  readyAt?: number;
  createdAt?: number;
  exitCode?: number;
  lastTerminated?: boolean;
  noRunnerStatus?: boolean;
  /** The runner container's `state.running.startedAt`. */
  startedAt?: number;
  /** The runner container is still being created (`state.waiting`). */
  waiting?: boolean;
}

function pod(o: PodOpts = {}): PodLike {
  const statuses =
    o.noRunnerStatus === true
      ? []
      : [
          {
            name: 'runner',
            state: o.waiting
              ? { waiting: { reason: 'ContainerCreating' } }
              : o.exitCode === undefined
                ? {
                    running:
                      o.startedAt === undefined ? {} : { startedAt: new Date(o.startedAt).toISOString() },
                  }
                : { terminated: { exitCode: o.exitCode } },
            lastState: o.lastTerminated ? { terminated: { exitCode: 137 } } : {},
          },
        ];
  return {
    metadata: {
      name: 'runner-abc',
      annotations: o.annotations ?? {},
      creationTimestamp: new Date(o.createdAt ?? NOW - 5 * MIN).toISOString(),
    },
    spec: {
      containers: [
        {
          name: 'runner',
          env: [{ name: 'RUNNER_EPHEMERAL', value: o.ephemeral === false ? 'false' : 'true' }],
        },
        { name: 'docker' },
      ],
    },
    status: {
      phase: o.phase ?? 'Running',
      conditions:
        o.readyAt === undefined
          ? []
          : [{ type: 'Ready', status: 'True', lastTransitionTime: new Date(o.readyAt).toISOString() }],
      containerStatuses: statuses,
    },
  };
}

function stop(o: PodOpts, runnerId: number | undefined, now = NOW) {
  return gracefulStopDecision({
    facts: runnerPodFacts(pod(o)),
    runnerId,
    now,
    retryDelayMs: RETRY,
    registrationTimeoutMs: TIMEOUT,
  });
}

describe('facts', () => {
  test('stopped as ARC HEAD: Succeeded or Failed, runner terminated with any code, or deleted before any container started', () => {
    const stopped = (o: PodOpts, deleting = false) => {
      const p = pod(o);
      if (deleting) p.metadata.deletionTimestamp = new Date(NOW).toISOString();
      return runnerStopped(runnerPodFacts(p));
    };
    assert.equal(stopped({ phase: 'Succeeded' }), true);
    assert.equal(stopped({ phase: 'Failed' }), true);
    assert.equal(stopped({ phase: 'Failed', exitCode: 0 }), true);
    assert.equal(stopped({ phase: 'Running', exitCode: 0 }), true);
    assert.equal(stopped({ phase: 'Running', exitCode: 1 }), true, 'a crash is a stop too');
    assert.equal(stopped({ phase: 'Running', exitCode: 137 }), true);
    assert.equal(stopped({ phase: 'Running' }), false);
    assert.equal(stopped({ phase: 'Pending', noRunnerStatus: true }), false);
    assert.equal(
      stopped({ phase: 'Pending', noRunnerStatus: true }, true),
      true,
      'deleted before it started',
    );
    assert.equal(stopped({ phase: 'Running' }, true), false, 'deleted while running: the kubelet stops it');
  });

  test('finished (the seed’s rule) is only exit code 0 or Succeeded', () => {
    assert.equal(runnerFinished(runnerPodFacts(pod({ phase: 'Running', exitCode: 0 }))), true);
    assert.equal(runnerFinished(runnerPodFacts(pod({ phase: 'Succeeded' }))), true);
    assert.equal(runnerFinished(runnerPodFacts(pod({ phase: 'Running', exitCode: 1 }))), false);
    assert.equal(runnerFinished(runnerPodFacts(pod({ phase: 'Failed' }))), false);
  });

  test('runner ID, ephemeral and container state are read from the pod', () => {
    const f = runnerPodFacts(
      pod({
        annotations: { 'actions-runner/id': '42' },
        ephemeral: false,
        exitCode: 3,
        lastTerminated: true,
      }),
    );
    assert.equal(f.recordedRunnerId, 42);
    assert.equal(f.ephemeral, false);
    assert.equal(f.runnerExitCode, 3);
    assert.equal(f.runnerTerminatedBefore, true);
    assert.ok(
      Number.isNaN(runnerPodFacts(pod({ annotations: { 'actions-runner/id': 'x1' } })).recordedRunnerId),
    );
  });
});

describe('graceful stop decision table (spec §4.3)', () => {
  test('row 1: unregistration already complete → done', () => {
    assert.deepEqual(
      stop({ annotations: { 'actions-runner/unregistration-complete-timestamp': rfc3339(NOW) } }, 7),
      {
        kind: 'done',
        row: '1',
        reason: 'already-unregistered',
      },
    );
  });

  test('row 2: no ID, running, ready within the timeout → wait retryDelay', () => {
    assert.deepEqual(stop({ readyAt: NOW - MIN }, undefined), {
      kind: 'wait',
      row: '2',
      reason: 'waiting-for-registration',
      requeueAfterMs: RETRY,
    });
  });

  test('row 2 / row 5 boundary: exactly at the ready timeout still waits; one second after it is done', () => {
    assert.equal(stop({ readyAt: NOW - TIMEOUT + 1000 }, undefined).row, '2', 'one second before');
    assert.equal(stop({ readyAt: NOW - TIMEOUT }, undefined).row, '2', 'exactly at the timeout');
    assert.deepEqual(stop({ readyAt: NOW - TIMEOUT - 1000 }, undefined), {
      kind: 'done',
      row: '5',
      reason: 'never-registered',
    });
  });

  test('row 3: no ID and pending → done (never scheduled; avoids volume deadlocks)', () => {
    assert.deepEqual(stop({ phase: 'Pending', noRunnerStatus: true }, undefined), {
      kind: 'done',
      row: '3',
      reason: 'pending-before-registration',
    });
  });

  test('row 4: no ID and stopped → done', () => {
    assert.equal(stop({ phase: 'Succeeded' }, undefined).row, '4');
    assert.equal(stop({ phase: 'Running', exitCode: 0 }, undefined).row, '4');
    assert.equal(stop({ phase: 'Running', exitCode: 1 }, undefined).row, '4', 'crashed before registering');
    assert.equal(stop({ phase: 'Failed' }, undefined).row, '4');
  });

  test('row 6: ID known, ephemeral runner exited 0 → done without asking (GitHub removed it with its job)', () => {
    assert.deepEqual(stop({ phase: 'Running', exitCode: 0 }, 7), {
      kind: 'done',
      row: '6',
      reason: 'runner-stopped',
    });
  });

  test('row 6/8: ID known and stopped any other way → ask GitHub (a crashed or static runner stays registered)', () => {
    assert.deepEqual(stop({ phase: 'Running', exitCode: 1 }, 7), { kind: 'remove', row: '6/8', runnerId: 7 });
    assert.deepEqual(stop({ phase: 'Failed' }, 7), { kind: 'remove', row: '6/8', runnerId: 7 });
    assert.deepEqual(stop({ phase: 'Running', exitCode: 0, ephemeral: false }, 7), {
      kind: 'remove',
      row: '6/8',
      runnerId: 7,
    });
  });

  test('row 7a: waiting for completion, not ephemeral or no runner status → wait', () => {
    const wait = { 'actions-runner/runner-completion-wait-start-timestamp': rfc3339(NOW - MIN) };
    assert.equal(stop({ annotations: wait, ephemeral: false }, 7).row, '7a');
    assert.equal(stop({ annotations: wait, noRunnerStatus: true }, 7).row, '7a');
  });

  test('row 7b: waiting for completion, runner never terminated before → wait', () => {
    const wait = { 'actions-runner/runner-completion-wait-start-timestamp': rfc3339(NOW - MIN) };
    assert.deepEqual(stop({ annotations: wait }, 7), {
      kind: 'wait',
      row: '7b',
      reason: 'waiting-for-job',
      requeueAfterMs: RETRY,
    });
  });

  test('row 7c: waiting for completion, the runner container crashed before (issue 1369) → done', () => {
    const wait = { 'actions-runner/runner-completion-wait-start-timestamp': rfc3339(NOW - MIN) };
    assert.deepEqual(stop({ annotations: wait, lastTerminated: true }, 7), {
      kind: 'done',
      row: '7c',
      reason: 'crashed-while-waiting',
    });
  });

  test('row 8: otherwise ask GitHub to remove the runner', () => {
    assert.deepEqual(stop({ readyAt: NOW - MIN }, 7), { kind: 'remove', row: '8', runnerId: 7 });
    assert.deepEqual(
      stop({ phase: 'Pending' }, 9),
      { kind: 'remove', row: '8', runnerId: 9 },
      'pending with an ID',
    );
  });
});

describe('RemoveRunner answers (spec §4.3, row 8)', () => {
  const step = (answer: RemovalAnswer, o: PodOpts = {}) =>
    removalStep({ answer, facts: runnerPodFacts(pod(o)), now: NOW, retryDelayMs: RETRY, rfc3339 });
  const busy: RemovalAnswer = {
    kind: 'busy',
    message: 'Bad request - Runner "runner-abc" is still running a job',
  };

  test('204 → done', () => {
    assert.deepEqual(step({ kind: 'removed' }), { kind: 'done', row: '8/204', reason: 'unregistered' });
  });

  test('403 → done, with a warning telling the user to clean up', () => {
    const s = step({ kind: 'forbidden', message: 'Resource not accessible by integration' });
    assert.equal(s.kind, 'done');
    assert.equal(s.kind === 'done' && s.reason, 'permission-denied');
    assert.match(s.kind === 'done' ? (s.warning ?? '') : '', /treating it as unregistered/);
  });

  test('422 with the runner container already terminated → done (crash/OOM)', () => {
    const s = step(busy, { exitCode: 137 });
    assert.equal(s.kind === 'done' && s.reason, 'crashed-while-busy');
    assert.equal(step(busy, { exitCode: 0, phase: 'Failed' }).kind, 'done');
  });

  test('422, ephemeral → record the failure and the wait start, wait for the job', () => {
    assert.deepEqual(step(busy, { ephemeral: true }), {
      kind: 'wait',
      row: '8/422-ephemeral',
      reason: 'runner-busy',
      requeueAfterMs: RETRY,
      annotateOnce: {
        'actions-runner/unregistration-failure-message':
          'Bad request - Runner "runner-abc" is still running a job',
        'actions-runner/runner-completion-wait-start-timestamp': '2026-06-01T12:00:00Z',
      },
      note: 'Runner runner-abc is running a job; waiting for the ephemeral runner to finish it',
    });
  });

  test('422, static → record the failure, retry after the retry delay', () => {
    const s = step(busy, { ephemeral: false });
    assert.equal(s.kind, 'wait');
    assert.equal(s.kind === 'wait' && s.row, '8/422-static');
    assert.equal(s.kind === 'wait' && s.requeueAfterMs, RETRY);
    assert.deepEqual(s.kind === 'wait' && s.annotateOnce, {
      'actions-runner/unregistration-failure-message':
        'Bad request - Runner "runner-abc" is still running a job',
    });
  });

  test('rate limited → wait until the reset, never done', () => {
    const s = step({ kind: 'rateLimited', resetAt: NOW + 5 * MIN, message: 'API rate limit exceeded' });
    assert.equal(s.kind, 'wait');
    assert.equal(s.kind === 'wait' && s.requeueAfterMs, 5 * MIN);
    const past = step({ kind: 'rateLimited', resetAt: NOW - 1, message: 'x' });
    assert.equal(
      past.kind === 'wait' && past.requeueAfterMs,
      1000,
      'a reset in the past still waits a moment',
    );
  });

  test('404 → confirm with a fresh list before treating the runner as gone', () => {
    assert.deepEqual(step({ kind: 'notFound' }), { kind: 'confirm-gone', row: '8/404' });
  });

  test('401 and other failures → retry with backoff', () => {
    assert.equal(step({ kind: 'invalidCredentials', message: 'Bad credentials' }).kind, 'retry');
    assert.equal(step({ kind: 'failed', status: 502, message: 'Server Error' }).kind, 'retry');
    assert.equal(step({ kind: 'failed', status: null, message: 'ECONNRESET' }).kind, 'retry');
  });
});

describe('registration check (seed)', () => {
  const S = { intervalMs: MIN, jitterMs: 10_000, timeoutMs: TIMEOUT };
  const facts = (o: PodOpts) => runnerPodFacts(pod(o));

  test('a finished pod restarts without asking GitHub', () => {
    assert.equal(registrationCheckStart(facts({ phase: 'Succeeded' }), NOW, S).kind, 'restart');
    assert.equal(registrationCheckStart(facts({ exitCode: 0 }), NOW, S).kind, 'restart');
  });

  test('a crashed runner (any exit code, or phase Failed) is replaced as well', () => {
    const crashed = registrationCheckStart(facts({ exitCode: 1 }), NOW, S);
    assert.equal(crashed.kind === 'restart' && crashed.reason, 'crashed');
    assert.match(crashed.kind === 'restart' ? crashed.message : '', /exited with code 1/);
    assert.equal(
      registrationCheckStart(facts({ phase: 'Failed', noRunnerStatus: true }), NOW, S).kind,
      'restart',
    );
  });

  test('checked at most once per interval: the last check time defers the next', () => {
    const last = (ago: number) =>
      facts({
        annotations: { 'actions-runner-controller/last-registration-check-time': rfc3339(NOW - ago) },
      });
    assert.deepEqual(registrationCheckStart(last(10_000), NOW, S), {
      kind: 'requeue',
      requeueAfterMs: 49_000,
    });
    assert.deepEqual(registrationCheckStart(last(58_000), NOW, S), { kind: 'requeue', requeueAfterMs: 1000 });
    assert.deepEqual(
      registrationCheckStart(last(59_000), NOW, S),
      { kind: 'lookup' },
      'within the 1 s slack',
    );
    assert.deepEqual(registrationCheckStart(last(120_000), NOW, S), { kind: 'lookup' });
    assert.deepEqual(registrationCheckStart(facts({}), NOW, S), { kind: 'lookup' }, 'never checked');
  });

  test('online → registered', () => {
    assert.deepEqual(registrationCheckResult(facts({}), 'online', NOW, S, 0.5), { kind: 'registered' });
  });

  test('not found within the timeout → recheck after interval + jitter', () => {
    assert.deepEqual(registrationCheckResult(facts({ createdAt: NOW - MIN }), 'notFound', NOW, S, 0), {
      kind: 'recheck',
      lookup: 'notFound',
      requeueAfterMs: 70_000,
    });
    const r = registrationCheckResult(facts({ createdAt: NOW - MIN }), 'offline', NOW, S, 0.999);
    assert.equal(r.kind === 'recheck' && Math.round(r.requeueAfterMs), 70_999);
  });

  test('timeout boundary from the runner container’s start: at the timeout still rechecks; one second later restarts', () => {
    const started = (at: number) => facts({ createdAt: NOW - 2 * TIMEOUT, startedAt: at });
    assert.equal(
      registrationCheckResult(started(NOW - TIMEOUT + 1000), 'notFound', NOW, S, 0).kind,
      'recheck',
    );
    assert.equal(registrationCheckResult(started(NOW - TIMEOUT), 'notFound', NOW, S, 0).kind, 'recheck');
    const late = registrationCheckResult(started(NOW - TIMEOUT - 1000), 'notFound', NOW, S, 0);
    assert.equal(late.kind, 'restart');
    assert.equal(late.kind === 'restart' && late.reason, 'not-registered');
    assert.match(late.kind === 'restart' ? late.message : '', /did not register with GitHub within 10m of/);
    const offline = registrationCheckResult(started(NOW - TIMEOUT - 1000), 'offline', NOW, S, 0);
    assert.equal(offline.kind === 'restart' && offline.reason, 'offline');
  });

  test('a pod whose runner container has not started (waiting for a node, a volume, an image) never times out', () => {
    const waiting = facts({ phase: 'Pending', noRunnerStatus: true, createdAt: NOW - 10 * TIMEOUT });
    assert.equal(registrationCheckResult(waiting, 'notFound', NOW, S, 0).kind, 'recheck');
    const creating = facts({ phase: 'Pending', waiting: true, createdAt: NOW - 10 * TIMEOUT });
    assert.equal(registrationCheckResult(creating, 'notFound', NOW, S, 0).kind, 'recheck');
  });

  test('messages state the configured timeout exactly (40 s is not "1m")', () => {
    const s40 = { ...S, timeoutMs: 40_000 };
    const r = registrationCheckResult(facts({ startedAt: NOW - 41_000 }), 'notFound', NOW, s40, 0);
    assert.match(r.kind === 'restart' ? r.message : '', /within 40s of its runner container starting/);
  });
});

describe('forced deletion', () => {
  test('one minute after the deletion request, not a moment before', () => {
    const asked = NOW - MIN;
    assert.deepEqual(forceDeleteDecision(asked + 1000, NOW, MIN), { kind: 'wait', requeueAfterMs: 2000 });
    assert.deepEqual(
      forceDeleteDecision(asked, NOW, MIN),
      { kind: 'wait', requeueAfterMs: 1000 },
      'exactly at the timeout',
    );
    assert.deepEqual(forceDeleteDecision(asked - 1000, NOW, MIN), { kind: 'force-delete' });
  });
});
