/**
 * The one source of truth for the `actions.summerwind.dev/v1alpha1` API: OpenAPI v3 schemas for our own
 * fields, written as plain data. `hack/gen-crds.ts` turns them into the CRD manifests under `config/crd/`
 * (inlining the Kubernetes types they embed from the API server's own OpenAPI document) and into the
 * TypeScript types in `src/api/generated/types.ts`. Edit this file, then run `node hack/gen-crds.ts`.
 *
 * Generator-only keys (all start with `x-paddock-`) never reach the CRDs:
 * - `x-paddock-k8s`: inline this Kubernetes OpenAPI component here; `x-paddock-ts` is its TS type
 *   (a `@kubernetes/client-node` class name).
 * - `x-paddock-ts-name`: emit this object as a named interface.
 * - `x-paddock-parts`: named object schemas whose properties are merged into this one (Go's inlined
 *   structs); the interface extends them. A part may also be a Kubernetes component (`x-paddock-k8s`).
 * - `x-paddock-ts`: TypeScript type to use instead of deriving one.
 */

export interface ValidationRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  fieldPath?: string;
  reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
}

export interface Schema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: Schema;
  enum?: string[];
  pattern?: string;
  format?: string;
  minimum?: number;
  maxLength?: number;
  maxItems?: number;
  nullable?: boolean;
  anyOf?: Schema[];
  'x-kubernetes-int-or-string'?: true;
  'x-kubernetes-validations'?: ValidationRule[];
  'x-paddock-k8s'?: string;
  'x-paddock-ts'?: string;
  'x-paddock-ts-name'?: string;
  'x-paddock-parts'?: Schema[];
}

export const GROUP = 'actions.summerwind.dev';
export const VERSION = 'v1alpha1';

// --- small builders ------------------------------------------------------------------------------

const str = (description?: string, extra: Partial<Schema> = {}): Schema => ({
  type: 'string',
  ...(description ? { description } : {}),
  ...extra,
});
const bool = (description?: string): Schema => ({ type: 'boolean', ...(description ? { description } : {}) });
const int = (description?: string, extra: Partial<Schema> = {}): Schema => ({
  type: 'integer',
  ...(description ? { description } : {}),
  ...extra,
});
const int64 = (description?: string): Schema => int(description, { format: 'int64' });
const time = (description?: string, extra: Partial<Schema> = {}): Schema =>
  str(description, { format: 'date-time', ...extra });
const list = (items: Schema, description?: string): Schema => ({
  type: 'array',
  items,
  ...(description ? { description } : {}),
});
const strings = (description?: string): Schema => list({ type: 'string' }, description);
const obj = (
  properties: Record<string, Schema>,
  opts: { description?: string; required?: string[]; name?: string } = {},
): Schema => ({
  type: 'object',
  ...(opts.description ? { description: opts.description } : {}),
  properties,
  ...(opts.required?.length ? { required: opts.required } : {}),
  ...(opts.name ? { 'x-paddock-ts-name': opts.name } : {}),
});
/** A Kubernetes type, inlined from the API server's OpenAPI document at generation time. */
const k8s = (component: string, tsType: string, description?: string): Schema => ({
  'x-paddock-k8s': component,
  'x-paddock-ts': tsType,
  ...(description ? { description } : {}),
});
const core = (name: string, description?: string) =>
  k8s(`io.k8s.api.core.v1.${name}`, `V1${name}`, description);
const coreList = (name: string, description?: string) => list(core(name), description);

/** resource.Quantity the way controller-gen writes it: an integer or a string in quantity syntax. */
export const QUANTITY_PATTERN =
  '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$';
const quantity = (description?: string): Schema => ({
  ...(description ? { description } : {}),
  anyOf: [{ type: 'integer' }, { type: 'string' }],
  pattern: QUANTITY_PATTERN,
  'x-kubernetes-int-or-string': true,
  'x-paddock-ts': 'number | string',
});

// --- shared pieces -------------------------------------------------------------------------------

export const secretReference = obj(
  { name: str('Name of a Secret in the namespace of the resource.') },
  { name: 'SecretReference', required: ['name'] },
);

