import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  RUNNER_RESOURCE_WEBHOOKS,
  runnerResourceAdmissionHandlers,
  validateRunnerResourceRequest,
} from './runner-admission.ts';
import type { RunnerResourceKind } from './runner-validation.ts';
import { type AdmissionRequest, reviewAdmission } from './server.ts';

const VALIDATE_RUNNER = '/validate-actions-summerwind-dev-v1alpha1-runner';

function request(
  kind: RunnerResourceKind,
  operation: string,
  object: unknown,
  extra: Partial<AdmissionRequest> = {},
): AdmissionRequest {
  return {
    uid: 'u1',
    kind: { group: 'actions.summerwind.dev', version: 'v1alpha1', kind },
    namespace: 'ns1',
    operation,
    object,
    ...extra,
  };
}

const runner = (spec: unknown, metadata: Record<string, unknown> = { name: 'r1' }) => ({
  apiVersion: 'actions.summerwind.dev/v1alpha1',
  kind: 'Runner',
  metadata,
  spec,
});

describe('paths and webhook names', () => {
  test('exactly ARC’s', () => {
    assert.deepEqual(
      RUNNER_RESOURCE_WEBHOOKS.map((w) => [
        w.kind,
        w.resource,
        w.mutatePath,
        w.validatePath,
        w.mutateName,
        w.validateName,
      ]),
      [
        [
          'Runner',
          'runners',
          '/mutate-actions-summerwind-dev-v1alpha1-runner',
          '/validate-actions-summerwind-dev-v1alpha1-runner',
          'mutate.runner.actions.summerwind.dev',
          'validate.runner.actions.summerwind.dev',
        ],
        [
          'RunnerDeployment',
          'runnerdeployments',
          '/mutate-actions-summerwind-dev-v1alpha1-runnerdeployment',
          '/validate-actions-summerwind-dev-v1alpha1-runnerdeployment',
          'mutate.runnerdeployment.actions.summerwind.dev',
          'validate.runnerdeployment.actions.summerwind.dev',
        ],
        [
          'RunnerReplicaSet',
          'runnerreplicasets',
          '/mutate-actions-summerwind-dev-v1alpha1-runnerreplicaset',
          '/validate-actions-summerwind-dev-v1alpha1-runnerreplicaset',
          'mutate.runnerreplicaset.actions.summerwind.dev',
          'validate.runnerreplicaset.actions.summerwind.dev',
        ],
      ],
    );
    assert.deepEqual(Object.keys(runnerResourceAdmissionHandlers()).sort(), [
      '/mutate-actions-summerwind-dev-v1alpha1-runner',
      '/mutate-actions-summerwind-dev-v1alpha1-runnerdeployment',
      '/mutate-actions-summerwind-dev-v1alpha1-runnerreplicaset',
      '/validate-actions-summerwind-dev-v1alpha1-runner',
      '/validate-actions-summerwind-dev-v1alpha1-runnerdeployment',
      '/validate-actions-summerwind-dev-v1alpha1-runnerreplicaset',
    ]);
  });
});

