/**
 * RFC 6902 JSON patches computed as the difference of two JSON documents, for admission responses:
 * the API server applies them to the object it sent, so they must be exact for that object.
 */

export type JsonPatchOp =
  | { op: 'add'; path: string; value: unknown }
  | { op: 'replace'; path: string; value: unknown }
  | { op: 'remove'; path: string };

/** One reference token of an RFC 6901 pointer: `~` becomes `~0`, `/` becomes `~1`. */
export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

export function pointer(tokens: readonly (string | number)[]): string {
  return tokens.map((t) => `/${escapePointerToken(String(t))}`).join('');
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isObject(a)) {
    if (!isObject(b)) return false;
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => k in b && deepEqual(a[k], b[k]));
  }
  return false;
}

/**
 * The operations that turn `from` into `to`. Objects are compared key by key, arrays index by index
 * (appended elements become `add` at the next index, dropped ones `remove` from the end); an array
 * whose every element changed is replaced whole. Keys whose value is `undefined` count as absent.
 */
export function diffJson(from: unknown, to: unknown, base: readonly (string | number)[] = []): JsonPatchOp[] {
  if (deepEqual(from, to)) return [];
  if (isObject(from) && isObject(to)) {
    const ops: JsonPatchOp[] = [];
    for (const k of Object.keys(from)) {
      if (from[k] !== undefined && to[k] === undefined)
        ops.push({ op: 'remove', path: pointer([...base, k]) });
    }
    for (const k of Object.keys(to)) {
      if (to[k] === undefined) continue;
      if (from[k] === undefined) ops.push({ op: 'add', path: pointer([...base, k]), value: to[k] });
      else ops.push(...diffJson(from[k], to[k], [...base, k]));
    }
    return ops;
  }
  if (Array.isArray(from) && Array.isArray(to)) {
    const common = Math.min(from.length, to.length);
    const ops: JsonPatchOp[] = [];
    let changed = Math.abs(from.length - to.length);
    for (let i = 0; i < common; i++) {
      const sub = diffJson(from[i], to[i], [...base, i]);
      if (sub.length > 0) changed++;
      ops.push(...sub);
    }
    // An array whose every element changed is said more plainly by the new array itself.
    if (changed > 1 && changed >= Math.max(from.length, to.length)) {
      return [{ op: 'replace', path: pointer(base), value: to }];
    }
    for (let i = common; i < to.length; i++)
      ops.push({ op: 'add', path: pointer([...base, i]), value: to[i] });
    for (let i = from.length - 1; i >= common; i--) ops.push({ op: 'remove', path: pointer([...base, i]) });
    return ops;
  }
  return [{ op: 'replace', path: pointer(base), value: to }];
}
