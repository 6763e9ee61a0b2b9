import { spawn } from 'node:child_process';
import path from 'node:path';

/**
 * Runs one of hack/'s build scripts (control plane, Helm): its stderr progress lines go to `log`,
 * and the last line it prints on stdout (the directory or binary it built) is the result.
 */
export function runBuildScript(script: string, log: (line: string) => void): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const child = spawn('bash', [script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n')) if (line.trim()) log(line);
    });
    child.on('error', reject);
    // 'close', not 'exit': the last line of stdout may arrive after the process has exited.
    child.on('close', (code) => {
      if (code === 0) resolve(out.trim().split('\n').pop() ?? '');
      else reject(new Error(`hack/${path.basename(script)} failed with exit code ${code}`));
    });
  });
}