describe('validateRunnerResourceRequest', () => {
  test('CREATE of an invalid object: 422 Invalid with the Kubernetes message', () => {
    assert.deepEqual(validateRunnerResourceRequest('Runner', request('Runner', 'CREATE', runner({}))), {
      allowed: false,
      status: {
        code: 422,
        reason: 'Invalid',
        message:
          'Runner.actions.summerwind.dev "r1" is invalid: spec.repository: Invalid value: "": spec needs enterprise, organization or repository',
      },
    });
  });

  test('CREATE of a valid object: allowed, nothing else', () => {
    assert.deepEqual(
      validateRunnerResourceRequest('Runner', request('Runner', 'CREATE', runner({ organization: 'acme' }))),
      { allowed: true },
    );
  });

  test('several errors are joined in brackets', () => {
    const rd = {
      metadata: { name: 'rd1' },
      spec: { replicas: -1, template: { spec: { organization: 'a', repository: 'a/b' } } },
    };
    const r = validateRunnerResourceRequest('RunnerDeployment', request('RunnerDeployment', 'CREATE', rd));
    assert.equal(
      r.status?.message,
      'RunnerDeployment.actions.summerwind.dev "rd1" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.template.spec.repository: Invalid value: "a/b": spec cannot have many fields defined enterprise, organization and repository]',
    );
  });

  test('the name comes from the object, else from the request (generateName before the name exists)', () => {
    const r = validateRunnerResourceRequest(
      'Runner',
      request('Runner', 'CREATE', runner({}, { generateName: 'r-' }), { name: 'r-xyz' }),
    );
    assert.match(r.status!.message, /^Runner\.actions\.summerwind\.dev "r-xyz" is invalid/);
    const r2 = validateRunnerResourceRequest('Runner', request('Runner', 'CREATE', runner({}, {})));
    assert.match(r2.status!.message, /^Runner\.actions\.summerwind\.dev "" is invalid/);
  });

  test('DELETE and CONNECT are allowed whatever they carry', () => {
    for (const operation of ['DELETE', 'CONNECT', undefined, 42]) {
      for (const object of [undefined, null, 'x', runner({})]) {
        const req = request('Runner', 'CREATE', object, {
          operation: operation as string,
          oldObject: runner({}),
        });
        assert.deepEqual(validateRunnerResourceRequest('Runner', req), { allowed: true }, String(operation));
      }
    }
  });

  test('an UPDATE introducing an error is denied', () => {
    const old = runner({ organization: 'acme' });
    const next = runner({ organization: 'acme', repository: 'acme/app' });
    const r = validateRunnerResourceRequest('Runner', request('Runner', 'UPDATE', next, { oldObject: old }));
    assert.equal(r.allowed, false);
    assert.equal(r.status?.code, 422);
    assert.match(r.status!.message, /spec cannot have many fields defined/);
  });

  test('an UPDATE of an object that was already invalid is denied only for errors it adds', () => {
    // Stored before the webhook existed: no scope at all.
    const old = runner({ labels: ['a'] }, { name: 'r1' });
    const finalizerRemoved = runner({ labels: ['a'] }, { name: 'r1', finalizers: [] });
    assert.deepEqual(
      validateRunnerResourceRequest(
        'Runner',
        request('Runner', 'UPDATE', finalizerRemoved, { oldObject: old }),
      ),
      { allowed: true },
    );
    const worse = runner({ labels: ['a'], containerMode: 'dind' });
    const r = validateRunnerResourceRequest('Runner', request('Runner', 'UPDATE', worse, { oldObject: old }));
    assert.equal(
      r.status?.message,
      'Runner.actions.summerwind.dev "r1" is invalid: spec.containerMode: Unsupported value: "dind": supported values: "", "kubernetes"',
    );
    // UPDATE without an old object (forged): every error counts.
    const forged = validateRunnerResourceRequest('Runner', request('Runner', 'UPDATE', finalizerRemoved));
    assert.equal(forged.allowed, false);
  });

  test('an UPDATE of an object being deleted is allowed (its finalizers must be removable)', () => {
    const deleting = runner({}, { name: 'r1', deletionTimestamp: '2024-05-01T12:00:00Z', finalizers: [] });
    assert.deepEqual(
      validateRunnerResourceRequest(
        'Runner',
        request('Runner', 'UPDATE', deleting, { oldObject: runner({ a: 1 }) }),
      ),
      { allowed: true },
    );
  });

  test('no object, or an object of another kind: 400', () => {
    for (const object of [undefined, null, 'x', 3, [runner({})]]) {
      const r = validateRunnerResourceRequest('Runner', request('Runner', 'CREATE', object));
      assert.equal(r.allowed, false);
      assert.equal(r.status?.code, 400);
      assert.equal(r.status?.reason, 'BadRequest');
      assert.match(r.status!.message, /^paddock: the CREATE request carries no Runner object$/);
    }
    const r = validateRunnerResourceRequest('Runner', request('RunnerDeployment', 'CREATE', runner({})));
    assert.equal(r.status?.code, 400);
    assert.match(r.status!.message, /the Runner webhook was sent a "RunnerDeployment"/);
    // Fuzzed: a kind that is an object whose toString is data (String() would throw).
    const odd = request('Runner', 'CREATE', runner({}));
    odd.kind = { kind: { toString: 'x', 名前: null } } as unknown as AdmissionRequest['kind'];
    const o = validateRunnerResourceRequest('Runner', odd);
    assert.equal(o.status?.code, 400);
    assert.match(o.status!.message, /was sent a \{"toString":"x","名前":null\}/);
  });
});

