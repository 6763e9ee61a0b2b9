import { GROUP, VERSION } from '../api/index.ts';
import { paddockListRequests } from '../controllers/cache-shapes.ts';
import { KubeHttp } from '../runtime/kube-http.ts';
import { type Kubeconfig, loadKubeconfig } from '../runtime/kubeconfig.ts';
import { parseFlags } from './flags.ts';
import { RUN_FLAGS } from './run-flags.ts';

/**
 * The first part of `paddock run`, loaded before the rest of its code: it sends the informers' lists
 * and the start-up checks' reads while the controllers, webhooks and GitHub client are still being
 * compiled, so the API server works while paddock loads (on a restart with 100 runner pods, loading
 * the code was ~110 ms of a ~380 ms start, with no request sent before it ended).
 *
 * Nothing here reports an error: on anything unexpected (bad flags, no kubeconfig) it sends nothing,
 * and the full start finds the same problem and says what it is.
 */

/** What was read ahead: the client whose requests take the answers, and their keys. */
export interface ReadAhead {
  kubeConfig: Kubeconfig;
  http: KubeHttp;
  /** Keys (KubeHttp.readKey) of the reads sent. */
  keys: string[];
  /** When they were sent, in ms since the process started. */
  sentAtMs: number;
  /** When they were on their way (or the start stopped waiting for them). */
  onTheirWayAtMs?: number;
}

/** The start-up checks' reads (startPaddock's preflight), with their options. */
export const VERSION_READ = { path: '/version', timeoutMs: 10_000 } as const;
export const API_GROUP_READ = { path: `/apis/${GROUP}/${VERSION}` } as const;

export function readAheadForRun(argv: string[], env: NodeJS.ProcessEnv): ReadAhead | undefined {
  try {
    const { values, help } = parseFlags(RUN_FLAGS, argv, env);
    // With --install-crds the lists wait for the CRDs; their resources may not be served yet.
    if (help || values['install-crds'] === true) return undefined;
    const path = (values.kubeconfig as string | undefined) || undefined;
    const kubeConfig = loadKubeconfig({ path, env });
    const http = new KubeHttp(kubeConfig);
    const namespace = (values['watch-namespace'] as string | undefined) || undefined;
    const keys: string[] = [];
    http.readAhead(VERSION_READ.path, { timeoutMs: VERSION_READ.timeoutMs });
    http.readAhead(API_GROUP_READ.path);
    keys.push(http.readKey(VERSION_READ.path), http.readKey(API_GROUP_READ.path));
    for (const list of paddockListRequests(namespace)) {
      http.readAhead(list.path, { query: list.query });
      keys.push(http.readKey(list.path, list.query));
    }
    return { kubeConfig, http, keys, sentAtMs: performance.now() };
  } catch {
    return undefined;
  }
}

/**
 * How long the start waits for the reads to be on their way before it loads the rest: compiling
 * holds this thread, and the TLS handshakes need it. An API server that does not answer by then
 * is not waited for.
 */
const SEND_WAIT_MS = 200;

/** `paddock run`: reads ahead, then loads and runs the rest. */
export async function runCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const readAhead = readAheadForRun(argv, env);
  if (readAhead) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      readAhead.http.readsAheadOnTheirWay(),
      new Promise((resolve) => {
        timer = setTimeout(resolve, SEND_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    readAhead.onTheirWayAtMs = performance.now();
  }
  const { runCommandAfterReadAhead } = await import('./run.ts');
  return runCommandAfterReadAhead(argv, env, readAhead);
}

/** How a read ahead went, told once paddock is ready. */
export interface ReadAheadReport {
  /** Reads answered from a read ahead. */
  taken: number;
  /** Read ahead and never asked for: a request sent for nothing. */
  untaken: string[];
  /** Informers' first lists that were not read ahead: they waited for all the code. */
  notReadAhead: string[];
}

/** `dropped` is KubeHttp.dropReadsAhead()'s answer; `informerLists` the keys of the informers' first lists. */
export function readAheadReport(
  sent: readonly string[],
  dropped: { taken: number; untaken: string[] },
  informerLists: readonly string[],
): ReadAheadReport {
  const sentKeys = new Set(sent);
  return {
    taken: dropped.taken,
    untaken: dropped.untaken,
    notReadAhead: informerLists.filter((k) => !sentKeys.has(k)),
  };
}
