import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { FakeClock } from './clock.ts';
import { EventRecorder } from './events.ts';
import type { KubeHttp } from './kube-http.ts';

test('Event writes wait their turn (4 at once) and a backlog beyond 1,000 is dropped, not hoarded', async () => {
  let inFlight = 0;
  let most = 0;
  const gates: (() => void)[] = [];
  const http = {
    async request() {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise<void>((resolve) => gates.push(resolve));
      inFlight--;
      return {};
    },
  } as unknown as KubeHttp;
  const recorder = new EventRecorder({
    http,
    clock: new FakeClock(),
    log: pino({ level: 'silent' }),
    reportingController: 'paddock.dev/test',
    reportingInstance: 'test',
  });
  const regarding = { apiVersion: 'v1', kind: 'Pod', namespace: 'ns', name: 'p', uid: 'u' };
  for (let i = 0; i < 1010; i++)
    recorder.record({ regarding, type: 'Normal', reason: 'R', note: `event ${i}` });
  await new Promise((r) => setImmediate(r));
  assert.equal(most, 4);
  assert.equal(recorder.dropped, 6, '4 in flight, 1,000 waiting, the rest dropped');
  while (recorder.writes < 1004) {
    gates.shift()?.();
    await new Promise((r) => setImmediate(r));
  }
  for (const g of gates.splice(0)) g();
  await new Promise((r) => setImmediate(r));
  assert.equal(most, 4);
  assert.equal(recorder.writes, 1004);
});

test('series are forgotten past their window, and beyond the limit the least recently observed go first', async () => {
  let creates = 0;
  const http = {
    async request(method: string) {
      if (method === 'POST') creates++;
      return {};
    },
  } as unknown as KubeHttp;
  const clock = new FakeClock();
  const recorder = new EventRecorder({
    http,
    clock,
    log: pino({ level: 'silent' }),
    reportingController: 'paddock.dev/test',
    reportingInstance: 'test',
    maxTracked: 2,
    seriesWindowMs: 60_000,
  });
  const pod = (name: string) => ({ apiVersion: 'v1', kind: 'Pod', namespace: 'ns', name, uid: name });
  const record = (name: string) =>
    recorder.record({ regarding: pod(name), type: 'Normal', reason: 'R', note: 'n' });
  record('a');
  record('b');
  await clock.advance(1000);
  record('a'); // a repeat: the same series, now the most recently observed
  record('c'); // over the limit: b goes, not a
  assert.equal(recorder.tracked, 2);
  await new Promise((r) => setImmediate(r));
  const before = creates;
  record('a');
  await new Promise((r) => setImmediate(r));
  assert.equal(creates, before, 'a is still a series: counted, not created again');
  await clock.advance(61_000);
  record('d'); // a and c are past their window
  assert.equal(recorder.tracked, 1);
});
