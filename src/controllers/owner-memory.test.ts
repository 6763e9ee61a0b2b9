import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeClock } from '../runtime/clock.ts';
import type { KubeObject } from '../runtime/store.ts';
import { ASKED_MEMORY_MS, OwnerSyncMemory } from './owner-memory.ts';

describe('OwnerSyncMemory: deleted owners', () => {
  test('an owner deleted moments ago counts as being deleted until the cache shows it, it is gone, or time runs out', async () => {
    const clock = new FakeClock();
    const memory = new OwnerSyncMemory(clock);
    const owner: KubeObject = { metadata: { name: 'r1', uid: 'u1' } };
    assert.equal(memory.ownerDeletedRecently('ns/rs', owner), false);
    memory.rememberDeletedOwner('ns/rs', 'u1');
    assert.equal(memory.ownerDeletedRecently('ns/rs', owner), true);
    assert.equal(memory.ownerDeletedRecently('ns/other', owner), false, 'per parent');
    const shown: KubeObject = { metadata: { ...owner.metadata, deletionTimestamp: '2026-12-03T10:00:00Z' } };
    assert.equal(memory.ownerDeletedRecently('ns/rs', shown), false, 'the cache shows it');
    memory.forgetSettled('ns/rs', [shown], []);
    assert.equal(memory.ownerDeletedRecently('ns/rs', owner), false, 'forgotten once shown');

    memory.rememberDeletedOwner('ns/rs', 'u1');
    await clock.advance(ASKED_MEMORY_MS);
    assert.equal(memory.ownerDeletedRecently('ns/rs', owner), false, 'bounded in time (a lost watch event)');
  });
});

describe('OwnerSyncMemory: the desired replicas of the last creations', () => {
  test('remembered by a creating round, lowered when the desired count falls', () => {
    const m = new OwnerSyncMemory(new FakeClock());
    assert.equal(m.desiredAtLastCreation('ns/rrs', 3), undefined, 'nothing since start');
    m.expectCreations('ns/rrs', 5);
    assert.equal(m.desiredAtLastCreation('ns/rrs', 7), 5);
    assert.equal(m.desiredAtLastCreation('ns/rrs', 2), 2);
    assert.equal(m.desiredAtLastCreation('ns/rrs', 4), 2, 'a raise counts from the lowest point');
  });
});
