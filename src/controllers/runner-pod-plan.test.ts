import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { rfc3339 } from './constants.ts';
import type { RemovalAnswer } from './graceful-stop.ts';
import {
  DEFAULT_RUNNER_POD_SETTINGS,
  INCOMPLETE_LISTING_RETRY_MS,
  type Learned,
  planRunnerPod,
  type RunnerListing,
  type RunnerLite,
  type RunnerPodLike,
  type RunnerPodStep,
} from './runner-pod-plan.ts';

/**
 * The runner pod plan, driven the way the reconciler drives it: each step is applied to an
 * in-memory pod (annotations, finalizers) or answered from a scripted GitHub, until a terminal step.
 */

const NOW = Date.parse('2026-06-01T12:00:00Z');
const MIN = 60_000;
const S = DEFAULT_RUNNER_POD_SETTINGS;
const NAME = 'rs-abcde-0';
const FIN = 'actions.summerwind.dev/runner-pod';
const iso = (ms: number) => new Date(ms).toISOString();

interface PodOpts {
  phase?: string;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ephemeral?: boolean;
  createdAt?: number;
  /** Runner container started at (running state); undefined: no status at all. */
  startedAt?: number;
  exitCode?: number;
  deletedAt?: number;
  env?: { name: string; value?: string }[];
  credsSecret?: string;
}

function pod(o: PodOpts = {}): RunnerPodLike {
  const started = o.startedAt;
  const statuses =
    started === undefined && o.exitCode === undefined
      ? []
      : [
          {
            name: 'runner',
            state:
              o.exitCode === undefined
                ? { running: { startedAt: iso(started!) } }
                : { terminated: { exitCode: o.exitCode, startedAt: iso(started ?? NOW - 5 * MIN) } },
          },
        ];
  return {
    metadata: {
      name: NAME,
      creationTimestamp: iso(o.createdAt ?? NOW - 5 * MIN),
      annotations: {
        ...(o.credsSecret ? { 'actions-runner/github-api-creds-secret': o.credsSecret } : {}),
        ...o.annotations,
      },
      finalizers: o.finalizers ?? [FIN],
      ...(o.deletedAt !== undefined ? { deletionTimestamp: iso(o.deletedAt) } : {}),
    },
    spec: {
      containers: [
        {
          name: 'runner',
          env: o.env ?? [
            { name: 'RUNNER_ORG', value: 'acme' },
            { name: 'RUNNER_EPHEMERAL', value: o.ephemeral === false ? 'false' : 'true' },
          ],
        },
      ],
    },
    status: { phase: o.phase ?? (statuses.length > 0 ? 'Running' : 'Pending'), containerStatuses: statuses },
  };
}

function runner(id: number, name = NAME, extra: Partial<RunnerLite> = {}): RunnerLite {
  return { id, name, status: 'online', busy: false, ...extra };
}

function listing(runners: RunnerLite[], fetchedAt = NOW, complete = true): RunnerListing {
  return {
    fetchedAt,
    complete,
    byName: (n) => runners.find((r) => r.name === n),
    byId: (id) => runners.find((r) => r.id === id),
  };
}

interface GitHubScript {
  /** undefined: credentials resolve; a string: unusable with that message. */
  clientError?: string;
  /** The list answered for a request with `notBefore` (or the cached one when undefined). */
  list?: (notBefore: number | undefined) => RunnerListing;
  remove?: (id: number) => RemovalAnswer;
  /** GitHub's list filtered by the pod's name (default: a server that ignores the filter). */
  lookup?: () => RunnerLite | 'absent' | 'unsupported';
  now?: number;
}

interface Run {
  steps: RunnerPodStep[];
  pod: RunnerPodLike;
  final: RunnerPodStep;
  removed: number[];
  lists: (number | undefined)[];
  lookups: number;
  events: string[];
}