export const githubAPICredentialsFrom = obj(
  {
    secretRef: {
      ...secretReference,
      description:
        'Secret holding a PAT or GitHub App credentials for the GitHub API calls made for this resource.',
    },
  },
  { name: 'GitHubAPICredentialsFrom' },
);

export const workVolumeClaimTemplate = obj(
  {
    storageClassName: str('StorageClass of the ephemeral volume that holds the work directory.'),
    accessModes: {
      ...strings('Access modes of the work volume: ReadWriteOnce and/or ReadWriteMany.'),
      // Bounds the cost of the CEL rules below; there are only four access modes.
      maxItems: 4,
    },
    resources: core('VolumeResourceRequirements', 'Storage requests and limits of the work volume.'),
  },
  {
    name: 'WorkVolumeClaimTemplate',
    required: ['storageClassName', 'accessModes', 'resources'],
    description:
      'Claim template of the generic ephemeral volume mounted at the work directory (container mode kubernetes).',
  },
);

/** The runner settings shared by Runner, RunnerReplicaSet/RunnerDeployment templates and RunnerSet. */
export const runnerConfig = obj(
  {
    enterprise: str('Enterprise to register the runner to.', { pattern: '^[^/]+$' }),
    organization: str('Organization to register the runner to.', { pattern: '^[^/]+$' }),
    repository: str('Repository ("owner/name") to register the runner to.', { pattern: '^[^/]+/[^/]+$' }),
    labels: strings('Runner labels, in addition to the default labels GitHub adds.'),
    group: str('Runner group; empty means the default group.'),
    ephemeral: bool('Whether the runner takes a single job and is replaced afterwards. Unset means true.'),
    image: str("Runner container image; empty means the template's image, then the controller default."),
    workDir: str('Work directory of the runner. Unset means /runner/_work.'),
    dockerdWithinRunnerContainer: bool('Run dockerd inside the runner container instead of a sidecar.'),
    dockerEnabled: bool('Whether the pod gets Docker at all. Unset means true.'),
    dockerMTU: int64('MTU of the Docker networks.'),
    dockerRegistryMirror: str(
      'Registry mirror for dockerd. Unset means the controller default; "" disables it.',
    ),
    dockerVarRunVolumeSizeLimit: quantity(
      'Size limit of the in-memory /run volume shared with dockerd (1M).',
    ),
    volumeSizeLimit: quantity('Size limit of the /runner volume; 0 removes the volume.'),
    volumeStorageMedium: str('Storage medium of the /runner volume ("" or Memory).'),
    containerMode: str('"" runs job containers with Docker; "kubernetes" runs them as pods via the hooks.'),
    podTemplateName: str('Reserved; not used by the controller.'),
    githubAPICredentialsFrom: {
      ...githubAPICredentialsFrom,
      description: 'Per-resource GitHub API credentials; unset means the controller-wide credentials.',
    },
  },
  { name: 'RunnerConfig' },
);

/** Pod-level settings of a runner (Runner and the RunnerDeployment/RunnerReplicaSet template). */
export const runnerPodSpec = obj(
  {
    dockerdContainerResources: core('ResourceRequirements', 'Resources of the docker sidecar.'),
    dockerVolumeMounts: coreList('VolumeMount', 'Extra volume mounts of the docker sidecar.'),
    dockerEnv: coreList('EnvVar', 'Extra environment of the docker sidecar.'),
    containers: coreList('Container', 'Containers of the pod; "runner" and "docker" are the reserved names.'),
    imagePullPolicy: str('Pull policy of the runner container.'),
    env: coreList('EnvVar', 'Extra environment of the runner container.'),
    envFrom: coreList('EnvFromSource', 'Extra environment sources of the runner container.'),
    resources: core('ResourceRequirements', 'Resources of the runner container.'),
    volumeMounts: coreList('VolumeMount', 'Extra volume mounts of the first container (the runner).'),
    volumes: coreList(
      'Volume',
      'Extra volumes of the pod; a volume named "work" replaces the work directory.',
    ),
    enableServiceLinks: bool(),
    initContainers: coreList('Container'),
    nodeSelector: {
      type: 'object',
      additionalProperties: { type: 'string' },
      'x-paddock-ts': '{ [key: string]: string }',
    },
    serviceAccountName: str(),
    automountServiceAccountToken: bool(),
    sidecarContainers: coreList('Container', 'Containers appended after the runner and docker containers.'),
    securityContext: core('PodSecurityContext'),
    imagePullSecrets: coreList('LocalObjectReference'),
    affinity: core('Affinity'),
    tolerations: coreList('Toleration'),
    priorityClassName: str(),
    terminationGracePeriodSeconds: int64(),
    ephemeralContainers: coreList('EphemeralContainer'),
    hostAliases: coreList('HostAlias'),
    topologySpreadConstraints: coreList('TopologySpreadConstraint'),
    runtimeClassName: str(),
    dnsPolicy: str(),
    dnsConfig: core('PodDNSConfig'),
    workVolumeClaimTemplate,
  },
  { name: 'RunnerPodSpec' },
);

