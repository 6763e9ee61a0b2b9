import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SandboxSummary } from '../../src/sandbox/sandbox.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// The README's first command, shortened: `make sandbox ARGS="--duration 60 --json"`.
export async function runSandbox(extra: string[]): Promise<SandboxSummary> {
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
      ...extra,
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
  // 'close': after the output, which may arrive after 'exit'.
  const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? 1)));
  assert.equal(code, 0, `exit code (stderr: ${err.slice(-2000)})`);
  const lines = out.trim().split('\n');
  assert.equal(lines.length, 1, 'exactly one JSON line on stdout');
  return JSON.parse(lines[0]!) as SandboxSummary;
}