/** Applies steps like the reconciler, against a scripted GitHub, until a terminal step. */
function drive(p: RunnerPodLike, gh: GitHubScript = {}, learnedStart: Learned = {}): Run {
  const now = gh.now ?? NOW;
  const learned: Learned = { ...learnedStart };
  const steps: RunnerPodStep[] = [];
  const removed: number[] = [];
  const lists: (number | undefined)[] = [];
  const events: string[] = [];
  let lookups = 0;
  const current = structuredClone(p);
  for (let i = 0; i < 30; i++) {
    const step = planRunnerPod({ pod: current, now, settings: S, random: 0, learned });
    steps.push(step);
    const ev = 'event' in step ? step.event : undefined;
    if (ev) events.push(`${ev.type}:${ev.reason}`);
    switch (step.kind) {
      case 'add-finalizers':
        current.metadata.finalizers = [...(current.metadata.finalizers ?? []), ...step.finalizers];
        break;
      case 'remove-finalizer':
        current.metadata.finalizers = (current.metadata.finalizers ?? []).filter((f) => f !== step.finalizer);
        for (const [k, v] of Object.entries(step.annotations ?? {})) {
          if (v === null) delete current.metadata.annotations![k];
          else current.metadata.annotations![k] = v;
        }
        break;
      case 'annotate':
        for (const [k, v] of Object.entries(step.annotations)) {
          if (v === null) delete current.metadata.annotations![k];
          else current.metadata.annotations![k] = v;
        }
        break;
      case 'need-client':
        learned.client = gh.clientError ? { usable: false, message: gh.clientError } : { usable: true };
        break;
      case 'need-listing':
        lists.push(step.notBefore);
        learned.listing = (gh.list ?? (() => listing([])))(step.notBefore);
        break;
      case 'need-name-lookup': {
        lookups++;
        const answer = (gh.lookup ?? (() => 'unsupported'))();
        // Asked after every earlier step (a removal's answer is `now + 1`).
        const at = now + steps.length;
        learned.nameLookup =
          typeof answer === 'string' ? { at, answer } : { at, answer: 'found', runner: answer };
        break;
      }
      case 'remove-runner':
        removed.push(step.runnerId);
        learned.removal = {
          runnerId: step.runnerId,
          answer: (gh.remove ?? (() => ({ kind: 'removed' })))(step.runnerId),
          at: now + 1,
        };
        break;
      case 'delete-runner-object':
        learned.runnerObjectDeleted = true;
        break;
      case 'cleanup-linked':
        learned.linkedCleaned = true;
        break;
      default:
        if (step.kind === 'settle' && step.mark && step.mark !== 'clear')
          events.push(`${step.mark.event.type}:${step.mark.event.reason}`);
        return { steps, pod: current, final: step, removed, lists, lookups, events };
    }
    if (step.kind === 'remove-finalizer' && (current.metadata.finalizers ?? []).length === 0) {
      // what the API server does next is not the plan's business
      if (current.metadata.deletionTimestamp)
        return { steps, pod: current, final: step, removed, lists, lookups, events };
    }
  }
  throw new Error(`no terminal step: ${steps.map((s) => s.kind).join(' → ')}`);
}

const kinds = (r: Run) => r.steps.map((s) => s.kind);
const ann = (r: Run, k: string) => r.pod.metadata.annotations?.[k];

