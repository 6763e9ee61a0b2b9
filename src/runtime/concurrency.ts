/**
 * Runs `fn` over `items` with at most `limit` calls in flight, in order of the items. Every item is
 * attempted even when one fails (a failed write must not stop the unrelated ones of the same round);
 * the first error is thrown once all have settled.
 */
export async function forEachConcurrently<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  let firstError: { err: unknown } | undefined;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      try {
        await fn(items[i] as T, i);
      } catch (err) {
        firstError ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (firstError) throw firstError.err;
}
