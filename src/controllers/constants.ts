/** Labels, annotations and finalizers shared with ARC (users and tooling depend on the exact keys). */

export const LABEL_RUNNER = 'actions-runner';
export const LABEL_RUNNERSET_NAME = 'runnerset-name';
export const LABEL_RUNNER_DEPLOYMENT_NAME = 'runner-deployment-name';
export const LABEL_RUNNER_POD = 'runner-pod';
export const LABEL_RUNNER_TEMPLATE_HASH = 'runner-template-hash';
/** On every runner pod; the pod webhook's object selector. */
export const LABEL_INJECT_REGISTRATION_TOKEN = 'actions-runner-controller/inject-registration-token';
/** On a RunnerSet's volume claims: the StatefulSet they were made for (volume retention). */
export const LABEL_RUNNER_STATEFULSET_NAME = 'runner-statefulset-name';

/**
 * A pod is a runner pod when it carries any of these (the runner pod controller's filter, as ARC's):
 * `actions-runner` is on every pod paddock makes and on ARC's since v0.25; ARC v0.20 to v0.24 put
 * only `runnerset-name` on its runner pods (the RunnerSet pods from v0.20, all from v0.22), and
 * RunnerDeployment pods of older ARC have only `runner-deployment-name`. (Not
 * `actions-runner-controller/inject-registration-token`: paddock's Runner pods, which read their
 * token from a Secret, do not carry it.)
 */
export const RUNNER_POD_LABELS = [LABEL_RUNNER, LABEL_RUNNERSET_NAME, LABEL_RUNNER_DEPLOYMENT_NAME] as const;

/**
 * The label selectors of the runner pod cache: a selector can only AND its terms, so "any of
 * RUNNER_POD_LABELS" is one selector per label that excludes the labels before it (`actions-runner`;
 * `!actions-runner,runnerset-name`; ...). No pod matches two, so none is cached twice; today's pods
 * all match the first, the other two hold what older ARC versions left.
 */
export const RUNNER_POD_SELECTORS: readonly string[] = RUNNER_POD_LABELS.map((key, i) =>
  [...RUNNER_POD_LABELS.slice(0, i).map((k) => `!${k}`), key].join(','),
);

export const ANNOTATION_RUNNER_ID = 'actions-runner/id';
export const ANNOTATION_UNREGISTRATION_REQUEST = 'actions-runner/unregistration-request-timestamp';
export const ANNOTATION_UNREGISTRATION_START = 'actions-runner/unregistration-start-timestamp';
export const ANNOTATION_UNREGISTRATION_COMPLETE = 'actions-runner/unregistration-complete-timestamp';
export const ANNOTATION_UNREGISTRATION_FAILURE = 'actions-runner/unregistration-failure-message';
export const ANNOTATION_COMPLETION_WAIT_START = 'actions-runner/runner-completion-wait-start-timestamp';
/** When the registration token a pod (or a Runner's token Secret) carries expires; informational. */
export const ANNOTATION_TOKEN_EXPIRES_AT = 'actions-runner-controller/token-expires-at';
export const ANNOTATION_CREDS_SECRET = 'actions-runner/github-api-creds-secret';
export const ANNOTATION_LAST_REGISTRATION_CHECK = 'actions-runner-controller/last-registration-check-time';

/** paddock's own: why a pod is waiting and since when, so every wait is visible on the pod. */
export const ANNOTATION_WAIT_REASON = 'paddock.dev/wait-reason';
export const ANNOTATION_WAIT_START = 'paddock.dev/wait-start-timestamp';

/** On Runners (ARC's name): the Runner controller cleans up before a Runner goes. */
export const FINALIZER_RUNNER = 'runner.actions.summerwind.dev';
export const FINALIZER_RUNNER_POD = 'actions.summerwind.dev/runner-pod';
export const FINALIZER_LINKED_RESOURCES = 'actions.summerwind.dev/linked-resources';

export const RUNNER_CONTAINER = 'runner';

export const ENV_ENTERPRISE = 'RUNNER_ENTERPRISE';
export const ENV_ORG = 'RUNNER_ORG';
export const ENV_REPO = 'RUNNER_REPO';
export const ENV_EPHEMERAL = 'RUNNER_EPHEMERAL';
export const ENV_CONTAINER_HOOKS = 'ACTIONS_RUNNER_CONTAINER_HOOKS';
export const ENV_LABELS = 'RUNNER_LABELS';
export const ENV_RUNNER_NAME = 'RUNNER_NAME';
export const ENV_RUNNER_TOKEN = 'RUNNER_TOKEN';

/** RFC 3339 with seconds, as Go's time.RFC3339 formats UTC times. */
export function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** Owners' status figures (replicas, ready) are written at most this often per object. */
export const STATUS_WRITE_INTERVAL_MS = 1000;

/** An owner (RunnerReplicaSet, RunnerSet) is synced at most this often; changes meanwhile are merged. */
export const OWNER_ROUND_INTERVAL_MS = 100;
