import { ANNOTATION_TOKEN_EXPIRES_AT, LABEL_RUNNERSET_NAME } from '../controllers/constants.ts';
import { invalidSubdomainReason } from '../runtime/names.ts';
import type { KubeObject } from '../runtime/store.ts';

/**
 * The Secret that carries a runner pod's credential. The webhook never puts a registration token
 * or a JIT configuration into its admission response: it writes the credential into a Secret
 * paddock owns, one per RunnerSet StatefulSet (each has exactly one pod), and points the runner
 * container's env at it. The StatefulSet owns the Secret, so the garbage collector removes both
 * together; each admission of the StatefulSet's pod rewrites it (a recreated pod gets a fresh
 * credential).
 */

/** Keys of the Secret's data. */
export const TOKEN_SECRET_KEY = 'registration-token';
export const JIT_CONFIG_SECRET_KEY = 'jit-config';

/**
 * The JIT runner paddock created for the pod, recorded so that a later name collision (409) can be
 * told apart from someone else's runner of the same name. Not a credential.
 */
export const ANNOTATION_JIT_RUNNER_ID = 'paddock.dev/jit-runner-id';
export const ANNOTATION_JIT_RUNNER_NAME = 'paddock.dev/jit-runner-name';

const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
const MANAGED_BY = 'paddock';
const SUFFIX = '-runner-token';

export function tokenSecretName(statefulSetName: string): string {
  return `${statefulSetName}${SUFFIX}`;
}

/** Why the Secret cannot be named after this StatefulSet, or undefined when it can. */
export function invalidTokenSecretName(statefulSetName: string): string | undefined {
  return invalidSubdomainReason('runner token Secret', tokenSecretName(statefulSetName));
}

export type RunnerCredential =
  | { kind: 'registrationToken'; token: string }
  | { kind: 'jitConfig'; encodedJitConfig: string; runnerId: number; runnerName: string };

export interface TokenSecretInput {
  namespace: string;
  statefulSet: { name: string; uid: string };
  runnerSetName: string;
  credential: RunnerCredential;
}

/** The key of the Secret that holds this kind of credential. */
export function tokenSecretKey(kind: RunnerCredential['kind']): string {
  return kind === 'registrationToken' ? TOKEN_SECRET_KEY : JIT_CONFIG_SECRET_KEY;
}

/**
 * The whole Secret as paddock applies it. Fields it leaves out (the other credential, an old JIT
 * record) are dropped by the apply, since paddock was their only manager.
 */
export function tokenSecret(input: TokenSecretInput): KubeObject {
  return credentialSecret({
    namespace: input.namespace,
    name: tokenSecretName(input.statefulSet.name),
    labels: { [LABEL_RUNNERSET_NAME]: input.runnerSetName },
    owner: { apiVersion: 'apps/v1', kind: 'StatefulSet', ...input.statefulSet },
    credential: input.credential,
  });
}

/**
 * A registration token Secret the Runner controller writes and points runner pods' RUNNER_TOKEN at,
 * so the token is never in a pod spec or a response. `owner` is the Runner itself, or the
 * RunnerReplicaSet whose Runners all share it (a registration token belongs to the scope, not to a
 * runner). Named like a StatefulSet's: `<owner>-runner-token`.
 */
export function runnerTokenSecret(input: {
  namespace: string;
  owner: { kind: 'Runner' | 'RunnerReplicaSet'; name: string; uid: string };
  token: string;
  expiresAt: string;
}): KubeObject {
  const secret = credentialSecret({
    namespace: input.namespace,
    name: tokenSecretName(input.owner.name),
    labels: {},
    owner: { apiVersion: 'actions.summerwind.dev/v1alpha1', ...input.owner },
    credential: { kind: 'registrationToken', token: input.token },
  });
  secret.metadata.annotations = { [ANNOTATION_TOKEN_EXPIRES_AT]: input.expiresAt };
  return secret;
}

function credentialSecret(input: {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  owner: { apiVersion: string; kind: string; name: string; uid: string };
  credential: RunnerCredential;
}): KubeObject {
  const c = input.credential;
  const value = c.kind === 'registrationToken' ? c.token : c.encodedJitConfig;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: input.name,
      namespace: input.namespace,
      labels: { [LABEL_MANAGED_BY]: MANAGED_BY, ...input.labels },
      ...(c.kind === 'jitConfig'
        ? {
            annotations: {
              [ANNOTATION_JIT_RUNNER_ID]: String(c.runnerId),
              [ANNOTATION_JIT_RUNNER_NAME]: c.runnerName,
            },
          }
        : {}),
      // No blockOwnerDeletion: deleting the owner never waits for its token Secret.
      ownerReferences: [{ ...input.owner, controller: true }],
    },
    type: 'Opaque',
    data: { [tokenSecretKey(c.kind)]: Buffer.from(value, 'utf8').toString('base64') },
  };
}

export interface JitRunnerRecord {
  runnerId: number;
  runnerName: string;
}

/**
 * The JIT runner a token Secret records, when the Secret is paddock's and belongs to this very
 * StatefulSet (same UID): the only proof the webhook accepts that a runner of the pod's name is
 * one paddock created for the pod.
 */
export function recordedJitRunner(
  secret: KubeObject | undefined,
  statefulSetUid: string,
): JitRunnerRecord | undefined {
  if (!secret) return undefined;
  const m = secret.metadata;
  if (m.labels?.[LABEL_MANAGED_BY] !== MANAGED_BY) return undefined;
  if (!(m.ownerReferences ?? []).some((r) => r.kind === 'StatefulSet' && r.uid === statefulSetUid)) {
    return undefined;
  }
  const idText = m.annotations?.[ANNOTATION_JIT_RUNNER_ID] ?? '';
  const runnerName = m.annotations?.[ANNOTATION_JIT_RUNNER_NAME] ?? '';
  if (!/^[1-9]\d{0,15}$/.test(idText) || runnerName === '') return undefined;
  return { runnerId: Number(idText), runnerName };
}