describe('which pods, and finalizers', () => {
  test('a pod without a runner container or scope is ignored with a Warning; a deleted one is released', () => {
    const bad = pod({ env: [{ name: 'FOO', value: 'x' }], finalizers: [] });
    const r = drive(bad);
    assert.deepEqual(kinds(r), ['ignore']);
    assert.deepEqual(r.events, ['Warning:InvalidRunnerPod']);
    const stuck = pod({ env: [{ name: 'FOO', value: 'x' }], deletedAt: NOW - MIN });
    const d = drive(stuck);
    assert.equal(d.steps[0]?.kind, 'remove-finalizer', 'not kept Terminating by our finalizer');
  });

  test('finalizers first, before any GitHub call; container mode adds the linked-resources one', () => {
    assert.deepEqual(
      planRunnerPod({ pod: pod({ finalizers: [] }), now: NOW, settings: S, random: 0, learned: {} }),
      {
        kind: 'add-finalizers',
        finalizers: [FIN],
      },
    );
    const hooks = pod({
      finalizers: [],
      env: [
        { name: 'RUNNER_ORG', value: 'acme' },
        { name: 'ACTIONS_RUNNER_CONTAINER_HOOKS', value: '/runner/k8s/index.js' },
      ],
    });
    const step = planRunnerPod({ pod: hooks, now: NOW, settings: S, random: 0, learned: {} });
    assert.deepEqual(step, {
      kind: 'add-finalizers',
      finalizers: [FIN, 'actions.summerwind.dev/linked-resources'],
    });
  });
});

