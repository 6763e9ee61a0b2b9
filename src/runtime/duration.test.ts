import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatDuration } from './duration.ts';

test('formatDuration states the duration exactly', () => {
  const cases: [number, string][] = [
    [0, '0ms'],
    [250, '250ms'],
    [1000, '1s'],
    [1500, '1.5s'],
    [40_000, '40s'],
    [60_000, '1m'],
    [90_000, '1m30s'],
    [600_000, '10m'],
    [3_600_000, '1h'],
    [3_900_000, '1h5m'],
    [3_601_250, '1h1.25s'],
  ];
  for (const [ms, text] of cases) assert.equal(formatDuration(ms), text, String(ms));
});
