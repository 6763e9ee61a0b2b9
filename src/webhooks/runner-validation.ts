import { GROUP } from '../api/index.ts';
import { LABEL_RUNNER_DEPLOYMENT_NAME, LABEL_RUNNER_TEMPLATE_HASH } from '../controllers/constants.ts';
import { CONTAINER_MODE_KUBERNETES, isZeroQuantity } from '../controllers/runner-pod-spec.ts';
import { isDns1123Subdomain } from '../runtime/names.ts';

/**
 * Validation of Runner, RunnerReplicaSet and RunnerDeployment objects for the validating admission
 * webhooks: ARC's rules (spec §2.6) plus mistakes the controllers would otherwise only report later,
 * on every reconcile. Pure: a decoded object in, field errors out, formatted like apimachinery's
 * field errors and Invalid status messages so `kubectl` users see what they know.
 *
 * Input is whatever the request carried: every field is type-checked before use, and a field of the
 * wrong type is a field error, never an exception.
 */

export type FieldErrorType = 'Invalid value' | 'Required value' | 'Unsupported value' | 'Forbidden';

export interface FieldError {
  type: FieldErrorType;
  /** Path in the object, e.g. `spec.template.spec.repository`. */
  field: string;
  /** The offending value (shown for Invalid and Unsupported). */
  value?: unknown;
  detail?: string;
}

export type RunnerResourceKind = 'Runner' | 'RunnerReplicaSet' | 'RunnerDeployment';

export const MSG_NO_SCOPE = 'spec needs enterprise, organization or repository';
export const MSG_MANY_SCOPES = 'spec cannot have many fields defined enterprise, organization and repository';
export const MSG_NO_WORK_VOLUME_CLAIM_TEMPLATE =
  'Spec.ContainerMode: kubernetes must have workVolumeClaimTemplate field specified';
export const MSG_NO_ACCESS_MODE = 'access mode should have at least one mode specified';
// The controller's own errors for these (spec §5.1, §5.2, §5.4), reported before it gets there.
export const MSG_WORK_VOLUME_MOUNT =
  'volume mount "work" should be specified by workVolumeClaimTemplate in container mode kubernetes';
export const MSG_WORK_VOLUME =
  'volume "work" should be specified by workVolumeClaimTemplate in container mode kubernetes';
export const MSG_RUNNER_WORK_MOUNT =
  'volume mount "work" should not be present on the runner container in container mode kubernetes';
export const MSG_RUNNER_VOLUME_REQUIRED =
  "runner volume can't be disabled because it is required to share the working directory between the runner and the dockerd containers";

const SUPPORTED_ACCESS_MODES = ['ReadWriteOnce', 'ReadWriteMany'];
const SUPPORTED_CONTAINER_MODES = ['', CONTAINER_MODE_KUBERNETES];
const SELECTOR_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'];

/** At most this many errors are spelled out in one message (a forged object could hold thousands). */
const MAX_ERRORS_SHOWN = 10;
/** Longer rendered values are cut, so a denial never echoes a megabyte back. */
const MAX_VALUE_CHARS = 160;

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// --- messages ----------------------------------------------------------------------------------

function cut(text: string): string {
  return text.length > MAX_VALUE_CHARS ? `${text.slice(0, MAX_VALUE_CHARS)}…` : text;
}

