import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type FieldError,
  formatFieldError,
  invalidMessage,
  isLabelValue,
  isQualifiedName,
  isRfc3339,
  MSG_MANY_SCOPES,
  MSG_NO_ACCESS_MODE,
  MSG_NO_SCOPE,
  MSG_NO_WORK_VOLUME_CLAIM_TEMPLATE,
  MSG_RUNNER_VOLUME_REQUIRED,
  MSG_RUNNER_WORK_MOUNT,
  MSG_WORK_VOLUME,
  MSG_WORK_VOLUME_MOUNT,
  renderValue,
  validateLabelSelector,
  validateRunner,
  validateRunnerDeployment,
  validateRunnerReplicaSet,
  validateRunnerResource,
  validateRunnerSpec,
} from './runner-validation.ts';

/** The formatted errors, the way they show up in a denial. */
const lines = (errs: FieldError[]) => errs.map(formatFieldError);

const KUBERNETES_MODE = {
  repository: 'owner/repo',
  containerMode: 'kubernetes',
  workVolumeClaimTemplate: {
    storageClassName: 'standard',
    accessModes: ['ReadWriteOnce'],
    resources: { requests: { storage: '10Gi' } },
  },
};

function deployment(spec: Record<string, unknown>, name = 'rd1'): Record<string, unknown> {
  return {
    apiVersion: 'actions.summerwind.dev/v1alpha1',
    kind: 'RunnerDeployment',
    metadata: { name },
    spec,
  };
}

function replicaSet(spec: Record<string, unknown>, labels?: Record<string, string>): Record<string, unknown> {
  return {
    apiVersion: 'actions.summerwind.dev/v1alpha1',
    kind: 'RunnerReplicaSet',
    metadata: { name: 'rs1', ...(labels ? { labels } : {}) },
    spec,
  };
}

describe('validateRunnerSpec: ARC rule 1, exactly one of enterprise, organization, repository', () => {
  for (const [what, spec] of [
    ['enterprise', { enterprise: 'acme-corp' }],
    ['organization', { organization: 'acme' }],
    ['repository', { repository: 'acme/app' }],
    ['one set, the others empty', { enterprise: '', organization: 'acme', repository: '' }],
  ] as const) {
    test(`${what}: valid`, () => assert.deepEqual(validateRunnerSpec(spec, 'spec'), []));
  }

  test('none: ARC message on <root>.repository with the (empty) repository', () => {
    assert.deepEqual(lines(validateRunnerSpec({}, 'spec')), [
      'spec.repository: Invalid value: "": spec needs enterprise, organization or repository',
    ]);
    assert.deepEqual(lines(validateRunnerSpec({ repository: '', organization: '' }, 'spec.template.spec')), [
      `spec.template.spec.repository: Invalid value: "": ${MSG_NO_SCOPE}`,
    ]);
  });

  test('an absent or null spec is the zero value: the same error', () => {
    assert.deepEqual(lines(validateRunnerSpec(undefined, 'spec')), [
      `spec.repository: Invalid value: "": ${MSG_NO_SCOPE}`,
    ]);
    assert.deepEqual(lines(validateRunnerSpec(null, 'spec')), [
      `spec.repository: Invalid value: "": ${MSG_NO_SCOPE}`,
    ]);
  });

  for (const [what, spec, value] of [
    ['organization and repository', { organization: 'acme', repository: 'acme/app' }, '"acme/app"'],
    ['enterprise and organization', { enterprise: 'corp', organization: 'acme' }, '""'],
    ['all three', { enterprise: 'corp', organization: 'acme', repository: 'acme/app' }, '"acme/app"'],
  ] as const) {
    test(`${what}: ARC's "many fields" message`, () => {
      assert.deepEqual(lines(validateRunnerSpec(spec, 'spec')), [
        `spec.repository: Invalid value: ${value}: ${MSG_MANY_SCOPES}`,
      ]);
    });
  }
});

