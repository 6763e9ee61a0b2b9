import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  RUNNER_DEPLOYMENTS,
  RUNNER_REPLICA_SETS,
  RUNNERS,
  type Runner,
  type RunnerReplicaSet,
} from '../src/api/index.ts';
import { installCrds } from '../src/cli/run.ts';
import { resourcePath } from '../src/runtime/informer.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { DEFAULT_TIMINGS, type LeaseObject } from '../src/runtime/leader-election.ts';
import { mergePatch } from '../src/runtime/objects.ts';
import { LEASES, PODS } from '../src/runtime/resources.ts';
import type { KubeObject } from '../src/runtime/store.ts';
import { NodeAgent, type PodObject } from '../src/sandbox/node-agent.ts';
import { type ControlPlane, freePort, startControlPlane } from '../src/testenv/control-plane.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';
import { type ManagedProcess, startManagedProcess } from '../src/testenv/processes.ts';
import { eventually } from './support/cluster.ts';

/**
 * Control-plane faults and leader death (issue 15), on a control plane of this file's own (restarting
 * the shared one would break the tests running beside it), with paddock as `paddock run` child
 * processes, the GitHub double, and the simulated kubelet and runners (NodeAgent):
 *
 * - etcd, then kube-apiserver, restarted under a running RunnerDeployment: the same paddock process
 *   keeps going, and after each a scale-up (after the second also a deleted pod) is handled within a
 *   bound, with no runner leaked or duplicated;
 * - two replicas with leader election, the leader killed with SIGKILL: the other one holds the Lease
 *   within lease duration + renew deadline, only after the dead one's lease expired, and reconciles;
 * - kube-apiserver away for longer than the renew deadline under two such replicas: the leader steps
 *   down (exits 1) by its renew deadline, before its lease can expire, and the other one takes over
 *   once the lease has expired.
 *
 * paddock has no flags for its leader election timings: the replicas run with client-go's (15 s
 * lease, 10 s renew deadline, 2 s retry), DEFAULT_TIMINGS, so the takeover bound is 25 s.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NS = 'faults';
const ORG = 'acme';
const LEASE_NAME = 'paddock';
const { leaseDurationMs: LEASE_DURATION_MS, renewDeadlineMs: RENEW_DEADLINE_MS } = DEFAULT_TIMINGS;
const TAKEOVER_BOUND_MS = LEASE_DURATION_MS + RENEW_DEADLINE_MS;
/** After the takeover, the new leader's reconcile of a scale-up (its caches are warm). */
const RECONCILE_MARGIN_MS = 5000;
/**
 * After the control plane is back: informers that lost their watch retry with client-go's backoff
 * (0.8 s doubling, up to 2× jitter), so a re-watch can come some 25 s after a restart of several
 * seconds; then the reconcile, the simulated kubelet and the runner's registration.
 */
const RECOVERY_BOUND_MS = 45_000;

/**
 * `paddock run` from this tree's sources: bin/paddock.js would run a dist/ build instead when one
 * exists, and in a tree that others build in, that can be older than the sources under test.
 */
const ENTRY = `const { main } = await import(${JSON.stringify(
  pathToFileURL(path.join(root, 'src/cli/main.ts')).href,
)}); process.exitCode = await main(process.argv.slice(1));`;

interface Replica {
  name: string;
  proc: ManagedProcess;
  logFile: string;
  probeUrl: string;
}

/** A Lease record's holder and times; microsecond times are read to the millisecond. */
interface LeaseView {
  holder: string;
  renewMs: number;
  acquireMs: number;
  transitions: number;
}

const micro = (t: string | undefined) => (t ? Date.parse(t.replace(/(\.\d{3})\d*Z$/, '$1Z')) : Number.NaN);

/** The lines of a paddock log worth quoting (info and up), last `n`. */
function logTail(file: string, n = 25): string {
  try {
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l !== '' && !l.includes('"level":"debug"'))
      .slice(-n)
      .join('\n');
  } catch (err) {
    return `(no log: ${String(err)})`;
  }
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

