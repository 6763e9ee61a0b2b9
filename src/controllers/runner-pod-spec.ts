/**
 * Runner pod construction (ARC legacy spec §5) as pure functions: plain data in, plain Kubernetes
 * objects out. Used by the Runner controller (`newRunnerPod`, `runnerRbacObjects`) and the RunnerSet
 * controller (`newRunnerSetPodTemplate`), and by the token injector (`mutatePod`).
 */
import type {
  V1Container,
  V1EnvVar,
  V1OwnerReference,
  V1Pod,
  V1PodTemplateSpec,
  V1PolicyRule,
  V1Role,
  V1RoleBinding,
  V1ServiceAccount,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import type { Runner, RunnerConfig, RunnerSet, WorkVolumeClaimTemplate } from '../api/index.ts';
import {
  ANNOTATION_CREDS_SECRET,
  ENV_CONTAINER_HOOKS,
  ENV_ENTERPRISE,
  ENV_EPHEMERAL,
  ENV_LABELS,
  ENV_ORG,
  ENV_REPO,
  ENV_RUNNER_NAME,
  ENV_RUNNER_TOKEN,
  LABEL_INJECT_REGISTRATION_TOKEN,
  LABEL_RUNNER,
  LABEL_RUNNER_TEMPLATE_HASH,
  LABEL_RUNNERSET_NAME,
  RUNNER_CONTAINER,
} from './constants.ts';

// --- constants ---------------------------------------------------------------------------------

export const LABEL_POD_TEMPLATE_HASH = 'pod-template-hash';
export const LABEL_POD_MUTATION = LABEL_INJECT_REGISTRATION_TOKEN;
export const LABEL_VALUE_POD_MUTATION = 'true';

export const ENV_GROUP = 'RUNNER_GROUP';

export const CONTAINER_MODE_KUBERNETES = 'kubernetes';
export const DOCKER_CONTAINER = 'docker';
export const DEFAULT_WORK_DIR = '/runner/_work';
export const DEFAULT_RUNNER_HOOK_PATH = '/runner/k8s/index.js';
export const DOCKER_SOCKET = 'unix:///run/docker.sock';
export const DEFAULT_DOCKER_VAR_RUN_SIZE_LIMIT = '1M';

/** The docker sidecar's preStop hook: wait for the runner to finish, and for dockerd to be up. */
export const DOCKER_PRESTOP_COMMAND: readonly string[] = [
  '/bin/sh',
  '-c',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a template
  "timeout \"${RUNNER_GRACEFUL_STOP_TIMEOUT:-15}\" /bin/sh -c \"echo 'Prestop hook started'; while [ -f /runner/.runner ]; do sleep 1; done; echo 'Waiting for dockerd to start'; while ! pgrep -x dockerd; do sleep 1; done; echo 'Prestop hook stopped'\" >/proc/1/fd/1 2>&1",
];

/** Controller-wide pod defaults (the manager's flags). */
export interface RunnerPodDefaults {
  /** --runner-image */
  runnerImage: string;
  /** --runner-image-pull-secret (repeatable); used when the pod has no imagePullSecrets. */
  runnerImagePullSecrets: string[];
  /** --docker-image */
  dockerImage: string;
  /** --docker-registry-mirror */
  dockerRegistryMirror: string;
  /** --docker-gid: DOCKER_GROUP_GID unless the runner image name implies another one. */
  dockerGID: string;
  /** --runner-status-update-hook */
  useRunnerStatusUpdateHook: boolean;
  /** Version in GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT (`actions-runner-controller/<version>`). */
  buildVersion: string;
}

export const DEFAULT_RUNNER_POD_DEFAULTS: Readonly<RunnerPodDefaults> = Object.freeze({
  runnerImage: 'summerwind/actions-runner:latest',
  runnerImagePullSecrets: [],
  dockerImage: 'docker:dind',
  dockerRegistryMirror: '',
  dockerGID: '1001',
  useRunnerStatusUpdateHook: false,
  buildVersion: 'NA',
});

/** A runner pod that cannot be built from the given spec; the message is ARC's. */
export class RunnerPodError extends Error {
  override name = 'RunnerPodError';
}

// --- hashing (§3.11) -----------------------------------------------------------------------------

const SAFE_ALPHANUMS = 'bcdfghjklmnpqrstvwxz2456789';

/** k8s `rand.SafeEncodeString`: maps every character onto a vowel-free alphabet. */
export function safeEncodeString(s: string): string {
  let out = '';
  for (const ch of s) out += SAFE_ALPHANUMS[ch.codePointAt(0)! % SAFE_ALPHANUMS.length];
  return out;
}

/** 32-bit FNV-1a over the UTF-8 bytes of `s`. */
export function fnv1a32(s: string): number {
  let h = 2166136261;
  for (const b of Buffer.from(s, 'utf8')) {
    h ^= b;
    h = Math.imul(h, 16777619) >>> 0;
  }
  return h >>> 0;
}

/**
 * `pod-template-hash` of a Runner's pod. Upstream hashes several objects but resets the hasher for
 * each, so only the registration token counts (kept exactly: "" gives `8857b86c7`).
 */
export function runnerPodTemplateHash(registrationToken: string): string {
  return safeEncodeString(String(fnv1a32(`(string)${registrationToken}`)));
}

/**
 * Template hash for RunnerDeployment/RunnerReplicaSet and RunnerSet templates: deterministic, equal for
 * equal inputs, different when any field differs. FNV-1a over canonical JSON (sorted keys, nulls dropped)
 * instead of upstream's go-spew dump, which cannot be reproduced; only equality is observable.
 */
export function computeHash(value: unknown): string {
  return safeEncodeString(String(fnv1a32(canonicalJSON(value) ?? '')));
}

function canonicalJSON(value: unknown): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJSON(v) ?? 'null').join(',')}]`;
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (typeof value === 'object') {
    const parts: string[] = [];
    for (const key of Object.keys(value).sort()) {
      const v = canonicalJSON((value as Record<string, unknown>)[key]);
      if (v !== undefined) parts.push(`${JSON.stringify(key)}:${v}`);
    }
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value);
}

// --- helpers -------------------------------------------------------------------------------------

const clone = <T>(v: T): T => structuredClone(v);

function findIndex<T extends { name: string }>(items: T[] | undefined, name: string): number {
  return (items ?? []).findIndex((i) => i.name === name);
}

/** resource.Quantity.IsZero for the int-or-string forms a CR can hold. */
export function isZeroQuantity(q: number | string | undefined | null): boolean {
  if (q === undefined || q === null) return false;
  if (typeof q === 'number') return q === 0;
  const m = /^[+-]?(\d+(?:\.\d*)?|\.\d+)/.exec(q.trim());
  return m !== null && Number(m[1]) === 0;
}

/** DOCKER_GROUP_GID default for a runner image: Ubuntu 22.04/24.04 images use 121, 20.04 uses 1001. */
export function dockerGroupGID(runnerImage: string, defaultGID: string): string {
  if (runnerImage.includes('22.04') || runnerImage.includes('24.04')) return '121';
  if (runnerImage.includes('20.04')) return '1001';
  return defaultGID;
}

// --- container mode kubernetes (§5.4) ------------------------------------------------------------

/** The `work` volume: a generic ephemeral volume from the claim template. */
export function workVolume(tpl: WorkVolumeClaimTemplate): V1Volume {
  return {
    name: 'work',
    ephemeral: {
      volumeClaimTemplate: {
        spec: {
          accessModes: [...tpl.accessModes],
          storageClassName: tpl.storageClassName,
          resources: clone(tpl.resources),
        },
      },
    },
  };
}

export function workVolumeMount(mountPath: string): V1VolumeMount {
  return { name: 'work', mountPath };
}

/** Adds the work volume from the claim template and mounts it on the runner container (in place). */
export function applyWorkVolumeClaimTemplateToPod(
  pod: V1Pod,
  tpl: WorkVolumeClaimTemplate | undefined,
  workDir: string,
): void {
  if (!tpl)
    throw new RunnerPodError('work volume claim template must be specified in container mode kubernetes');
  pod.spec ??= { containers: [] };
  const spec = pod.spec;
  if (findIndex(spec.volumes, 'work') >= 0) {
    throw new RunnerPodError(
      'work volume should not be specified in container mode kubernetes. workVolumeClaimTemplate field should be used instead',
    );
  }
  const runner = spec.containers.find((c) => c.name === RUNNER_CONTAINER);
  if (!runner)
    throw new RunnerPodError('runner container is not present when applying work volume claim template');
  if (findIndex(runner.volumeMounts, 'work') >= 0) {
    throw new RunnerPodError(
      'volume mount "work" should not be present on the runner container in container mode kubernetes',
    );
  }
  spec.volumes = [...(spec.volumes ?? []), workVolume(tpl)];
  runner.volumeMounts = [...(runner.volumeMounts ?? []), workVolumeMount(workDir)];
}

/**
 * Whether job pods must run on the runner's node: true for a ReadWriteOnce work volume, false when
 * every access mode is ReadWriteMany.
 */
export function isRequireSameNode(pod: V1Pod): boolean {
  const work = pod.spec?.volumes?.find((v) => v.name === 'work');
  if (!work)
    throw new RunnerPodError('internal error: work volume mount must exist in containerMode: kubernetes');
  const claim = work.ephemeral?.volumeClaimTemplate;
  if (!claim) {
    throw new RunnerPodError(
      'containerMode: kubernetes should have pod.Spec.Volumes[].Ephemeral.VolumeClaimTemplate set',
    );
  }
  for (const mode of claim.spec.accessModes ?? []) {
    if (mode === 'ReadWriteOnce') return true;
    if (mode !== 'ReadWriteMany') {
      throw new RunnerPodError(
        'actions-runner-controller supports ReadWriteOnce and ReadWriteMany modes only',
      );
    }
  }
  return false;
}

/** The container-hook environment of the runner in container mode kubernetes. */
export function runnerHookEnvs(pod: V1Pod, podTemplateName?: string): V1EnvVar[] {
  const sameNode = isRequireSameNode(pod);
  const env: V1EnvVar[] = [
    { name: ENV_CONTAINER_HOOKS, value: DEFAULT_RUNNER_HOOK_PATH },
    { name: 'ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER', value: 'true' },
    { name: 'ACTIONS_RUNNER_POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'ACTIONS_RUNNER_JOB_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'ACTIONS_RUNNER_REQUIRE_SAME_NODE', value: String(sameNode) },
  ];
  if (podTemplateName) {
    env.push({ name: 'ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE', value: `/templates/${podTemplateName}.yaml` });
  }
  return env;
}

// --- §5.1 ----------------------------------------------------------------------------------------

/**
 * Turns a pod template into a runner pod: the `runner` container with ARC's environment, the docker
 * sidecar (or dockerd in the runner, or no docker), the shared volumes, labels and restartPolicy Never.
 * Throws RunnerPodError for impossible combinations. The template is not modified.
 */
export function newRunnerPodWithContainerMode(
  containerMode: string | undefined,
  template: V1Pod,
  cfg: RunnerConfig,
  githubBaseURL: string,
  defaults: RunnerPodDefaults,
): V1Pod {
  const kubernetesMode = containerMode === CONTAINER_MODE_KUBERNETES;
  let dind = cfg.dockerdWithinRunnerContainer === true;
  let dockerEnabled = cfg.dockerEnabled !== false;
  const ephemeral = cfg.ephemeral !== false;
  let dindPrivileged = dind;
  let privileged = true;
  if (kubernetesMode) {
    dind = false;
    dockerEnabled = false;
    dindPrivileged = false;
  }

  const pod = clone(template);
  pod.metadata ??= {};
  const metadata = pod.metadata;
  metadata.labels = {
    ...metadata.labels,
    [LABEL_RUNNER]: '',
    [LABEL_POD_MUTATION]: LABEL_VALUE_POD_MUTATION,
  };
  if (cfg.githubAPICredentialsFrom) {
    metadata.annotations = {
      ...metadata.annotations,
      [ANNOTATION_CREDS_SECRET]: cfg.githubAPICredentialsFrom.secretRef?.name ?? '',
    };
  }
  pod.spec ??= { containers: [] };
  const spec = pod.spec;
  spec.containers ??= [];

  const workDir = cfg.workDir || DEFAULT_WORK_DIR;
  const mirror =
    cfg.dockerRegistryMirror !== undefined && cfg.dockerRegistryMirror !== null
      ? cfg.dockerRegistryMirror
      : defaults.dockerRegistryMirror;
  const varRunSizeLimit = cfg.dockerVarRunVolumeSizeLimit ?? DEFAULT_DOCKER_VAR_RUN_SIZE_LIMIT;

  const arcEnv: V1EnvVar[] = [
    { name: ENV_ORG, value: cfg.organization ?? '' },
    { name: ENV_REPO, value: cfg.repository ?? '' },
    { name: ENV_ENTERPRISE, value: cfg.enterprise ?? '' },
    { name: ENV_LABELS, value: (cfg.labels ?? []).join(',') },
    { name: ENV_GROUP, value: cfg.group ?? '' },
    { name: 'DOCKER_ENABLED', value: String(dockerEnabled || dind) },
    { name: 'DOCKERD_IN_RUNNER', value: String(dind) },
    { name: 'GITHUB_URL', value: githubBaseURL },
    { name: 'RUNNER_WORKDIR', value: workDir },
    { name: ENV_EPHEMERAL, value: String(ephemeral) },
    { name: 'RUNNER_STATUS_UPDATE_HOOK', value: String(defaults.useRunnerStatusUpdateHook) },
    {
      name: 'GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT',
      value: `actions-runner-controller/${defaults.buildVersion}`,
    },
  ];

  const seLinuxOptions = spec.securityContext?.seLinuxOptions;
  if (seLinuxOptions) {
    privileged = false;
    dindPrivileged = false;
  }

  // The last container of each reserved name wins, as upstream.
  let runnerIndex = -1;
  let dockerIndex = -1;
  spec.containers.forEach((c, i) => {
    if (c.name === RUNNER_CONTAINER) runnerIndex = i;
    else if (c.name === DOCKER_CONTAINER) dockerIndex = i;
  });
  if (kubernetesMode && dockerIndex >= 0) {
    // Deviation: upstream also decrements the runner index when there is no docker container at all
    // (its index defaults to 0), which duplicates the runner container; only a removed one counts here.
    spec.containers.splice(dockerIndex, 1);
    if (dockerIndex < runnerIndex) runnerIndex--;
    dockerIndex = -1;
  }
  const runner: V1Container =
    runnerIndex >= 0 ? clone(spec.containers[runnerIndex]!) : { name: RUNNER_CONTAINER };
  const docker: V1Container =
    dockerIndex >= 0 ? clone(spec.containers[dockerIndex]!) : { name: DOCKER_CONTAINER };

  if (cfg.image) runner.image = cfg.image;
  if (!runner.image) runner.image = defaults.runnerImage;
  if (!runner.imagePullPolicy) runner.imagePullPolicy = 'Always';

  runner.env = [...(runner.env ?? []), ...arcEnv];
  if (kubernetesMode) runner.env.push(...runnerHookEnvs(pod, cfg.podTemplateName));

  runner.securityContext ??= {};
  // Never set privileged: false explicitly (Windows pods on GKE are rejected with it).
  if (dindPrivileged) runner.securityContext.privileged = true;

  spec.restartPolicy = 'Never';

  if (dind && cfg.dockerMTU !== undefined && cfg.dockerMTU !== null) {
    runner.env.push({ name: 'MTU', value: String(cfg.dockerMTU) });
  }
  if (!spec.imagePullSecrets?.length && defaults.runnerImagePullSecrets.length) {
    spec.imagePullSecrets = defaults.runnerImagePullSecrets.map((name) => ({ name }));
  }
  if (dind && mirror) runner.env.push({ name: 'DOCKER_REGISTRY_MIRROR', value: mirror });

  const volumeSizeLimitIsZero = isZeroQuantity(cfg.volumeSizeLimit);
  if (!volumeSizeLimitIsZero) {
    const emptyDir: { medium?: string; sizeLimit?: string } = {};
    if (cfg.volumeStorageMedium) emptyDir.medium = cfg.volumeStorageMedium;
    if (cfg.volumeSizeLimit !== undefined && cfg.volumeSizeLimit !== null) {
      emptyDir.sizeLimit = String(cfg.volumeSizeLimit);
    }
    spec.volumes = [...(spec.volumes ?? []), { name: 'runner', emptyDir }];
    runner.volumeMounts = [...(runner.volumeMounts ?? []), { name: 'runner', mountPath: '/runner' }];
  }

  const sidecar = !dind && dockerEnabled;
  if (sidecar) {
    if (volumeSizeLimitIsZero) {
      throw new RunnerPodError(
        "runner volume can't be disabled because it is required to share the working directory between the runner and the dockerd containers",
      );
    }
    docker.args = ['dockerd', `--host=${DOCKER_SOCKET}`, ...(docker.args ?? [])];
    if (findIndex(docker.env, 'DOCKER_GROUP_GID') < 0) {
      docker.env = [
        ...(docker.env ?? []),
        { name: 'DOCKER_GROUP_GID', value: dockerGroupGID(runner.image, defaults.dockerGID) },
      ];
    }
    docker.args.push('--group=$(DOCKER_GROUP_GID)');
    runner.env.push({ name: 'DOCKER_HOST', value: DOCKER_SOCKET });

    spec.volumes ??= [];
    if (findIndex(spec.volumes, 'work') < 0) spec.volumes.push({ name: 'work', emptyDir: {} });
    spec.volumes.push({
      name: 'var-run',
      emptyDir: { medium: 'Memory', sizeLimit: String(varRunSizeLimit) },
    });

    runner.volumeMounts ??= [];
    if (findIndex(runner.volumeMounts, 'work') < 0)
      runner.volumeMounts.push({ name: 'work', mountPath: workDir });
    if (findIndex(runner.volumeMounts, 'var-run') < 0)
      runner.volumeMounts.push({ name: 'var-run', mountPath: '/run' });

    const dockerMounts: V1VolumeMount[] = [{ name: 'runner', mountPath: '/runner' }];
    if (findIndex(docker.volumeMounts, 'var-run') < 0)
      dockerMounts.push({ name: 'var-run', mountPath: '/run' });
    if (findIndex(docker.volumeMounts, 'work') < 0) dockerMounts.push({ name: 'work', mountPath: workDir });

    if (!docker.image) docker.image = defaults.dockerImage;
    docker.securityContext ??= {
      privileged,
      ...(seLinuxOptions ? { seLinuxOptions: clone(seLinuxOptions) } : {}),
    };
    docker.volumeMounts = [...(docker.volumeMounts ?? []), ...dockerMounts];

    if (cfg.dockerMTU !== undefined && cfg.dockerMTU !== null) {
      docker.env = [
        ...(docker.env ?? []),
        { name: 'DOCKERD_ROOTLESS_ROOTLESSKIT_MTU', value: String(cfg.dockerMTU) },
      ];
      docker.args.push('--mtu', String(cfg.dockerMTU));
    }
    if (mirror) docker.args.push(`--registry-mirror=${mirror}`);
    docker.lifecycle = { preStop: { exec: { command: [...DOCKER_PRESTOP_COMMAND] } } };
  }

  if (runnerIndex < 0) {
    spec.containers.unshift(runner);
    if (dockerIndex >= 0) dockerIndex++;
  } else {
    spec.containers[runnerIndex] = runner;
  }
  if (sidecar) {
    if (dockerIndex < 0) spec.containers.push(docker);
    else spec.containers[dockerIndex] = docker;
  }
  return pod;
}

// --- §5.2: the Runner controller's pod -----------------------------------------------------------

/** Sets RUNNER_NAME (to the pod name) and RUNNER_TOKEN on the runner container when they are empty. */
export function mutatePod(pod: V1Pod, token: string): V1Pod {
  const updated = clone(pod);
  const runner = updated.spec?.containers.find((c) => c.name === RUNNER_CONTAINER);
  if (!runner) return updated;
  const set = (name: string, value: string) => {
    runner.env ??= [];
    const existing = runner.env.find((e) => e.name === name);
    if (existing?.value) return;
    if (existing) existing.value = value;
    else runner.env.push({ name, value });
  };
  set(ENV_RUNNER_NAME, updated.metadata?.name ?? '');
  set(ENV_RUNNER_TOKEN, token);
  return updated;
}

export function runnerOwnerReference(runner: Runner): V1OwnerReference {
  return {
    apiVersion: 'actions.summerwind.dev/v1alpha1',
    kind: 'Runner',
    name: runner.metadata.name ?? '',
    uid: runner.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/**
 * The pod of a Runner (same name and namespace), with the registration token from its status and a
 * controller reference to it. Throws RunnerPodError for invalid container-mode-kubernetes settings.
 */
export function newRunnerPod(
  runner: Runner,
  githubBaseURL: string,
  defaults: RunnerPodDefaults,
  /**
   * paddock's Runner controller: RUNNER_TOKEN comes from this Secret (key `registration-token`)
   * instead of a literal, so the token is never in the pod spec; the pod-mutation label is left off
   * (the pod needs nothing from the pod webhook). Without it, ARC's literal from the Runner status.
   */
  tokenSecret?: { name: string; key: string },
): V1Pod {
  const spec = runner.spec;
  const name = runner.metadata.name ?? '';
  const token = runner.status?.registration?.token ?? '';
  const kubernetesMode = spec.containerMode === CONTAINER_MODE_KUBERNETES;

  let containers: V1Container[];
  if (!spec.containers?.length) {
    containers = [{ name: RUNNER_CONTAINER }];
    if (spec.dockerEnabled !== false && spec.dockerdWithinRunnerContainer !== true) {
      containers.push({ name: DOCKER_CONTAINER });
    }
  } else {
    containers = clone(spec.containers);
  }
  for (const c of containers) {
    if (c.name === RUNNER_CONTAINER) {
      if (!c.imagePullPolicy && spec.imagePullPolicy) c.imagePullPolicy = spec.imagePullPolicy;
      if (!c.envFrom?.length && spec.envFrom?.length) c.envFrom = clone(spec.envFrom);
      if (!c.env?.length && spec.env?.length) c.env = clone(spec.env);
      fillResources(c, spec.resources);
    } else if (c.name === DOCKER_CONTAINER) {
      if (!c.volumeMounts?.length && spec.dockerVolumeMounts?.length)
        c.volumeMounts = clone(spec.dockerVolumeMounts);
      fillResources(c, spec.dockerdContainerResources);
      if (!c.env?.length && spec.dockerEnv?.length) c.env = clone(spec.dockerEnv);
    }
  }

  const template: V1Pod = {
    metadata: {
      name,
      ...(runner.metadata.namespace ? { namespace: runner.metadata.namespace } : {}),
      labels: { ...runner.metadata.labels, [LABEL_POD_TEMPLATE_HASH]: runnerPodTemplateHash(token) },
      ...(runner.metadata.annotations ? { annotations: { ...runner.metadata.annotations } } : {}),
    },
    spec: {
      containers,
      ...(spec.securityContext ? { securityContext: clone(spec.securityContext) } : {}),
      ...(spec.enableServiceLinks !== undefined ? { enableServiceLinks: spec.enableServiceLinks } : {}),
    },
  };
  if (kubernetesMode) {
    applyWorkVolumeClaimTemplateToPod(
      template,
      spec.workVolumeClaimTemplate,
      spec.workDir || DEFAULT_WORK_DIR,
    );
  }

  const pod = newRunnerPodWithContainerMode(spec.containerMode, template, spec, githubBaseURL, defaults);
  const podSpec = pod.spec!;

  if (spec.volumeMounts?.length) {
    if (findIndex(spec.volumeMounts, 'work') >= 0) {
      if (kubernetesMode) {
        throw new RunnerPodError(
          'volume mount "work" should be specified by workVolumeClaimTemplate in container mode kubernetes',
        );
      }
      const first = podSpec.containers[0]!;
      const at = findIndex(first.volumeMounts, 'work');
      if (at >= 0) first.volumeMounts!.splice(at, 1);
    }
    const first = podSpec.containers[0]!;
    first.volumeMounts = [...(first.volumeMounts ?? []), ...clone(spec.volumeMounts)];
  }
  if (spec.volumes?.length) {
    if (findIndex(spec.volumes, 'work') >= 0) {
      if (kubernetesMode) {
        throw new RunnerPodError(
          'volume "work" should be specified by workVolumeClaimTemplate in container mode kubernetes',
        );
      }
      const at = findIndex(podSpec.volumes, 'work');
      if (at >= 0) podSpec.volumes!.splice(at, 1);
    }
    podSpec.volumes = [...(podSpec.volumes ?? []), ...clone(spec.volumes)];
  }
  if (spec.initContainers?.length) {
    podSpec.initContainers = [...(podSpec.initContainers ?? []), ...clone(spec.initContainers)];
  }
  if (spec.nodeSelector) podSpec.nodeSelector = { ...spec.nodeSelector };
  if (spec.serviceAccountName) podSpec.serviceAccountName = spec.serviceAccountName;
  else if (defaults.useRunnerStatusUpdateHook || kubernetesMode) podSpec.serviceAccountName = name;
  if (spec.automountServiceAccountToken !== undefined) {
    podSpec.automountServiceAccountToken = spec.automountServiceAccountToken;
  }
  if (spec.sidecarContainers?.length) podSpec.containers.push(...clone(spec.sidecarContainers));
  if (spec.imagePullSecrets?.length) podSpec.imagePullSecrets = clone(spec.imagePullSecrets);
  if (spec.affinity) podSpec.affinity = clone(spec.affinity);
  if (spec.tolerations?.length) podSpec.tolerations = clone(spec.tolerations);
  if (spec.priorityClassName) podSpec.priorityClassName = spec.priorityClassName;
  if (spec.topologySpreadConstraints?.length) {
    podSpec.topologySpreadConstraints = clone(spec.topologySpreadConstraints);
  }
  if (spec.ephemeralContainers?.length) podSpec.ephemeralContainers = clone(spec.ephemeralContainers);
  if (spec.terminationGracePeriodSeconds !== undefined) {
    podSpec.terminationGracePeriodSeconds = spec.terminationGracePeriodSeconds;
  }
  if (spec.hostAliases?.length) podSpec.hostAliases = clone(spec.hostAliases);
  if (spec.dnsPolicy) podSpec.dnsPolicy = spec.dnsPolicy;
  if (spec.dnsConfig) podSpec.dnsConfig = clone(spec.dnsConfig);
  if (spec.runtimeClassName !== undefined) podSpec.runtimeClassName = spec.runtimeClassName;

  pod.metadata!.name = name;
  const mutated = mutatePod(pod, token);
  mutated.metadata!.ownerReferences = [runnerOwnerReference(runner)];
  if (tokenSecret) {
    const env = mutated.spec?.containers.find((c) => c.name === RUNNER_CONTAINER)?.env ?? [];
    const entry = env.find((e) => e.name === ENV_RUNNER_TOKEN);
    if (entry && !entry.value && !entry.valueFrom) {
      delete entry.value;
      entry.valueFrom = { secretKeyRef: { name: tokenSecret.name, key: tokenSecret.key } };
    }
    delete mutated.metadata!.labels![LABEL_POD_MUTATION];
  }
  return mutated;
}

function fillResources(c: V1Container, from: V1Container['resources']): void {
  if (!from) return;
  const requests = from.requests && Object.keys(from.requests).length ? from.requests : undefined;
  const limits = from.limits && Object.keys(from.limits).length ? from.limits : undefined;
  if (!c.resources?.requests || !Object.keys(c.resources.requests).length) {
    if (requests) c.resources = { ...c.resources, requests: { ...requests } };
  }
  if (!c.resources?.limits || !Object.keys(c.resources.limits).length) {
    if (limits) c.resources = { ...c.resources, limits: { ...limits } };
  }
}

/**
 * The ServiceAccount, Role and RoleBinding (all named after the Runner, owned by it) that a runner pod
 * needs for the status-update hook or container mode kubernetes; undefined when none is needed
 * (spec.serviceAccountName set, or neither feature used).
 */
export function runnerRbacObjects(
  runner: Runner,
  defaults: Pick<RunnerPodDefaults, 'useRunnerStatusUpdateHook'>,
): { serviceAccount: V1ServiceAccount; role: V1Role; roleBinding: V1RoleBinding } | undefined {
  const kubernetesMode = runner.spec.containerMode === CONTAINER_MODE_KUBERNETES;
  if (runner.spec.serviceAccountName || !(defaults.useRunnerStatusUpdateHook || kubernetesMode))
    return undefined;
  const name = runner.metadata.name ?? '';
  const metadata = () => ({
    name,
    ...(runner.metadata.namespace ? { namespace: runner.metadata.namespace } : {}),
    ownerReferences: [runnerOwnerReference(runner)],
  });
  const rules: V1PolicyRule[] = [];
  if (defaults.useRunnerStatusUpdateHook) {
    rules.push({
      apiGroups: ['actions.summerwind.dev'],
      resources: ['runners/status'],
      verbs: ['get', 'update', 'patch'],
      resourceNames: [name],
    });
  }
  if (kubernetesMode) {
    rules.push(
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'create', 'delete'] },
      { apiGroups: [''], resources: ['pods/exec'], verbs: ['get', 'create'] },
      { apiGroups: [''], resources: ['pods/log'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get', 'list', 'create', 'delete'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'create', 'delete'] },
    );
  }
  return {
    serviceAccount: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: metadata() },
    role: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: metadata(), rules },
    roleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: metadata(),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [
        {
          kind: 'ServiceAccount',
          name,
          ...(runner.metadata.namespace ? { namespace: runner.metadata.namespace } : {}),
        },
      ],
    },
  };
}

// --- §3.7: the RunnerSet's pod template ----------------------------------------------------------

/**
 * The StatefulSet pod template of a RunnerSet (§3.7 steps 2-7): the runner pod built from
 * `spec.template`, with restartPolicy Always as StatefulSets require (the token injector turns it back
 * to Never) and the `runner-template-hash` label; `hash` is computed on the pod spec with Never.
 */
export function newRunnerSetPodTemplate(
  runnerSet: RunnerSet,
  githubBaseURL: string,
  defaults: RunnerPodDefaults,
): { template: V1PodTemplateSpec; hash: string } {
  const spec = runnerSet.spec;
  const src = clone(spec.template ?? {});
  const template: V1Pod = { metadata: src.metadata ?? {}, spec: src.spec ?? { containers: [] } };
  const podSpec = template.spec!;
  podSpec.containers ??= [];
  if (spec.containerMode === CONTAINER_MODE_KUBERNETES) {
    if (!podSpec.containers.some((c) => c.name === RUNNER_CONTAINER)) {
      podSpec.containers.push({ name: RUNNER_CONTAINER });
    }
    applyWorkVolumeClaimTemplateToPod(
      template,
      spec.workVolumeClaimTemplate,
      spec.workDir || DEFAULT_WORK_DIR,
    );
    if (spec.serviceAccountName) podSpec.serviceAccountName = spec.serviceAccountName;
    else delete podSpec.serviceAccountName;
  }
  template.metadata!.labels = {
    ...template.metadata!.labels,
    [LABEL_RUNNERSET_NAME]: runnerSet.metadata.name ?? '',
  };
  const pod = newRunnerPodWithContainerMode(spec.containerMode, template, spec, githubBaseURL, defaults);
  const hash = computeHash(pod.spec);
  pod.spec!.restartPolicy = 'Always';
  pod.metadata!.labels = { ...pod.metadata!.labels, [LABEL_RUNNER_TEMPLATE_HASH]: hash };
  return { template: { metadata: pod.metadata!, spec: pod.spec! }, hash };
}