describe('validateRunnerSpec: ARC rule 2, container mode kubernetes needs a work volume claim template', () => {
  test('a complete template is valid, with ReadWriteOnce, ReadWriteMany or both', () => {
    assert.deepEqual(validateRunnerSpec(KUBERNETES_MODE, 'spec'), []);
    for (const accessModes of [['ReadWriteMany'], ['ReadWriteMany', 'ReadWriteOnce']]) {
      const spec = {
        ...KUBERNETES_MODE,
        workVolumeClaimTemplate: { ...KUBERNETES_MODE.workVolumeClaimTemplate, accessModes },
      };
      assert.deepEqual(validateRunnerSpec(spec, 'spec'), []);
    }
  });

  test('no template', () => {
    const { workVolumeClaimTemplate: _, ...spec } = KUBERNETES_MODE;
    assert.deepEqual(lines(validateRunnerSpec(spec, 'spec.template.spec')), [
      `spec.template.spec.workVolumeClaimTemplate: Invalid value: null: ${MSG_NO_WORK_VOLUME_CLAIM_TEMPLATE}`,
    ]);
  });

  test('no access mode (empty or absent)', () => {
    for (const template of [{ accessModes: [] }, { storageClassName: 'x' }]) {
      const errs = validateRunnerSpec({ ...KUBERNETES_MODE, workVolumeClaimTemplate: template }, 'spec');
      assert.equal(errs.length, 1);
      assert.equal(errs[0]!.field, 'spec.workVolumeClaimTemplate');
      assert.equal(errs[0]!.detail, MSG_NO_ACCESS_MODE);
    }
  });

  test('an unsupported access mode is named (the first one)', () => {
    const template = { accessModes: ['ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteOncePod'] };
    const errs = validateRunnerSpec({ ...KUBERNETES_MODE, workVolumeClaimTemplate: template }, 'spec');
    assert.deepEqual(lines(errs), [
      'spec.workVolumeClaimTemplate: Invalid value: {"accessModes":["ReadWriteOnce","ReadOnlyMany","ReadWriteOncePod"]}: access mode ReadOnlyMany is not supported',
    ]);
  });

  test('docker mode does not look at the template at all (ARC)', () => {
    for (const containerMode of [undefined, '']) {
      const spec = { repository: 'o/r', containerMode, workVolumeClaimTemplate: { accessModes: ['Bogus'] } };
      assert.deepEqual(validateRunnerSpec(spec, 'spec'), []);
    }
  });
});

describe('validateRunnerSpec: what the controller would only fail on later', () => {
  test('an unknown container mode is listed against the supported ones', () => {
    for (const mode of ['docker', 'dind', 'Kubernetes']) {
      assert.deepEqual(lines(validateRunnerSpec({ repository: 'o/r', containerMode: mode }, 'spec')), [
        `spec.containerMode: Unsupported value: ${JSON.stringify(mode)}: supported values: "", "kubernetes"`,
      ]);
    }
  });

  test('kubernetes mode: a volume or a volume mount named work (§5.2 step 8 messages)', () => {
    const spec = {
      ...KUBERNETES_MODE,
      volumeMounts: [
        { name: 'cache', mountPath: '/cache' },
        { name: 'work', mountPath: '/runner/_work' },
      ],
      volumes: [{ name: 'work', emptyDir: {} }],
    };
    assert.deepEqual(lines(validateRunnerSpec(spec, 'spec.template.spec')), [
      `spec.template.spec.volumeMounts[1].name: Invalid value: "work": ${MSG_WORK_VOLUME_MOUNT}`,
      `spec.template.spec.volumes[0].name: Invalid value: "work": ${MSG_WORK_VOLUME}`,
    ]);
  });

  test('docker mode: a work volume and mount replace the default ones (ARC documents this)', () => {
    const spec = {
      repository: 'o/r',
      volumeMounts: [{ name: 'work', mountPath: '/runner/_work' }],
      volumes: [{ name: 'work', emptyDir: { medium: 'Memory' } }],
    };
    assert.deepEqual(validateRunnerSpec(spec, 'spec'), []);
  });

  test('kubernetes mode: other volumes are fine', () => {
    const spec = { ...KUBERNETES_MODE, volumes: [{ name: 'cache', emptyDir: {} }] };
    assert.deepEqual(validateRunnerSpec(spec, 'spec'), []);
  });

  test('kubernetes mode: containers without one named runner', () => {
    const spec = { ...KUBERNETES_MODE, containers: [{ name: 'main' }, { name: 'helper' }] };
    assert.deepEqual(lines(validateRunnerSpec(spec, 'spec')), [
      'spec.containers: Invalid value: ["main","helper"]: container mode kubernetes needs a container named "runner" to mount the work volume on',
    ]);
    // No containers at all: ARC adds the runner container itself.
    assert.deepEqual(validateRunnerSpec({ ...KUBERNETES_MODE, containers: [] }, 'spec'), []);
    assert.deepEqual(
      validateRunnerSpec({ ...KUBERNETES_MODE, containers: [{ name: 'runner' }] }, 'spec'),
      [],
    );
  });

  test('kubernetes mode: a work mount on the runner container', () => {
    const spec = {
      ...KUBERNETES_MODE,
      containers: [{ name: 'side' }, { name: 'runner', volumeMounts: [{ name: 'work', mountPath: '/w' }] }],
    };
    assert.deepEqual(lines(validateRunnerSpec(spec, 'spec')), [
      `spec.containers[1].volumeMounts[0].name: Invalid value: "work": ${MSG_RUNNER_WORK_MOUNT}`,
    ]);
  });

  test('volumeSizeLimit 0 with the docker sidecar (§5.1 step 18); fine without the sidecar', () => {
    for (const limit of [0, '0', '0Gi', '0.0', '+0M']) {
      assert.deepEqual(lines(validateRunnerSpec({ repository: 'o/r', volumeSizeLimit: limit }, 'spec')), [
        `spec.volumeSizeLimit: Invalid value: ${renderValue(limit)}: ${MSG_RUNNER_VOLUME_REQUIRED}`,
      ]);
    }
    for (const extra of [
      { dockerEnabled: false },
      { dockerdWithinRunnerContainer: true },
      { containerMode: 'kubernetes', workVolumeClaimTemplate: { accessModes: ['ReadWriteOnce'] } },
    ]) {
      assert.deepEqual(validateRunnerSpec({ repository: 'o/r', volumeSizeLimit: '0', ...extra }, 'spec'), []);
    }
    assert.deepEqual(validateRunnerSpec({ repository: 'o/r', volumeSizeLimit: '1Gi' }, 'spec'), []);
  });

  test('githubAPICredentialsFrom.secretRef.name must be a Secret name; empty means the default credentials', () => {
    const creds = (name: unknown) => ({
      repository: 'o/r',
      githubAPICredentialsFrom: { secretRef: { name } },
    });
    for (const good of ['creds', 'team-a.github', 'a'.repeat(253)]) {
      assert.deepEqual(validateRunnerSpec(creds(good), 'spec'), [], good);
    }
    assert.deepEqual(validateRunnerSpec(creds(''), 'spec'), []);
    assert.deepEqual(validateRunnerSpec({ repository: 'o/r', githubAPICredentialsFrom: {} }, 'spec'), []);
    for (const bad of ['Creds', 'team_a', '-x', 'x-', 'a/b', '../etc', 'a'.repeat(254), 'a..b']) {
      const errs = validateRunnerSpec(creds(bad), 'spec');
      assert.equal(errs.length, 1, bad);
      assert.equal(errs[0]!.field, 'spec.githubAPICredentialsFrom.secretRef.name');
      assert.match(errs[0]!.detail!, /lower-case RFC 1123 subdomain/);
    }
  });

  test('several errors are all reported', () => {
    const spec = { containerMode: 'kube', githubAPICredentialsFrom: { secretRef: { name: 'X' } } };
    assert.deepEqual(
      validateRunnerSpec(spec, 'spec').map((e) => e.field),
      ['spec.repository', 'spec.containerMode', 'spec.githubAPICredentialsFrom.secretRef.name'],
    );
  });
});