const has = (f: string) => `(has(self.${f}) && self.${f} != '')`;
const count = (f: string) => `(${has(f)} ? 1 : 0)`;
const k8sMode = `has(self.containerMode) && self.containerMode == 'kubernetes'`;
const supportedMode = (m: string) => `${m} == 'ReadWriteOnce' || ${m} == 'ReadWriteMany'`;

/**
 * What ARC's validating admission webhooks checked (RunnerSpec.Validate), as CEL rules: exactly one
 * scope, and a usable workVolumeClaimTemplate in container mode kubernetes.
 */
export const RUNNER_SPEC_VALIDATIONS: ValidationRule[] = [
  {
    rule: `${has('enterprise')} || ${has('organization')} || ${has('repository')}`,
    message: 'spec needs enterprise, organization or repository',
    fieldPath: '.repository',
  },
  {
    rule: `${count('enterprise')} + ${count('organization')} + ${count('repository')} <= 1`,
    message: 'spec cannot have many fields defined enterprise, organization and repository',
    fieldPath: '.repository',
  },
  {
    rule: `!(${k8sMode}) || has(self.workVolumeClaimTemplate)`,
    message: 'Spec.ContainerMode: kubernetes must have workVolumeClaimTemplate field specified',
    fieldPath: '.workVolumeClaimTemplate',
  },
  {
    rule: `!(${k8sMode}) || !has(self.workVolumeClaimTemplate) || self.workVolumeClaimTemplate.accessModes.size() > 0`,
    message: 'access mode should have at least one mode specified',
    fieldPath: '.workVolumeClaimTemplate',
  },
  {
    rule: `!(${k8sMode}) || !has(self.workVolumeClaimTemplate) || self.workVolumeClaimTemplate.accessModes.all(m, ${supportedMode('m')})`,
    message: 'access mode is not supported',
    messageExpression: `'access mode ' + self.workVolumeClaimTemplate.accessModes.filter(m, !(${supportedMode('m')}))[0] + ' is not supported'`,
    fieldPath: '.workVolumeClaimTemplate',
  },
];

export const runnerSpec: Schema = {
  type: 'object',
  description: 'Desired state of a runner: where it registers, how its pod looks.',
  'x-paddock-ts-name': 'RunnerSpec',
  'x-paddock-parts': [runnerConfig, runnerPodSpec],
  'x-kubernetes-validations': RUNNER_SPEC_VALIDATIONS,
};

/** Embedded object metadata; typed as the raw-JSON ObjectMeta of the runtime (timestamps are strings). */
const objectMeta = k8s('io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta', 'ObjectMeta');
const labelSelector = (description: string): Schema => ({
  ...k8s('io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector', 'V1LabelSelector', description),
  nullable: true,
});
const effectiveTime = time(
  'When the autoscaler last asked for the current replicas; guards ephemeral runners against needless recreation.',
  { nullable: true },
);
const replicas = (description: string): Schema => int(description, { minimum: 0, nullable: true });

export const runnerTemplate = obj(
  { metadata: objectMeta, spec: runnerSpec },
  { name: 'RunnerTemplate', required: ['spec'], description: 'Template of the Runners to create.' },
);

// --- Runner --------------------------------------------------------------------------------------

