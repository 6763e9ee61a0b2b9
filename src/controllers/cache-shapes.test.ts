import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Runner, RunnerReplicaSet, RunnerSet } from '../api/index.ts';
import type { KubeHttp, WatchLine } from '../runtime/kube-http.ts';
import { silentLogger } from '../runtime/log.ts';
import { Manager, type ManagerOptions } from '../runtime/manager.ts';
import { RuntimeMetrics } from '../runtime/metrics.ts';
import { PODS, STATEFUL_SETS } from '../runtime/resources.ts';
import { CONTROLLER_UID_INDEX, type KubeObject } from '../runtime/store.ts';
import {
  POD_NAME_INDEX,
  runnerPodInformer,
  runnerPodShape,
  runnerVolumeClaimInformer,
  type StatefulSetObject,
  statefulSetInformer,
  statefulSetShape,
} from './cache-shapes.ts';
import {
  ANNOTATION_RUNNER_ID,
  ANNOTATION_UNREGISTRATION_REQUEST,
  FINALIZER_LINKED_RESOURCES,
  FINALIZER_RUNNER,
  FINALIZER_RUNNER_POD,
  RUNNER_POD_LABELS,
  RUNNER_POD_SELECTORS,
} from './constants.ts';
import { runnerPodFacts } from './graceful-stop.ts';
import { classifyPod } from './owner-sync.ts';
import { runnerPodChanged, tokenHolder } from './runner.ts';
import { planRunner, runnerStatusFromPod } from './runner-plan.ts';
import { isRunnerPod, type PodObject } from './runner-pod.ts';
import {
  DEFAULT_RUNNER_POD_SETTINGS,
  type Learned,
  planRunnerPod,
  type RunnerListing,
  runnerPodFinalizers,
  runnerPodIdentity,
} from './runner-pod-plan.ts';
import { DEFAULT_RUNNER_POD_DEFAULTS, newRunnerPod, newRunnerSetPodTemplate } from './runner-pod-spec.ts';

/**
 * The caches keep only what the controllers read: every decision made on a shaped object must be
 * the one made on the object as the API server sends it. Pods are built the way paddock and ARC
 * build them (full specs) and put through the states a runner pod goes through.
 */

const NOW = Date.parse('2026-06-01T12:00:00Z');
const MIN = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();
const GITHUB = 'https://github.com/';

function runner(spec: Runner['spec'], name = 'rd-abcde-xyz12'): Runner {
  return {
    apiVersion: 'actions.summerwind.dev/v1alpha1',
    kind: 'Runner',
    metadata: {
      name,
      namespace: 'ns',
      uid: 'runner-uid',
      labels: { 'runner-template-hash': 'abc', 'runner-deployment-name': 'rd' },
      annotations: { 'sync-time': '2026-06-01T11:00:00Z' },
      finalizers: [FINALIZER_RUNNER],
      ownerReferences: [
        {
          apiVersion: 'actions.summerwind.dev/v1alpha1',
          kind: 'RunnerReplicaSet',
          name: 'rd-abcde',
          uid: 'rrs-uid',
          controller: true,
        },
      ],
    },
    spec,
    status: { registration: { token: 'tok', expiresAt: '2099-01-01T00:00:00Z' } },
  } as Runner;
}