describe('validateRunnerSpec: type-confused input is a field error, never an exception', () => {
  const cases: [string, unknown, string][] = [
    ['spec is a string', 'x', 'spec: Invalid value: "x": must be an object'],
    ['spec is a list', [1], 'spec: Invalid value: [1]: must be an object'],
    [
      'repository is a number',
      { repository: 5, organization: 'acme' },
      'spec.repository: Invalid value: 5: must be a string',
    ],
    [
      'organization is an object',
      { organization: { a: 1 }, repository: 'o/r' },
      'spec.organization: Invalid value: {"a":1}: must be a string',
    ],
    [
      'containerMode is a boolean',
      { repository: 'o/r', containerMode: true },
      'spec.containerMode: Invalid value: true: must be a string',
    ],
    [
      'workVolumeClaimTemplate is a list',
      { repository: 'o/r', containerMode: 'kubernetes', workVolumeClaimTemplate: [] },
      'spec.workVolumeClaimTemplate: Invalid value: []: must be an object',
    ],
    [
      'accessModes is a string',
      { repository: 'o/r', containerMode: 'kubernetes', workVolumeClaimTemplate: { accessModes: 'RWO' } },
      'spec.workVolumeClaimTemplate.accessModes: Invalid value: "RWO": must be a list',
    ],
    [
      'an access mode is a number',
      { repository: 'o/r', containerMode: 'kubernetes', workVolumeClaimTemplate: { accessModes: [7] } },
      'spec.workVolumeClaimTemplate: Invalid value: {"accessModes":[7]}: access mode 7 is not supported',
    ],
    [
      'volumes is an object',
      { ...KUBERNETES_MODE, volumes: { work: {} } },
      'spec.volumes: Invalid value: {"work":{}}: must be a list',
    ],
    [
      'containers is a number',
      { ...KUBERNETES_MODE, containers: 3 },
      'spec.containers: Invalid value: 3: must be a list',
    ],
    [
      'runner volumeMounts is a string',
      { ...KUBERNETES_MODE, containers: [{ name: 'runner', volumeMounts: 'work' }] },
      'spec.containers[0].volumeMounts: Invalid value: "work": must be a list',
    ],
    [
      'dockerEnabled is a string',
      { repository: 'o/r', dockerEnabled: 'false' },
      'spec.dockerEnabled: Invalid value: "false": must be true or false',
    ],
    [
      'volumeSizeLimit is an object',
      { repository: 'o/r', volumeSizeLimit: { size: 0 } },
      'spec.volumeSizeLimit: Invalid value: {"size":0}: must be a quantity such as 10Gi',
    ],
    [
      'githubAPICredentialsFrom is a string',
      { repository: 'o/r', githubAPICredentialsFrom: 'creds' },
      'spec.githubAPICredentialsFrom: Invalid value: "creds": must be an object',
    ],
    [
      'secretRef is a list',
      { repository: 'o/r', githubAPICredentialsFrom: { secretRef: ['creds'] } },
      'spec.githubAPICredentialsFrom.secretRef: Invalid value: ["creds"]: must be an object',
    ],
    [
      'secretRef.name is a number',
      { repository: 'o/r', githubAPICredentialsFrom: { secretRef: { name: 12 } } },
      'spec.githubAPICredentialsFrom.secretRef.name: Invalid value: 12: must be a string',
    ],
  ];
  for (const [what, spec, expected] of cases) {
    test(what, () => {
      const got = lines(validateRunnerSpec(spec, 'spec'));
      assert.deepEqual(got, [expected]);
    });
  }

  test('a scope field of the wrong type counts as unset', () => {
    assert.deepEqual(lines(validateRunnerSpec({ repository: ['o/r'] }, 'spec')), [
      'spec.repository: Invalid value: ["o/r"]: must be a string',
      `spec.repository: Invalid value: "": ${MSG_NO_SCOPE}`,
    ]);
  });

  test('null fields read as unset (Go zero values)', () => {
    const spec = {
      repository: 'o/r',
      organization: null,
      containerMode: null,
      githubAPICredentialsFrom: null,
      volumeSizeLimit: null,
      dockerEnabled: null,
    };
    assert.deepEqual(validateRunnerSpec(spec, 'spec'), []);
  });

  test('list entries of any type are skipped when looking for names', () => {
    const spec = { ...KUBERNETES_MODE, volumes: [null, 1, 'work', ['work']], volumeMounts: [{ name: 5 }] };
    assert.deepEqual(validateRunnerSpec(spec, 'spec'), []);
  });
});