export const runnerStatus = obj(
  {
    ready: bool('True when the runner pod is Ready.'),
    registration: obj(
      {
        enterprise: str(),
        organization: str(),
        repository: str(),
        labels: strings(),
        token: str('Registration token.'),
        expiresAt: time('Expiry of the registration token.'),
      },
      { name: 'RunnerStatusRegistration', required: ['token', 'expiresAt'] },
    ),
    phase: str('Pod phase, "Created", or Running/Idle as written by the in-pod status hook.'),
    reason: str(),
    message: str(),
    workflow: obj(
      {
        name: str('Workflow name (GITHUB_WORKFLOW).'),
        repository: str('Repository of the workflow (GITHUB_REPOSITORY).'),
        repositoryOwner: str('Owner of that repository (GITHUB_REPOSITORY_OWNER).'),
        runNumber: str('GITHUB_RUN_NUMBER.'),
        runID: str('GITHUB_RUN_ID.'),
        job: str('GITHUB_JOB.'),
        action: str('GITHUB_ACTION.'),
      },
      { name: 'WorkflowStatus', description: 'The job the runner is running, written by the in-pod hook.' },
    ),
    lastRegistrationCheckTime: time('Unused.', { nullable: true }),
  },
  { name: 'RunnerStatus' },
);

// --- RunnerReplicaSet / RunnerDeployment ---------------------------------------------------------

export const runnerReplicaSetSpec = obj(
  {
    replicas: replicas('Number of runners. Unset means 1.'),
    effectiveTime,
    selector: labelSelector('Selects the Runners owned by this RunnerReplicaSet.'),
    template: runnerTemplate,
  },
  { name: 'RunnerReplicaSetSpec', required: ['template'] },
);

export const runnerReplicaSetStatus = obj(
  {
    replicas: int('Runners managed by this RunnerReplicaSet.'),
    readyReplicas: int('Runners that are running.'),
    availableReplicas: int('Same as readyReplicas.'),
  },
  { name: 'RunnerReplicaSetStatus', required: ['readyReplicas', 'availableReplicas'] },
);

export const runnerDeploymentSpec = obj(
  {
    replicas: replicas('Number of runners. Unset means 1.'),
    effectiveTime,
    selector: labelSelector(
      'Selects the RunnerReplicaSets owned by this RunnerDeployment. Unset means runner-deployment-name=<name>.',
    ),
    template: runnerTemplate,
  },
  { name: 'RunnerDeploymentSpec', required: ['template'] },
);

const replicaCounts = {
  availableReplicas: int('Runners that are registered and running.'),
  readyReplicas: int('Runners that are ready.'),
  updatedReplicas: int('Runners with the current template.'),
  desiredReplicas: int('Desired runners with the current template.'),
  replicas: int('All runners.'),
};

export const runnerDeploymentStatus = obj(replicaCounts, { name: 'RunnerDeploymentStatus' });

// --- RunnerSet -----------------------------------------------------------------------------------

export const runnerSetSpec: Schema = {
  type: 'object',
  description:
    'Runner settings plus a StatefulSet spec; each runner is a one-replica StatefulSet built from it.',
  'x-paddock-ts-name': 'RunnerSetSpec',
  'x-paddock-parts': [runnerConfig, k8s('io.k8s.api.apps.v1.StatefulSetSpec', 'V1StatefulSetSpec')],
  properties: {
    effectiveTime,
    serviceAccountName: str('Service account of the runner pods (container mode kubernetes).'),
    workVolumeClaimTemplate,
    replicas: int('Number of runners. Unset means 1.', { format: 'int32', minimum: 0 }),
  },
};

export const runnerSetStatus = obj(
  { ...replicaCounts, selector: str('Label selector of the runner pods, for the scale subresource.') },
  { name: 'RunnerSetStatus' },
);

// --- HorizontalRunnerAutoscaler ------------------------------------------------------------------

