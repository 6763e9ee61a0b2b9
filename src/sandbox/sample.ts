import { API_VERSION, RUNNER_DEPLOYMENTS, RUNNER_SETS } from '../api/index.ts';
import type { ResourceRef } from '../runtime/informer.ts';

/**
 * The sandbox's sample runner owner: a RunnerDeployment (what ARC's documentation starts with, so what
 * a first-time user most likely brings) or a RunnerSet, written in the documented manifest shape, and
 * the desired/current/ready figures the live view and the summary show for either.
 */

export type SandboxKind = 'RunnerDeployment' | 'RunnerSet';

export const SANDBOX_KINDS: readonly SandboxKind[] = ['RunnerDeployment', 'RunnerSet'];

/** `runnerdeployment`, `RunnerDeployment`, `runnerset`, … → the kind; undefined for anything else. */
export function parseSandboxKind(text: string): SandboxKind | undefined {
  const t = text.trim().toLowerCase();
  return SANDBOX_KINDS.find((k) => k.toLowerCase() === t);
}

export function sampleResource(kind: SandboxKind): ResourceRef {
  return kind === 'RunnerDeployment' ? RUNNER_DEPLOYMENTS : RUNNER_SETS;
}

export interface SampleSpec {
  name: string;
  organization: string;
  replicas: number;
  ephemeral: boolean;
  labels: string[];
  /** A Secret with the runners' GitHub credentials (githubAPICredentialsFrom). */
  credentialsSecret?: string | undefined;
}

/** The manifest the sandbox applies, as a user would write it. */
export function sampleManifest(kind: SandboxKind, s: SampleSpec): Record<string, unknown> {
  const runner = {
    organization: s.organization,
    ephemeral: s.ephemeral,
    labels: s.labels,
    ...(s.credentialsSecret
      ? { githubAPICredentialsFrom: { secretRef: { name: s.credentialsSecret } } }
      : {}),
  };
  if (kind === 'RunnerDeployment') {
    return {
      apiVersion: API_VERSION,
      kind,
      metadata: { name: s.name },
      spec: { replicas: s.replicas, template: { spec: runner } },
    };
  }
  // A RunnerSet is a StatefulSet spec plus the runner fields: selector and serviceName are required.
  return {
    apiVersion: API_VERSION,
    kind,
    metadata: { name: s.name },
    spec: {
      replicas: s.replicas,
      ...runner,
      selector: { matchLabels: { app: s.name } },
      serviceName: s.name,
      podManagementPolicy: 'Parallel',
      template: {
        metadata: { labels: { app: s.name } },
        spec: { containers: [{ name: 'runner' }] },
      },
    },
  };
}

export interface OwnerFigures {
  kind: SandboxKind;
  name: string;
  /** `spec.replicas`; null when the object is not there (yet). */
  desired: number | null;
  /** Runner pods the owner counts (`status.replicas`). */
  current: number;
  /** Runner pods running (`status.readyReplicas`). */
  ready: number;
}

interface OwnerObject {
  metadata?: { name?: string };
  spec?: { replicas?: number };
  status?: { replicas?: number; readyReplicas?: number; desiredReplicas?: number };
}

/** The figures of a fetched RunnerDeployment or RunnerSet (both report replicas and readyReplicas). */
export function ownerFigures(kind: SandboxKind, name: string, obj: OwnerObject | undefined): OwnerFigures {
  return {
    kind,
    name,
    desired: obj ? (obj.spec?.replicas ?? obj.status?.desiredReplicas ?? 1) : null,
    current: obj?.status?.replicas ?? 0,
    ready: obj?.status?.readyReplicas ?? 0,
  };
}

/** `RunnerDeployment sandbox-runners: desired 5  current 5  ready 4` */
export function formatOwnerFigures(f: OwnerFigures): string {
  return `${f.kind} ${f.name}: desired ${f.desired ?? '?'}  current ${f.current}  ready ${f.ready}`;
}

export type AutoscaleMode = 'webhook' | 'pull';

/** `webhook` or `pull` → the mode; undefined for anything else. */
export function parseAutoscaleMode(text: string): AutoscaleMode | undefined {
  const t = text.trim().toLowerCase();
  return t === 'webhook' || t === 'pull' ? t : undefined;
}

/**
 * The HorizontalRunnerAutoscaler for the sample owner, in the shape ARC's documentation gives: a
 * workflow_job trigger for `webhook`, TotalNumberOfQueuedAndInProgressWorkflowRuns over the
 * workload's repositories for `pull`. From zero up to `maxReplicas`.
 */
export function sampleAutoscaler(
  kind: SandboxKind,
  s: {
    name: string;
    mode: AutoscaleMode;
    /** Default 0. */
    minReplicas?: number | undefined;
    maxReplicas: number;
    repositories: string[];
    scaleDownDelaySeconds: number;
  },
): Record<string, unknown> {
  return {
    apiVersion: API_VERSION,
    kind: 'HorizontalRunnerAutoscaler',
    metadata: { name: s.name },
    spec: {
      scaleTargetRef: { kind, name: s.name },
      minReplicas: s.minReplicas ?? 0,
      maxReplicas: s.maxReplicas,
      scaleDownDelaySecondsAfterScaleOut: s.scaleDownDelaySeconds,
      ...(s.mode === 'webhook'
        ? { scaleUpTriggers: [{ githubEvent: { workflowJob: {} }, duration: '30m' }] }
        : {
            metrics: [
              { type: 'TotalNumberOfQueuedAndInProgressWorkflowRuns', repositoryNames: s.repositories },
            ],
          }),
    },
  };
}

export interface AutoscalerFigures {
  desired: number | null;
  reservations: number;
}

/** The HRA's desired replicas and its live capacity reservations. */
export function autoscalerFigures(
  obj:
    | {
        spec?: { capacityReservations?: { expirationTime?: string }[] };
        status?: { desiredReplicas?: number };
      }
    | undefined,
  now: number,
): AutoscalerFigures {
  return {
    desired: obj?.status?.desiredReplicas ?? null,
    reservations: (obj?.spec?.capacityReservations ?? []).filter(
      (r) => !r.expirationTime || Date.parse(r.expirationTime) > now,
    ).length,
  };
}
