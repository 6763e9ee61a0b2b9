import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import type { Runner, RunnerSet, RunnerSpec } from '../api/index.ts';
import {
  computeHash,
  DEFAULT_RUNNER_POD_DEFAULTS,
  DOCKER_PRESTOP_COMMAND,
  dockerGroupGID,
  isZeroQuantity,
  mutatePod,
  newRunnerPod,
  newRunnerPodWithContainerMode,
  newRunnerSetPodTemplate,
  type RunnerPodDefaults,
  RunnerPodError,
  runnerPodTemplateHash,
  runnerRbacObjects,
} from './runner-pod-spec.ts';

const GITHUB = 'https://github.com/';
const defaults: RunnerPodDefaults = { ...DEFAULT_RUNNER_POD_DEFAULTS };

function runner(spec: RunnerSpec, extra: Partial<Runner> = {}): Runner {
  return {
    apiVersion: 'actions.summerwind.dev/v1alpha1',
    kind: 'Runner',
    metadata: {
      name: 'r1',
      namespace: 'ns',
      uid: 'uid-1',
      labels: { 'runner-template-hash': 'abc', 'runner-deployment-name': 'rd' },
      annotations: { 'sync-time': '2024-01-01T00:00:00Z' },
    },
    spec,
    status: { registration: { token: 'tok', expiresAt: '2099-01-01T00:00:00Z' } },
    ...extra,
  };
}

const container = (pod: V1Pod, name: string): V1Container => {
  const c = pod.spec!.containers.find((x) => x.name === name);
  assert.ok(c, `no container ${name}`);
  return c;
};
const envNames = (c: V1Container) => (c.env ?? []).map((e) => e.name);
const env = (c: V1Container, name: string) => c.env?.find((e) => e.name === name)?.value;
const mounts = (c: V1Container) => (c.volumeMounts ?? []).map((m) => `${m.name}:${m.mountPath}`);

const ARC_ENV = [
  'RUNNER_ORG',
  'RUNNER_REPO',
  'RUNNER_ENTERPRISE',
  'RUNNER_LABELS',
  'RUNNER_GROUP',
  'DOCKER_ENABLED',
  'DOCKERD_IN_RUNNER',
  'GITHUB_URL',
  'RUNNER_WORKDIR',
  'RUNNER_EPHEMERAL',
  'RUNNER_STATUS_UPDATE_HOOK',
  'GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT',
];

describe('hashes', () => {
  test('pod-template-hash depends only on the registration token, exactly as upstream', () => {
    assert.equal(runnerPodTemplateHash(''), '8857b86c7');
    assert.equal(runnerPodTemplateHash('fake-registration-token'), '6f6f7758bb');
  });

  test('computeHash is deterministic, key-order blind and sensitive to every field', () => {
    const a = { spec: { containers: [{ name: 'runner', image: 'x' }], b: 1, a: false } };
    const b = { spec: { a: false, b: 1, containers: [{ image: 'x', name: 'runner' }] } };
    assert.equal(computeHash(a), computeHash(b));
    assert.match(computeHash(a), /^[bcdfghjklmnpqrstvwxz2456789]+$/);
    assert.notEqual(computeHash(a), computeHash({ ...a, spec: { ...a.spec, a: true } }));
    assert.notEqual(computeHash({ x: [1, 2] }), computeHash({ x: [2, 1] }));
    assert.equal(computeHash({ x: 1, y: null }), computeHash({ x: 1 }));
  });
});

