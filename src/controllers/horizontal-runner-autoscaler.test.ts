import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { reposOf } from './horizontal-runner-autoscaler.ts';

describe('reposOf (TotalNumberOfQueuedAndInProgressWorkflowRuns)', () => {
  test("a repository target's own repository; an organization's named ones; ARC's errors otherwise", () => {
    assert.deepEqual(reposOf({ spec: { repository: 'acme/app' } }, ['ignored']), [
      { owner: 'acme', repo: 'app' },
    ]);
    assert.deepEqual(reposOf({ spec: { organization: 'acme' } }, ['app', 'web']), [
      { owner: 'acme', repo: 'app' },
      { owner: 'acme', repo: 'web' },
    ]);
    assert.throws(() => reposOf({ spec: { organization: 'acme' } }, []), /repositoryNames is required/);
    assert.throws(() => reposOf({ spec: {} }, ['app']), /organization should not be empty/);
  });
});
