import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type FlagSpec, parseDuration, parseFlags, renderHelp, UsageError } from './flags.ts';

describe('flags', () => {
  test('durations: units, combinations, and bare numbers as seconds', () => {
    assert.equal(parseDuration('60'), 60_000, '`--duration 60` means a minute');
    assert.equal(parseDuration('1.5'), 1500);
    assert.equal(parseDuration('500ms'), 500);
    assert.equal(parseDuration('1m30s'), 90_000);
    assert.equal(parseDuration('2h'), 7_200_000);
    assert.throws(() => parseDuration('5x'), UsageError);
    assert.throws(() => parseDuration('1m junk'), UsageError);
  });

  const specs: FlagSpec[] = [
    { group: 'G', name: 'sync-period', type: 'duration', env: 'SYNC_PERIOD', default: '1m', help: 'h' },
    {
      group: 'G',
      name: 'leader-elect',
      aliases: ['enable-leader-election'],
      type: 'boolean',
      default: 'false',
      help: 'h',
    },
    { group: 'G', name: 'labels', type: 'list', env: 'LABELS', help: 'h' },
    { group: 'G', name: 'replicas', type: 'integer', help: 'h' },
  ];

  test('a flag beats its variable, the variable beats the default', () => {
    assert.equal(parseFlags(specs, [], {}).values['sync-period'], 60_000);
    assert.equal(parseFlags(specs, [], { SYNC_PERIOD: '30s' }).values['sync-period'], 30_000);
    assert.equal(
      parseFlags(specs, ['--sync-period', '10s'], { SYNC_PERIOD: '30s' }).values['sync-period'],
      10_000,
    );
  });

  test('aliases, lists, booleans from the environment, integers', () => {
    assert.equal(parseFlags(specs, ['--enable-leader-election'], {}).values['leader-elect'], true);
    assert.deepEqual(parseFlags(specs, ['--labels', 'a,b', '--labels', 'c,'], {}).values.labels, [
      'a',
      'b',
      'c',
    ]);
    assert.deepEqual(parseFlags(specs, [], { LABELS: 'x, y' }).values.labels, ['x', 'y']);
    assert.throws(() => parseFlags(specs, ['--replicas', '1.5'], {}), /--replicas: expected an integer/);
    assert.throws(() => parseFlags(specs, ['--nope'], {}), UsageError);
  });

  test('help names every flag, its variable and default', () => {
    const help = renderHelp('run', 'summary', specs);
    assert.match(help, /--sync-period <duration>\n\s+h \(env SYNC_PERIOD; default 1m\)/);
    assert.match(help, /--leader-elect, --enable-leader-election/);
  });
});