describe('validateRunner', () => {
  test('ARC root path spec', () => {
    assert.deepEqual(lines(validateRunner({ metadata: { name: 'r1' }, spec: { organization: '' } })), [
      `spec.repository: Invalid value: "": ${MSG_NO_SCOPE}`,
    ]);
    assert.deepEqual(validateRunner({ metadata: { name: 'r1' }, spec: { organization: 'acme' } }), []);
  });

  test('not an object', () => {
    for (const obj of [null, 'x', 1, []]) {
      assert.equal(validateRunner(obj).length, 1);
    }
  });

  test('validateRunnerResource dispatches on the kind', () => {
    assert.equal(validateRunnerResource('Runner', { spec: {} })[0]!.field, 'spec.repository');
    const rd = deployment({ template: { spec: {} } });
    assert.equal(validateRunnerResource('RunnerDeployment', rd)[0]!.field, 'spec.template.spec.repository');
    const rs = replicaSet({ template: { spec: {} } });
    assert.equal(validateRunnerResource('RunnerReplicaSet', rs)[0]!.field, 'spec.template.spec.repository');
  });
});

describe('validateRunnerDeployment and validateRunnerReplicaSet', () => {
  test('ARC documentation manifests are valid', () => {
    // docs: a repository RunnerDeployment with labels
    assert.deepEqual(
      validateRunnerDeployment(
        deployment(
          {
            replicas: 1,
            template: {
              spec: { repository: 'mumoshu/actions-runner-controller-ci', labels: ['custom-runner'] },
            },
          },
          'example-runnerdeploy',
        ),
      ),
      [],
    );
    // docs: an organization RunnerDeployment in a runner group
    assert.deepEqual(
      validateRunnerDeployment(
        deployment({ template: { spec: { organization: 'your-organization-name', group: 'NewGroup' } } }),
      ),
      [],
    );
    // docs: container mode kubernetes
    assert.deepEqual(
      validateRunnerDeployment(
        deployment({
          template: {
            spec: {
              containerMode: 'kubernetes',
              serviceAccountName: 'my-service-account',
              workVolumeClaimTemplate: {
                storageClassName: 'my-dynamic-storage-class',
                accessModes: ['ReadWriteOnce'],
                resources: { requests: { storage: '10Gi' } },
              },
              repository: 'mumoshu/actions-runner-controller-ci',
              env: [],
            },
          },
        }),
      ),
      [],
    );
    // docs: a RAM-disk work directory in docker mode
    assert.deepEqual(
      validateRunnerDeployment(
        deployment({
          template: {
            spec: {
              repository: 'o/r',
              dockerVolumeMounts: [{ mountPath: '/var/lib/docker', name: 'docker' }],
              volumeMounts: [{ mountPath: '/tmp', name: 'tmp' }],
              volumes: [
                { name: 'docker', emptyDir: { medium: 'Memory' } },
                { name: 'work', emptyDir: { medium: 'Memory' } },
                { name: 'tmp', emptyDir: { medium: 'Memory' } },
              ],
              ephemeral: true,
            },
          },
        }),
      ),
      [],
    );
    // dind and a disabled /runner volume without the sidecar
    assert.deepEqual(
      validateRunnerDeployment(
        deployment({
          template: {
            spec: {
              organization: 'acme',
              dockerdWithinRunnerContainer: true,
              image: 'summerwind/actions-runner-dind',
              volumeSizeLimit: '0',
            },
          },
        }),
      ),
      [],
    );
  });

  test('the runner spec is checked under spec.template.spec', () => {
    assert.deepEqual(lines(validateRunnerDeployment(deployment({ template: { spec: {} } }))), [
      `spec.template.spec.repository: Invalid value: "": ${MSG_NO_SCOPE}`,
    ]);
    assert.deepEqual(lines(validateRunnerReplicaSet(replicaSet({ template: {} }))), [
      `spec.template.spec.repository: Invalid value: "": ${MSG_NO_SCOPE}`,
    ]);
  });

  test('spec and template are required', () => {
    assert.deepEqual(lines(validateRunnerDeployment({ metadata: { name: 'rd1' } })), [
      'spec: Required value',
    ]);
    assert.deepEqual(lines(validateRunnerReplicaSet(replicaSet({ replicas: 1 }))), [
      'spec.template: Required value',
    ]);
    assert.deepEqual(lines(validateRunnerDeployment(deployment({ template: 'x' }))), [
      'spec.template: Invalid value: "x": must be an object',
    ]);
  });

  test('replicas: unset, null, 0 and positive are fine; negative and fractional are not', () => {
    const t = { template: { spec: { organization: 'acme' } } };
    for (const replicas of [undefined, null, 0, 1, 100]) {
      assert.deepEqual(validateRunnerDeployment(deployment({ ...t, replicas })), []);
      assert.deepEqual(validateRunnerReplicaSet(replicaSet({ ...t, replicas })), []);
    }
    assert.deepEqual(lines(validateRunnerDeployment(deployment({ ...t, replicas: -1 }))), [
      'spec.replicas: Invalid value: -1: must be greater than or equal to 0',
    ]);
    assert.deepEqual(lines(validateRunnerReplicaSet(replicaSet({ ...t, replicas: -3 }))), [
      'spec.replicas: Invalid value: -3: must be greater than or equal to 0',
    ]);
    for (const replicas of [1.5, '2', true, [1], { n: 1 }, Number.NaN]) {
      assert.match(
        lines(validateRunnerDeployment(deployment({ ...t, replicas })))[0]!,
        /must be an integer$/,
      );
    }
  });

  test('effectiveTime: RFC 3339 or unset', () => {
    const t = { template: { spec: { organization: 'acme' } } };
    for (const effectiveTime of [undefined, null, '2024-05-01T12:00:00Z', '2024-02-29T23:59:59.123+09:00']) {
      assert.deepEqual(validateRunnerDeployment(deployment({ ...t, effectiveTime })), []);
    }
    assert.deepEqual(lines(validateRunnerReplicaSet(replicaSet({ ...t, effectiveTime: 'now' }))), [
      'spec.effectiveTime: Invalid value: "now": must be an RFC 3339 time such as "2024-05-01T12:00:00Z"',
    ]);
    assert.deepEqual(lines(validateRunnerDeployment(deployment({ ...t, effectiveTime: 1714564800 }))), [
      'spec.effectiveTime: Invalid value: 1714564800: must be a string',
    ]);
  });

  test('template labels and annotation keys must be valid, or the Runners could never be created', () => {
    const errs = validateRunnerDeployment(
      deployment({
        template: {
          metadata: {
            labels: { 'bad key': 'v', good: 'has space', ok: 'fine', n: 1 },
            annotations: { 'Example.com/Note': 'any value is fine', 'not ok': 'x' },
          },
          spec: { organization: 'acme' },
        },
      }),
    );
    assert.deepEqual(
      errs.map((e) => `${e.field} ${renderValue(e.value)}`),
      [
        'spec.template.metadata.labels[n] 1',
        'spec.template.metadata.labels "bad key"',
        'spec.template.metadata.labels[good] "has space"',
        'spec.template.metadata.annotations "not ok"',
      ],
    );
  });

  test('type-confused metadata is a field error', () => {
    assert.deepEqual(
      lines(validateRunnerDeployment({ metadata: 'x', spec: { template: { spec: { organization: 'a' } } } })),
      ['metadata: Invalid value: "x": must be an object'],
    );
    assert.deepEqual(
      lines(
        validateRunnerDeployment(
          deployment({ template: { metadata: { labels: ['a'] }, spec: { organization: 'a' } } }),
        ),
      ),
      ['spec.template.metadata.labels: Invalid value: ["a"]: must be an object'],
    );
  });
});