/** What the API server adds to a created pod (defaults, managedFields, a node). */
function asServed(pod: object, extra: Partial<PodObject['metadata']> = {}): PodObject {
  const p = structuredClone(pod) as PodObject;
  p.apiVersion = 'v1';
  p.kind = 'Pod';
  p.metadata = {
    ...p.metadata,
    namespace: 'ns',
    uid: `uid-${p.metadata.name}`,
    resourceVersion: '1234',
    creationTimestamp: iso(NOW - 20 * MIN),
    managedFields: [{ manager: 'paddock', operation: 'Update', fieldsV1: { 'f:metadata': {} } }],
    ...extra,
  };
  const spec = p.spec as Record<string, unknown>;
  spec.nodeName = 'node-1';
  spec.schedulerName = 'default-scheduler';
  spec.tolerations = [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute' }];
  spec.volumes = [
    ...((spec.volumes as unknown[]) ?? []),
    {
      name: 'kube-api-access-abcde',
      projected: {
        sources: [
          { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
          { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
        ],
      },
    },
  ];
  return p;
}

const readyCondition = (since: number) => ({
  type: 'Ready',
  status: 'True',
  lastProbeTime: null,
  lastTransitionTime: iso(since),
});

/** A runner pod in the states the controllers tell apart. */
function states(base: PodObject): Record<string, PodObject> {
  const withStatus = (status: Record<string, unknown>, meta: Partial<PodObject['metadata']> = {}) => {
    const p = structuredClone(base);
    p.metadata = { ...p.metadata, ...meta };
    p.status = status as PodObject['status'];
    return p;
  };
  const docker = {
    name: 'docker',
    image: 'docker:dind',
    imageID: 'docker-pullable://docker@sha256:0123',
    containerID: 'containerd://d0',
    ready: true,
    restartCount: 0,
    started: true,
    state: { running: { startedAt: iso(NOW - 9 * MIN) } },
  };
  const runnerStatus = (state: unknown, lastState: unknown = {}) => ({
    name: 'runner',
    image: 'summerwind/actions-runner:latest',
    imageID: 'docker-pullable://summerwind/actions-runner@sha256:4567',
    containerID: 'containerd://r0',
    ready: true,
    restartCount: 0,
    started: true,
    state,
    lastState,
  });
  const conditions = [
    { type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: iso(NOW - 10 * MIN) },
    { type: 'Initialized', status: 'True', lastProbeTime: null, lastTransitionTime: iso(NOW - 10 * MIN) },
    readyCondition(NOW - 8 * MIN),
  ];
  const running = {
    phase: 'Running',
    conditions,
    hostIP: '10.0.0.1',
    podIP: '10.244.0.7',
    podIPs: [{ ip: '10.244.0.7' }],
    startTime: iso(NOW - 10 * MIN),
    qosClass: 'BestEffort',
    containerStatuses: [runnerStatus({ running: { startedAt: iso(NOW - 9 * MIN) } }), docker],
  };
  const terminated = (exitCode: number) => ({
    terminated: {
      exitCode,
      reason: exitCode === 0 ? 'Completed' : 'Error',
      startedAt: iso(NOW - 9 * MIN),
      finishedAt: iso(NOW - MIN),
      containerID: 'containerd://r0',
    },
  });
  return {
    created: (() => {
      const p = structuredClone(base);
      delete p.status;
      return p;
    })(),
    pending: withStatus({ phase: 'Pending', qosClass: 'BestEffort' }),
    waiting: withStatus({
      phase: 'Pending',
      conditions: [conditions[0]],
      containerStatuses: [
        { ...runnerStatus({ waiting: { reason: 'ContainerCreating' } }), ready: false, started: false },
        { ...docker, state: { waiting: { reason: 'ContainerCreating' } } },
      ],
    }),
    running: withStatus(running),
    registered: withStatus(running, {
      annotations: { ...base.metadata.annotations, [ANNOTATION_RUNNER_ID]: '42' },
    }),
    asked: withStatus(running, {
      annotations: {
        ...base.metadata.annotations,
        [ANNOTATION_RUNNER_ID]: '42',
        [ANNOTATION_UNREGISTRATION_REQUEST]: '2026-06-01T11:59:00Z',
      },
    }),
    registrationTimedOut: withStatus({ ...running, conditions: [readyCondition(NOW - 30 * MIN)] }),
    finished: withStatus({ ...running, containerStatuses: [runnerStatus(terminated(0)), docker] }),
    crashed: withStatus({ ...running, containerStatuses: [runnerStatus(terminated(1)), docker] }),
    restarted: withStatus({
      ...running,
      containerStatuses: [runnerStatus({ running: { startedAt: iso(NOW - MIN) } }, terminated(137)), docker],
    }),
    succeeded: withStatus({ ...running, phase: 'Succeeded' }),
    evicted: withStatus({
      phase: 'Failed',
      reason: 'Evicted',
      message: 'The node was low on resource: memory.',
    }),
    deleting: withStatus(running, { deletionTimestamp: iso(NOW - 2 * MIN), deletionGracePeriodSeconds: 30 }),
    deletingUnstarted: withStatus(
      { phase: 'Pending', qosClass: 'BestEffort' },
      { deletionTimestamp: iso(NOW - 2 * MIN) },
    ),
    deletingLong: withStatus(running, { deletionTimestamp: iso(NOW - 20 * MIN), finalizers: [] }),
  };
}

/** Pods as paddock, ARC and a RunnerSet's StatefulSet make them. */
function fleet(): Record<string, PodObject> {
  const defaults = { ...DEFAULT_RUNNER_POD_DEFAULTS };
  const withFinalizers = (p: PodObject) => {
    p.metadata.finalizers = runnerPodFinalizers(p);
    return p;
  };
  // paddock's Runners keep no token in their status: the pods read it from a Secret.
  const withoutToken = (r: Runner): Runner => ({ ...r, status: {} });
  const paddock = asServed(
    newRunnerPod(withoutToken(runner({ organization: 'acme', labels: ['linux'] })), GITHUB, defaults, {
      // The Runner's own token Secret (the container-mode pod below reads its replica set's).
      name: 'rd-abcde-xyz12-runner-token',
      key: 'registration-token',
    }),
  );
  const arc = asServed(newRunnerPod(runner({ repository: 'acme/app', ephemeral: false }), GITHUB, defaults));
  const containerMode = asServed(
    newRunnerPod(
      withoutToken(
        runner({
          enterprise: 'big',
          containerMode: 'kubernetes',
          workVolumeClaimTemplate: {
            accessModes: ['ReadWriteOnce'],
            storageClassName: 'fast',
            resources: { requests: { storage: '1Gi' } },
          },
        }),
      ),
      GITHUB,
      defaults,
      { name: 'rd-abcde-runner-token', key: 'registration-token' },
    ),
  );
  const rs = {
    metadata: { name: 'rs', namespace: 'ns', uid: 'rs-uid' },
    spec: { organization: 'acme', githubAPICredentialsFrom: { secretRef: { name: 'app-creds' } } },
  } as unknown as RunnerSet;
  const { template } = newRunnerSetPodTemplate(rs, GITHUB, defaults);
  const fromSet = asServed(
    { metadata: { ...template.metadata, name: 'rs-abcde-0' }, spec: template.spec },
    {
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'rs-abcde', uid: 'sts-uid', controller: true },
      ],
    },
  );
  const invalid = asServed({
    metadata: { name: 'not-a-runner', labels: { 'actions-runner': '' } },
    spec: { containers: [{ name: 'main', image: 'busybox', env: [{ name: 'A', value: 'b' }] }] },
  });
  const unscoped = asServed({
    metadata: { name: 'unscoped', labels: { 'actions-runner': '' } },
    spec: {
      containers: [
        {
          name: 'runner',
          image: 'summerwind/actions-runner',
          env: [{ name: 'RUNNER_LABELS', value: 'linux' }],
        },
      ],
    },
  });
  const noEnv = asServed({
    metadata: { name: 'no-env', labels: { 'runnerset-name': 'x' }, finalizers: [FINALIZER_RUNNER_POD] },
    spec: { containers: [{ name: 'runner', image: 'summerwind/actions-runner' }] },
  });
  const out: Record<string, PodObject> = {};
  for (const [kind, base] of Object.entries({
    paddock: withFinalizers(paddock),
    arc: withFinalizers(arc),
    containerMode: withFinalizers(containerMode),
    fromSet: withFinalizers(fromSet),
    invalid,
    unscoped,
    noEnv,
  })) {
    for (const [state, pod] of Object.entries(states(base))) out[`${kind}/${state}`] = pod;
  }
  return out;
}

const listing = (busy: boolean | undefined, id = 42): RunnerListing => {
  const r = busy === undefined ? undefined : { id, name: 'x', status: 'online', busy };
  return {
    fetchedAt: NOW - 1000,
    complete: true,
    byName: () => r,
    byId: (i) => (i === id ? r : undefined),
  };
};

const learnedCases: Learned[] = [
  {},
  { client: { usable: true } },
  { client: { usable: false, message: 'no credentials' } },
  { client: { usable: true }, listing: listing(false) },
  { client: { usable: true }, listing: listing(true) },
  { client: { usable: true }, listing: listing(undefined) },
  {
    client: { usable: true },
    listing: listing(true),
    removal: { runnerId: 42, answer: { kind: 'busy', message: 'busy' }, at: NOW },
  },
  {
    client: { usable: true },
    listing: listing(false),
    removal: { runnerId: 42, answer: { kind: 'removed' }, at: NOW },
  },
  { client: { usable: true }, rateLimited: { resetAt: NOW + MIN, message: 'primary' } },
  { runnerObjectDeleted: true, linkedCleaned: true, client: { usable: true }, listing: listing(undefined) },
];

/** Everything decided from a pod in the cache. */
function decisions(pod: PodObject) {
  const r = runner({ organization: 'acme' }, pod.metadata.name);
  const set = {
    metadata: { name: 'rd-abcde', namespace: 'ns', uid: 'rrs-uid' },
    spec: { template: { spec: { organization: 'acme' } } },
  } as RunnerReplicaSet;
  const deletingRunner = { ...r, metadata: { ...r.metadata, deletionTimestamp: iso(NOW - MIN) } };
  return {
    isRunnerPod: isRunnerPod(pod),
    facts: runnerPodFacts(pod),
    identity: runnerPodIdentity(pod),
    finalizers: runnerPodFinalizers(pod),
    buckets: [0, 600_000, 60_000].map((timeout) => classifyPod(pod, NOW, timeout)),
    status: [false, true].map((hook) => runnerStatusFromPod(r, pod, hook)),
    runnerPlans: [r, deletingRunner].flatMap((runner) =>
      [{}, { token: { expiresAt: NOW + 3_600_000 } }, { podDeleted: true }].map((done) =>
        planRunner({
          runner,
          pod,
          now: NOW,
          podStateSince: NOW - 10_000,
          useRunnerStatusUpdateHook: false,
          done,
        }),
      ),
    ),
    tokenHolder: tokenHolder(r, pod, set),
    podPlans: learnedCases.flatMap((learned) =>
      [0, 0.5].map((random) =>
        planRunnerPod({ pod, now: NOW, settings: DEFAULT_RUNNER_POD_SETTINGS, random, learned }),
      ),
    ),
  };
}

describe('runner pod cache shape', () => {
  const pods = fleet();

  test('every decision on a shaped pod is the one on the pod as served', () => {
    for (const [name, pod] of Object.entries(pods)) {
      assert.deepEqual(decisions(runnerPodShape(pod)), decisions(pod), name);
    }
  });

  test('the Runner controller sees a shaped pod change exactly when the served one changes', () => {
    const all = Object.entries(pods);
    for (const [a, pa] of all) {
      assert.equal(runnerPodChanged(pa, runnerPodShape(pa)), false, `${a} looks the same shaped`);
      for (const [b, pb] of all) {
        assert.equal(
          runnerPodChanged(runnerPodShape(pa), runnerPodShape(pb)),
          runnerPodChanged(pa, pb),
          `${a} → ${b}`,
        );
      }
    }
  });

  test('the decisions tell the states apart (the comparison above is not vacuous)', () => {
    const kinds = new Set(
      Object.values(pods).map((p) => JSON.stringify(decisions(p).podPlans.map((s) => s.kind))),
    );
    assert.ok(kinds.size >= 10, `only ${kinds.size} different plans`);
    assert.ok(Object.values(pods).some((p) => decisions(p).finalizers.includes(FINALIZER_LINKED_RESOURCES)));
    assert.ok(Object.values(pods).some((p) => decisions(p).tokenHolder.kind === 'Runner'));
    assert.ok(Object.values(pods).some((p) => decisions(p).tokenHolder.kind === 'RunnerReplicaSet'));
  });

  test('keeps metadata, container names, the runner variables read and the status read; drops the rest', () => {
    const pod = pods['paddock/restarted']!;
    const shaped = runnerPodShape(pod);
    assert.deepEqual(Object.keys(shaped).sort(), ['apiVersion', 'kind', 'metadata', 'spec', 'status']);
    const { managedFields: _m, ...metadata } = pod.metadata;
    assert.deepEqual(shaped.metadata, metadata);
    assert.deepEqual(Object.keys(shaped.spec!), ['containers']);
    assert.deepEqual(
      shaped.spec!.containers!.map((c) => c.name),
      pod.spec!.containers!.map((c) => c.name),
    );
    const read = ['RUNNER_ORG', 'RUNNER_REPO', 'RUNNER_ENTERPRISE', 'RUNNER_EPHEMERAL', 'RUNNER_TOKEN'];
    assert.deepEqual(
      shaped.spec!.containers!.find((c) => c.name === 'runner')!.env,
      pod.spec!.containers!.find((c) => c.name === 'runner')!.env!.filter((e) => read.includes(e.name)),
    );
    const hooks = runnerPodShape(pods['containerMode/running']!).spec!.containers![0]!.env!;
    assert.deepEqual(
      hooks.filter((e) => !read.includes(e.name)),
      [{ name: 'ACTIONS_RUNNER_CONTAINER_HOOKS' }],
      'container mode is told by the name',
    );
    assert.deepEqual(runnerPodShape(pods['unscoped/running']!).spec!.containers![0]!.env, [
      { name: 'RUNNER_LABELS' },
    ]);
    assert.deepEqual(
      shaped.spec!.containers!.find((c) => c.name === 'docker'),
      { name: 'docker' },
    );
    assert.deepEqual(Object.keys(shaped.status!), ['phase', 'conditions', 'containerStatuses']);
    assert.deepEqual(
      shaped.status!.conditions,
      [readyCondition(NOW - 8 * MIN)].map(({ lastProbeTime: _p, ...c }) => c),
    );
    assert.deepEqual(shaped.status!.containerStatuses, [
      {
        name: 'runner',
        state: pod.status!.containerStatuses![0]!.state,
        lastState: pod.status!.containerStatuses![0]!.lastState,
      },
      { name: 'docker' },
    ]);
    assert.deepEqual(runnerPodShape(shaped), shaped, 'shaping twice changes nothing');
    const size = (o: unknown) => JSON.stringify(o).length;
    assert.ok(size(shaped) * 2 < size(pod), `${size(shaped)} of ${size(pod)} bytes kept`);
  });

  test('does not change the object it is given', () => {
    const pod = pods['arc/running']!;
    const before = structuredClone(pod);
    runnerPodShape(pod);
    assert.deepEqual(pod, before);
  });
});

/** A label selector of the forms RUNNER_POD_SELECTORS uses (`k`, `!k`, `k=v`), as the API server reads it. */
function selects(selector: string, labels: Record<string, string> = {}): boolean {
  return selector.split(',').every((term) => {
    if (term.startsWith('!')) return !(term.slice(1) in labels);
    const [k, v] = term.split('=');
    return v === undefined ? k! in labels : labels[k!] === v;
  });
}

describe('runner pod selectors', () => {
  test('one selector per runner pod label, each excluding the ones before', () => {
    assert.deepEqual(RUNNER_POD_SELECTORS, [
      'actions-runner',
      '!actions-runner,runnerset-name',
      '!actions-runner,!runnerset-name,runner-deployment-name',
    ]);
  });

  test('every runner pod matches exactly one selector, any other pod none', () => {
    const others = {
      app: 'web',
      'runner-template-hash': 'abc',
      'actions-runner-controller/inject-registration-token': 'true',
    };
    for (let mask = 0; mask < 2 ** RUNNER_POD_LABELS.length; mask++) {
      const labels: Record<string, string> = { ...others };
      RUNNER_POD_LABELS.forEach((l, i) => {
        if (mask & (1 << i)) labels[l] = i === 0 ? '' : 'x';
      });
      const pod: KubeObject = { metadata: { name: 'p', labels } };
      const matching = RUNNER_POD_SELECTORS.filter((s) => selects(s, labels));
      assert.equal(matching.length, isRunnerPod(pod) ? 1 : 0, JSON.stringify(labels));
    }
  });
});

/** A KubeHttp that answers lists and watches from `objects`, honouring label selectors. */
function fakeApi(objects: KubeObject[]) {
  const lists: string[] = [];
  const watches: { path: string; selector: string | undefined; onLine: (l: WatchLine) => void }[] = [];
  const http = {
    async request(method: string, path: string, opts: { query?: Record<string, unknown> } = {}) {
      assert.equal(method, 'GET');
      const selector = opts.query?.labelSelector as string | undefined;
      lists.push(`${path}?${selector ?? ''}`);
      const plural = path.split('/').at(-1);
      const items = objects.filter(
        (o) =>
          (o.kind === 'Pod' ? 'pods' : 'statefulsets') === plural &&
          (!selector || selects(selector, o.metadata.labels)),
      );
      return { metadata: { resourceVersion: '1' }, items: structuredClone(items) };
    },
    watch(
      path: string,
      query: Record<string, unknown>,
      h: { onLine: (l: WatchLine) => void },
      signal: AbortSignal,
    ) {
      watches.push({ path, selector: query.labelSelector as string | undefined, onLine: h.onLine });
      return new Promise<void>((_resolve, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    },
    close() {},
  };
  return {
    http: http as unknown as KubeHttp,
    lists,
    /** Sends a watch event to every watch whose selector the object matches. */
    emit(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: KubeObject) {
      for (const w of watches) {
        if (w.path.endsWith('/pods') && (!w.selector || selects(w.selector, obj.metadata.labels))) {
          w.onLine({ type, object: structuredClone(obj) });
        }
      }
    },
  };
}

function manager(http: KubeHttp): Manager {
  return new Manager({
    kubeConfig: {} as ManagerOptions['kubeConfig'],
    http,
    log: silentLogger(),
    metrics: new RuntimeMetrics({ processMetrics: false }),
  });
}

describe('shared caches', () => {
  const pod = (name: string, labels: Record<string, string>, owner?: string): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'ns',
      uid: `uid-${name}`,
      resourceVersion: '1',
      labels,
      managedFields: [{}],
      ...(owner
        ? {
            ownerReferences: [
              { apiVersion: 'apps/v1', kind: 'StatefulSet', name: owner, uid: owner, controller: true },
            ],
          }
        : {}),
    },
    spec: { containers: [{ name: 'runner', image: 'x', env: [{ name: 'RUNNER_ORG', value: 'acme' }] }] },
  });

  test('runner pods are cached once each, shaped and indexed; other pods not at all', async () => {
    const api = fakeApi([
      pod('paddock', { 'actions-runner': '', 'runnerset-name': 'rs' }, 'sts-1'),
      pod('arc-0-24', { 'runnerset-name': 'rs' }, 'sts-2'),
      pod('arc-0-21', { 'runner-deployment-name': 'rd' }),
      pod('web', { app: 'web' }),
      pod('job', { 'runner-pod': 'paddock' }),
    ]);
    const m = manager(api.http);
    const pods = runnerPodInformer(m, 'ns');
    await m.start();
    try {
      await pods.waitForSync();
      assert.deepEqual(
        pods.store
          .list()
          .map((p) => p.metadata.name)
          .sort(),
        ['arc-0-21', 'arc-0-24', 'paddock'],
      );
      assert.deepEqual(
        api.lists.sort(),
        RUNNER_POD_SELECTORS.map((s) => `/api/v1/namespaces/ns/pods?${s}`).sort(),
      );
      assert.equal(pods.store.size, 3);
      assert.equal(pods.store.get('ns/arc-0-24')?.metadata.managedFields, undefined, 'shaped');
      assert.deepEqual(pods.store.get('ns/paddock')?.spec?.containers?.[0], {
        name: 'runner',
        env: [{ name: 'RUNNER_ORG', value: 'acme' }],
      });
      assert.deepEqual(
        pods.store.byIndex(CONTROLLER_UID_INDEX, 'sts-2').map((p) => p.metadata.name),
        ['arc-0-24'],
      );
      assert.deepEqual(
        pods.store.byIndex(POD_NAME_INDEX, 'arc-0-21').map((p) => p.metadata.name),
        ['arc-0-21'],
      );

      // Every user of the cache asks for the same informers; handlers hear every part.
      const again = runnerPodInformer(m, 'ns');
      assert.deepEqual(again.parts, pods.parts);
      const seen: string[] = [];
      again.addHandler({
        onAdd: (p) => seen.push(`add ${p.metadata.name}`),
        onDelete: (p) => seen.push(`delete ${p.metadata.name}`),
      });
      seen.length = 0; // the replay of what is cached
      api.emit('ADDED', pod('arc-new', { 'runnerset-name': 'rs' }));
      api.emit('ADDED', pod('not-runner', { app: 'x' }));
      api.emit('DELETED', pod('paddock', { 'actions-runner': '', 'runnerset-name': 'rs' }, 'sts-1'));
      assert.deepEqual(seen, ['add arc-new', 'delete paddock']);
      assert.deepEqual(again.store.keys().sort(), ['ns/arc-0-21', 'ns/arc-0-24', 'ns/arc-new']);
    } finally {
      await m.stop();
    }
  });

  test('a shared informer asked for with another transform is refused', () => {
    const m = manager(fakeApi([]).http);
    const sts = statefulSetInformer(m, 'ns');
    assert.equal(statefulSetInformer(m, 'ns'), sts);
    assert.throws(() => m.informer(STATEFUL_SETS, { namespace: 'ns' }), /another transform/);
    runnerPodInformer(m);
    assert.throws(() => m.informer(PODS, { labelSelector: RUNNER_POD_SELECTORS[0] }), /another transform/);
    assert.equal(runnerVolumeClaimInformer(m, 'ns'), runnerVolumeClaimInformer(m, 'ns'));
  });
});

