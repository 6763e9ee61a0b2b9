import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RecentRemovals } from './recent-removals.ts';

test('recent removal answers are reused only while fresh, and only those that stay true', () => {
  const memo = new RecentRemovals(5_000);
  memo.record('acme/1', { kind: 'busy', message: 'Runner is busy' }, 1_000);
  memo.record('acme/2', { kind: 'removed' }, 1_000);
  memo.record('acme/3', { kind: 'notFound' }, 1_000);
  memo.record('acme/4', { kind: 'failed', status: 500, message: 'boom' }, 1_000);
  memo.record('acme/5', { kind: 'forbidden', message: 'Resource not accessible by integration' }, 1_000);
  assert.deepEqual(memo.get('acme/1', 5_999), { kind: 'busy', message: 'Runner is busy' });
  assert.deepEqual(memo.get('acme/2', 1_000), { kind: 'removed' });
  assert.equal(memo.get('acme/3', 1_000), undefined, '404 is confirmed by a fresh list instead');
  assert.equal(memo.get('acme/4', 1_000), undefined, 'failures are retried, never replayed');
  assert.equal(
    memo.get('acme/5', 1_000)?.kind,
    'forbidden',
    'a refusal is not asked again from a stale cache',
  );
  assert.equal(memo.get('acme/1', 6_000), undefined, 'expired');
  assert.equal(memo.get('other/1', 1_000), undefined);

  // A later failure replaces an earlier answer.
  memo.record('acme/2', { kind: 'rateLimited', resetAt: 9_000, cause: 'primary', message: 'limit' }, 2_000);
  assert.equal(memo.get('acme/2', 2_000), undefined);
});

test('the memo stays bounded', () => {
  const memo = new RecentRemovals(1_000);
  for (let i = 0; i < 1024; i++) memo.record(`s/${i}`, { kind: 'removed' }, 0);
  memo.record('s/new', { kind: 'removed' }, 5_000);
  assert.equal(memo.size, 1, 'expired entries were dropped');
});
