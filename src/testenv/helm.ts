import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runBuildScript } from './build-script.ts';

/**
 * The Helm command of the chart tests and `make manifests`: the version pinned in
 * hack/helm-bin/go.mod, built once from the Go module proxy by hack/build-helm.sh into paddock's
 * cache outside the repository (HELM_BIN_DIR overrides the directory, as for the script).
 */

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let pinnedVersion: string | undefined;

/** The Helm version hack/helm-bin/go.mod pins (read on first use: the image has no hack/). */
export function helmVersion(): string {
  if (pinnedVersion) return pinnedVersion;
  const goMod = readFileSync(path.join(repoRoot, 'hack', 'helm-bin', 'go.mod'), 'utf8');
  const m = /^\s*(?:require\s+)?helm\.sh\/helm\/v4\s+(v\S+)/m.exec(goMod);
  if (!m) throw new Error('hack/helm-bin/go.mod requires no helm.sh/helm/v4');
  pinnedVersion = m[1]!;
  return pinnedVersion;
}

export function helmCachePath(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(process.env.HELM_BIN_DIR || path.join(base, 'paddock', 'helm', helmVersion()), 'helm');
}

function reportedVersion(bin: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(bin, ['version', '--template', '{{.Version}}'], { timeout: 30_000 }, (err, stdout) =>
      resolve(err ? undefined : stdout.trim()),
    );
  });
}

let pending: Promise<string> | undefined;

/**
 * The path of a Helm binary that reports the pinned version, building it first when it is missing
 * (a few minutes, once; progress lines go to `log`, stderr by default).
 */
export function ensureHelm(opts: { log?: (line: string) => void } = {}): Promise<string> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  pending ??= (async () => {
    const cached = helmCachePath();
    if (existsSync(cached) && (await reportedVersion(cached)) === helmVersion()) return cached;
    const script = path.join(repoRoot, 'hack', 'build-helm.sh');
    return (await runBuildScript(script, log)) || cached;
  })();
  pending.catch(() => {
    pending = undefined;
  });
  return pending;
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs Helm with only the environment given (plus PATH): no HELM_* setting or kubeconfig of the
 * caller leaks in. Never throws for a non-zero exit; the caller checks `code`.
 */
export function runHelm(
  bin: string,
  args: string[],
  env: Record<string, string>,
  opts: { cwd?: string; timeoutMs?: number } = {},
): Promise<HelmResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, {
      cwd: opts.cwd ?? repoRoot,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    });
  });
}

/** HELM_* homes under `dir`, so Helm reads and writes nothing of the user's. */
export function isolatedHelmEnv(dir: string, kubeconfig?: string): Record<string, string> {
  return {
    HOME: dir,
    HELM_CACHE_HOME: path.join(dir, 'cache'),
    HELM_CONFIG_HOME: path.join(dir, 'config'),
    HELM_DATA_HOME: path.join(dir, 'data'),
    // No update checks, plugins or telemetry of any kind.
    HELM_PLUGINS: path.join(dir, 'plugins'),
    ...(kubeconfig ? { KUBECONFIG: kubeconfig } : { KUBECONFIG: path.join(dir, 'no-kubeconfig') }),
  };
}