describe('StatefulSet cache shape', () => {
  const sts: StatefulSetObject = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: {
      name: 'rs-abcde',
      namespace: 'ns',
      uid: 'sts-uid',
      creationTimestamp: iso(NOW - MIN),
      labels: { 'runner-template-hash': 'abc' },
      annotations: { 'sync-time': '2026-06-01T11:59:00Z' },
      ownerReferences: [
        {
          apiVersion: 'actions.summerwind.dev/v1alpha1',
          kind: 'RunnerSet',
          name: 'rs',
          uid: 'rs-uid',
          controller: true,
        },
      ],
      managedFields: [{}],
    },
    spec: {
      replicas: 1,
      // What the runner-set controller writes and nothing reads back.
      ...({
        selector: { matchLabels: { 'runnerset-name': 'rs' } },
        serviceName: 'rs',
        template: {
          metadata: { labels: { 'runnerset-name': 'rs' } },
          spec: { containers: [{ name: 'runner' }] },
        },
        volumeClaimTemplates: [{ metadata: { name: 'cache' } }],
      } as object),
    },
    status: {
      replicas: 1,
      readyReplicas: 1,
      currentReplicas: 1,
      updatedReplicas: 1,
      ...({ availableReplicas: 1, observedGeneration: 1, currentRevision: 'rs-abcde-1' } as object),
    },
  };

  test('keeps metadata, the wanted replicas and the counts the RunnerSet status sums', () => {
    const { managedFields: _m, ...metadata } = sts.metadata;
    assert.deepEqual(statefulSetShape(sts), {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata,
      spec: { replicas: 1 },
      status: { replicas: 1, readyReplicas: 1, currentReplicas: 1, updatedReplicas: 1 },
    });
    const noReplicas = { ...sts, spec: {}, status: undefined };
    assert.deepEqual(statefulSetShape(noReplicas).spec, {}, 'replicas left unset stays unset (means 1)');
  });
});