export const horizontalRunnerAutoscalerSpec = obj(
  {
    scaleTargetRef: obj(
      {
        kind: str('RunnerDeployment (the default when empty) or RunnerSet.', {
          enum: ['RunnerDeployment', 'RunnerSet'],
        }),
        name: str('Name of the scale target in the same namespace.'),
      },
      { name: 'ScaleTargetRef' },
    ),
    minReplicas: int('Lower bound of the replicas. Required by the controller.'),
    maxReplicas: int('Upper bound of the replicas. Required by the controller.'),
    scaleDownDelaySecondsAfterScaleOut: int(
      'Seconds to wait after a scale-out before scaling down; overrides --default-scale-down-delay.',
    ),
    metrics: list(
      obj(
        {
          type: str('TotalNumberOfQueuedAndInProgressWorkflowRuns or PercentageRunnersBusy.'),
          repositoryNames: strings('Repositories (the REPO of OWNER/REPO) the metric looks at.'),
          scaleUpThreshold: str('Busy ratio above which to scale up (a decimal string).'),
          scaleDownThreshold: str('Busy ratio below which to scale down (a decimal string).'),
          scaleUpFactor: str('Multiplier applied on scale-up (a decimal string).'),
          scaleDownFactor: str('Multiplier applied on scale-down (a decimal string).'),
          scaleUpAdjustment: int('Runners added on scale-up.'),
          scaleDownAdjustment: int('Runners removed on scale-down.'),
        },
        { name: 'MetricSpec' },
      ),
      'Pull-based metrics; PercentageRunnersBusy first if both are used.',
    ),
    scaleUpTriggers: list(
      obj(
        {
          githubEvent: obj(
            {
              checkRun: obj(
                { types: strings(), status: str(), names: strings(), repositories: strings() },
                { name: 'CheckRunSpec' },
              ),
              pullRequest: obj({ types: strings(), branches: strings() }, { name: 'PullRequestSpec' }),
              push: obj({}, { name: 'PushSpec' }),
              workflowJob: obj({}, { name: 'WorkflowJobSpec' }),
            },
            { name: 'GitHubEventScaleUpTriggerSpec' },
          ),
          amount: int('Ignored: each workflow_job event adds or removes one runner.'),
          duration: str('How long a scale-up lasts at most, as a Go duration (e.g. "30m").'),
        },
        { name: 'ScaleUpTrigger' },
      ),
      'Webhook-driven scaling; only a single githubEvent.workflowJob trigger has an effect.',
    ),
    capacityReservations: list(
      obj(
        {
          name: str(),
          effectiveTime: time(),
          expirationTime: time(),
          replicas: int(),
        },
        { name: 'CapacityReservation' },
      ),
      'Temporary extra replicas, written by the webhook server.',
    ),
    scheduledOverrides: list(
      obj(
        {
          startTime: time('Start of the first period.'),
          endTime: time('End of the first period.'),
          minReplicas: int('minReplicas during the period; unset leaves it alone.', {
            minimum: 0,
            nullable: true,
          }),
          recurrenceRule: obj(
            {
              frequency: str('Daily, Weekly, Monthly or Yearly; empty means once.', {
                enum: ['Daily', 'Weekly', 'Monthly', 'Yearly'],
              }),
              untilTime: time('Start time of the last recurrence; unset means forever.'),
            },
            { name: 'RecurrenceRule' },
          ),
        },
        { name: 'ScheduledOverride', required: ['startTime', 'endTime'] },
      ),
      'Periods with another minReplicas; earlier entries win.',
    ),
    githubAPICredentialsFrom,
  },
  { name: 'HorizontalRunnerAutoscalerSpec' },
);

export const horizontalRunnerAutoscalerStatus = obj(
  {
    observedGeneration: int64('Unused.'),
    desiredReplicas: int('Replicas last computed for the scale target.'),
    lastSuccessfulScaleOutTime: time(undefined, { nullable: true }),
    cacheEntries: list(
      obj({ key: str(), value: int(), expirationTime: time() }, { name: 'CacheEntry' }),
      'Unused.',
    ),
    scheduledOverridesSummary: str('Active and upcoming scheduled overrides, for kubectl get.'),
  },
  { name: 'HorizontalRunnerAutoscalerStatus' },
);

// --- the CRDs ------------------------------------------------------------------------------------

export interface PrinterColumn {
  name: string;
  type: 'string' | 'number' | 'integer' | 'boolean' | 'date';
  jsonPath: string;
}

