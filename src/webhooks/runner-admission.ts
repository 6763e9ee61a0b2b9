import { GROUP } from '../api/index.ts';
import type { AdmissionResult } from './runner-token.ts';
import {
  formatFieldError,
  invalidMessage,
  type RunnerResourceKind,
  renderValue,
  validateRunnerResource,
} from './runner-validation.ts';
import type { AdmissionHandler, AdmissionRequest } from './server.ts';

/**
 * The defaulting and validating admission webhooks of Runner, RunnerReplicaSet and RunnerDeployment,
 * at ARC's paths and under ARC's webhook names (spec §2.6).
 */

export interface RunnerResourceWebhook {
  kind: RunnerResourceKind;
  /** Plural resource name, for the webhook rules. */
  resource: string;
  mutatePath: string;
  validatePath: string;
  mutateName: string;
  validateName: string;
}

function webhookOf(kind: RunnerResourceKind, resource: string): RunnerResourceWebhook {
  const singular = kind.toLowerCase();
  return {
    kind,
    resource,
    mutatePath: `/mutate-actions-summerwind-dev-v1alpha1-${singular}`,
    validatePath: `/validate-actions-summerwind-dev-v1alpha1-${singular}`,
    mutateName: `mutate.${singular}.${GROUP}`,
    validateName: `validate.${singular}.${GROUP}`,
  };
}

export const RUNNER_RESOURCE_WEBHOOKS: readonly RunnerResourceWebhook[] = [
  webhookOf('Runner', 'runners'),
  webhookOf('RunnerDeployment', 'runnerdeployments'),
  webhookOf('RunnerReplicaSet', 'runnerreplicasets'),
];

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const ALLOWED: AdmissionResult = { allowed: true };

function badRequest(message: string): AdmissionResult {
  return { allowed: false, status: { code: 400, message: `paddock: ${message}`, reason: 'BadRequest' } };
}

/**
 * The validating webhook's verdict on one request for `kind`. DELETE (and anything but CREATE and
 * UPDATE) is allowed. An UPDATE is denied only for errors its old object did not have (ratcheting,
 * as Kubernetes does for CRD schemas): metadata-only writes such as a finalizer removal on an object
 * stored before these rules existed must go through, or its deletion could hang. An object being
 * deleted is not validated at all.
 */
export function validateRunnerResourceRequest(
  kind: RunnerResourceKind,
  request: AdmissionRequest,
): AdmissionResult {
  const operation = request.operation;
  if (operation !== 'CREATE' && operation !== 'UPDATE') return ALLOWED;
  const requestKind = isObj(request.kind) ? request.kind.kind : undefined;
  if (requestKind !== undefined && requestKind !== kind) {
    return badRequest(
      `the ${kind} webhook was sent a ${renderValue(requestKind)}; check the webhook configuration`,
    );
  }
  const object = request.object;
  if (!isObj(object)) return badRequest(`the ${operation} request carries no ${kind} object`);
  const metadata = isObj(object.metadata) ? object.metadata : {};
  if (operation === 'UPDATE' && metadata.deletionTimestamp) return ALLOWED;
  let errors = validateRunnerResource(kind, object);
  if (operation === 'UPDATE' && errors.length > 0 && isObj(request.oldObject)) {
    const before = new Set(validateRunnerResource(kind, request.oldObject).map(formatFieldError));
    errors = errors.filter((e) => !before.has(formatFieldError(e)));
  }
  if (errors.length === 0) return ALLOWED;
  const name =
    typeof metadata.name === 'string' && metadata.name
      ? metadata.name
      : typeof request.name === 'string'
        ? request.name
        : '';
  return {
    allowed: false,
    status: { code: 422, reason: 'Invalid', message: invalidMessage(kind, name, errors) },
  };
}

/**
 * Path → handler for the six webhooks. The defaulters allow everything unchanged: ARC's are no-ops,
 * and defaults (replicas 1, ephemeral true, …) are applied where the controllers read the fields,
 * so a stored object keeps exactly what its author wrote.
 */
export function runnerResourceAdmissionHandlers(): Record<string, AdmissionHandler> {
  const handlers: Record<string, AdmissionHandler> = {};
  for (const w of RUNNER_RESOURCE_WEBHOOKS) {
    handlers[w.mutatePath] = async () => ALLOWED;
    handlers[w.validatePath] = async (request) => validateRunnerResourceRequest(w.kind, request);
  }
  return handlers;
}
