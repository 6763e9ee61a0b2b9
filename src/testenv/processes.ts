import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';

/**
 * Child processes that must never outlive us: each runs in its own process group (so its own
 * children die with it), under `setpriv --pdeathsig` where available (so a SIGKILL of this
 * process still takes them down), and is killed from the exit and signal handlers.
 */
export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** Resolves with the exit code (or signal name) when the process has ended. */
  readonly exited: Promise<number | string>;
  /** True until the process exits. */
  running(): boolean;
  /** SIGTERM to the process group, SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
}

const live = new Set<ManagedProcess>();
let handlersInstalled = false;

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  // 'exit' handlers must be synchronous: a plain SIGKILL of every group is all we can do there.
  process.on('exit', () => {
    for (const p of live) killGroup(p.pid, 'SIGKILL');
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      for (const p of live) killGroup(p.pid, 'SIGKILL');
      // Re-raise with the default disposition so the exit status tells the truth.
      process.kill(process.pid, signal);
    });
  }
}

let setprivChecked: boolean | undefined;
function hasSetprivPdeathsig(): boolean {
  if (setprivChecked === undefined) {
    const r = spawnSync('setpriv', ['--help'], { encoding: 'utf8' });
    setprivChecked = r.status === 0 && r.stdout.includes('--pdeathsig');
  }
  return setprivChecked;
}

export interface StartOptions {
  name: string;
  command: string;
  args: string[];
  /** File that receives stdout and stderr. */
  logFile: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

export function startManagedProcess(opts: StartOptions): ManagedProcess {
  installHandlers();
  if (!existsSync(opts.command)) throw new Error(`${opts.name}: binary not found at ${opts.command}`);
  const log = createWriteStream(opts.logFile, { flags: 'a' });
  const [cmd, args] = hasSetprivPdeathsig()
    ? ['setpriv', ['--pdeathsig', 'SIGKILL', '--', opts.command, ...opts.args]]
    : [opts.command, opts.args];
  const child = spawn(cmd, args, {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: opts.env ?? process.env,
    cwd: opts.cwd,
  });
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  // A finished test file must be able to exit while these run; the exit handler then kills them.
  child.unref();
  (child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
  (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
  if (child.pid === undefined) throw new Error(`${opts.name}: could not be started`);
  const pid = child.pid;
  let alive = true;
  // Output can still be in the pipes when 'exit' comes: the log is whole once stdio has closed
  // (bounded, in case something the process started still holds them) and the file is written.
  const stdioClosed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      alive = false;
      live.delete(managed);
      const bound = new Promise<void>((r) => setTimeout(r, 2000).unref());
      void Promise.race([stdioClosed, bound]).then(() => log.end(() => resolve(code ?? signal ?? 'unknown')));
    });
  });
  const managed: ManagedProcess = {
    name: opts.name,
    pid,
    child,
    exited,
    running: () => alive,
    async stop(graceMs = 15_000) {
      if (!alive) return;
      killGroup(pid, 'SIGTERM');
      const timer = setTimeout(() => killGroup(pid, 'SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
      // Anything the process left behind in its group goes too.
      killGroup(pid, 'SIGKILL');
    },
  };
  live.add(managed);
  return managed;
}