describe('selectors of RunnerDeployments', () => {
  const tpl = (labels?: Record<string, string>) => ({
    ...(labels ? { metadata: { labels } } : {}),
    spec: { organization: 'acme' },
  });

  test('a missing, null or empty selector is fine (ARC defaults it)', () => {
    for (const selector of [undefined, null, {}, { matchLabels: {} }]) {
      assert.deepEqual(validateRunnerDeployment(deployment({ selector, template: tpl() })), []);
    }
  });

  test('selecting the template labels, the deployment name or both is fine', () => {
    for (const selector of [
      { matchLabels: { app: 'ci' } },
      { matchLabels: { 'runner-deployment-name': 'rd1' } },
      { matchLabels: { app: 'ci', 'runner-deployment-name': 'rd1' } },
      { matchExpressions: [{ key: 'app', operator: 'In', values: ['ci', 'cd'] }] },
      { matchExpressions: [{ key: 'app', operator: 'Exists' }] },
      { matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' }] },
      { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['cd'] }] },
      { matchExpressions: [{ key: 'runner-template-hash', operator: 'Exists' }] },
      // Replaced by the controller with the template hash.
      { matchLabels: { app: 'ci', 'runner-template-hash': 'stale' } },
    ]) {
      assert.deepEqual(
        validateRunnerDeployment(deployment({ selector, template: tpl({ app: 'ci' }) })),
        [],
        JSON.stringify(selector),
      );
    }
  });

  test('a selector the runners cannot match is rejected', () => {
    for (const selector of [
      { matchLabels: { app: 'cd' } },
      { matchLabels: { app: 'ci', team: 'x' } },
      { matchLabels: { 'runner-deployment-name': 'other' } },
      { matchExpressions: [{ key: 'app', operator: 'In', values: ['cd'] }] },
      { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['ci'] }] },
      { matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] },
      { matchExpressions: [{ key: 'tier', operator: 'Exists' }] },
      { matchExpressions: [{ key: 'runner-template-hash', operator: 'DoesNotExist' }] },
    ]) {
      const errs = validateRunnerDeployment(deployment({ selector, template: tpl({ app: 'ci' }) }));
      assert.equal(errs.length, 1, JSON.stringify(selector));
      assert.equal(errs[0]!.field, 'spec.selector');
      assert.match(
        formatFieldError(errs[0]!),
        /selector does not match the labels of the runners \(spec\.template\.metadata\.labels plus runner-deployment-name=rd1\)/,
      );
    }
  });

  test('the label the controller overrides counts with its controller value', () => {
    // A template label runner-deployment-name=x is overwritten with the deployment's name.
    const selector = { matchLabels: { 'runner-deployment-name': 'x' } };
    assert.equal(
      validateRunnerDeployment(deployment({ selector, template: tpl({ 'runner-deployment-name': 'x' }) }))
        .length,
      1,
    );
  });

  test('before the server generates the name, the deployment name label is not held against the selector', () => {
    const obj = {
      metadata: { generateName: 'rd-' },
      spec: { selector: { matchLabels: { 'runner-deployment-name': 'rd-abcde' } }, template: tpl() },
    };
    assert.deepEqual(validateRunnerDeployment(obj), []);
  });

  test('structural selector errors (apimachinery messages), and no match check on a broken selector', () => {
    const selector = {
      matchLabels: { 'bad key': 'v', app: 'bad value!' },
      matchExpressions: [
        { key: 'a', operator: 'Equals', values: ['x'] },
        { key: 'b', operator: 'In' },
        { key: 'c', operator: 'NotIn', values: [] },
        { key: 'd', operator: 'Exists', values: ['x'] },
        { key: 'e', operator: 'DoesNotExist', values: ['x'] },
        { operator: 'Exists' },
        { key: 'f' },
        'nope',
        { key: 'g', operator: 'In', values: [1, 'bad value!'] },
      ],
    };
    assert.deepEqual(
      lines(validateRunnerDeployment(deployment({ selector, template: tpl() }))).map((l) =>
        l.replace(/: must be (a|an|empty) .*$/, ''),
      ),
      [
        'spec.selector.matchLabels: Invalid value: "bad key"',
        'spec.selector.matchLabels[app]: Invalid value: "bad value!"',
        'spec.selector.matchExpressions[0].operator: Unsupported value: "Equals": supported values: "In", "NotIn", "Exists", "DoesNotExist"',
        "spec.selector.matchExpressions[1].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        "spec.selector.matchExpressions[2].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        "spec.selector.matchExpressions[3].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        "spec.selector.matchExpressions[4].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        'spec.selector.matchExpressions[5].key: Required value',
        'spec.selector.matchExpressions[6].operator: Required value',
        'spec.selector.matchExpressions[7]: Invalid value: "nope"',
        'spec.selector.matchExpressions[8].values[0]: Invalid value: 1',
        'spec.selector.matchExpressions[8].values[1]: Invalid value: "bad value!"',
      ],
    );
  });

  test('type-confused selectors', () => {
    for (const [selector, expected] of [
      ['app=ci', 'spec.selector: Invalid value: "app=ci": must be an object'],
      [[{ app: 'ci' }], 'spec.selector: Invalid value: [{"app":"ci"}]: must be an object'],
      [{ matchLabels: ['app'] }, 'spec.selector.matchLabels: Invalid value: ["app"]: must be an object'],
      [{ matchLabels: { app: 1 } }, 'spec.selector.matchLabels[app]: Invalid value: 1: must be a string'],
      [
        { matchExpressions: { key: 'a' } },
        'spec.selector.matchExpressions: Invalid value: {"key":"a"}: must be a list',
      ],
      [
        { matchExpressions: [{ key: 1, operator: 'Exists' }] },
        'spec.selector.matchExpressions[0].key: Invalid value: 1: must be a string',
      ],
      [
        { matchExpressions: [{ key: 'a', operator: ['In'] }] },
        'spec.selector.matchExpressions[0].operator: Invalid value: ["In"]: must be a string',
      ],
      [
        { matchExpressions: [{ key: 'a', operator: 'In', values: 'x' }] },
        'spec.selector.matchExpressions[0].values: Invalid value: "x": must be a list',
      ],
    ] as const) {
      assert.deepEqual(lines(validateLabelSelector(selector, 'spec.selector')), [expected]);
      assert.ok(
        lines(validateRunnerDeployment(deployment({ selector, template: tpl() }))).includes(expected),
      );
    }
  });
});

