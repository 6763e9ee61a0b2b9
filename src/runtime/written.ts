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
    if (!cached || supersedes(cached, written)) {
      this.byKey.delete(key);
      return cached;
    }
    return written;
  }

  /**
   * The cache has this object now (an informer event): a write it supersedes is dropped at once. A
   * write whose watch event wakes no reconcile (a status write the controller filters out) would
   * otherwise be held, a whole object per key, until the next reconcile of that key.
   */
  observe(cached: T): void {
    const key = objectKey(cached);
    const written = this.byKey.get(key);
    if (written && supersedes(cached, written)) this.byKey.delete(key);
  }

  get size(): number {
    return this.byKey.size;
  }
}

/** The cached object is a new one of the same name, or at least as new as the write. */
function supersedes(cached: KubeObject, written: KubeObject): boolean {
  if (cached.metadata.uid !== written.metadata.uid) return true;
  const c = version(cached);
  const w = version(written);
  return c === undefined || w === undefined || c >= w;
}

function version(obj: KubeObject): bigint | undefined {
  const rv = obj.metadata.resourceVersion;
  if (!rv || !/^\d+$/.test(rv)) return undefined;
  return BigInt(rv);
}
