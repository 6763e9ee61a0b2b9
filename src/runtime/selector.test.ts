import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { selectorMatches } from './selector.ts';

describe('selectorMatches', () => {
  test('matchLabels and each operator, as the API server decides', () => {
    const labels = { app: 'runner', tier: 'ci' };
    const cases: [Parameters<typeof selectorMatches>[0], boolean][] = [
      [{}, true],
      [{ matchLabels: { app: 'runner' } }, true],
      [{ matchLabels: { app: 'web' } }, false],
      [{ matchExpressions: [{ key: 'tier', operator: 'In', values: ['ci', 'cd'] }] }, true],
      [{ matchExpressions: [{ key: 'tier', operator: 'In', values: ['cd'] }] }, false],
      [{ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }, true],
      [{ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['ci'] }] }, false],
      [{ matchExpressions: [{ key: 'app', operator: 'Exists' }] }, true],
      [{ matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] }, false],
      [{ matchExpressions: [{ key: 'app', operator: 'Gt', values: ['1'] }] }, false],
    ];
    for (const [selector, want] of cases)
      assert.equal(selectorMatches(selector, labels), want, JSON.stringify(selector));
    assert.equal(selectorMatches({ matchLabels: { app: 'runner' } }, undefined), false);
  });
});