describe('registration check', () => {
  test('a pod whose runner container has not started is not looked up and never recycled (item 12)', () => {
    const r = drive(pod({ phase: 'Pending', createdAt: NOW - 60 * MIN }));
    assert.deepEqual(kinds(r), ['settle']);
    assert.equal(r.final.kind === 'settle' && r.final.requeueAfterMs, S.registrationRecheckIntervalMs);
  });

  test('an online runner of the pod’s name gets its ID recorded; an offline one does not (item 3)', () => {
    const online = drive(pod({ startedAt: NOW - MIN }), { list: () => listing([runner(7)]) });
    assert.deepEqual(kinds(online), ['need-client', 'need-listing', 'annotate', 'settle']);
    assert.equal(ann(online, 'actions-runner/id'), '7');
    const offline = drive(pod({ startedAt: NOW - MIN }), {
      list: () => listing([runner(7, NAME, { status: 'offline' })]),
    });
    assert.equal(ann(offline, 'actions-runner/id'), undefined);
    assert.equal(offline.final.kind, 'settle');
  });

  test('a recorded ID that is not the online runner’s is corrected, with a Warning', () => {
    const r = drive(pod({ startedAt: NOW - MIN, annotations: { 'actions-runner/id': '99' } }), {
      list: () => listing([runner(7)]),
    });
    assert.equal(ann(r, 'actions-runner/id'), '7');
    assert.deepEqual(r.events, ['Warning:RunnerIdCorrected']);
  });

  test('a list from before the pod existed only knows a predecessor of the same name', () => {
    const r = drive(pod({ startedAt: NOW - MIN, createdAt: NOW - 2 * MIN }), {
      list: () => listing([runner(7)], NOW - 3 * MIN),
    });
    assert.equal(ann(r, 'actions-runner/id'), undefined);
  });

  test('not registered within the timeout: the recheck is recorded and the wait shown', () => {
    const r = drive(pod({ startedAt: NOW - MIN }), { list: () => listing([]) });
    assert.equal(r.final.kind, 'settle');
    if (r.final.kind !== 'settle') return;
    assert.equal(
      r.final.annotations?.['actions-runner-controller/last-registration-check-time'],
      rfc3339(NOW),
    );
    assert.equal(r.final.mark !== 'clear' && r.final.mark?.reason, 'registration-pending');
  });

  test('within its first interval, a runner is not looked up, annotated or reported', () => {
    const r = drive(pod({ startedAt: NOW - 5_000 }), { list: () => listing([]) });
    assert.equal(r.final.kind, 'settle');
    if (r.final.kind !== 'settle') return;
    assert.equal(r.final.annotations, undefined);
    assert.equal(r.final.mark, undefined);
    // Not even looked up: the first check comes an interval after the container started.
    assert.deepEqual(r.lists, []);
    assert.equal(r.final.requeueAfterMs, S.registrationRecheckIntervalMs - 5_000);
    assert.deepEqual(r.events, []);
  });

  test('past the timeout, the decision waits for a list that started after the deadline (item 15)', () => {
    const deadline = NOW - MIN + S.registrationTimeoutMs - 11 * MIN; // started 11 min ago → deadline 1 min ago
    const p = pod({ startedAt: NOW - 11 * MIN });
    // The cached list (from before the deadline) says "absent"; the fresh one shows the runner that
    // registered a moment before the deadline.
    const r = drive(p, {
      list: (nb) => (nb === undefined ? listing([], deadline - 30_000) : listing([runner(7)], NOW)),
    });
    assert.deepEqual(r.lists, [undefined, NOW - MIN]);
    assert.equal(ann(r, 'actions-runner/id'), '7', 'registered after all: recorded, not replaced');
    assert.ok(!kinds(r).includes('delete-pod'));
  });

  test('past the timeout and absent from a fresh list: stopped gracefully, then deleted with a Warning', () => {
    const p = pod({ startedAt: NOW - 11 * MIN });
    const r = drive(p, { list: () => listing([], NOW) });
    assert.equal(r.final.kind, 'delete-pod');
    assert.deepEqual(r.events, ['Warning:RegistrationTimeout', 'Normal:PodDeleted']);
    assert.ok(ann(r, 'actions-runner/unregistration-complete-timestamp'));
    assert.deepEqual(r.removed, [], 'nothing registered, nothing removed');
  });

  test('a listing whose pages disagreed proves no absence: no replacement, a short recheck (item 9)', () => {
    const p = pod({ startedAt: NOW - 11 * MIN });
    const r = drive(p, { list: () => listing([], NOW, false) });
    assert.equal(r.final.kind, 'settle');
    assert.equal(r.final.kind === 'settle' && r.final.requeueAfterMs, INCOMPLETE_LISTING_RETRY_MS);
    assert.ok(!kinds(r).includes('delete-pod'));
  });

  test('pages that disagreed, then a lookup by name: absent is replaced, online is recorded, one request each', () => {
    const p = pod({ startedAt: NOW - 11 * MIN });
    const absent = drive(p, { list: () => listing([], NOW, false), lookup: () => 'absent' });
    assert.equal(absent.final.kind, 'delete-pod');
    assert.equal(absent.lookups, 1);
    assert.deepEqual(absent.events, ['Warning:RegistrationTimeout', 'Normal:PodDeleted']);
    const online = drive(p, { list: () => listing([], NOW, false), lookup: () => runner(7) });
    assert.equal(ann(online, 'actions-runner/id'), '7', 'registered after all: recorded');
    assert.ok(!kinds(online).includes('delete-pod'));
    const offline = drive(p, {
      list: () => listing([], NOW, false),
      lookup: () => runner(7, NAME, { status: 'offline' }),
    });
    assert.equal(offline.final.kind, 'delete-pod', 'offline past the timeout: replaced as well');
  });

  test('a runner that crashed (exit 1) before registering is replaced (item 4)', () => {
    const r = drive(pod({ exitCode: 1 }), { list: () => listing([], NOW) });
    assert.equal(r.final.kind, 'delete-pod');
    assert.deepEqual(r.events, ['Warning:RunnerCrashed', 'Normal:PodDeleted']);
  });

  test('a finished ephemeral runner whose ID was never seen is replaced without any GitHub call either', () => {
    const r = drive(pod({ exitCode: 0 }));
    assert.deepEqual(kinds(r), ['annotate', 'annotate', 'delete-pod']);
  });

  test('a finished ephemeral runner (exit 0, ID known) is replaced without any GitHub call', () => {
    const r = drive(pod({ exitCode: 0, annotations: { 'actions-runner/id': '7' } }));
    assert.deepEqual(kinds(r), ['annotate', 'annotate', 'delete-pod']);
    assert.deepEqual(r.removed, []);
  });

  test('a Runner’s stopped pod is left to its owners: no write, no GitHub call; a crash is reported once', () => {
    const ofRunner = (o: PodOpts) => {
      const p = pod(o);
      p.metadata.ownerReferences = [{ kind: 'Runner', name: NAME, controller: true }];
      return p;
    };
    const finished = drive(ofRunner({ exitCode: 0, annotations: { 'actions-runner/id': '7' } }));
    assert.deepEqual(kinds(finished), ['settle']);
    assert.deepEqual(finished.removed, []);
    const crashed = drive(ofRunner({ exitCode: 137, annotations: { 'actions-runner/id': '7' } }));
    assert.deepEqual(kinds(crashed), ['settle']);
    assert.deepEqual(crashed.removed, []);
    const mark = crashed.final.kind === 'settle' ? crashed.final.mark : undefined;
    assert.equal(typeof mark === 'object' ? mark.event?.reason : undefined, 'RunnerCrashed');
  });

  test('a crashed runner with an ID is removed from GitHub before its pod is replaced', () => {
    const r = drive(pod({ exitCode: 137, annotations: { 'actions-runner/id': '7' } }), {
      list: () => listing([runner(7, NAME, { status: 'offline' })]),
    });
    assert.deepEqual(r.removed, [7]);
    assert.equal(r.final.kind, 'delete-pod');
  });
});