describe('newRunnerPod (Runner controller path)', () => {
  test('the default pod: runner plus docker sidecar', () => {
    const pod = newRunnerPod(runner({ repository: 'o/r' }), GITHUB, defaults);
    const expectedEnv = [
      { name: 'RUNNER_ORG', value: '' },
      { name: 'RUNNER_REPO', value: 'o/r' },
      { name: 'RUNNER_ENTERPRISE', value: '' },
      { name: 'RUNNER_LABELS', value: '' },
      { name: 'RUNNER_GROUP', value: '' },
      { name: 'DOCKER_ENABLED', value: 'true' },
      { name: 'DOCKERD_IN_RUNNER', value: 'false' },
      { name: 'GITHUB_URL', value: GITHUB },
      { name: 'RUNNER_WORKDIR', value: '/runner/_work' },
      { name: 'RUNNER_EPHEMERAL', value: 'true' },
      { name: 'RUNNER_STATUS_UPDATE_HOOK', value: 'false' },
      { name: 'GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT', value: 'actions-runner-controller/NA' },
      { name: 'DOCKER_HOST', value: 'unix:///run/docker.sock' },
      { name: 'RUNNER_NAME', value: 'r1' },
      { name: 'RUNNER_TOKEN', value: 'tok' },
    ];
    assert.deepEqual(pod, {
      metadata: {
        name: 'r1',
        namespace: 'ns',
        labels: {
          'runner-template-hash': 'abc',
          'runner-deployment-name': 'rd',
          'pod-template-hash': runnerPodTemplateHash('tok'),
          'actions-runner': '',
          'actions-runner-controller/inject-registration-token': 'true',
        },
        annotations: { 'sync-time': '2024-01-01T00:00:00Z' },
        ownerReferences: [
          {
            apiVersion: 'actions.summerwind.dev/v1alpha1',
            kind: 'Runner',
            name: 'r1',
            uid: 'uid-1',
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: {
        containers: [
          {
            name: 'runner',
            image: 'summerwind/actions-runner:latest',
            imagePullPolicy: 'Always',
            env: expectedEnv,
            securityContext: {},
            volumeMounts: [
              { name: 'runner', mountPath: '/runner' },
              { name: 'work', mountPath: '/runner/_work' },
              { name: 'var-run', mountPath: '/run' },
            ],
          },
          {
            name: 'docker',
            image: 'docker:dind',
            args: ['dockerd', '--host=unix:///run/docker.sock', '--group=$(DOCKER_GROUP_GID)'],
            env: [{ name: 'DOCKER_GROUP_GID', value: '1001' }],
            securityContext: { privileged: true },
            volumeMounts: [
              { name: 'runner', mountPath: '/runner' },
              { name: 'var-run', mountPath: '/run' },
              { name: 'work', mountPath: '/runner/_work' },
            ],
            lifecycle: { preStop: { exec: { command: [...DOCKER_PRESTOP_COMMAND] } } },
          },
        ],
        restartPolicy: 'Never',
        volumes: [
          { name: 'runner', emptyDir: {} },
          { name: 'work', emptyDir: {} },
          { name: 'var-run', emptyDir: { medium: 'Memory', sizeLimit: '1M' } },
        ],
      },
    });
    assert.equal(
      DOCKER_PRESTOP_COMMAND[2],
      `timeout "\${RUNNER_GRACEFUL_STOP_TIMEOUT:-15}" /bin/sh -c "echo 'Prestop hook started'; while [ -f /runner/.runner ]; do sleep 1; done; echo 'Waiting for dockerd to start'; while ! pgrep -x dockerd; do sleep 1; done; echo 'Prestop hook stopped'" >/proc/1/fd/1 2>&1`,
    );
  });

  test('scope, labels, group and ephemeral go into the ARC env in order', () => {
    const pod = newRunnerPod(
      runner({ organization: 'org', labels: ['a', 'b c'], group: 'g', ephemeral: false }),
      'https://ghe.example.com/',
      { ...defaults, useRunnerStatusUpdateHook: true, buildVersion: '1.2.3' },
    );
    const r = container(pod, 'runner');
    assert.deepEqual(envNames(r), [...ARC_ENV, 'DOCKER_HOST', 'RUNNER_NAME', 'RUNNER_TOKEN']);
    assert.equal(env(r, 'RUNNER_ORG'), 'org');
    assert.equal(env(r, 'RUNNER_LABELS'), 'a,b c');
    assert.equal(env(r, 'RUNNER_GROUP'), 'g');
    assert.equal(env(r, 'RUNNER_EPHEMERAL'), 'false');
    assert.equal(env(r, 'GITHUB_URL'), 'https://ghe.example.com/');
    assert.equal(env(r, 'RUNNER_STATUS_UPDATE_HOOK'), 'true');
    assert.equal(env(r, 'GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT'), 'actions-runner-controller/1.2.3');
    // The status hook needs the runner's own service account.
    assert.equal(pod.spec!.serviceAccountName, 'r1');
  });

  test('dockerdWithinRunnerContainer: one privileged container, only the /runner volume', () => {
    const pod = newRunnerPod(
      runner({
        repository: 'o/r',
        dockerdWithinRunnerContainer: true,
        image: 'summerwind/actions-runner-dind',
      }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(
      pod.spec!.containers.map((c) => c.name),
      ['runner'],
    );
    const r = container(pod, 'runner');
    assert.equal(r.image, 'summerwind/actions-runner-dind');
    assert.deepEqual(r.securityContext, { privileged: true });
    assert.deepEqual(envNames(r), [...ARC_ENV, 'RUNNER_NAME', 'RUNNER_TOKEN']);
    assert.equal(env(r, 'DOCKER_ENABLED'), 'true');
    assert.equal(env(r, 'DOCKERD_IN_RUNNER'), 'true');
    assert.deepEqual(mounts(r), ['runner:/runner']);
    assert.deepEqual(pod.spec!.volumes, [{ name: 'runner', emptyDir: {} }]);
  });

  test('dockerEnabled false: no sidecar, no privilege', () => {
    const pod = newRunnerPod(runner({ repository: 'o/r', dockerEnabled: false }), GITHUB, defaults);
    assert.deepEqual(
      pod.spec!.containers.map((c) => c.name),
      ['runner'],
    );
    const r = container(pod, 'runner');
    assert.deepEqual(r.securityContext, {});
    assert.equal(env(r, 'DOCKER_ENABLED'), 'false');
    assert.equal(env(r, 'DOCKERD_IN_RUNNER'), 'false');
    assert.ok(!envNames(r).includes('DOCKER_HOST'));
    assert.deepEqual(pod.spec!.volumes, [{ name: 'runner', emptyDir: {} }]);
  });

  test('docker group GID follows the runner image name unless set', () => {
    const gid = (image: string, d: RunnerPodDefaults = defaults) =>
      env(
        container(newRunnerPod(runner({ repository: 'o/r', image }), GITHUB, d), 'docker'),
        'DOCKER_GROUP_GID',
      );
    assert.equal(gid('summerwind/actions-runner:ubuntu-22.04'), '121');
    assert.equal(gid('summerwind/actions-runner:v2.300.0-ubuntu-24.04'), '121');
    assert.equal(gid('summerwind/actions-runner:ubuntu-20.04'), '1001');
    assert.equal(gid('summerwind/actions-runner:latest'), '1001');
    assert.equal(gid('my/runner', { ...defaults, dockerGID: '999' }), '999');
    assert.equal(dockerGroupGID('x:22.04', '5'), '121');
    // An explicit DOCKER_GROUP_GID (here through dockerEnv) is kept as is.
    const pod = newRunnerPod(
      runner({ repository: 'o/r', dockerEnv: [{ name: 'DOCKER_GROUP_GID', value: '42' }] }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(container(pod, 'docker').env, [{ name: 'DOCKER_GROUP_GID', value: '42' }]);
  });

  test('dockerMTU and registry mirror on the sidecar', () => {
    const pod = newRunnerPod(
      runner({ repository: 'o/r', dockerMTU: 1450, dockerRegistryMirror: 'https://mirror.gcr.io/' }),
      GITHUB,
      defaults,
    );
    const d = container(pod, 'docker');
    assert.deepEqual(d.args, [
      'dockerd',
      '--host=unix:///run/docker.sock',
      '--group=$(DOCKER_GROUP_GID)',
      '--mtu',
      '1450',
      '--registry-mirror=https://mirror.gcr.io/',
    ]);
    assert.deepEqual(envNames(d), ['DOCKER_GROUP_GID', 'DOCKERD_ROOTLESS_ROOTLESSKIT_MTU']);
    assert.equal(env(d, 'DOCKERD_ROOTLESS_ROOTLESSKIT_MTU'), '1450');
    const r = container(pod, 'runner');
    assert.ok(!envNames(r).includes('MTU'));
    assert.ok(!envNames(r).includes('DOCKER_REGISTRY_MIRROR'));
  });

  test('dockerMTU and registry mirror with dockerd in the runner; "" disables the default mirror', () => {
    const d: RunnerPodDefaults = { ...defaults, dockerRegistryMirror: 'https://default.mirror/' };
    const pod = newRunnerPod(
      runner({ repository: 'o/r', dockerdWithinRunnerContainer: true, dockerMTU: 1400 }),
      GITHUB,
      d,
    );
    const r = container(pod, 'runner');
    assert.deepEqual(envNames(r), [
      ...ARC_ENV,
      'MTU',
      'DOCKER_REGISTRY_MIRROR',
      'RUNNER_NAME',
      'RUNNER_TOKEN',
    ]);
    assert.equal(env(r, 'MTU'), '1400');
    assert.equal(env(r, 'DOCKER_REGISTRY_MIRROR'), 'https://default.mirror/');
    const off = newRunnerPod(
      runner({ repository: 'o/r', dockerdWithinRunnerContainer: true, dockerRegistryMirror: '' }),
      GITHUB,
      d,
    );
    assert.ok(!envNames(container(off, 'runner')).includes('DOCKER_REGISTRY_MIRROR'));
    const sidecar = newRunnerPod(runner({ repository: 'o/r' }), GITHUB, d);
    assert.equal(container(sidecar, 'docker').args!.at(-1), '--registry-mirror=https://default.mirror/');
  });

  test('SELinux options unprivilege the sidecar and are passed to it', () => {
    const seLinuxOptions = { level: 's0', role: 'system_r', type: 'super_t', user: 'system_u' };
    const pod = newRunnerPod(
      runner({ repository: 'o/r', securityContext: { seLinuxOptions } }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(pod.spec!.securityContext, { seLinuxOptions });
    assert.deepEqual(container(pod, 'docker').securityContext, { privileged: false, seLinuxOptions });
    assert.deepEqual(container(pod, 'runner').securityContext, {});
    const dind = newRunnerPod(
      runner({ repository: 'o/r', dockerdWithinRunnerContainer: true, securityContext: { seLinuxOptions } }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(container(dind, 'runner').securityContext, {});
  });

  test('runner volume: size limit, medium, and disabling it', () => {
    const sized = newRunnerPod(
      runner({
        repository: 'o/r',
        volumeSizeLimit: '4Gi',
        volumeStorageMedium: 'Memory',
        dockerVarRunVolumeSizeLimit: '2M',
      }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(sized.spec!.volumes, [
      { name: 'runner', emptyDir: { medium: 'Memory', sizeLimit: '4Gi' } },
      { name: 'work', emptyDir: {} },
      { name: 'var-run', emptyDir: { medium: 'Memory', sizeLimit: '2M' } },
    ]);
    const none = newRunnerPod(
      runner({ repository: 'o/r', dockerdWithinRunnerContainer: true, volumeSizeLimit: 0 }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(none.spec!.volumes, undefined);
    assert.deepEqual(container(none, 'runner').volumeMounts, undefined);
    assert.throws(
      () => newRunnerPod(runner({ repository: 'o/r', volumeSizeLimit: '0Gi' }), GITHUB, defaults),
      (err: Error) =>
        err instanceof RunnerPodError &&
        err.message ===
          "runner volume can't be disabled because it is required to share the working directory between the runner and the dockerd containers",
    );
    assert.ok(isZeroQuantity('0') && isZeroQuantity('0.0Mi') && isZeroQuantity(0) && !isZeroQuantity('1m'));
  });

  test('workDir moves the work mounts', () => {
    const pod = newRunnerPod(runner({ repository: 'o/r', workDir: '/home/runner/work' }), GITHUB, defaults);
    assert.equal(env(container(pod, 'runner'), 'RUNNER_WORKDIR'), '/home/runner/work');
    assert.deepEqual(mounts(container(pod, 'runner')), [
      'runner:/runner',
      'work:/home/runner/work',
      'var-run:/run',
    ]);
    assert.deepEqual(mounts(container(pod, 'docker')), [
      'runner:/runner',
      'var-run:/run',
      'work:/home/runner/work',
    ]);
  });

  test('per-resource GitHub credentials are named in an annotation', () => {
    const pod = newRunnerPod(
      runner({ repository: 'o/r', githubAPICredentialsFrom: { secretRef: { name: 'org1-app' } } }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(pod.metadata!.annotations, {
      'sync-time': '2024-01-01T00:00:00Z',
      'actions-runner/github-api-creds-secret': 'org1-app',
    });
  });

  test('default image pull secrets apply only when the spec has none', () => {
    const d = { ...defaults, runnerImagePullSecrets: ['a', 'b'] };
    assert.deepEqual(newRunnerPod(runner({ repository: 'o/r' }), GITHUB, d).spec!.imagePullSecrets, [
      { name: 'a' },
      { name: 'b' },
    ]);
    const own = newRunnerPod(runner({ repository: 'o/r', imagePullSecrets: [{ name: 'mine' }] }), GITHUB, d);
    assert.deepEqual(own.spec!.imagePullSecrets, [{ name: 'mine' }]);
  });

  test('spec fields fill the runner and docker containers, custom containers keep their own', () => {
    const pod = newRunnerPod(
      runner({
        repository: 'o/r',
        imagePullPolicy: 'IfNotPresent',
        env: [{ name: 'A', value: '1' }],
        envFrom: [{ configMapRef: { name: 'cm' } }],
        resources: { requests: { cpu: '1' }, limits: { memory: '1Gi' } },
        dockerEnv: [{ name: 'HTTP_PROXY', value: 'http://p' }],
        dockerVolumeMounts: [{ name: 'docker-extra', mountPath: '/var/lib/docker' }],
        dockerdContainerResources: { limits: { cpu: '2' } },
      }),
      GITHUB,
      defaults,
    );
    const r = container(pod, 'runner');
    assert.equal(r.imagePullPolicy, 'IfNotPresent');
    assert.deepEqual(envNames(r), ['A', ...ARC_ENV, 'DOCKER_HOST', 'RUNNER_NAME', 'RUNNER_TOKEN']);
    assert.deepEqual(r.envFrom, [{ configMapRef: { name: 'cm' } }]);
    assert.deepEqual(r.resources, { requests: { cpu: '1' }, limits: { memory: '1Gi' } });
    const d = container(pod, 'docker');
    assert.deepEqual(envNames(d), ['HTTP_PROXY', 'DOCKER_GROUP_GID']);
    assert.deepEqual(mounts(d), [
      'docker-extra:/var/lib/docker',
      'runner:/runner',
      'var-run:/run',
      'work:/runner/_work',
    ]);
    assert.deepEqual(d.resources, { limits: { cpu: '2' } });

    const custom = newRunnerPod(
      runner({
        repository: 'o/r',
        env: [{ name: 'FROM_SPEC', value: 'x' }],
        containers: [
          { name: 'docker', image: 'docker:24-dind', args: ['--storage-driver=overlay2'] },
          { name: 'runner', image: 'my/runner:ubuntu-22.04', env: [{ name: 'OWN', value: 'y' }] },
        ],
      }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(
      custom.spec!.containers.map((c) => c.name),
      ['docker', 'runner'],
    );
    assert.deepEqual(envNames(container(custom, 'runner')).slice(0, 2), ['OWN', 'RUNNER_ORG']);
    const dd = container(custom, 'docker');
    assert.equal(dd.image, 'docker:24-dind');
    assert.deepEqual(dd.args, [
      'dockerd',
      '--host=unix:///run/docker.sock',
      '--storage-driver=overlay2',
      '--group=$(DOCKER_GROUP_GID)',
    ]);
    assert.equal(env(dd, 'DOCKER_GROUP_GID'), '121');
  });

  test('a template docker container is left alone when docker is off or in the runner', () => {
    const pod = newRunnerPod(
      runner({
        repository: 'o/r',
        dockerEnabled: false,
        containers: [{ name: 'runner' }, { name: 'docker', image: 'x' }],
      }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(container(pod, 'docker'), { name: 'docker', image: 'x' });
  });

  test('user volumes and mounts are appended; a "work" volume replaces the default one', () => {
    const pod = newRunnerPod(
      runner({
        repository: 'o/r',
        volumeMounts: [
          { name: 'work', mountPath: '/runner/_work', subPathExpr: '$(POD_NAME)-work' },
          { name: 'tmp', mountPath: '/tmp' },
        ],
        volumes: [
          { name: 'work', hostPath: { path: '/mnt/ssd' } },
          { name: 'tmp', emptyDir: { medium: 'Memory' } },
        ],
      }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(
      pod.spec!.volumes!.map((v) => v.name),
      ['runner', 'var-run', 'work', 'tmp'],
    );
    assert.deepEqual(pod.spec!.volumes![2], { name: 'work', hostPath: { path: '/mnt/ssd' } });
    const r = container(pod, 'runner');
    assert.deepEqual(mounts(r), ['runner:/runner', 'var-run:/run', 'work:/runner/_work', 'tmp:/tmp']);
    assert.equal(r.volumeMounts![2]!.subPathExpr, '$(POD_NAME)-work');
  });

  test('pod-level overlays from the spec', () => {
    const pod = newRunnerPod(
      runner({
        organization: 'o',
        nodeSelector: { 'kubernetes.io/os': 'linux' },
        tolerations: [{ key: 'k', operator: 'Exists' }],
        priorityClassName: 'high',
        runtimeClassName: 'runc',
        terminationGracePeriodSeconds: 110,
        serviceAccountName: 'sa',
        automountServiceAccountToken: false,
        enableServiceLinks: false,
        dnsPolicy: 'None',
        dnsConfig: { nameservers: ['10.0.0.53'] },
        hostAliases: [{ ip: '10.0.0.1', hostnames: ['h'] }],
        initContainers: [{ name: 'init', image: 'busybox' }],
        sidecarContainers: [{ name: 'mysql', image: 'mysql:5.7' }],
        affinity: { nodeAffinity: {} },
        topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'h', whenUnsatisfiable: 'ScheduleAnyway' }],
      }),
      GITHUB,
      defaults,
    );
    const s = pod.spec!;
    assert.deepEqual(
      s.containers.map((c) => c.name),
      ['runner', 'docker', 'mysql'],
    );
    assert.deepEqual(s.nodeSelector, { 'kubernetes.io/os': 'linux' });
    assert.deepEqual(s.tolerations, [{ key: 'k', operator: 'Exists' }]);
    assert.equal(s.priorityClassName, 'high');
    assert.equal(s.runtimeClassName, 'runc');
    assert.equal(s.terminationGracePeriodSeconds, 110);
    assert.equal(s.serviceAccountName, 'sa');
    assert.equal(s.automountServiceAccountToken, false);
    assert.equal(s.enableServiceLinks, false);
    assert.equal(s.dnsPolicy, 'None');
    assert.deepEqual(s.dnsConfig, { nameservers: ['10.0.0.53'] });
    assert.deepEqual(s.hostAliases, [{ ip: '10.0.0.1', hostnames: ['h'] }]);
    assert.deepEqual(s.initContainers, [{ name: 'init', image: 'busybox' }]);
    assert.deepEqual(s.affinity, { nodeAffinity: {} });
    assert.equal(s.topologySpreadConstraints!.length, 1);
    assert.equal(s.restartPolicy, 'Never');
  });

  test('RUNNER_NAME and RUNNER_TOKEN are filled only when empty', () => {
    const pod = newRunnerPod(
      runner({ repository: 'o/r', env: [{ name: 'RUNNER_NAME', value: 'fixed' }] }),
      GITHUB,
      defaults,
    );
    const r = container(pod, 'runner');
    assert.equal(env(r, 'RUNNER_NAME'), 'fixed');
    assert.equal(envNames(r).at(-1), 'RUNNER_TOKEN');
    assert.equal(env(r, 'RUNNER_TOKEN'), 'tok');
    const noToken = newRunnerPod(runner({ repository: 'o/r' }, { status: {} }), GITHUB, defaults);
    assert.equal(env(container(noToken, 'runner'), 'RUNNER_TOKEN'), '');
    assert.equal(noToken.metadata!.labels!['pod-template-hash'], '8857b86c7');
    const again = mutatePod(pod, 'other');
    assert.equal(env(container(again, 'runner'), 'RUNNER_TOKEN'), 'tok');
  });
});

describe('container mode kubernetes', () => {
  const wvct = (accessModes: string[]) => ({
    storageClassName: 'standard',
    accessModes,
    resources: { requests: { storage: '10Gi' } },
  });

  test('work on an ephemeral PVC, hook env, no docker, own service account', () => {
    const pod = newRunnerPod(
      runner({
        organization: 'o',
        containerMode: 'kubernetes',
        workVolumeClaimTemplate: wvct(['ReadWriteOnce']),
      }),
      GITHUB,
      defaults,
    );
    assert.deepEqual(
      pod.spec!.containers.map((c) => c.name),
      ['runner'],
    );
    assert.deepEqual(pod.spec!.volumes, [
      {
        name: 'work',
        ephemeral: {
          volumeClaimTemplate: {
            spec: {
              accessModes: ['ReadWriteOnce'],
              storageClassName: 'standard',
              resources: { requests: { storage: '10Gi' } },
            },
          },
        },
      },
      { name: 'runner', emptyDir: {} },
    ]);
    const r = container(pod, 'runner');
    assert.deepEqual(mounts(r), ['work:/runner/_work', 'runner:/runner']);
    assert.deepEqual(r.securityContext, {});
    assert.deepEqual(envNames(r), [
      ...ARC_ENV,
      'ACTIONS_RUNNER_CONTAINER_HOOKS',
      'ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER',
      'ACTIONS_RUNNER_POD_NAME',
      'ACTIONS_RUNNER_JOB_NAMESPACE',
      'ACTIONS_RUNNER_REQUIRE_SAME_NODE',
      'RUNNER_NAME',
      'RUNNER_TOKEN',
    ]);
    assert.equal(env(r, 'DOCKER_ENABLED'), 'false');
    assert.equal(env(r, 'ACTIONS_RUNNER_CONTAINER_HOOKS'), '/runner/k8s/index.js');
    assert.equal(env(r, 'ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER'), 'true');
    assert.deepEqual(r.env!.find((e) => e.name === 'ACTIONS_RUNNER_POD_NAME')!.valueFrom, {
      fieldRef: { fieldPath: 'metadata.name' },
    });
    assert.deepEqual(r.env!.find((e) => e.name === 'ACTIONS_RUNNER_JOB_NAMESPACE')!.valueFrom, {
      fieldRef: { fieldPath: 'metadata.namespace' },
    });
    assert.equal(env(r, 'ACTIONS_RUNNER_REQUIRE_SAME_NODE'), 'true');
    assert.equal(pod.spec!.serviceAccountName, 'r1');

    const rwx = newRunnerPod(
      runner({
        organization: 'o',
        containerMode: 'kubernetes',
        workVolumeClaimTemplate: wvct(['ReadWriteMany']),
      }),
      GITHUB,
      defaults,
    );
    assert.equal(env(container(rwx, 'runner'), 'ACTIONS_RUNNER_REQUIRE_SAME_NODE'), 'false');
  });

  test('ServiceAccount, Role and RoleBinding for the runner', () => {
    const r = runner({
      organization: 'o',
      containerMode: 'kubernetes',
      workVolumeClaimTemplate: wvct(['ReadWriteOnce']),
    });
    const objs = runnerRbacObjects(r, { useRunnerStatusUpdateHook: true })!;
    const owner = [
      {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'Runner',
        name: 'r1',
        uid: 'uid-1',
        controller: true,
        blockOwnerDeletion: true,
      },
    ];
    assert.deepEqual(objs.serviceAccount, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'r1', namespace: 'ns', ownerReferences: owner },
    });
    assert.deepEqual(objs.role.rules, [
      {
        apiGroups: ['actions.summerwind.dev'],
        resources: ['runners/status'],
        verbs: ['get', 'update', 'patch'],
        resourceNames: ['r1'],
      },
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'create', 'delete'] },
      { apiGroups: [''], resources: ['pods/exec'], verbs: ['get', 'create'] },
      { apiGroups: [''], resources: ['pods/log'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get', 'list', 'create', 'delete'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'create', 'delete'] },
    ]);
    assert.deepEqual(objs.roleBinding.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'r1',
    });
    assert.deepEqual(objs.roleBinding.subjects, [{ kind: 'ServiceAccount', name: 'r1', namespace: 'ns' }]);
    assert.equal(runnerRbacObjects(r, { useRunnerStatusUpdateHook: false })!.role.rules!.length, 5);
    assert.equal(
      runnerRbacObjects(runner({ organization: 'o' }), { useRunnerStatusUpdateHook: false }),
      undefined,
    );
    assert.equal(
      runnerRbacObjects(runner({ ...r.spec, serviceAccountName: 'mine' }), {
        useRunnerStatusUpdateHook: true,
      }),
      undefined,
    );
  });

  test('a template docker container is dropped and the runner keeps its place', () => {
    const template: V1Pod = {
      metadata: {},
      spec: {
        containers: [{ name: 'docker' }, { name: 'sidecar', image: 's' }, { name: 'runner', image: 'r' }],
        volumes: [workVolumeFor(['ReadWriteOnce'])],
      },
    };
    const pod = newRunnerPodWithContainerMode(
      'kubernetes',
      template,
      { organization: 'o' },
      GITHUB,
      defaults,
    );
    assert.deepEqual(
      pod.spec!.containers.map((c) => `${c.name}:${c.image}`),
      ['sidecar:s', 'runner:r'],
    );
    // Upstream would decrement the runner index without a docker container and duplicate the runner.
    const noDocker = newRunnerPodWithContainerMode(
      'kubernetes',
      {
        metadata: {},
        spec: {
          containers: [{ name: 'sidecar' }, { name: 'runner' }],
          volumes: [workVolumeFor(['ReadWriteMany'])],
        },
      },
      { organization: 'o' },
      GITHUB,
      defaults,
    );
    assert.deepEqual(
      noDocker.spec!.containers.map((c) => c.name),
      ['sidecar', 'runner'],
    );
    assert.equal(env(noDocker.spec!.containers[1]!, 'ACTIONS_RUNNER_REQUIRE_SAME_NODE'), 'false');
  });

  test('ARC errors for work volumes that conflict with the claim template', () => {
    const base = {
      organization: 'o',
      containerMode: 'kubernetes',
      workVolumeClaimTemplate: wvct(['ReadWriteOnce']),
    };
    const fails = (spec: RunnerSpec, message: string) =>
      assert.throws(
        () => newRunnerPod(runner(spec), GITHUB, defaults),
        (err: Error) => err instanceof RunnerPodError && err.message === message,
      );
    fails(
      { organization: 'o', containerMode: 'kubernetes' },
      'work volume claim template must be specified in container mode kubernetes',
    );
    fails(
      { ...base, volumes: [{ name: 'work', emptyDir: {} }] },
      'volume "work" should be specified by workVolumeClaimTemplate in container mode kubernetes',
    );
    fails(
      { ...base, volumeMounts: [{ name: 'work', mountPath: '/w' }] },
      'volume mount "work" should be specified by workVolumeClaimTemplate in container mode kubernetes',
    );
    fails(
      { ...base, containers: [{ name: 'runner', volumeMounts: [{ name: 'work', mountPath: '/w' }] }] },
      'volume mount "work" should not be present on the runner container in container mode kubernetes',
    );
    fails(
      { ...base, containers: [{ name: 'main' }] },
      'runner container is not present when applying work volume claim template',
    );
    fails(
      { ...base, workVolumeClaimTemplate: wvct(['ReadOnlyMany']) },
      'actions-runner-controller supports ReadWriteOnce and ReadWriteMany modes only',
    );
  });
});

describe('newRunnerPodWithContainerMode is pure', () => {
  test('the template is not modified', () => {
    const template: V1Pod = {
      metadata: { labels: { a: 'b' } },
      spec: { containers: [{ name: 'runner', env: [] }] },
    };
    const copy = structuredClone(template);
    newRunnerPodWithContainerMode(undefined, template, { repository: 'o/r', dockerMTU: 1 }, GITHUB, defaults);
    assert.deepEqual(template, copy);
  });
});

describe('newRunnerSetPodTemplate', () => {
  const set = (spec: Partial<RunnerSet['spec']>): RunnerSet => ({
    metadata: { name: 'rs', namespace: 'ns' },
    spec: {
      organization: 'o',
      selector: { matchLabels: { app: 'rs' } },
      template: {
        metadata: { labels: { app: 'rs' } },
        spec: { containers: [{ name: 'runner', image: 'img' }] },
      },
      ...spec,
    },
  });

  test('a runner pod template with restartPolicy Always and the template hash', () => {
    const { template, hash } = newRunnerSetPodTemplate(set({}), GITHUB, defaults);
    assert.equal(template.spec!.restartPolicy, 'Always');
    assert.deepEqual(template.metadata!.labels, {
      app: 'rs',
      'runnerset-name': 'rs',
      'actions-runner': '',
      'actions-runner-controller/inject-registration-token': 'true',
      'runner-template-hash': hash,
    });
    assert.deepEqual(
      template.spec!.containers.map((c) => c.name),
      ['runner', 'docker'],
    );
    // The webhook injects these for RunnerSet pods.
    assert.ok(!envNames(template.spec!.containers[0]!).includes('RUNNER_TOKEN'));
    assert.equal(hash, newRunnerSetPodTemplate(set({}), GITHUB, defaults).hash);
    assert.notEqual(hash, newRunnerSetPodTemplate(set({ labels: ['x'] }), GITHUB, defaults).hash);
  });

  test('container mode kubernetes uses the RunnerSet service account', () => {
    const { template } = newRunnerSetPodTemplate(
      set({
        containerMode: 'kubernetes',
        serviceAccountName: 'rs-sa',
        workVolumeClaimTemplate: { storageClassName: 's', accessModes: ['ReadWriteOnce'], resources: {} },
        template: { metadata: {}, spec: { containers: [] } },
      }),
      GITHUB,
      defaults,
    );
    assert.equal(template.spec!.serviceAccountName, 'rs-sa');
    assert.deepEqual(
      template.spec!.containers.map((c) => c.name),
      ['runner'],
    );
    assert.deepEqual(mounts(template.spec!.containers[0]!), ['work:/runner/_work', 'runner:/runner']);
  });
});

function workVolumeFor(accessModes: string[]) {
  return { name: 'work', ephemeral: { volumeClaimTemplate: { spec: { accessModes } } } };
}