describe('selectors of RunnerReplicaSets', () => {
  const tpl = (labels: Record<string, string>) => ({ metadata: { labels }, spec: { organization: 'acme' } });

  test('a missing selector is accepted, as ARC does', () => {
    assert.deepEqual(validateRunnerReplicaSet(replicaSet({ template: tpl({}) })), []);
  });

  test('as the RunnerDeployment controller makes them: selector and template share the hash', () => {
    const labels = { 'runner-template-hash': 'abc123', 'runner-deployment-name': 'rd1' };
    const rs = replicaSet(
      {
        selector: { matchLabels: { 'runner-deployment-name': 'rd1', 'runner-template-hash': 'abc123' } },
        template: tpl(labels),
      },
      labels,
    );
    assert.deepEqual(validateRunnerReplicaSet(rs), []);
  });

  test('no hash label on the set: the controller adds one to the template, whatever its value', () => {
    const rs = replicaSet({
      selector: { matchLabels: { app: 'ci', 'runner-template-hash': 'anything' } },
      template: tpl({ app: 'ci' }),
    });
    assert.deepEqual(validateRunnerReplicaSet(rs), []);
  });

  test('with its own hash label the template is used as it is', () => {
    const rs = replicaSet(
      { selector: { matchLabels: { 'runner-template-hash': 'abc' } }, template: tpl({ app: 'ci' }) },
      { 'runner-template-hash': 'abc' },
    );
    assert.deepEqual(lines(validateRunnerReplicaSet(rs)), [
      'spec.selector: Invalid value: {"matchLabels":{"runner-template-hash":"abc"}}: selector does not match the labels of the runners (spec.template.metadata.labels): this RunnerReplicaSet would never find them and would keep creating more',
    ]);
  });

  test('a selector on labels the template lacks is rejected; runner-deployment-name is not added here', () => {
    for (const selector of [
      { matchLabels: { app: 'cd' } },
      { matchLabels: { 'runner-deployment-name': 'rd1' } },
    ]) {
      assert.equal(
        validateRunnerReplicaSet(replicaSet({ selector, template: tpl({ app: 'ci' }) })).length,
        1,
      );
    }
  });
});

