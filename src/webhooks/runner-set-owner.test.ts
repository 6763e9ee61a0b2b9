import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { RunnerSet } from '../api/index.ts';
import type { KubeObject, OwnerReference } from '../runtime/store.ts';
import {
  cachedRunnerPodCluster,
  claimedRunnerSet,
  claimedStatefulSet,
  type RunnerPodClaims,
  runnerSetMismatch,
  verifyRunnerSetPod,
} from './runner-set-owner.ts';
import { FakeRunnerPodCluster } from './test-support.ts';

const STS_REF: OwnerReference = {
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  name: 'rs-x',
  uid: 'sts-uid',
  controller: true,
};
const RS_REF: OwnerReference = {
  apiVersion: 'actions.summerwind.dev/v1alpha1',
  kind: 'RunnerSet',
  name: 'rs',
  uid: 'rs-uid',
  controller: true,
};

function claims(o: Partial<RunnerPodClaims> = {}): RunnerPodClaims {
  return {
    ownerReferences: [STS_REF],
    scope: { enterprise: '', organization: 'acme', repository: '' },
    credentialsSecret: undefined,
    ...o,
  };
}

function statefulSet(owner: OwnerReference | null = RS_REF, uid = 'sts-uid'): KubeObject {
  return { metadata: { name: 'rs-x', namespace: 'ns', uid, ownerReferences: owner ? [owner] : [] } };
}

function runnerSet(spec: Partial<RunnerSet['spec']> = { organization: 'acme' }, uid = 'rs-uid'): RunnerSet {
  return { metadata: { name: 'rs', namespace: 'ns', uid }, spec: spec as RunnerSet['spec'] };
}

