import type { EventHandler, Informer, UpdatePredicate, Watchable } from './informer.ts';
import type { KubeObject, ReadonlyStore } from './store.ts';

/**
 * Informers of one resource whose selectors are disjoint (no object matches two of them), watched
 * and read as one cache. A label selector can only AND its terms, so "has any of these labels" takes
 * one informer per label, each excluding the labels before it (`a`; `!a,b`; `!a,!b,c`).
 *
 * An object whose labels change so that it moves from one part to another is, to handlers, deleted
 * by one part and added by the other (in whichever order the two watches deliver).
 */
export class InformerUnion<T extends KubeObject> implements Watchable<T> {
  readonly parts: readonly Informer<T>[];
  readonly store: ReadonlyStore<T>;

  constructor(parts: readonly Informer<T>[]) {
    if (parts.length === 0) throw new Error('an informer union needs at least one informer');
    this.parts = parts;
    this.store = new UnionStore(parts.map((p) => p.store));
  }

  addHandler(handler: EventHandler<T>, predicates: UpdatePredicate<T>[] = []): void {
    for (const p of this.parts) p.addHandler(handler, predicates);
  }

  async waitForSync(signal?: AbortSignal): Promise<void> {
    await Promise.all(this.parts.map((p) => p.waitForSync(signal)));
  }

  hasSynced(): boolean {
    return this.parts.every((p) => p.hasSynced());
  }
}

class UnionStore<T extends KubeObject> implements ReadonlyStore<T> {
  private readonly stores: readonly ReadonlyStore<T>[];

  constructor(stores: readonly ReadonlyStore<T>[]) {
    this.stores = stores;
  }

  get size(): number {
    return this.stores.reduce((n, s) => n + s.size, 0);
  }

  get(key: string): T | undefined {
    for (const s of this.stores) {
      const o = s.get(key);
      if (o) return o;
    }
    return undefined;
  }

  getByName(namespace: string | undefined, name: string): T | undefined {
    for (const s of this.stores) {
      const o = s.getByName(namespace, name);
      if (o) return o;
    }
    return undefined;
  }

  list(namespace?: string): T[] {
    return this.stores.flatMap((s) => s.list(namespace));
  }

  keys(): string[] {
    return this.stores.flatMap((s) => s.keys());
  }

  byIndex(index: string, value: string): T[] {
    return this.stores.flatMap((s) => s.byIndex(index, value));
  }

  byOwnerUid(uid: string): T[] {
    return this.stores.flatMap((s) => s.byOwnerUid(uid));
  }

  byLabel(key: string, value: string): T[] {
    return this.stores.flatMap((s) => s.byLabel(key, value));
  }
}