describe('graceful stop on deletion', () => {
  const deleting = (o: PodOpts = {}) => pod({ deletedAt: NOW - 10_000, ...o });

  test('deleted before any container started: done at once, no GitHub (item 4: never stuck Terminating)', () => {
    const r = drive(deleting({ phase: 'Pending' }));
    // One write: the stop's start and completion records travel with the finalizer removal.
    assert.deepEqual(kinds(r), ['remove-finalizer']);
    assert.equal(ann(r, 'actions-runner/unregistration-start-timestamp'), rfc3339(NOW));
    assert.equal(ann(r, 'actions-runner/unregistration-complete-timestamp'), rfc3339(NOW));
  });

  test('deleted while running and not registered: waits; once the kubelet stops it (any exit code), done', () => {
    const waiting = drive(deleting({ startedAt: NOW - MIN }), { list: () => listing([]) });
    assert.equal(waiting.final.kind, 'settle');
    const stopped = drive(deleting({ exitCode: 143, startedAt: NOW - MIN }), {
      list: () => listing([], NOW),
    });
    assert.equal(stopped.final.kind, 'remove-finalizer');
    assert.deepEqual(stopped.lists, [NOW], 'absence is decided on a list of this reconcile');
  });

  test('stopped before its ID was seen, but registered in a fresh list: that runner is removed', () => {
    const r = drive(deleting({ exitCode: 143, startedAt: NOW - MIN }), {
      list: () => listing([runner(8)], NOW),
    });
    assert.deepEqual(r.removed, [8]);
    assert.equal(r.final.kind, 'remove-finalizer');
  });

  test('stopped before its ID was seen, pages disagreed: the lookup by name decides (absent, or removed)', () => {
    const p = deleting({ exitCode: 143, startedAt: NOW - MIN });
    const unproven = drive(p, { list: () => listing([], NOW, false) });
    assert.equal(
      unproven.final.kind === 'settle' && unproven.final.requeueAfterMs,
      INCOMPLETE_LISTING_RETRY_MS,
    );
    assert.equal(unproven.lookups, 1, 'a server that ignores the filter: the short recheck as before');
    const absent = drive(p, { list: () => listing([], NOW, false), lookup: () => 'absent' });
    assert.equal(absent.final.kind, 'remove-finalizer');
    assert.deepEqual(absent.removed, []);
    const found = drive(p, { list: () => listing([], NOW, false), lookup: () => runner(9) });
    assert.deepEqual(found.removed, [9]);
    assert.equal(found.final.kind, 'remove-finalizer');
  });

  test('declared unregistered while pending, then started before its deletion: looked up again, not leaked', () => {
    const completeAt = NOW - 30_000;
    const p = deleting({
      startedAt: completeAt + 5000,
      exitCode: 143,
      annotations: {
        'actions-runner/unregistration-start-timestamp': rfc3339(completeAt),
        'actions-runner/unregistration-complete-timestamp': rfc3339(completeAt),
      },
    });
    const r = drive(p, { list: () => listing([runner(8)], NOW) });
    assert.deepEqual(r.removed, [8], 'the runner that registered after row 3 is removed');
    assert.equal(r.final.kind, 'remove-finalizer');
    const never = drive(
      deleting({
        phase: 'Pending',
        annotations: {
          'actions-runner/unregistration-start-timestamp': rfc3339(completeAt),
          'actions-runner/unregistration-complete-timestamp': rfc3339(completeAt),
        },
      }),
    );
    assert.deepEqual(kinds(never), ['remove-finalizer'], 'still never started: row 1 holds');
  });

  test('an idle registered runner is removed (204), then the finalizer goes', () => {
    const r = drive(deleting({ startedAt: NOW - MIN, annotations: { 'actions-runner/id': '7' } }), {
      list: () => listing([runner(7)]),
    });
    assert.deepEqual(r.removed, [7]);
    assert.deepEqual(r.events, ['Normal:Unregistered']);
    assert.equal(r.final.kind, 'remove-finalizer');
  });

  test('a recorded ID naming another runner is never removed; the pod’s runner is found by name (item 3)', () => {
    const r = drive(deleting({ startedAt: NOW - MIN, annotations: { 'actions-runner/id': '5' } }), {
      list: () => listing([runner(5, 'someone-elses-runner'), runner(7)]),
    });
    assert.deepEqual(r.removed, [7]);
    assert.ok(r.events.includes('Warning:RunnerIdMismatch'));
  });

  test('a recorded ID naming another runner, and no runner of the pod’s name: nothing is removed', () => {
    const r = drive(
      deleting({ exitCode: 143, startedAt: NOW - MIN, annotations: { 'actions-runner/id': '5' } }),
      {
        list: () => listing([runner(5, 'someone-elses-runner')], NOW),
      },
    );
    assert.deepEqual(r.removed, []);
    assert.equal(r.final.kind, 'remove-finalizer');
  });

  test('a recorded ID no longer listed: a fresh list decides, by name too', () => {
    const gone = drive(deleting({ startedAt: NOW - MIN, annotations: { 'actions-runner/id': '7' } }), {
      list: () => listing([], NOW),
    });
    assert.deepEqual(gone.removed, []);
    assert.ok(gone.events.includes('Normal:RunnerGone'));
    const renewed = drive(deleting({ startedAt: NOW - MIN, annotations: { 'actions-runner/id': '7' } }), {
      list: (nb) => (nb === undefined ? listing([], NOW - 30_000) : listing([runner(9)], NOW)),
    });
    assert.deepEqual(renewed.removed, [9], 're-registered under a new ID (config --replace)');
  });

  test('404 on removal: confirmed by a list from after the answer; a same-named runner with a new ID goes too', () => {
    let answers = 0;
    const r = drive(deleting({ startedAt: NOW - MIN, annotations: { 'actions-runner/id': '7' } }), {
      list: (nb) => (nb === undefined ? listing([runner(7)]) : listing([runner(9)], nb)),
      remove: () => (answers++ === 0 ? { kind: 'notFound' } : { kind: 'removed' }),
    });
    assert.deepEqual(r.removed, [7, 9]);
    assert.equal(r.final.kind, 'remove-finalizer');
  });

  test('404 with an incomplete list: not declared gone yet', () => {
    const r = drive(deleting({ startedAt: NOW - MIN, annotations: { 'actions-runner/id': '7' } }), {
      list: (nb) => (nb === undefined ? listing([runner(7)]) : listing([], nb, false)),
      remove: () => ({ kind: 'notFound' }),
    });
    assert.equal(r.final.kind, 'settle');
    assert.equal(ann(r, 'actions-runner/unregistration-complete-timestamp'), undefined);
  });

  test('404 with an incomplete list: a lookup by name asked after the 404 decides', () => {
    const p = deleting({ startedAt: NOW - MIN, annotations: { 'actions-runner/id': '7' } });
    const list = (nb: number | undefined) =>
      nb === undefined ? listing([runner(7)]) : listing([], nb, false);
    const gone = drive(p, { list, remove: () => ({ kind: 'notFound' }), lookup: () => 'absent' });
    assert.equal(gone.final.kind, 'remove-finalizer');
    assert.deepEqual(gone.events, ['Normal:RunnerGone']);
    // The same ID listed by name after GitHub's 404: a contradiction, retried rather than removed again.
    const same = drive(p, { list, remove: () => ({ kind: 'notFound' }), lookup: () => runner(7) });
    assert.equal(same.final.kind, 'fail');
    assert.deepEqual(same.removed, [7]);
    // Registered again under a new ID meanwhile (config --replace): that one goes too.
    const again = drive(p, {
      list,
      remove: (id) => (id === 7 ? { kind: 'notFound' } : { kind: 'removed' }),
      lookup: () => runner(8),
    });
    assert.deepEqual(again.removed, [7, 8]);
    assert.equal(again.final.kind, 'remove-finalizer');
  });

  test('a recorded ID missing from a listing whose pages disagreed: found by name, it is removed', () => {
    const p = deleting({ startedAt: NOW - MIN, annotations: { 'actions-runner/id': '7' } });
    const r = drive(p, { list: (nb) => listing([], nb ?? NOW - 30_000, false), lookup: () => runner(7) });
    assert.deepEqual(r.removed, [7]);
    assert.equal(r.final.kind, 'remove-finalizer');
  });

  test('a busy ephemeral runner: the wait is recorded and shown, the pod stays', () => {
    const r = drive(deleting({ startedAt: NOW - MIN, annotations: { 'actions-runner/id': '7' } }), {
      list: () => listing([runner(7, NAME, { busy: true })]),
      remove: () => ({ kind: 'busy', message: 'Bad request - Runner is still running a job' }),
    });
    assert.equal(r.final.kind, 'settle');
    if (r.final.kind !== 'settle') return;
    assert.ok(r.final.annotations?.['actions-runner/runner-completion-wait-start-timestamp']);
    assert.equal(r.final.mark !== 'clear' && r.final.mark?.reason, 'runner-busy');
  });

  describe('a pod that never reports its runner exiting (lost node) after a 422', () => {
    const waiting = (waitAgo: number) =>
      deleting({
        startedAt: NOW - 10 * MIN,
        annotations: {
          'actions-runner/id': '7',
          'actions-runner/runner-completion-wait-start-timestamp': rfc3339(NOW - waitAgo),
        },
      });

    test('within the retry delay: waits, GitHub is not asked', () => {
      const r = drive(waiting(S.unregistrationRetryDelayMs - 1000), { list: () => listing([]) });
      assert.equal(r.final.kind, 'settle');
      assert.deepEqual(r.lists, []);
      assert.deepEqual(r.removed, []);
    });

    test('still listed busy after the delay: keeps waiting, no removal', () => {
      const r = drive(waiting(2 * MIN), {
        list: (nb) => listing([runner(7, NAME, { busy: true })], nb ?? NOW),
      });
      assert.equal(r.final.kind, 'settle');
      assert.equal(
        r.final.kind === 'settle' && r.final.mark !== 'clear' && r.final.mark?.reason,
        'runner-busy',
      );
      assert.deepEqual(r.removed, []);
    });

    test('listed idle after the delay (its job failed when it lost contact): removed, pod released', () => {
      const r = drive(waiting(2 * MIN), {
        list: (nb) => listing([runner(7, NAME, { status: 'offline', busy: false })], nb ?? NOW),
      });
      assert.deepEqual(r.removed, [7]);
      assert.equal(r.final.kind, 'remove-finalizer');
    });

    test('gone from GitHub after the delay (the ephemeral runner was removed with its job): released without a removal', () => {
      const r = drive(waiting(2 * MIN), { list: (nb) => listing([], nb ?? NOW) });
      assert.deepEqual(r.removed, []);
      assert.equal(r.final.kind, 'remove-finalizer');
      assert.ok(r.events.includes('Normal:RunnerGone'));
    });

    test('a list from before the wait began does not count: a fresh one is asked for', () => {
      const since = NOW - 2 * MIN;
      const r = drive(waiting(2 * MIN), {
        list: (nb) =>
          nb === undefined ? listing([], since - 1000) : listing([runner(7, NAME, { busy: true })], nb),
      });
      assert.equal(r.lists[0], since);
      assert.equal(r.final.kind, 'settle');
      assert.deepEqual(r.removed, []);
    });

    test('a static runner is not affected (row 7a keeps waiting)', () => {
      const p = waiting(2 * MIN);
      p.spec!.containers![0]!.env = [
        { name: 'RUNNER_ORG', value: 'acme' },
        { name: 'RUNNER_EPHEMERAL', value: 'false' },
      ];
      const r = drive(p, { list: (nb) => listing([], nb ?? NOW) });
      assert.equal(r.final.kind, 'settle');
      assert.deepEqual(r.removed, []);
    });
  });
});