describe('messages', () => {
  test('apimachinery field error formats', () => {
    assert.equal(formatFieldError({ type: 'Required value', field: 'spec' }), 'spec: Required value');
    assert.equal(
      formatFieldError({ type: 'Required value', field: 'spec.x', detail: 'needed' }),
      'spec.x: Required value: needed',
    );
    assert.equal(formatFieldError({ type: 'Forbidden', field: 'a', detail: 'no' }), 'a: Forbidden: no');
    assert.equal(
      formatFieldError({ type: 'Invalid value', field: 'a', value: 'x"y', detail: 'bad' }),
      'a: Invalid value: "x\\"y": bad',
    );
    assert.equal(
      formatFieldError({ type: 'Invalid value', field: 'a', value: false, detail: 'd' }),
      'a: Invalid value: false: d',
    );
    assert.equal(
      formatFieldError({ type: 'Invalid value', field: '', value: 1, detail: 'd' }),
      'Invalid value: 1: d',
    );
  });

  test('the Invalid status message: one error bare, several in brackets, duplicates once', () => {
    const e1: FieldError = {
      type: 'Invalid value',
      field: 'spec.repository',
      value: '',
      detail: MSG_NO_SCOPE,
    };
    const e2: FieldError = { type: 'Required value', field: 'spec.template' };
    assert.equal(invalidMessage('Runner', 'r1', []), 'Runner.actions.summerwind.dev "r1" is invalid');
    assert.equal(
      invalidMessage('Runner', 'r1', [e1]),
      'Runner.actions.summerwind.dev "r1" is invalid: spec.repository: Invalid value: "": spec needs enterprise, organization or repository',
    );
    assert.equal(
      invalidMessage('RunnerDeployment', 'rd1', [e1, e2, e1]),
      `RunnerDeployment.actions.summerwind.dev "rd1" is invalid: [spec.repository: Invalid value: "": ${MSG_NO_SCOPE}, spec.template: Required value]`,
    );
  });

  test('a huge value or error list is cut, never echoed whole', () => {
    const big = 'x'.repeat(100_000);
    const msg = invalidMessage('Runner', big, [
      { type: 'Invalid value', field: 'spec.repository', value: big, detail: 'd' },
    ]);
    assert.ok(msg.length < 600, `${msg.length} characters`);
    const many = Array.from(
      { length: 5000 },
      (_, i): FieldError => ({ type: 'Required value', field: `spec.f${i}` }),
    );
    const text = invalidMessage('Runner', 'r1', many);
    assert.match(text, /spec\.f9: Required value, and 4990 more errors\]$/);
    assert.ok(text.length < 1000);
  });

  test('a forged object with thousands of bad entries still gets an answer quickly', () => {
    const volumes = Array.from({ length: 50_000 }, () => ({ name: 'work' }));
    const started = Date.now();
    const errs = validateRunnerSpec({ ...KUBERNETES_MODE, volumes, volumeMounts: volumes }, 'spec');
    assert.equal(errs.length, 2, 'the first work volume is the one reported');
    assert.ok(Date.now() - started < 1000);
  });
});