describe('RunnerSet owner verification', () => {
  test('the pod must name a StatefulSet as its controller', () => {
    assert.deepEqual(claimedStatefulSet(claims()), { ok: true, ref: STS_REF });
    const notController = claimedStatefulSet(
      claims({ ownerReferences: [{ ...STS_REF, controller: false }] }),
    );
    assert.equal(notController.ok, false);
    const replicaSet = claimedStatefulSet(claims({ ownerReferences: [{ ...STS_REF, kind: 'ReplicaSet' }] }));
    assert.match((replicaSet as { reason: string }).reason, /ReplicaSet/);
    const otherGroup = claimedStatefulSet(
      claims({ ownerReferences: [{ ...STS_REF, apiVersion: 'example.com/v1' }] }),
    );
    assert.match((otherGroup as { reason: string }).reason, /not a StatefulSet/);
    // Names that could not be part of a URL path (the API server never stores them) are refused.
    for (const name of ['sts\ud800', 'Upper', '../secrets', 'a/b']) {
      const bad = claimedStatefulSet(claims({ ownerReferences: [{ ...STS_REF, name }] }));
      assert.match(
        (bad as { reason: string }).reason,
        /StatefulSet owner reference .* is not a valid name/,
        name,
      );
    }
  });

  test('the StatefulSet must exist with the claimed UID and be controlled by a RunnerSet of actions.summerwind.dev', () => {
    assert.deepEqual(claimedRunnerSet('ns', STS_REF, statefulSet()), { ok: true, ref: RS_REF });
    const reasons = [
      claimedRunnerSet('ns', STS_REF, undefined),
      claimedRunnerSet('ns', STS_REF, statefulSet(RS_REF, 'other')),
      claimedRunnerSet('ns', STS_REF, statefulSet(null)),
      claimedRunnerSet('ns', STS_REF, statefulSet({ ...RS_REF, apiVersion: 'evil.example.com/v1alpha1' })),
      claimedRunnerSet('ns', STS_REF, statefulSet({ ...RS_REF, kind: 'Runner' })),
    ].map((r) => (r.ok ? 'ok' : r.reason));
    assert.deepEqual(reasons, [
      'its owner StatefulSet ns/rs-x does not exist',
      'its owner reference names StatefulSet ns/rs-x with UID sts-uid, but that StatefulSet has UID other',
      'StatefulSet ns/rs-x is not controlled by a RunnerSet (actions.summerwind.dev)',
      'StatefulSet ns/rs-x is not controlled by a RunnerSet (actions.summerwind.dev)',
      'StatefulSet ns/rs-x is not controlled by a RunnerSet (actions.summerwind.dev)',
    ]);
  });

  test('the RunnerSet must exist with the UID its StatefulSet names', () => {
    assert.equal(runnerSetMismatch('ns', RS_REF, runnerSet(), claims()), undefined);
    assert.equal(runnerSetMismatch('ns', RS_REF, undefined, claims()), 'its RunnerSet ns/rs does not exist');
    assert.match(runnerSetMismatch('ns', RS_REF, runnerSet(undefined, 'new'), claims()) ?? '', /UID new/);
  });

  test('each scope field must equal the RunnerSet’s (absent counts as empty)', () => {
    const repoSet = runnerSet({ repository: 'acme/app' });
    assert.equal(
      runnerSetMismatch(
        'ns',
        RS_REF,
        repoSet,
        claims({ scope: { enterprise: '', organization: '', repository: 'acme/app' } }),
      ),
      undefined,
    );
    assert.equal(
      runnerSetMismatch(
        'ns',
        RS_REF,
        repoSet,
        claims({ scope: { enterprise: '', organization: 'acme', repository: 'acme/app' } }),
      ),
      `its RUNNER_ORG "acme" is not RunnerSet ns/rs's organization ""`,
    );
    assert.equal(
      runnerSetMismatch(
        'ns',
        RS_REF,
        runnerSet({ organization: 'acme' }),
        claims({ scope: { enterprise: 'ent', organization: 'acme', repository: '' } }),
      ),
      `its RUNNER_ENTERPRISE "ent" is not RunnerSet ns/rs's enterprise ""`,
    );
    assert.equal(
      runnerSetMismatch(
        'ns',
        RS_REF,
        runnerSet(),
        claims({ scope: { enterprise: '', organization: 'acme', repository: null } }),
      ),
      'its RUNNER_REPO is not a literal value',
    );
  });

  test('the credentials Secret must be the RunnerSet’s; both absent (or empty) is a match', () => {
    const withSecret = runnerSet({
      organization: 'acme',
      githubAPICredentialsFrom: { secretRef: { name: 'creds' } },
    });
    assert.equal(
      runnerSetMismatch('ns', RS_REF, withSecret, claims({ credentialsSecret: 'creds' })),
      undefined,
    );
    assert.equal(runnerSetMismatch('ns', RS_REF, runnerSet(), claims({ credentialsSecret: '' })), undefined);
    assert.equal(
      runnerSetMismatch('ns', RS_REF, withSecret, claims()),
      `its credentials Secret (none) is not RunnerSet ns/rs's githubAPICredentialsFrom Secret "creds"`,
    );
    assert.equal(
      runnerSetMismatch('ns', RS_REF, runnerSet(), claims({ credentialsSecret: 'creds' })),
      `its credentials Secret "creds" is not RunnerSet ns/rs's githubAPICredentialsFrom Secret (none)`,
    );
  });

  test('verifyRunnerSetPod reads the StatefulSet and RunnerSet of the request namespace only', async () => {
    const cluster = new FakeRunnerPodCluster();
    const ref = cluster.addRunnerSet({
      namespace: 'ns',
      name: 'rs',
      uid: 'rs-uid',
      spec: { organization: 'acme' },
      statefulSet: { name: 'rs-x', uid: 'sts-uid' },
    });
    const ok = await verifyRunnerSetPod('ns', claims({ ownerReferences: [ref] }), cluster);
    assert.equal(ok.ok, true);
    assert.deepEqual(ok.ok && ok.owner.statefulSet, { name: 'rs-x', uid: 'sts-uid' });
    assert.equal(ok.ok && ok.owner.runnerSet.metadata.name, 'rs');
    const elsewhere = await verifyRunnerSetPod('other-ns', claims({ ownerReferences: [ref] }), cluster);
    assert.deepEqual(elsewhere, { ok: false, reason: 'its owner StatefulSet other-ns/rs-x does not exist' });
    assert.deepEqual(cluster.reads, ['StatefulSet ns/rs-x', 'RunnerSet ns/rs', 'StatefulSet other-ns/rs-x']);
  });
});

describe('cachedRunnerPodCluster', () => {
  const sts = { metadata: { name: 'rs-abc', namespace: 'ns', uid: 's1' } };
  const live = {
    gets: [] as string[],
    statefulSet: async (_ns: string, name: string) => {
      live.gets.push(`sts/${name}`);
      return name === 'new-sts' ? { metadata: { name, namespace: 'ns', uid: 's2' } } : undefined;
    },
    runnerSet: async (_ns: string, name: string) => {
      live.gets.push(`rs/${name}`);
      return undefined;
    },
    secret: async () => undefined,
    applySecret: async () => undefined,
  };
  const cached = cachedRunnerPodCluster(live, {
    statefulSets: { getByName: (ns, name) => (ns === 'ns' && name === 'rs-abc' ? sts : undefined) },
    runnerSets: { getByName: () => undefined },
  });

  test('a StatefulSet in the cache is not fetched; one the cache has not seen yet is', async () => {
    assert.equal(await cached.statefulSet('ns', 'rs-abc'), sts);
    assert.deepEqual(live.gets, []);
    assert.equal((await cached.statefulSet('ns', 'new-sts'))?.metadata.uid, 's2');
    assert.equal(await cached.runnerSet('ns', 'rs'), undefined);
    assert.deepEqual(live.gets, ['sts/new-sts', 'rs/rs']);
  });
});