describe('without usable GitHub credentials (item 5)', () => {
  const gone = { clientError: 'Secret "ns/creds" not found' };

  test('rows that need no call complete at once: pending (row 3), finished ephemeral (row 6), already complete (row 1)', () => {
    for (const p of [
      pod({ deletedAt: NOW - 1000, phase: 'Pending' }),
      pod({ deletedAt: NOW - 1000, exitCode: 0, annotations: { 'actions-runner/id': '7' } }),
      pod({
        deletedAt: NOW - 1000,
        annotations: { 'actions-runner/unregistration-complete-timestamp': rfc3339(NOW) },
      }),
    ]) {
      const r = drive(p, gone);
      assert.equal(r.final.kind, 'remove-finalizer');
      assert.ok(!kinds(r).includes('need-client'), 'the client is never asked for');
    }
  });

  test('a registered runner waits for credentials until the deadline, then is released with a Warning naming it', () => {
    const p = (deletedAgo: number) =>
      pod({
        deletedAt: NOW - deletedAgo,
        startedAt: NOW - 10 * MIN,
        annotations: { 'actions-runner/id': '7' },
      });
    const early = drive(p(MIN), gone);
    assert.equal(early.final.kind, 'settle');
    assert.deepEqual(early.events, ['Warning:GitHubCredentialsError']);
    const late = drive(p(S.githubUnavailableTimeoutMs + 1000), gone);
    assert.equal(late.final.kind, 'remove-finalizer');
    const abandoned = late.steps.find((s) => 'event' in s && s.event?.reason === 'UnregistrationAbandoned');
    assert.match(
      abandoned && 'event' in abandoned ? (abandoned.event?.note ?? '') : '',
      new RegExp(`runner ${NAME} \\(ID 7\\) 5m after`),
    );
  });

  test('credentials rejected by GitHub (401) on removal count as unusable too', () => {
    const p = pod({
      deletedAt: NOW - S.githubUnavailableTimeoutMs - 1000,
      startedAt: NOW - 10 * MIN,
      annotations: { 'actions-runner/id': '7' },
    });
    const r = drive(p, {
      list: () => listing([runner(7)]),
      remove: () => ({ kind: 'invalidCredentials', message: 'Bad credentials' }),
    });
    assert.equal(r.final.kind, 'remove-finalizer');
    assert.ok(r.events.includes('Warning:UnregistrationAbandoned'));
  });

  test('a live pod whose credentials are unusable waits and says why', () => {
    const r = drive(pod({ startedAt: NOW - MIN }), gone);
    assert.equal(r.final.kind, 'settle');
    assert.deepEqual(r.events, ['Warning:GitHubCredentialsError']);
  });
});