describe('faults: control-plane restarts and leader death', { timeout: 300_000 }, () => {
  let plane: ControlPlane | undefined;
  let http: KubeHttp;
  let agent: NodeAgent | undefined;
  const double = new GitHubDouble();
  let token = '';
  const replicas: Replica[] = [];
  /** Every process this file started, control plane included, for the leak check. */
  const pids = new Set<number>();
  /** The control plane's progress lines (restart timings). */
  const planeLog: string[] = [];

  before(async () => {
    plane = await startControlPlane({ controllerManager: false, log: (l) => planeLog.push(l) });
    for (const pid of plane.pids()) pids.add(pid);
    http = new KubeHttp(plane.kubeConfig);
    await installCrds(http);
    await http.request('POST', '/api/v1/namespaces', { body: { metadata: { name: NS } } });
    double.cacheMaxAgeSeconds = 1;
    await double.start();
    double.addOrg(ORG);
    token = double.addToken().token;
    agent = new NodeAgent({
      http,
      namespace: NS,
      double,
      startupDelayMs: 300,
      registrationDelayMs: 100,
      assignIntervalMs: 200,
      nodeCount: 2,
      nodePrefix: 'faults-node-',
    });
    await agent.start();
  });

  /** Everything, in order, whatever did start; safe after the last test did it already. */
  const stopAll = async () => {
    await agent?.stop();
    for (const r of replicas) await r.proc.stop(5000);
    http?.close();
    await plane?.stop();
    await double.stop();
  };
  after(stopAll);

  async function startReplica(name: string, leaderElect: boolean): Promise<Replica> {
    const port = await freePort();
    const logFile = path.join(plane!.dataDir, `${name}.log`);
    const proc = startManagedProcess({
      name,
      command: process.execPath,
      logFile,
      args: [
        '--input-type=module',
        '-e',
        ENTRY,
        'run',
        '--kubeconfig',
        plane!.kubeconfigPath,
        '--watch-namespace',
        NS,
        '--leader-election-namespace',
        NS,
        ...(leaderElect ? ['--leader-elect'] : []),
        '--metrics-addr',
        '0',
        '--health-probe-addr',
        `127.0.0.1:${port}`,
        // No Service fronts the replicas here: a webhook configuration would name whichever replica
        // wrote it last, and (Fail-closed) turn away every Runner write once that one is killed.
        '--webhook-addr',
        '0',
        '--registration-recheck-interval',
        '1s',
        '--registration-recheck-jitter',
        '100ms',
        '--unregistration-retry-delay',
        '1s',
        '--sync-period',
        '5s',
        '--log-level',
        'info',
      ],
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        GITHUB_TOKEN: token,
        GITHUB_URL: double.apiUrl,
      },
    });
    const replica = { name, proc, logFile, probeUrl: `http://127.0.0.1:${port}` };
    replicas.push(replica);
    pids.add(proc.pid);
    // Ready: caches synced (a standby is then ready to take over).
    await eventually(
      `${name} ready`,
      async () => {
        if (!proc.running()) {
          throw new Error(`${name} exited with ${await proc.exited}:\n${logTail(logFile)}`);
        }
        return (await fetch(`${replica.probeUrl}/readyz`)).ok;
      },
      60_000,
      200,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${logTail(logFile)}`);
    });
    return replica;
  }

  const list = async <T extends KubeObject>(ref: Parameters<typeof resourcePath>[0]) =>
    (await http.request<{ items: T[] }>('GET', resourcePath(ref, NS))).items;
  const runnerPods = async () =>
    (await list<PodObject>(PODS)).filter((p) => p.metadata.labels?.['runner-deployment-name'] === 'ci');
  const online = () => double.runners(`orgs/${ORG}`).filter((r) => r.status === 'online');
  const scale = (replicasWanted: number) =>
    mergePatch(
      http,
      RUNNER_DEPLOYMENTS,
      { metadata: { name: 'ci', namespace: NS } },
      { spec: { replicas: replicasWanted } },
    );
  const readLease = async (): Promise<LeaseView | undefined> => {
    const lease = await http
      .request<LeaseObject>('GET', resourcePath(LEASES, NS, LEASE_NAME))
      .catch(() => undefined);
    if (!lease?.spec) return undefined;
    return {
      holder: lease.spec.holderIdentity ?? '',
      renewMs: micro(lease.spec.renewTime),
      acquireMs: micro(lease.spec.acquireTime),
      transitions: lease.spec.leaseTransitions ?? 0,
    };
  };

  /** Pods, Runners, sets and GitHub's runners, and each replica's log, for a failure message. */
  const diagnose = async (what: string) => {
    const show = (o: KubeObject & { status?: { phase?: string } }) =>
      `${o.metadata.name}(${o.status?.phase ?? '-'}${o.metadata.deletionTimestamp ? ',deleting' : ''})`;
    const sets = (await list<RunnerReplicaSet>(RUNNER_REPLICA_SETS).catch(() => []))
      .map((s) => `${s.metadata.name}(spec=${s.spec.replicas})`)
      .join(', ');
    const runners = (await list<Runner>(RUNNERS).catch(() => [])).map(show).join(', ');
    const pods = (await runnerPods().catch(() => [])).map(show).join(', ');
    const gh = double
      .runners(`orgs/${ORG}`)
      .map((r) => `${r.name}(${r.status}${r.busy ? ',busy' : ''})`)
      .join(', ');
    const logs = replicas
      .map(
        (r) =>
          `--- ${r.name} (pid ${r.proc.pid}, ${r.proc.running() ? 'running' : 'exited'}):\n${logTail(r.logFile)}`,
      )
      .join('\n');
    return `${what}\nsets: ${sets}\nRunners: ${runners}\npods: ${pods}\nGitHub: ${gh}\n${logs}`;
  };
  /** Fails with the state of things when `ok` is false (the diagnosis only then). */
  const expect = async (ok: boolean, what: string) => {
    if (!ok) assert.fail(await diagnose(what));
  };
  const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs: number) =>
    eventually(what, fn, timeoutMs, 200).catch(async (e: Error) => {
      throw new Error(await diagnose(e.message));
    });

  /**
   * `n` runner pods (none being deleted), `n` Runners, one RunnerReplicaSet, and exactly `n` runners
   * registered online in GitHub, one per pod: nothing leaked, nothing twice. Returns the pods.
   */
  const settled = (n: number, timeoutMs: number, extra: (pods: PodObject[]) => boolean = () => true) =>
    waitFor(
      `${n} runner pods, Runners and registered runners, nothing else`,
      async () => {
        const all = await runnerPods();
        const pods = all.filter((p) => !p.metadata.deletionTimestamp);
        const runners = await list<Runner>(RUNNERS);
        const sets = await list<RunnerReplicaSet>(RUNNER_REPLICA_SETS);
        const registered = double.runners(`orgs/${ORG}`);
        const names = new Set(pods.map((p) => p.metadata.name));
        return (
          all.length === n &&
          pods.length === n &&
          runners.length === n &&
          sets.length === 1 &&
          registered.length === n &&
          online().length === n &&
          registered.every((r) => names.has(r.name)) &&
          runners.every((r) => names.has(r.metadata.name)) &&
          extra(pods) &&
          pods
        );
      },
      timeoutMs,
    );

  test('etcd and kube-apiserver restarts: paddock keeps running; scale-up and pod replacement still happen', async (t) => {
    const p0 = await startReplica('paddock-0', false);
    await http.request('POST', resourcePath(RUNNER_DEPLOYMENTS, NS), {
      body: {
        apiVersion: 'actions.summerwind.dev/v1alpha1',
        kind: 'RunnerDeployment',
        metadata: { name: 'ci' },
        spec: { replicas: 3, template: { spec: { organization: ORG, labels: ['faults'] } } },
      },
    });
    await settled(3, 45_000);

    let at = Date.now();
    await plane!.restartEtcd();
    const etcdMs = Date.now() - at;
    for (const pid of plane!.pids()) pids.add(pid);
    // paddock's watches went on through kube-apiserver, whose own watch on etcd had to start over.
    await expect(p0.proc.running(), 'paddock-0 exited during the etcd restart');
    at = Date.now();
    await scale(4);
    await settled(4, RECOVERY_BOUND_MS);
    const afterEtcdMs = Date.now() - at;

    at = Date.now();
    await plane!.restartApiServer();
    const apiMs = Date.now() - at;
    for (const pid of plane!.pids()) pids.add(pid);
    for (const line of planeLog.filter((l) => l.includes('restarted'))) t.diagnostic(line);
    t.diagnostic(`etcd restart ${etcdMs} ms, kube-apiserver restart ${apiMs} ms in all`);
    // The same process: the restart did not crash paddock or make it exit.
    await expect(p0.proc.running(), 'paddock-0 exited during the kube-apiserver restart');

    at = Date.now();
    await scale(5);
    const five = await settled(5, RECOVERY_BOUND_MS);
    const scaleMs = Date.now() - at;
    t.diagnostic(`scale 3 → 4 after the etcd restart settled in ${afterEtcdMs} ms`);
    t.diagnostic(`scale 4 → 5 after the kube-apiserver restart settled in ${scaleMs} ms`);

    const victim = five[0]!;
    at = Date.now();
    await http.request('DELETE', resourcePath(PODS, NS, victim.metadata.name));
    await settled(5, RECOVERY_BOUND_MS, (pods) => pods.every((p) => p.metadata.uid !== victim.metadata.uid));
    const replaceMs = Date.now() - at;
    t.diagnostic(`a deleted runner pod replaced (registered again) in ${replaceMs} ms`);

    await expect(p0.proc.running(), 'paddock-0 exited');
    await expect(agent!.stats().leakedRunners === 0, 'runners left registered without a pod');
    // Left running, a second process without leader election would fight the replicas of the next test.
    await p0.proc.stop(10_000);
    assert.equal(await p0.proc.exited, 0, `paddock-0 did not shut down cleanly:\n${logTail(p0.logFile)}`);
  });

  test('kill -9 of the leader: the standby takes over within lease duration + renew deadline, never two at once', async (t) => {
    const [a, b] = [await startReplica('paddock-a', true), await startReplica('paddock-b', true)];
    const byPid = (holder: string) => [a, b].find((r) => holder.endsWith(`_${r.proc.pid}`));
    const held = await waitFor(
      'a replica holding the Lease',
      async () => {
        const lease = await readLease();
        return lease && byPid(lease.holder) ? lease : undefined;
      },
      30_000,
    );
    const leader = byPid(held.holder)!;
    const standby = leader === a ? b : a;
    // The fleet as the previous test left it, or made now; settled means the leader reconciles.
    const rd = await http
      .request<{ spec?: { replicas?: number } }>('GET', resourcePath(RUNNER_DEPLOYMENTS, NS, 'ci'))
      .catch(() => undefined);
    if (!rd) {
      await http.request('POST', resourcePath(RUNNER_DEPLOYMENTS, NS), {
        body: {
          apiVersion: 'actions.summerwind.dev/v1alpha1',
          kind: 'RunnerDeployment',
          metadata: { name: 'ci' },
          spec: { replicas: 2, template: { spec: { organization: ORG, labels: ['faults'] } } },
        },
      });
    }
    const n = rd?.spec?.replicas ?? 2;
    const existing = new Set((await settled(n, 45_000)).map((p) => p.metadata.uid));
    await expect(
      !logTail(standby.logFile, 1000).includes('became leader'),
      `${standby.name} led while ${leader.name} held the Lease`,
    );

    // The leader dies without a word; at once the fleet is asked to grow, which only a leader does.
    const killedAt = Date.now();
    process.kill(leader.proc.pid, 'SIGKILL');
    assert.equal(await leader.proc.exited, 'SIGKILL');
    const dead = (await readLease())!;
    assert.equal(dead.holder, held.holder, 'the dead leader’s record is the last one');
    await scale(n + 1);

    const taken = await waitFor(
      `${standby.name} holding the Lease`,
      async () => {
        const lease = await readLease();
        return lease && lease.holder !== dead.holder ? lease : undefined;
      },
      TAKEOVER_BOUND_MS + 15_000,
    );
    const observedMs = Date.now() - killedAt;
    assert.equal(byPid(taken.holder), standby, `the Lease went to ${taken.holder}`);
    const grown = await waitFor(
      `runner pod ${n + 1} created by the new leader`,
      async () => {
        const pods = await runnerPods();
        return pods.length === n + 1 && pods;
      },
      TAKEOVER_BOUND_MS + RECONCILE_MARGIN_MS + 15_000,
    );
    const reconciledMs = Date.now() - killedAt;
    const takeoverMs = taken.acquireMs - killedAt;
    t.diagnostic(
      `takeover: Lease acquired ${takeoverMs} ms after kill -9 (seen after ${observedMs} ms), ` +
        `bound ${TAKEOVER_BOUND_MS} ms; scale-up reconciled after ${reconciledMs} ms`,
    );
    t.diagnostic(
      `the dead leader's last renewal to the takeover: ${taken.acquireMs - dead.renewMs} ms (lease ${LEASE_DURATION_MS} ms)`,
    );

    assert.ok(takeoverMs <= TAKEOVER_BOUND_MS, `takeover took ${takeoverMs} ms > ${TAKEOVER_BOUND_MS} ms`);
    assert.ok(
      reconciledMs <= TAKEOVER_BOUND_MS + RECONCILE_MARGIN_MS,
      `the scale-up was reconciled ${reconciledMs} ms after the kill`,
    );
    // Never two holders: the survivor took the Lease only once the dead leader's last renewal had
    // expired (same host, same clock), as one transition.
    assert.ok(
      taken.acquireMs - dead.renewMs >= LEASE_DURATION_MS,
      `acquired ${taken.acquireMs - dead.renewMs} ms after the last renewal, before the lease (${LEASE_DURATION_MS} ms) expired`,
    );
    assert.equal(taken.transitions, dead.transitions + 1);
    // And nothing acted for the scale-up before it held the Lease (creation times are whole seconds).
    const newPod = grown.find((p) => !existing.has(p.metadata.uid));
    assert.ok(newPod, 'a pod made after the kill');
    assert.ok(
      Date.parse(newPod.metadata.creationTimestamp ?? '') >= Math.floor(taken.acquireMs / 1000) * 1000,
      `pod ${newPod.metadata.name} created at ${newPod.metadata.creationTimestamp}, before the Lease was taken at ${new Date(taken.acquireMs).toISOString()}`,
    );

    await settled(n + 1, RECOVERY_BOUND_MS);
    await expect(standby.proc.running(), `${standby.name} exited`);
    assert.equal(
      logTail(standby.logFile, 1000).split('became leader').length - 1,
      1,
      `${standby.name} became leader once`,
    );
  });

  test('kube-apiserver down longer than the renew deadline: the leader steps down before its lease can expire', async (t) => {
    // Fresh replicas: whatever the previous test left releases the Lease on SIGTERM.
    for (const r of replicas) if (r.proc.running()) await r.proc.stop(10_000);
    const [x, y] = [await startReplica('paddock-x', true), await startReplica('paddock-y', true)];
    const byPid = (holder: string) => [x, y].find((r) => holder.endsWith(`_${r.proc.pid}`));
    const held = await waitFor(
      'a replica holding the Lease',
      async () => {
        const lease = await readLease();
        return lease && byPid(lease.holder) ? lease : undefined;
      },
      30_000,
    );
    const leader = byPid(held.holder)!;
    const standby = leader === x ? y : x;
    let exitedAt: number | undefined;
    void leader.proc.exited.then(() => {
      exitedAt = Date.now();
    });
    // The outage starts right after a renewal (they come every 2 s), so that one is the last.
    const last = await eventually(
      'a renewal',
      async () => {
        const lease = await readLease();
        return lease && lease.holder === held.holder && lease.renewMs > held.renewMs ? lease : undefined;
      },
      10_000,
      20,
    );
    // Down for the renew deadline after the stop: with the stop and the start, some 3 s longer than it.
    await plane!.restartApiServer({ downMs: RENEW_DEADLINE_MS });
    const backAt = Date.now();
    for (const pid of plane!.pids()) pids.add(pid);

    await expect(
      exitedAt !== undefined,
      `${leader.name} still running ${backAt - last.renewMs} ms after its last renewal`,
    );
    assert.equal(
      await leader.proc.exited,
      1,
      `${leader.name} exited, but not with 1:\n${logTail(leader.logFile)}`,
    );
    assert.match(logTail(leader.logFile, 1000), /lost the lease: could not renew within the renew deadline/);
    const stepDownMs = exitedAt! - last.renewMs;
    t.diagnostic(
      `${leader.name} exited ${stepDownMs} ms after its last renewal (renew deadline ${RENEW_DEADLINE_MS} ms, lease ${LEASE_DURATION_MS} ms); kube-apiserver back ${backAt - last.renewMs} ms after it`,
    );
    // It stopped by its renew deadline: before the others could see its lease expire, and while
    // none of them could even reach the API server.
    assert.ok(stepDownMs <= RENEW_DEADLINE_MS + 2000, `stepped down ${stepDownMs} ms after the last renewal`);

    const taken = await waitFor(
      `${standby.name} holding the Lease`,
      async () => {
        const lease = await readLease();
        return lease && lease.holder !== held.holder ? lease : undefined;
      },
      TAKEOVER_BOUND_MS,
    );
    t.diagnostic(
      `${standby.name} acquired the Lease ${taken.acquireMs - backAt} ms after kube-apiserver was back, ${taken.acquireMs - last.renewMs} ms after the last renewal`,
    );
    assert.equal(byPid(taken.holder), standby, `the Lease went to ${taken.holder}`);
    assert.ok(taken.acquireMs - last.renewMs >= LEASE_DURATION_MS, 'taken only once the lease had expired');
    assert.equal(taken.transitions, last.transitions + 1);
    await expect(standby.proc.running(), `${standby.name} exited`);
  });

  test('stopping leaves no process behind, after restarts too', async () => {
    for (const pid of plane?.pids() ?? []) pids.add(pid);
    await stopAll();
    assert.ok(pids.size >= 5, `control plane and replicas seen: ${[...pids].join(', ')}`);
    assert.deepEqual(
      [...pids].filter(alive),
      [],
      'every process this file started has exited (etcd and kube-apiserver restarted included)',
    );
  });
});