/** A value as apimachinery prints it: strings quoted, numbers and booleans bare, nil as null. */
export function renderValue(value: unknown): string {
  if (value === undefined || value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(cut(value));
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return cut(JSON.stringify(value) ?? String(value));
}

/** `spec.repository: Invalid value: "": spec needs …`, as apimachinery's `field.Error`. */
export function formatFieldError(e: FieldError): string {
  let body: string = e.type;
  if (e.type === 'Invalid value' || e.type === 'Unsupported value') body += `: ${renderValue(e.value)}`;
  if (e.detail) body += `: ${e.detail}`;
  return e.field ? `${e.field}: ${body}` : body;
}

/**
 * The message of a Kubernetes Invalid error for `errors`:
 * `Runner.actions.summerwind.dev "r1" is invalid: <error>`, several errors as `[a, b]` (duplicates
 * dropped, as apimachinery's aggregate does).
 */
export function invalidMessage(kind: RunnerResourceKind, name: string, errors: FieldError[]): string {
  const head = `${kind}.${GROUP} ${JSON.stringify(cut(name))} is invalid`;
  const messages = [...new Set(errors.map(formatFieldError))];
  if (messages.length === 0) return head;
  if (messages.length === 1) return `${head}: ${messages[0]}`;
  const shown = messages.slice(0, MAX_ERRORS_SHOWN);
  if (messages.length > shown.length) shown.push(`and ${messages.length - shown.length} more errors`);
  return `${head}: [${shown.join(', ')}]`;
}

// --- typed reads ---------------------------------------------------------------------------------

const invalid = (field: string, value: unknown, detail: string): FieldError => ({
  type: 'Invalid value',
  field,
  value,
  detail,
});

/**
 * Reads `obj[key]` when it has the expected type; null and absent read as undefined (Go's zero
 * value); any other type adds an error and reads as undefined too.
 */
function read<T>(
  obj: Obj,
  key: string,
  path: string,
  errs: FieldError[],
  is: (v: unknown) => v is T,
  expected: string,
): T | undefined {
  const v = obj[key];
  if (v === undefined || v === null) return undefined;
  if (is(v)) return v;
  errs.push(invalid(path, v, `must be ${expected}`));
  return undefined;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isBoolean = (v: unknown): v is boolean => typeof v === 'boolean';
const isArray = (v: unknown): v is unknown[] => Array.isArray(v);
const isQuantity = (v: unknown): v is number | string => typeof v === 'number' || typeof v === 'string';

const readString = (o: Obj, k: string, p: string, e: FieldError[]) => read(o, k, p, e, isString, 'a string');
const readObject = (o: Obj, k: string, p: string, e: FieldError[]) => read(o, k, p, e, isObj, 'an object');
const readArray = (o: Obj, k: string, p: string, e: FieldError[]) => read(o, k, p, e, isArray, 'a list');
const readBoolean = (o: Obj, k: string, p: string, e: FieldError[]) =>
  read(o, k, p, e, isBoolean, 'true or false');

/** A map of strings (labels, annotations, matchLabels); wrong entries are errors and left out. */
function readStringMap(o: Obj, k: string, p: string, errs: FieldError[]): Map<string, string> | undefined {
  const m = readObject(o, k, p, errs);
  if (!m) return undefined;
  const out = new Map<string, string>();
  for (const [key, value] of Object.entries(m)) {
    if (typeof value === 'string') out.set(key, value);
    else errs.push(invalid(`${p}[${key}]`, value, 'must be a string'));
  }
  return out;
}

/** Index of the first named entry (container, volume, mount) called `name`, or -1. */
function indexOfName(list: unknown[], name: string): number {
  return list.findIndex((e) => isObj(e) && e.name === name);
}

// --- Kubernetes name rules ------------------------------------------------------------------------

const NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** A label key or annotation key: `[prefix/]name`, prefix a DNS subdomain, name ≤ 63 characters. */
export function isQualifiedName(key: string): boolean {
  const parts = key.split('/');
  if (parts.length > 2) return false;
  const name = parts.at(-1)!;
  if (name.length === 0 || name.length > 63 || !NAME_PART.test(name)) return false;
  return parts.length === 1 || isDns1123Subdomain(parts[0]!);
}

/** A label value: empty, or ≤ 63 characters shaped like a name part. */
export function isLabelValue(value: string): boolean {
  return value === '' || (value.length <= 63 && NAME_PART.test(value));
}

const KEY_RULE =
  "must be a name of at most 63 characters (letters, digits, '-', '_' or '.', starting and ending with a letter or digit), optionally after a DNS subdomain prefix and '/'";
const LABEL_VALUE_RULE =
  "must be empty or at most 63 characters: letters, digits, '-', '_' or '.', starting and ending with a letter or digit";
const SUBDOMAIN_RULE =
  "must be a Secret name: a lower-case RFC 1123 subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or digit, at most 253 characters)";

function checkLabels(labels: Map<string, string>, path: string, errs: FieldError[]): void {
  for (const [key, value] of labels) {
    if (!isQualifiedName(key)) errs.push(invalid(path, key, KEY_RULE));
    if (!isLabelValue(value)) errs.push(invalid(`${path}[${key}]`, value, LABEL_VALUE_RULE));
  }
}

// --- RunnerSpec ---------------------------------------------------------------------------------

/**
 * Errors of a RunnerSpec (a Runner's `spec`, or the `spec.template.spec` of a RunnerReplicaSet or
 * RunnerDeployment); `rootPath` prefixes every field path. An absent spec is Go's zero value.
 */
export function validateRunnerSpec(spec: unknown, rootPath: string): FieldError[] {
  if (spec === undefined || spec === null) spec = {};
  if (!isObj(spec)) return [invalid(rootPath, spec, 'must be an object')];
  const errs: FieldError[] = [];
  const at = (field: string) => `${rootPath}.${field}`;

  // ARC's rule 1: exactly one registration scope.
  const enterprise = readString(spec, 'enterprise', at('enterprise'), errs);
  const organization = readString(spec, 'organization', at('organization'), errs);
  const repository = readString(spec, 'repository', at('repository'), errs);
  const scopes = [enterprise, organization, repository].filter((s) => s).length;
  if (scopes === 0) errs.push(invalid(at('repository'), repository ?? '', MSG_NO_SCOPE));
  if (scopes > 1) errs.push(invalid(at('repository'), repository ?? '', MSG_MANY_SCOPES));

  // ARC treats any other mode as docker mode; a typo ("Kubernetes", "dind") would silently give
  // the runner a privileged docker sidecar instead of the hooks.
  const containerMode = readString(spec, 'containerMode', at('containerMode'), errs);
  if (containerMode !== undefined && !SUPPORTED_CONTAINER_MODES.includes(containerMode)) {
    errs.push({
      type: 'Unsupported value',
      field: at('containerMode'),
      value: containerMode,
      detail: `supported values: ${SUPPORTED_CONTAINER_MODES.map((m) => JSON.stringify(m)).join(', ')}`,
    });
  }
  const kubernetes = containerMode === CONTAINER_MODE_KUBERNETES;
  if (kubernetes) errs.push(...kubernetesModeErrors(spec, rootPath));
  else errs.push(...dockerModeErrors(spec, rootPath));

  const creds = readObject(spec, 'githubAPICredentialsFrom', at('githubAPICredentialsFrom'), errs);
  const secretRef = creds && readObject(creds, 'secretRef', at('githubAPICredentialsFrom.secretRef'), errs);
  const secretPath = at('githubAPICredentialsFrom.secretRef.name');
  const secretName = secretRef && readString(secretRef, 'name', secretPath, errs);
  // An empty name means the controller-wide credentials (ARC's behaviour), so only a set one is checked.
  if (secretName && !isDns1123Subdomain(secretName))
    errs.push(invalid(secretPath, secretName, SUBDOMAIN_RULE));
  return errs;
}

/** Container mode kubernetes: ARC's workVolumeClaimTemplate rule, and the pod errors of §5.2/§5.4. */
function kubernetesModeErrors(spec: Obj, rootPath: string): FieldError[] {
  const errs: FieldError[] = [];
  const at = (field: string) => `${rootPath}.${field}`;

  const template = spec.workVolumeClaimTemplate;
  const templatePath = at('workVolumeClaimTemplate');
  if (template === undefined || template === null) {
    errs.push(invalid(templatePath, null, MSG_NO_WORK_VOLUME_CLAIM_TEMPLATE));
  } else if (!isObj(template)) {
    errs.push(invalid(templatePath, template, 'must be an object'));
  } else {
    const modes = readArray(template, 'accessModes', `${templatePath}.accessModes`, errs);
    const unsupported = modes?.find((m) => !(typeof m === 'string' && SUPPORTED_ACCESS_MODES.includes(m)));
    const typeError =
      modes === undefined && template.accessModes !== undefined && template.accessModes !== null;
    if (!typeError && (!modes || modes.length === 0))
      errs.push(invalid(templatePath, template, MSG_NO_ACCESS_MODE));
    else if (unsupported !== undefined) {
      const shown = typeof unsupported === 'string' ? unsupported : renderValue(unsupported);
      errs.push(invalid(templatePath, template, `access mode ${cut(shown)} is not supported`));
    }
  }

  const volumeMounts = readArray(spec, 'volumeMounts', at('volumeMounts'), errs) ?? [];
  const mountAt = indexOfName(volumeMounts, 'work');
  if (mountAt >= 0) errs.push(invalid(at(`volumeMounts[${mountAt}].name`), 'work', MSG_WORK_VOLUME_MOUNT));
  const volumes = readArray(spec, 'volumes', at('volumes'), errs) ?? [];
  const volumeAt = indexOfName(volumes, 'work');
  if (volumeAt >= 0) errs.push(invalid(at(`volumes[${volumeAt}].name`), 'work', MSG_WORK_VOLUME));

  // The work volume is mounted on the container named runner; ARC only adds one when the spec
  // lists no containers at all.
  const containers = readArray(spec, 'containers', at('containers'), errs) ?? [];
  if (containers.length > 0) {
    const runnerAt = indexOfName(containers, 'runner');
    const runner = containers[runnerAt];
    if (!isObj(runner)) {
      const names = containers.map((c) => (isObj(c) ? c.name : c));
      errs.push(
        invalid(
          at('containers'),
          names,
          'container mode kubernetes needs a container named "runner" to mount the work volume on',
        ),
      );
    } else {
      const runnerPath = at(`containers[${runnerAt}].volumeMounts`);
      const mounts = readArray(runner, 'volumeMounts', runnerPath, errs) ?? [];
      const workAt = indexOfName(mounts, 'work');
      if (workAt >= 0) errs.push(invalid(`${runnerPath}[${workAt}].name`, 'work', MSG_RUNNER_WORK_MOUNT));
    }
  }
  return errs;
}

/** Docker mode: the docker sidecar shares /runner with the runner, so it cannot be switched off. */
function dockerModeErrors(spec: Obj, rootPath: string): FieldError[] {
  const errs: FieldError[] = [];
  const at = (field: string) => `${rootPath}.${field}`;
  const dockerEnabled = readBoolean(spec, 'dockerEnabled', at('dockerEnabled'), errs);
  const dind = readBoolean(spec, 'dockerdWithinRunnerContainer', at('dockerdWithinRunnerContainer'), errs);
  const limit = read(
    spec,
    'volumeSizeLimit',
    at('volumeSizeLimit'),
    errs,
    isQuantity,
    'a quantity such as 10Gi',
  );
  const sidecar = dockerEnabled !== false && dind !== true;
  if (sidecar && isZeroQuantity(limit))
    errs.push(invalid(at('volumeSizeLimit'), limit, MSG_RUNNER_VOLUME_REQUIRED));
  return errs;
}

// --- Runner, RunnerReplicaSet, RunnerDeployment ----------------------------------------------------------

/** Errors of a Runner object. */
export function validateRunner(obj: unknown): FieldError[] {
  if (!isObj(obj)) return [invalid('', obj, 'a Runner must be an object')];
  return validateRunnerSpec(obj.spec, 'spec');
}

/** Errors of a RunnerReplicaSet object. */
export function validateRunnerReplicaSet(obj: unknown): FieldError[] {
  return validateReplicated(obj, 'RunnerReplicaSet');
}

/** Errors of a RunnerDeployment object. */
export function validateRunnerDeployment(obj: unknown): FieldError[] {
  return validateReplicated(obj, 'RunnerDeployment');
}

/** Errors of an object of `kind`. */
export function validateRunnerResource(kind: RunnerResourceKind, obj: unknown): FieldError[] {
  return kind === 'Runner' ? validateRunner(obj) : validateReplicated(obj, kind);
}

/** A label whose value the controller decides later (a hash, or a name the server generates). */
const DECIDED_LATER = Symbol('decided later');
type RunnerLabels = Map<string, string | typeof DECIDED_LATER>;

function validateReplicated(obj: unknown, kind: 'RunnerReplicaSet' | 'RunnerDeployment'): FieldError[] {
  if (!isObj(obj)) return [invalid('', obj, `a ${kind} must be an object`)];
  const errs: FieldError[] = [];
  const metadata = readObject(obj, 'metadata', 'metadata', errs) ?? {};
  const spec = obj.spec;
  if (spec === undefined || spec === null) return [...errs, { type: 'Required value', field: 'spec' }];
  if (!isObj(spec)) return [...errs, invalid('spec', spec, 'must be an object')];

  const replicas = spec.replicas;
  if (replicas !== undefined && replicas !== null) {
    if (typeof replicas !== 'number' || !Number.isInteger(replicas))
      errs.push(invalid('spec.replicas', replicas, 'must be an integer'));
    else if (replicas < 0)
      errs.push(invalid('spec.replicas', replicas, 'must be greater than or equal to 0'));
  }
  const effectiveTime = readString(spec, 'effectiveTime', 'spec.effectiveTime', errs);
  if (effectiveTime !== undefined && !isRfc3339(effectiveTime)) {
    errs.push(
      invalid('spec.effectiveTime', effectiveTime, 'must be an RFC 3339 time such as "2024-05-01T12:00:00Z"'),
    );
  }

  const template = spec.template;
  let labels: Map<string, string> | undefined;
  if (template === undefined || template === null) {
    errs.push({ type: 'Required value', field: 'spec.template' });
  } else if (!isObj(template)) {
    errs.push(invalid('spec.template', template, 'must be an object'));
  } else {
    const before = errs.length;
    const templateMeta = readObject(template, 'metadata', 'spec.template.metadata', errs) ?? {};
    labels = readStringMap(templateMeta, 'labels', 'spec.template.metadata.labels', errs) ?? new Map();
    checkLabels(labels, 'spec.template.metadata.labels', errs);
    if (errs.length > before) labels = undefined; // no match check against labels that cannot exist
    const annotations = readStringMap(
      templateMeta,
      'annotations',
      'spec.template.metadata.annotations',
      errs,
    );
    for (const key of annotations?.keys() ?? []) {
      if (!isQualifiedName(key.toLowerCase()))
        errs.push(invalid('spec.template.metadata.annotations', key, KEY_RULE));
    }
    errs.push(...validateRunnerSpec(template.spec, 'spec.template.spec'));
  }

  // A missing selector is accepted, as ARC does (the RunnerDeployment controller fills one in).
  const selector = spec.selector;
  if (selector !== undefined && selector !== null) {
    const selectorErrs = validateLabelSelector(selector, 'spec.selector');
    errs.push(...selectorErrs);
    if (selectorErrs.length === 0 && labels && isObj(selector)) {
      const runnerLabels =
        kind === 'RunnerDeployment'
          ? deploymentRunnerLabels(metadata, labels)
          : replicaSetRunnerLabels(metadata, labels);
      if (selectorMatches(selector, runnerLabels, kind) === false) {
        errs.push(invalid('spec.selector', selector, selectorMismatchDetail(kind, metadata)));
      }
    }
  }
  return errs;
}

/**
 * The labels of the Runners a RunnerDeployment makes, through its RunnerReplicaSet (spec §3.6
 * `newRunnerReplicaSet`): the template's, with `runner-deployment-name` and `runner-template-hash`
 * set by the controller.
 */
function deploymentRunnerLabels(metadata: Obj, templateLabels: Map<string, string>): RunnerLabels {
  const labels: RunnerLabels = new Map(templateLabels);
  labels.set(LABEL_RUNNER_TEMPLATE_HASH, DECIDED_LATER);
  // Empty while the server has yet to generate the name (generateName).
  const name = typeof metadata.name === 'string' && metadata.name ? metadata.name : DECIDED_LATER;
  labels.set(LABEL_RUNNER_DEPLOYMENT_NAME, name);
  return labels;
}

/**
 * The labels of a RunnerReplicaSet's Runners (spec §3.5 step 3): the template's; when the set has
 * no `runner-template-hash` label of its own, the controller adds a computed one to the template.
 */
function replicaSetRunnerLabels(metadata: Obj, templateLabels: Map<string, string>): RunnerLabels {
  const labels: RunnerLabels = new Map(templateLabels);
  const own = isObj(metadata.labels) ? metadata.labels[LABEL_RUNNER_TEMPLATE_HASH] : undefined;
  if (typeof own !== 'string' || own === '') labels.set(LABEL_RUNNER_TEMPLATE_HASH, DECIDED_LATER);
  return labels;
}

function selectorMismatchDetail(kind: RunnerResourceKind, metadata: Obj): string {
  if (kind === 'RunnerDeployment') {
    const name = typeof metadata.name === 'string' && metadata.name ? metadata.name : '<name>';
    return `selector does not match the labels of the runners (spec.template.metadata.labels plus ${LABEL_RUNNER_DEPLOYMENT_NAME}=${cut(name)}): their RunnerReplicaSets would never find them and would keep creating more`;
  }
  return 'selector does not match the labels of the runners (spec.template.metadata.labels): this RunnerReplicaSet would never find them and would keep creating more';
}

// --- label selectors ------------------------------------------------------------------------------

/** Structural errors of a metav1.LabelSelector (the checks apimachinery makes when converting it). */
export function validateLabelSelector(selector: unknown, path: string): FieldError[] {
  if (!isObj(selector)) return [invalid(path, selector, 'must be an object')];
  const errs: FieldError[] = [];
  const matchLabels = readStringMap(selector, 'matchLabels', `${path}.matchLabels`, errs);
  if (matchLabels) checkLabels(matchLabels, `${path}.matchLabels`, errs);
  const expressions = readArray(selector, 'matchExpressions', `${path}.matchExpressions`, errs) ?? [];
  expressions.forEach((expr, i) => {
    const at = `${path}.matchExpressions[${i}]`;
    if (!isObj(expr)) {
      errs.push(invalid(at, expr, 'must be an object'));
      return;
    }
    if (expr.key === undefined || expr.key === null)
      errs.push({ type: 'Required value', field: `${at}.key` });
    const key = readString(expr, 'key', `${at}.key`, errs);
    if (key !== undefined && !isQualifiedName(key)) errs.push(invalid(`${at}.key`, key, KEY_RULE));
    const operator = readString(expr, 'operator', `${at}.operator`, errs);
    const valuesTyped = expr.values === undefined || expr.values === null || Array.isArray(expr.values);
    const values = readArray(expr, 'values', `${at}.values`, errs) ?? [];
    values.forEach((v, j) => {
      if (typeof v !== 'string') errs.push(invalid(`${at}.values[${j}]`, v, 'must be a string'));
      else if (!isLabelValue(v)) errs.push(invalid(`${at}.values[${j}]`, v, LABEL_VALUE_RULE));
    });
    if (operator === 'In' || operator === 'NotIn') {
      if (values.length === 0 && valuesTyped)
        errs.push({
          type: 'Required value',
          field: `${at}.values`,
          detail: "must be specified when `operator` is 'In' or 'NotIn'",
        });
    } else if (operator === 'Exists' || operator === 'DoesNotExist') {
      if (values.length > 0)
        errs.push({
          type: 'Forbidden',
          field: `${at}.values`,
          detail: "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        });
    } else if (expr.operator === undefined || expr.operator === null) {
      errs.push({ type: 'Required value', field: `${at}.operator` });
    } else if (operator !== undefined) {
      errs.push({
        type: 'Unsupported value',
        field: `${at}.operator`,
        value: operator,
        detail: `supported values: ${SELECTOR_OPERATORS.map((o) => JSON.stringify(o)).join(', ')}`,
      });
    }
  });
  return errs;
}

/**
 * Whether a structurally valid selector selects objects with `labels`: false only when some
 * requirement certainly fails. Requirements on a label whose value is decided later count as met,
 * except `DoesNotExist`, which fails whatever the value. For a RunnerDeployment, a `matchLabels`
 * entry for `runner-template-hash` is replaced by the controller, so it is not a requirement.
 */
function selectorMatches(selector: Obj, labels: RunnerLabels, kind: RunnerResourceKind): boolean {
  const matchLabels = isObj(selector.matchLabels) ? selector.matchLabels : {};
  for (const [key, want] of Object.entries(matchLabels)) {
    if (kind === 'RunnerDeployment' && key === LABEL_RUNNER_TEMPLATE_HASH) continue;
    const have = labels.get(key);
    if (have === DECIDED_LATER) continue;
    if (have !== want) return false;
  }
  const expressions = Array.isArray(selector.matchExpressions) ? selector.matchExpressions : [];
  for (const expr of expressions) {
    if (!isObj(expr) || typeof expr.key !== 'string') continue;
    const values = Array.isArray(expr.values) ? expr.values : [];
    const present = labels.has(expr.key);
    const have = labels.get(expr.key);
    switch (expr.operator) {
      case 'Exists':
        if (!present) return false;
        break;
      case 'DoesNotExist':
        if (present) return false;
        break;
      case 'In':
        if (have === DECIDED_LATER) break;
        if (!present || !values.includes(have)) return false;
        break;
      case 'NotIn':
        if (have === DECIDED_LATER) break;
        if (present && values.includes(have)) return false;
        break;
    }
  }
  return true;
}

// --- times --------------------------------------------------------------------------------------

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})([.,]\d+)?(Z|[+-](\d{2}):(\d{2}))$/;

/** Whether `s` is a time Go's `time.Parse(time.RFC3339, s)` accepts (how ARC decodes effectiveTime). */
export function isRfc3339(s: string): boolean {
  const m = RFC3339.exec(s);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const daysInMonth = month === 2 ? (leap ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31;
  if (day < 1 || day > daysInMonth) return false;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return false;
  return true;
}
