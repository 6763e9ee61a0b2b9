import type { RunnerSet } from '../api/index.ts';
import type { KubeObject, OwnerReference } from '../runtime/store.ts';
import type { JsonPatchOp } from './json-patch.ts';
import type { RunnerPodCluster } from './runner-set-owner.ts';

/**
 * A small RFC 6902 applier (add, replace, remove) for tests: strict about paths, so a patch that
 * the API server would reject fails here too.
 */
export function applyJsonPatch<T>(doc: T, ops: readonly JsonPatchOp[]): T {
  let root: unknown = structuredClone(doc);
  for (const op of ops) {
    if (op.path === '') {
      if (op.op === 'remove') throw new Error('cannot remove the root');
      root = structuredClone(op.value);
      continue;
    }
    if (!op.path.startsWith('/')) throw new Error(`bad pointer ${op.path}`);
    const tokens = op.path
      .slice(1)
      .split('/')
      .map((t) => {
        if (/~[^01]|~$/.test(t)) throw new Error(`bad escape in ${op.path}`);
        return t.replace(/~1/g, '/').replace(/~0/g, '~');
      });
    const last = tokens.pop()!;
    let parent: unknown = root;
    for (const t of tokens) {
      parent = child(parent, t, op.path);
    }
    if (Array.isArray(parent)) {
      const i = last === '-' && op.op === 'add' ? parent.length : arrayIndex(last, op.path);
      if (op.op === 'add') {
        if (i > parent.length) throw new Error(`index out of range in ${op.path}`);
        parent.splice(i, 0, structuredClone(op.value));
      } else {
        if (i >= parent.length) throw new Error(`index out of range in ${op.path}`);
        if (op.op === 'replace') parent[i] = structuredClone(op.value);
        else parent.splice(i, 1);
      }
    } else if (typeof parent === 'object' && parent !== null) {
      const obj = parent as Record<string, unknown>;
      if (op.op !== 'add' && !Object.hasOwn(obj, last)) throw new Error(`no member at ${op.path}`);
      if (op.op === 'remove') delete obj[last];
      else obj[last] = structuredClone(op.value);
    } else {
      throw new Error(`parent of ${op.path} is not a container`);
    }
  }
  return root as T;
}

function arrayIndex(t: string, path: string): number {
  if (!/^(0|[1-9]\d*)$/.test(t)) throw new Error(`bad array index in ${path}`);
  return Number(t);
}

function child(parent: unknown, t: string, path: string): unknown {
  if (Array.isArray(parent)) {
    const i = arrayIndex(t, path);
    if (i >= parent.length) throw new Error(`index out of range in ${path}`);
    return parent[i];
  }
  if (typeof parent === 'object' && parent !== null && Object.hasOwn(parent, t)) {
    return (parent as Record<string, unknown>)[t];
  }
  throw new Error(`no member ${t} in ${path}`);
}

/** A RunnerPodCluster in memory: objects keyed `namespace/name`, every call recorded. */
export class FakeRunnerPodCluster implements RunnerPodCluster {
  readonly statefulSets = new Map<string, KubeObject>();
  readonly runnerSets = new Map<string, RunnerSet>();
  readonly secrets = new Map<string, KubeObject>();
  /** Secrets written, in order. */
  readonly applied: KubeObject[] = [];
  readonly reads: string[] = [];
  /** Thrown by every lookup when set (an unreachable API server). */
  lookupError: unknown;
  /** Thrown by applySecret when set. */
  applyError: unknown;

  private async read<T>(kind: string, map: Map<string, T>, ns: string, name: string): Promise<T | undefined> {
    this.reads.push(`${kind} ${ns}/${name}`);
    if (this.lookupError !== undefined) throw this.lookupError;
    return structuredClone(map.get(`${ns}/${name}`));
  }

  statefulSet(ns: string, name: string) {
    return this.read('StatefulSet', this.statefulSets, ns, name);
  }
  runnerSet(ns: string, name: string) {
    return this.read('RunnerSet', this.runnerSets, ns, name);
  }
  secret(ns: string, name: string) {
    return this.read('Secret', this.secrets, ns, name);
  }
  async applySecret(secret: KubeObject): Promise<void> {
    if (this.applyError !== undefined) throw this.applyError;
    this.applied.push(structuredClone(secret));
    this.secrets.set(`${secret.metadata.namespace}/${secret.metadata.name}`, structuredClone(secret));
  }

  /** A RunnerSet and one StatefulSet it controls; returns the pod's owner reference. */
  addRunnerSet(o: {
    namespace: string;
    name: string;
    uid: string;
    spec: Partial<RunnerSet['spec']>;
    statefulSet: { name: string; uid: string };
  }): OwnerReference {
    this.runnerSets.set(`${o.namespace}/${o.name}`, {
      apiVersion: 'actions.summerwind.dev/v1alpha1',
      kind: 'RunnerSet',
      metadata: { name: o.name, namespace: o.namespace, uid: o.uid },
      spec: o.spec as RunnerSet['spec'],
    });
    this.statefulSets.set(`${o.namespace}/${o.statefulSet.name}`, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: {
        name: o.statefulSet.name,
        namespace: o.namespace,
        uid: o.statefulSet.uid,
        ownerReferences: [
          {
            apiVersion: 'actions.summerwind.dev/v1alpha1',
            kind: 'RunnerSet',
            name: o.name,
            uid: o.uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
    });
    return {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      name: o.statefulSet.name,
      uid: o.statefulSet.uid,
      controller: true,
      blockOwnerDeletion: true,
    };
  }
}
