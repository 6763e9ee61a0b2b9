/**
 * Objects as the API server sends them (raw JSON), and a keyed store with secondary indexes.
 */

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  managedFields?: unknown[];
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

/** `namespace/name`, or `name` for cluster-scoped objects: the work-queue key. */
export function objectKey(obj: { metadata: { name?: string; namespace?: string } }): string {
  const { name = '', namespace } = obj.metadata;
  return namespace ? `${namespace}/${name}` : name;
}

export function splitKey(key: string): { namespace?: string; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export type IndexFunc<T> = (obj: T) => string[];

export const OWNER_UID_INDEX = 'ownerUid';
export const LABEL_INDEX = 'label';
export const CONTROLLER_UID_INDEX = 'controllerUid';

export const defaultIndexers: Record<string, IndexFunc<KubeObject>> = {
  [OWNER_UID_INDEX]: (o) => (o.metadata.ownerReferences ?? []).map((r) => r.uid),
  [CONTROLLER_UID_INDEX]: (o) =>
    (o.metadata.ownerReferences ?? []).filter((r) => r.controller).map((r) => r.uid),
  [LABEL_INDEX]: (o) => Object.entries(o.metadata.labels ?? {}).map(([k, v]) => `${k}=${v}`),
};

/** A store as its readers see it: one informer's, or several disjoint ones read as one (InformerUnion). */
export interface ReadonlyStore<T extends KubeObject = KubeObject> {
  readonly size: number;
  get(key: string): T | undefined;
  getByName(namespace: string | undefined, name: string): T | undefined;
  list(namespace?: string): T[];
  keys(): string[];
  byIndex(index: string, value: string): T[];
  byOwnerUid(uid: string): T[];
  byLabel(key: string, value: string): T[];
}

export class Store<T extends KubeObject = KubeObject> implements ReadonlyStore<T> {
  private readonly items = new Map<string, T>();
  private readonly indexers: Record<string, IndexFunc<T>>;
  private readonly indexes = new Map<string, Map<string, Set<string>>>();

  constructor(indexers: Record<string, IndexFunc<T>> = defaultIndexers as Record<string, IndexFunc<T>>) {
    this.indexers = { ...indexers };
    for (const name of Object.keys(indexers)) this.indexes.set(name, new Map());
  }

  get size(): number {
    return this.items.size;
  }

  /** Adds an index later (shared informers: another user may need one the creator did not). */
  addIndexer(name: string, fn: IndexFunc<T>): void {
    if (this.indexers[name]) return;
    this.indexers[name] = fn;
    this.indexes.set(name, new Map());
    for (const [key, obj] of this.items) this.indexWith(name, fn, key, obj);
  }

  get(key: string): T | undefined {
    return this.items.get(key);
  }

  getByName(namespace: string | undefined, name: string): T | undefined {
    return this.items.get(namespace ? `${namespace}/${name}` : name);
  }

  list(namespace?: string): T[] {
    const all = [...this.items.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata.namespace === namespace);
  }

  keys(): string[] {
    return [...this.items.keys()];
  }

  byIndex(index: string, value: string): T[] {
    const keys = this.indexes.get(index)?.get(value);
    if (!keys) return [];
    return [...keys].map((k) => this.items.get(k)).filter((o): o is T => o !== undefined);
  }

  /** Objects that list `uid` among their ownerReferences. */
  byOwnerUid(uid: string): T[] {
    return this.byIndex(OWNER_UID_INDEX, uid);
  }

  byLabel(key: string, value: string): T[] {
    return this.byIndex(LABEL_INDEX, `${key}=${value}`);
  }

  /** Inserts or replaces; returns the previous object. */
  set(obj: T): T | undefined {
    const key = objectKey(obj);
    const old = this.items.get(key);
    if (old) this.unindex(key, old);
    this.items.set(key, obj);
    this.index(key, obj);
    return old;
  }

  delete(key: string): T | undefined {
    const old = this.items.get(key);
    if (!old) return undefined;
    this.unindex(key, old);
    this.items.delete(key);
    return old;
  }

  private index(key: string, obj: T): void {
    for (const [name, fn] of Object.entries(this.indexers)) this.indexWith(name, fn, key, obj);
  }

  private indexWith(name: string, fn: IndexFunc<T>, key: string, obj: T): void {
    const idx = this.indexes.get(name)!;
    for (const v of fn(obj)) {
      let set = idx.get(v);
      if (!set) {
        set = new Set();
        idx.set(v, set);
      }
      set.add(key);
    }
  }

  private unindex(key: string, obj: T): void {
    for (const [name, fn] of Object.entries(this.indexers)) {
      const idx = this.indexes.get(name)!;
      for (const v of fn(obj)) {
        const set = idx.get(v);
        set?.delete(key);
        if (set?.size === 0) idx.delete(v);
      }
    }
  }
}
