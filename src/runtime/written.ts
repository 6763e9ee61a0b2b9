import { type KubeObject, objectKey } from './store.ts';

/**
 * Objects a controller wrote, kept until its informer cache has caught up with them. A reconcile
 * that runs on the watch event of one write may still see the object as it was before the write
 * and repeat it; at a thousand objects that is hundreds of needless requests a minute. Resource
 * versions are compared as the numbers the API server issues; one that does not parse as a number
 * makes the cache win.
 */
export class WrittenObjects<T extends KubeObject> {
  private readonly byKey = new Map<string, T>();

  remember(obj: T | undefined): void {
    if (obj?.metadata.name) this.byKey.set(objectKey(obj), obj);
  }

  forget(key: string): void {
    this.byKey.delete(key);
  }

  /** The newer of the cached object and the one last written; the write is dropped once the cache has it. */
  newest(key: string, cached: T | undefined): T | undefined {
    const written = this.byKey.get(key);
    if (!written) return cached;
    if (!cached || cached.metadata.uid !== written.metadata.uid) {
      // Gone, or a new object of the same name: the cache knows better.
      this.byKey.delete(key);
      return cached;
    }
    const c = version(cached);
    const w = version(written);
    if (c === undefined || w === undefined || c >= w) {
      this.byKey.delete(key);
      return cached;
    }
    return written;
  }

  get size(): number {
    return this.byKey.size;
  }
}

function version(obj: KubeObject): bigint | undefined {
  const rv = obj.metadata.resourceVersion;
  if (!rv || !/^\d+$/.test(rv)) return undefined;
  return BigInt(rv);
}