describe('the handlers behind the AdmissionReview framing', () => {
  const handlers = runnerResourceAdmissionHandlers();
  const review = (path: string, req: unknown) =>
    reviewAdmission(
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: req }),
      handlers[path]!,
    );

  test('mutating handlers allow without a patch, whatever the object', async () => {
    for (const w of RUNNER_RESOURCE_WEBHOOKS) {
      for (const object of [runner({}), 'garbage', null, { spec: [1, 2] }]) {
        const answer = await review(w.mutatePath, request(w.kind, 'CREATE', object));
        assert.equal(answer.status, 200);
        assert.deepEqual(answer.body, {
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          response: { uid: 'u1', allowed: true },
        });
      }
    }
  });

  test('a denial travels as status code 422, reason Invalid', async () => {
    const answer = await review(
      VALIDATE_RUNNER,
      request('Runner', 'CREATE', runner({ containerMode: 'x', organization: 'o' })),
    );
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: {
        uid: 'u1',
        allowed: false,
        status: {
          status: 'Failure',
          code: 422,
          reason: 'Invalid',
          message:
            'Runner.actions.summerwind.dev "r1" is invalid: spec.containerMode: Unsupported value: "x": supported values: "", "kubernetes"',
        },
      },
    });
  });

  test('attacker-written objects get a clean answer from every validating path, never a 500', async () => {
    const junk: unknown[] = [
      null,
      true,
      -1,
      'spec',
      [],
      {},
      { __proto__: { spec: 1 } },
      { constructor: 'x', spec: { constructor: 1, toString: 2 } },
      {
        metadata: [],
        spec: { template: { metadata: { labels: { toString: 1 }, annotations: [] }, spec: [] } },
      },
      {
        metadata: { name: 7, labels: 'x' },
        spec: { selector: { matchExpressions: [null, [], { values: {} }] } },
      },
      {
        spec: {
          replicas: Number.POSITIVE_INFINITY,
          effectiveTime: {},
          selector: [],
          template: {
            spec: {
              containerMode: 'kubernetes',
              workVolumeClaimTemplate: { accessModes: [{}] },
              containers: [null, { name: 'runner', volumeMounts: {} }],
            },
          },
        },
      },
      { spec: { organization: ['a'], githubAPICredentialsFrom: { secretRef: 'x' }, volumeSizeLimit: [] } },
      JSON.parse('{"metadata":{"name":"x"},"spec":{"__proto__":{"organization":"polluted"}}}'),
    ];
    for (const w of RUNNER_RESOURCE_WEBHOOKS) {
      for (const object of junk) {
        for (const operation of ['CREATE', 'UPDATE']) {
          const answer = await review(
            w.validatePath,
            request(w.kind, operation, object, { oldObject: object }),
          );
          assert.equal(answer.status, 200);
          const response = (answer.body as { response: { allowed: boolean; status?: { code: number } } })
            .response;
          if (!response.allowed)
            assert.ok([400, 422].includes(response.status!.code), JSON.stringify(response));
        }
      }
    }
  });
});
