import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { SandboxSummary } from '../src/sandbox/sandbox.ts';
import { runSandbox } from './support/sandbox.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function assertHealthy(summary: SandboxSummary): void {
  assert.equal(summary.runners, 2);
  assert.ok(summary.pods.started >= 2, `pods started: ${summary.pods.started}`);
  assert.ok(summary.jobs.completed >= 1, `jobs completed: ${summary.jobs.completed}`);
  assert.equal(summary.jobs.cancelledByController, 0);
  assert.equal(summary.leakedRunners, 0);
  assert.equal(summary.controller.exitCode, 0, 'paddock stopped cleanly');
  assert.ok(summary.replacementLatencyMs.count >= 1, 'finished ephemeral runners were replaced');
  assert.ok(summary.github.rateLimitedRequests >= 1);
  assert.equal(summary.owner?.desired, 2);
  // Not current/ready: a RunnerReplicaSet reports 0 for a moment whenever it deletes a finished Runner.
  assert.equal(typeof summary.owner?.current, 'number');
}

test('paddock sandbox runs the whole system with a RunnerDeployment, then exits 0 with a JSON summary', async () => {
  const summary = await runSandbox([]);
  assert.equal(summary.kind, 'RunnerDeployment', 'the default kind');
  assert.equal(summary.owner?.kind, 'RunnerDeployment');
  assertHealthy(summary);
});

test('paddock sandbox --kind runnerset runs a RunnerSet the same way', async () => {
  const summary = await runSandbox(['--kind', 'runnerset']);
  assert.equal(summary.kind, 'RunnerSet');
  assert.equal(summary.owner?.kind, 'RunnerSet');
  assertHealthy(summary);
});

test('paddock sandbox --autoscale webhook: signed deliveries (some lost or repeated) drive an HRA from zero', async () => {
  const summary = await runSandbox([
    '--autoscale',
    'webhook',
    '--chaos-webhook-drop',
    '0.1',
    '--chaos-webhook-duplicate',
    '0.2',
  ]);
  const a = summary.autoscale;
  assert.equal(a?.mode, 'webhook');
  assert.ok((a?.deliveries?.sent ?? 0) >= 3, `deliveries sent: ${JSON.stringify(a?.deliveries)}`);
  assert.equal(a?.deliveries?.failed, 0, 'every delivery that was sent was taken');
  assert.ok(summary.jobs.completed >= 1, `jobs completed: ${summary.jobs.completed}`);
  assert.ok(summary.pods.started >= 1);
  assert.equal(summary.jobs.cancelledByController, 0);
  assert.equal(summary.leakedRunners, 0);
  assert.equal(summary.controller.exitCode, 0);
  assert.equal(typeof a?.idleRunnerMinutes, 'number');
  assert.equal(typeof a?.queuedJobMinutes, 'number');
});

test('paddock sandbox --help names --kind; an unknown kind is a usage error before anything starts', async () => {
  const run = async (args: string[]) => {
    const child = spawn(process.execPath, [path.join(root, 'bin/paddock.js'), 'sandbox', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      out += d.toString();
    });
    // 'close': after the output, which may arrive after 'exit'.
    const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? 1)));
    return { code, out };
  };
  const help = await run(['--help']);
  assert.equal(help.code, 0);
  assert.match(
    help.out,
    /--kind <string>[\s\S]*runnerdeployment[\s\S]*runnerset[\s\S]*default runnerdeployment/,
  );
  const bad = await run(['--kind', 'deployment']);
  assert.equal(bad.code, 2);
  assert.match(bad.out, /--kind: one of runnerdeployment, runnerset/);
  const badMode = await run(['--autoscale', 'push']);
  assert.equal(badMode.code, 2);
  assert.match(badMode.out, /--autoscale: webhook or pull/);
  const badShare = await run(['--chaos-webhook-drop', '2']);
  assert.equal(badShare.code, 2);
  assert.match(badShare.out, /--chaos-webhook-drop: a share between 0 and 1/);
});
