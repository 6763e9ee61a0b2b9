import type { GitHubRunner } from '../github/index.ts';
import type { JitRunnerRecord } from './token-secret.ts';

/**
 * GitHub refuses a JIT configuration for a name already registered (409). When a RunnerSet pod is
 * recreated, the name is usually taken by the runner paddock created for the pod's previous
 * incarnation, which never came online or has gone offline. That runner may be removed so the new
 * pod can register, but only when paddock can prove it is its own: the StatefulSet's token Secret
 * recorded its ID when paddock created it, and GitHub still lists that ID under that name, offline
 * and not busy. Anything else is somebody else's runner, or a live one, and is left alone.
 */

export type JitCollisionVerdict = { remove: true; runnerId: number } | { remove: false; reason: string };

/** First step, before asking GitHub anything: which runner ID the Secret vouches for. */
export function recordedRunnerFor(
  runnerName: string,
  record: JitRunnerRecord | undefined,
): { ok: true; runnerId: number } | { ok: false; reason: string } {
  if (!record) {
    return { ok: false, reason: "the StatefulSet's token Secret records no runner paddock created" };
  }
  if (record.runnerName !== runnerName) {
    return {
      ok: false,
      reason: `the StatefulSet's token Secret records runner ${record.runnerId} named "${record.runnerName}", not "${runnerName}"`,
    };
  }
  return { ok: true, runnerId: record.runnerId };
}

/** Second step: whether the runner GitHub lists under the recorded ID may go. */
export function staleRunnerVerdict(
  runnerName: string,
  runnerId: number,
  /** GitHub's runner of that ID, undefined when it lists none. */
  runner: GitHubRunner | undefined,
): JitCollisionVerdict {
  if (!runner) {
    return {
      remove: false,
      reason: `runner ${runnerId}, which paddock created for the pod, is no longer listed, so the name belongs to another runner`,
    };
  }
  if (runner.name !== runnerName) {
    return { remove: false, reason: `runner ${runnerId} is now named "${runner.name}"` };
  }
  if (runner.busy) return { remove: false, reason: `runner ${runnerId} is running a job` };
  if (runner.status !== 'offline') return { remove: false, reason: `runner ${runnerId} is ${runner.status}` };
  return { remove: true, runnerId };
}
