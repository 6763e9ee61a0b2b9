import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// The README's first command, shortened: `make sandbox ARGS="--duration 60 --json"`.
test('paddock sandbox runs the whole system, then exits 0 with a JSON summary', async () => {
  const child = spawn(
    process.execPath,
    [
      path.join(root, 'bin/paddock.js'),
      'sandbox',
      '--duration',
      '25s',
      '--json',
      '--runners',
      '2',
      '--job-rate',
      '30',
      '--job-duration',
      '3s',
      '--startup-delay',
      '1s',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PADDOCK_TEST_KUBECONFIG: '' } },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const code = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
  assert.equal(code, 0, `exit code (stderr: ${err.slice(-2000)})`);
  const lines = out.trim().split('\n');
  assert.equal(lines.length, 1, 'exactly one JSON line on stdout');
  const summary = JSON.parse(lines[0]!);
  assert.equal(summary.runners, 2);
  assert.ok(summary.pods.started >= 2, `pods started: ${summary.pods.started}`);
  assert.ok(summary.jobs.completed >= 1, `jobs completed: ${summary.jobs.completed}`);
  assert.equal(summary.jobs.cancelledByController, 0);
  assert.equal(summary.leakedRunners, 0);
  assert.equal(summary.controller.exitCode, 0, 'paddock stopped cleanly');
  assert.ok(summary.replacementLatencyMs.count >= 1, 'finished ephemeral runners were replaced');
  assert.ok(summary.github.rateLimitedRequests >= 1);
});
