import {
  API_VERSION,
  RUNNER_DEPLOYMENTS,
  RUNNER_REPLICA_SETS,
  RUNNERS,
  type Runner,
  type RunnerReplicaSet,
} from '../../src/api/index.ts';
import { resourcePath } from '../../src/runtime/informer.ts';
import type { KubeHttp } from '../../src/runtime/kube-http.ts';
import { mergePatch } from '../../src/runtime/objects.ts';
import { PODS } from '../../src/runtime/resources.ts';
import type { KubeObject } from '../../src/runtime/store.ts';
import type { PodObject } from '../../src/sandbox/node-agent.ts';
import type { GitHubDouble } from '../../src/testenv/github-double/index.ts';

/**
 * A RunnerDeployment fleet exactly as a running ARC leaves it, for the tests that take over from ARC
 * (runner-adoption, migration): the RunnerDeployment, the RunnerReplicaSet ARC made for it (ARC's
 * template hash label, Go's serialisation of the template), one Runner per replica (ARC's finalizer,
 * `sync-time` annotation, its registration token kept in the status) and one running pod per Runner
 * (ARC's labels, annotations and finalizer, the token as a literal env value), each runner registered
 * and online in the GitHub double.
 */

/** Any value ARC's Go hash could have produced. */
export const ARC_HASH = '7d9f8c6b5';
/** The finalizers ARC puts on Runners and on runner pods; paddock uses the same names. */
export const ARC_RUNNER_FINALIZER = 'runner.actions.summerwind.dev';
export const ARC_POD_FINALIZER = 'actions.summerwind.dev/runner-pod';
/** The token ARC left in the Runner status and in the pods' env. */
export const ARC_KEPT_TOKEN = 'ARC-KEPT-TOKEN';

export interface ArcFleetMember {
  runner: Runner;
  pod: PodObject;
  /** The runner's ID in the GitHub double. */
  runnerId: number;
}

export interface ArcFleet {
  deployment: KubeObject;
  replicaSet: RunnerReplicaSet;
  members: ArcFleetMember[];
}

export async function createArcFleet(opts: {
  http: KubeHttp;
  namespace: string;
  double: GitHubDouble;
  organization: string;
  /** The node every pod runs on (the node agent's `<nodePrefix>0`). */
  nodeName: string;
  replicas: number;
  /** The RunnerDeployment's name (default `ci`); the set is `<name>-arc01`. */
  name?: string;
  labels?: string[];
  /** When the runner containers started (default now); a fleet running for a while started earlier. */
  startedAt?: Date;
}): Promise<ArcFleet> {
  const { http, namespace, double, organization } = opts;
  const name = opts.name ?? 'ci';
  const runnerLabels = opts.labels ?? ['linux'];
  const template = { spec: { organization, labels: runnerLabels } };
  const deployment = await http.request<KubeObject>('POST', resourcePath(RUNNER_DEPLOYMENTS, namespace), {
    body: {
      apiVersion: API_VERSION,
      kind: 'RunnerDeployment',
      metadata: { name },
      spec: { replicas: opts.replicas, template },
    },
  });
  const setName = `${name}-arc01`;
  const labels = { 'runner-deployment-name': name, 'runner-template-hash': ARC_HASH };
  const replicaSet = await http.request<RunnerReplicaSet>(
    'POST',
    resourcePath(RUNNER_REPLICA_SETS, namespace),
    {
      body: {
        apiVersion: API_VERSION,
        kind: 'RunnerReplicaSet',
        metadata: {
          name: setName,
          labels,
          ownerReferences: [
            {
              apiVersion: API_VERSION,
              kind: 'RunnerDeployment',
              name,
              uid: deployment.metadata.uid,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        // As Go serialises it: an empty image, a null creation time in the template.
        spec: {
          replicas: opts.replicas,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels, creationTimestamp: null },
            spec: { ...template.spec, image: '' },
          },
        },
      },
    },
  );
  const members: ArcFleetMember[] = [];
  for (let i = 0; i < opts.replicas; i++) {
    const runnerName = `${setName}-${String.fromCharCode(97 + i).repeat(5)}`;
    const runner = await http.request<Runner>('POST', resourcePath(RUNNERS, namespace), {
      body: {
        apiVersion: API_VERSION,
        kind: 'Runner',
        metadata: {
          name: runnerName,
          labels,
          annotations: { 'sync-time': '2026-12-01T08:00:00Z' },
          finalizers: [ARC_RUNNER_FINALIZER],
          ownerReferences: [
            {
              apiVersion: API_VERSION,
              kind: 'RunnerReplicaSet',
              name: setName,
              uid: replicaSet.metadata.uid,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: { ...template.spec, image: '' },
      },
    });
    const record = double.registerRunner({
      registrationToken: double.model.issueToken(`orgs/${organization}`, 'registration').token,
      name: runnerName,
      labels: runnerLabels,
      ephemeral: true,
    });
    const withStatus = await mergePatch<Runner>(
      http,
      RUNNERS,
      runner,
      {
        status: {
          phase: 'Running',
          ready: true,
          registration: {
            organization,
            labels: runnerLabels,
            token: ARC_KEPT_TOKEN,
            expiresAt: '2026-12-03T23:00:00Z',
          },
        },
      },
      { subresource: 'status' },
    );
    const pod = await http.request<PodObject>('POST', resourcePath(PODS, namespace), {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: runnerName,
          labels: {
            ...labels,
            'actions-runner': '',
            'pod-template-hash': '8857b86c7',
            'actions-runner-controller/inject-registration-token': 'true',
          },
          annotations: { 'sync-time': '2026-12-01T08:00:00Z', 'actions-runner/id': String(record.id) },
          finalizers: [ARC_POD_FINALIZER],
          ownerReferences: [
            {
              apiVersion: API_VERSION,
              kind: 'Runner',
              name: runnerName,
              uid: runner.metadata.uid,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: {
          nodeName: opts.nodeName,
          restartPolicy: 'Never',
          containers: [
            {
              name: 'runner',
              image: 'summerwind/actions-runner:latest',
              env: [
                { name: 'RUNNER_ORG', value: organization },
                { name: 'RUNNER_REPO', value: '' },
                { name: 'RUNNER_ENTERPRISE', value: '' },
                { name: 'RUNNER_LABELS', value: runnerLabels.join(',') },
                { name: 'RUNNER_EPHEMERAL', value: 'true' },
                { name: 'RUNNER_NAME', value: runnerName },
                { name: 'RUNNER_TOKEN', value: ARC_KEPT_TOKEN },
              ],
            },
          ],
        },
      },
    });
    const now = new Date().toISOString();
    const startedAt = (opts.startedAt ?? new Date()).toISOString();
    const running = await mergePatch<PodObject>(
      http,
      PODS,
      pod,
      {
        status: {
          phase: 'Running',
          conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now }],
          containerStatuses: [
            {
              name: 'runner',
              ready: true,
              restartCount: 0,
              image: 'x',
              imageID: '',
              state: { running: { startedAt } },
            },
          ],
        },
      },
      { subresource: 'status' },
    );
    members.push({ runner: withStatus, pod: running, runnerId: record.id });
  }
  return { deployment, replicaSet, members };
}
