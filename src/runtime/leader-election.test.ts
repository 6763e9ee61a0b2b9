import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { leaseDecision, nextLeaseSpec } from './leader-election.ts';

const T = Date.parse('2026-06-01T12:00:00Z');
const LEASE = 15_000;

describe('leaseDecision', () => {
  const decide = (lease: Parameters<typeof leaseDecision>[0]['lease'], observedAt: number, now: number) =>
    leaseDecision({ lease, identity: 'me', observedAt, now, leaseDurationMs: LEASE });

  test('no lease → create', () => {
    assert.deepEqual(decide(undefined, T, T), { action: 'create' });
  });

  test('our own lease → renew, whatever the times say', () => {
    assert.deepEqual(decide({ holderIdentity: 'me', leaseDurationSeconds: 15 }, T - 60_000, T), {
      action: 'renew',
    });
  });

  test('released lease (empty holder) → acquire at once', () => {
    assert.deepEqual(decide({ holderIdentity: '', leaseDurationSeconds: 1 }, T, T), {
      action: 'acquire',
      takeover: false,
    });
  });

  test('another holder: wait until observed time + lease duration, then take over', () => {
    const lease = { holderIdentity: 'other', leaseDurationSeconds: 15 };
    assert.deepEqual(decide(lease, T, T), { action: 'wait', holder: 'other', expiresAt: T + LEASE });
    assert.equal(decide(lease, T, T + LEASE - 1).action, 'wait');
    assert.deepEqual(decide(lease, T, T + LEASE), { action: 'acquire', takeover: true });
    assert.deepEqual(decide(lease, T, T + LEASE + 1000), { action: 'acquire', takeover: true });
  });

  test('the holder’s own leaseDurationSeconds counts, not ours', () => {
    const lease = { holderIdentity: 'other', leaseDurationSeconds: 60 };
    assert.equal(decide(lease, T, T + 30_000).action, 'wait');
    assert.equal(decide(lease, T, T + 60_000).action, 'acquire');
  });

  test('a skewed renewTime in the record does not matter: only our observation does', () => {
    const lease = {
      holderIdentity: 'other',
      leaseDurationSeconds: 15,
      renewTime: '2000-01-01T00:00:00.000000Z',
    };
    assert.equal(decide(lease, T, T + 1000).action, 'wait');
  });
});

describe('nextLeaseSpec', () => {
  test('create starts at zero transitions', () => {
    const spec = nextLeaseSpec({ action: 'create' }, undefined, 'me', T, LEASE);
    assert.equal(spec.holderIdentity, 'me');
    assert.equal(spec.leaseDurationSeconds, 15);
    assert.equal(spec.leaseTransitions, 0);
    assert.equal(spec.acquireTime, '2026-06-01T12:00:00.000000Z');
    assert.equal(spec.renewTime, spec.acquireTime);
  });

  test('renew keeps acquireTime and transitions', () => {
    const cur = { holderIdentity: 'me', acquireTime: 'A', leaseTransitions: 4 };
    const spec = nextLeaseSpec({ action: 'renew' }, cur, 'me', T + 2000, LEASE);
    assert.equal(spec.acquireTime, 'A');
    assert.equal(spec.leaseTransitions, 4);
    assert.equal(spec.renewTime, '2026-06-01T12:00:02.000000Z');
  });

  test('taking over from another holder counts a transition', () => {
    const cur = { holderIdentity: 'other', acquireTime: 'A', leaseTransitions: 4 };
    const spec = nextLeaseSpec({ action: 'acquire', takeover: true }, cur, 'me', T, LEASE);
    assert.equal(spec.leaseTransitions, 5);
    assert.equal(spec.holderIdentity, 'me');
  });
});
