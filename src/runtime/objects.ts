import { isInvalid, isNotFound, KubeError } from './errors.ts';
import { apiVersionOf, type ResourceRef, resourcePath } from './informer.ts';
import { type KubeHttp, PATCH_CONTENT_TYPES } from './kube-http.ts';
import type { KubeObject, OwnerReference } from './store.ts';

/** The one field manager name paddock writes with; never change it (SSA ownership is keyed on it). */
export const FIELD_MANAGER = 'paddock';

export function controllerReference(owner: KubeObject): OwnerReference {
  const { name, uid } = owner.metadata;
  if (!owner.apiVersion || !owner.kind || !name || !uid) {
    throw new Error('owner needs apiVersion, kind, name and uid for an owner reference');
  }
  return {
    apiVersion: owner.apiVersion,
    kind: owner.kind,
    name,
    uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

export function isControlledBy(obj: KubeObject, owner: KubeObject): boolean {
  return (obj.metadata.ownerReferences ?? []).some((r) => r.controller && r.uid === owner.metadata.uid);
}

export function hasFinalizer(obj: KubeObject, finalizer: string): boolean {
  return (obj.metadata.finalizers ?? []).includes(finalizer);
}

export function objectPath(
  r: ResourceRef,
  obj: { metadata: { name?: string; namespace?: string } },
  sub?: string,
): string {
  const path = resourcePath(r, obj.metadata.namespace, obj.metadata.name);
  return sub ? `${path}/${sub}` : path;
}

export interface PatchOptions {
  subresource?: 'status' | 'scale';
}

export async function mergePatch<T extends KubeObject>(
  http: KubeHttp,
  r: ResourceRef,
  target: { metadata: { name?: string; namespace?: string } },
  patch: unknown,
  opts: PatchOptions = {},
): Promise<T> {
  return await http.request<T>('PATCH', objectPath(r, target, opts.subresource), {
    body: patch,
    contentType: PATCH_CONTENT_TYPES.merge,
    query: { fieldManager: FIELD_MANAGER },
  });
}

export type JsonPatchOp =
  | { op: 'add' | 'replace' | 'test'; path: string; value: unknown }
  | { op: 'remove'; path: string };

export async function jsonPatch<T extends KubeObject>(
  http: KubeHttp,
  r: ResourceRef,
  target: { metadata: { name?: string; namespace?: string } },
  ops: JsonPatchOp[],
  opts: PatchOptions = {},
): Promise<T> {
  return await http.request<T>('PATCH', objectPath(r, target, opts.subresource), {
    body: ops,
    contentType: PATCH_CONTENT_TYPES.json,
    query: { fieldManager: FIELD_MANAGER },
  });
}

/** Server-side apply of the fields in `obj` (which must name apiVersion, kind, name and namespace). */
export async function serverSideApply<T extends KubeObject>(
  http: KubeHttp,
  r: ResourceRef,
  obj: KubeObject,
  opts: PatchOptions & { force?: boolean } = {},
): Promise<T> {
  const body = { apiVersion: apiVersionOf(r), kind: r.kind, ...obj };
  return await http.request<T>('PATCH', objectPath(r, obj, opts.subresource), {
    body,
    contentType: PATCH_CONTENT_TYPES.apply,
    query: { fieldManager: FIELD_MANAGER, ...(opts.force ? { force: 'true' } : {}) },
  });
}

const FINALIZER_ATTEMPTS = 25;

/**
 * Adds a finalizer with a JSON Patch guarded by a `test` of the current list, so concurrent writers
 * cannot drop each other's finalizers; a failed test (422) re-reads and tries again. Returns the
 * updated object, or undefined when it no longer exists.
 */
export async function addFinalizer<T extends KubeObject>(
  http: KubeHttp,
  r: ResourceRef,
  obj: T,
  finalizer: string,
): Promise<T | undefined> {
  return await guardedFinalizerUpdate(http, r, obj, (current) => {
    const list = current.metadata.finalizers;
    if (list?.includes(finalizer)) return undefined;
    if (!list || list.length === 0) {
      return [
        { op: 'test', path: '/metadata/finalizers', value: list ?? null },
        { op: list ? 'replace' : 'add', path: '/metadata/finalizers', value: [finalizer] },
      ];
    }
    return [
      { op: 'test', path: '/metadata/finalizers', value: list },
      { op: 'add', path: '/metadata/finalizers/-', value: finalizer },
    ];
  });
}

/**
 * Removes a finalizer, guarded the same way. `annotations` (null removes a key) are written in the
 * same request: a last record on an object about to go costs no write of its own.
 */
export async function removeFinalizer<T extends KubeObject>(
  http: KubeHttp,
  r: ResourceRef,
  obj: T,
  finalizer: string,
  annotations: Record<string, string | null> = {},
): Promise<T | undefined> {
  return await guardedFinalizerUpdate(http, r, obj, (current) => {
    const list = current.metadata.finalizers ?? [];
    const i = list.indexOf(finalizer);
    if (i < 0) return undefined;
    return [
      { op: 'test', path: '/metadata/finalizers', value: list },
      { op: 'remove', path: `/metadata/finalizers/${i}` },
      ...annotationOps(current.metadata.annotations, annotations),
    ];
  });
}

/** JSON-patch operations that set (or, for null, remove) annotations on an object as it is now. */
export function annotationOps(
  current: Record<string, string> | undefined,
  changes: Record<string, string | null>,
): JsonPatchOp[] {
  const set = Object.entries(changes).filter((e): e is [string, string] => e[1] !== null);
  const drop = Object.keys(changes).filter((k) => changes[k] === null && current && k in current);
  if (!current)
    return set.length > 0
      ? [{ op: 'add', path: '/metadata/annotations', value: Object.fromEntries(set) }]
      : [];
  const pointer = (k: string) => `/metadata/annotations/${k.replaceAll('~', '~0').replaceAll('/', '~1')}`;
  return [
    ...set.map(([k, v]): JsonPatchOp => ({ op: 'add', path: pointer(k), value: v })),
    ...drop.map((k): JsonPatchOp => ({ op: 'remove', path: pointer(k) })),
  ];
}

async function guardedFinalizerUpdate<T extends KubeObject>(
  http: KubeHttp,
  r: ResourceRef,
  obj: T,
  plan: (current: T) => JsonPatchOp[] | undefined,
): Promise<T | undefined> {
  let current: T | undefined = obj;
  for (let attempt = 0; attempt < FINALIZER_ATTEMPTS; attempt++) {
    const ops = plan(current);
    if (!ops) return current;
    try {
      return await jsonPatch<T>(http, r, current, ops);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      if (!isInvalid(err)) throw err;
      // The list changed under us: back off a little (writers collide less), re-read, redo the plan.
      await new Promise((r) => setTimeout(r, Math.random() * 10 * (attempt + 1)));
      try {
        current = await http.request<T>('GET', objectPath(r, current));
      } catch (readErr) {
        if (isNotFound(readErr)) return undefined;
        throw readErr;
      }
    }
  }
  throw new KubeError({
    code: 409,
    reason: 'Conflict',
    message: `finalizers of ${obj.metadata.namespace}/${obj.metadata.name} kept changing; giving up after ${FINALIZER_ATTEMPTS} attempts`,
  });
}