export interface KindDefinition {
  kind: string;
  plural: string;
  singular: string;
  shortNames?: string[];
  description: string;
  spec: Schema;
  status: Schema;
  printerColumns: PrinterColumn[];
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
}

const age: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };
const scopeColumns = (prefix: string): PrinterColumn[] => [
  { name: 'Enterprise', type: 'string', jsonPath: `${prefix}.enterprise` },
  { name: 'Organization', type: 'string', jsonPath: `${prefix}.organization` },
  { name: 'Repository', type: 'string', jsonPath: `${prefix}.repository` },
  { name: 'Group', type: 'string', jsonPath: `${prefix}.group` },
  { name: 'Labels', type: 'string', jsonPath: `${prefix}.labels` },
];
const replicaColumns: PrinterColumn[] = [
  { name: 'Desired', type: 'number', jsonPath: '.spec.replicas' },
  { name: 'Current', type: 'number', jsonPath: '.status.replicas' },
  { name: 'Up-To-Date', type: 'number', jsonPath: '.status.updatedReplicas' },
  { name: 'Available', type: 'number', jsonPath: '.status.availableReplicas' },
];

export const KINDS: KindDefinition[] = [
  {
    kind: 'Runner',
    plural: 'runners',
    singular: 'runner',
    description: 'A self-hosted GitHub Actions runner, run as one pod of the same name.',
    spec: runnerSpec,
    status: runnerStatus,
    printerColumns: [
      ...scopeColumns('.spec'),
      { name: 'Status', type: 'string', jsonPath: '.status.phase' },
      { name: 'Message', type: 'string', jsonPath: '.status.message' },
      { name: 'WF Repo', type: 'string', jsonPath: '.status.workflow.repository' },
      { name: 'WF Run', type: 'string', jsonPath: '.status.workflow.runID' },
      age,
    ],
  },
  {
    kind: 'RunnerReplicaSet',
    plural: 'runnerreplicasets',
    singular: 'runnerreplicaset',
    shortNames: ['rrs'],
    description: 'A set of identical Runners (one template generation of a RunnerDeployment).',
    spec: runnerReplicaSetSpec,
    status: runnerReplicaSetStatus,
    printerColumns: [
      { name: 'Desired', type: 'number', jsonPath: '.spec.replicas' },
      { name: 'Current', type: 'number', jsonPath: '.status.replicas' },
      { name: 'Ready', type: 'number', jsonPath: '.status.readyReplicas' },
      age,
    ],
  },
  {
    kind: 'RunnerDeployment',
    plural: 'runnerdeployments',
    singular: 'runnerdeployment',
    shortNames: ['rdeploy'],
    description: 'Runners from a template, rolled out through RunnerReplicaSets.',
    spec: runnerDeploymentSpec,
    status: runnerDeploymentStatus,
    printerColumns: [...scopeColumns('.spec.template.spec'), ...replicaColumns, age],
  },
  {
    kind: 'RunnerSet',
    plural: 'runnersets',
    singular: 'runnerset',
    description:
      'Runners run by StatefulSets (one per runner), with a registration token injected by webhook.',
    spec: runnerSetSpec,
    status: runnerSetStatus,
    printerColumns: [...replicaColumns, age],
    scale: {
      specReplicasPath: '.spec.replicas',
      statusReplicasPath: '.status.replicas',
      labelSelectorPath: '.status.selector',
    },
  },
  {
    kind: 'HorizontalRunnerAutoscaler',
    plural: 'horizontalrunnerautoscalers',
    singular: 'horizontalrunnerautoscaler',
    shortNames: ['hra'],
    description: 'Scales a RunnerDeployment or RunnerSet from GitHub metrics, webhooks and schedules.',
    spec: horizontalRunnerAutoscalerSpec,
    status: horizontalRunnerAutoscalerStatus,
    printerColumns: [
      { name: 'Min', type: 'number', jsonPath: '.spec.minReplicas' },
      { name: 'Max', type: 'number', jsonPath: '.spec.maxReplicas' },
      { name: 'Desired', type: 'number', jsonPath: '.status.desiredReplicas' },
      { name: 'Schedule', type: 'string', jsonPath: '.status.scheduledOverridesSummary' },
    ],
  },
];