describe('name and time rules', () => {
  test('qualified names (label and annotation keys)', () => {
    for (const ok of ['app', 'a', 'example.com/app', 'app.kubernetes.io/name', 'A_b-c.d', 'x'.repeat(63)]) {
      assert.ok(isQualifiedName(ok), ok);
    }
    for (const bad of [
      '',
      'a b',
      '-a',
      'a-',
      'x'.repeat(64),
      'a/b/c',
      '/a',
      'Example.com/a',
      'ex_ample.com/a',
      'a/',
    ]) {
      assert.ok(!isQualifiedName(bad), bad);
    }
  });

  test('label values', () => {
    for (const ok of ['', 'a', 'A-b_c.d', 'x'.repeat(63)]) assert.ok(isLabelValue(ok), ok);
    for (const bad of ['a b', '-a', 'a-', 'x'.repeat(64), 'a/b']) assert.ok(!isLabelValue(bad), bad);
  });

  test('RFC 3339 as Go parses it', () => {
    for (const ok of [
      '2024-05-01T12:00:00Z',
      '2024-05-01T12:00:00.5Z',
      '2024-05-01T12:00:00,123456789Z',
      '2024-05-01T12:00:00+02:00',
      '2024-05-01T12:00:00-23:59',
      '2024-02-29T00:00:00Z',
      '2000-02-29T00:00:00Z',
      '0000-01-01T00:00:00Z',
    ]) {
      assert.ok(isRfc3339(ok), ok);
    }
    for (const bad of [
      '',
      'now',
      '2024-05-01',
      '2024-05-01 12:00:00Z',
      '2024-05-01t12:00:00z',
      '2024-05-01T12:00Z',
      '2024-05-01T12:00:00',
      '2024-13-01T00:00:00Z',
      '2024-00-01T00:00:00Z',
      '2023-02-29T00:00:00Z',
      '1900-02-29T00:00:00Z',
      '2024-04-31T00:00:00Z',
      '2024-05-01T24:00:00Z',
      '2024-05-01T12:60:00Z',
      '2024-05-01T12:00:60Z',
      '2024-05-01T12:00:00+24:00',
      '2024-05-01T12:00:00+0200',
      '24-05-01T12:00:00Z',
    ]) {
      assert.ok(!isRfc3339(bad), bad);
    }
  });
});
