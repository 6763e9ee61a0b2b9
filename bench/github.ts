/**
 * GitHub API budget of one organization with 1,000 runners over one hour of simulated time, measured
 * on the GitHub API double: rate-limited requests (those GitHub counts against the primary limit)
 * for an idle fleet and for 30 runner replacements per hour, with and without conditional requests.
 *
 * The controller is simulated as a reconcile pass every 10 s that looks up 50 pods' runners in the
 * shared registry (which refreshes at the 60 s Cache-Control max-age), plus, for churn, a runner
 * replacement every 2 minutes: removeRunner, a (cached) registration token, a new registration.
 * The hour is measured after a warm-up listing, i.e. in steady state.
 *
 *   node bench/github.ts          human-readable table
 *   node bench/github.ts --json   one JSON line
 */
import pino from 'pino';
import { GitHubClient } from '../src/github/index.ts';
import type { GitHubScope } from '../src/github/scope.ts';
import { FakeClock } from '../src/runtime/clock.ts';
import { GitHubDouble } from '../src/testenv/github-double/index.ts';

const RUNNERS = 1000;
const HOUR_MS = 3600_000;
const TICK_MS = 10_000;
const PODS_PER_TICK = 50;
const SCOPE: GitHubScope = { kind: 'organization', org: 'acme' };

interface Scenario {
  conditionalRequests: boolean;
  replacementsPerHour: number;
}

interface Result {
  rateLimitedRequests: number;
  totalRequests: number;
  notModified: number;
  listings: number;
}

/** Deterministic choice of which runner a replacement hits (a small LCG). */
function picker(seed: number) {
  let state = seed >>> 0;
  return (n: number) => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state % n;
  };
}

async function run(scenario: Scenario): Promise<Result> {
  const clock = new FakeClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  await double.start();
  try {
    double.addOrg('acme');
    const { token } = double.addToken({ login: 'bench' });
    const seedToken = double.model.issueToken('orgs/acme', 'registration');
    const names: string[] = [];
    for (let i = 0; i < RUNNERS; i++) {
      names.push(double.registerRunner({ registrationToken: seedToken.token, name: `runner-${i}` }).name);
    }
    const client = new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { apiUrl: double.apiUrl },
      clock,
      logger: pino({ level: 'silent' }),
      conditionalRequests: scenario.conditionalRequests,
    });

    await client.registry.get(SCOPE); // warm-up listing, not counted
    const start = double.log.length;
    const refreshesBefore = client.registry.refreshes;
    const pick = picker(42);
    const replaceEveryMs = scenario.replacementsPerHour > 0 ? HOUR_MS / scenario.replacementsPerHour : 0;
    let nextReplacement = replaceEveryMs;
    let replaced = 0;

    for (let t = TICK_MS; t <= HOUR_MS; t += TICK_MS) {
      await clock.advance(TICK_MS);
      if (replaceEveryMs > 0 && t >= nextReplacement) {
        nextReplacement += replaceEveryMs;
        const snapshot = await client.registry.get(SCOPE);
        const victim = snapshot.runners[pick(snapshot.runners.length)]!;
        const outcome = await client.removeRunner(SCOPE, victim.id);
        if (outcome.kind !== 'removed') throw new Error(`replacement failed: ${JSON.stringify(outcome)}`);
        const registration = await client.registrationToken(SCOPE);
        const name = `replacement-${replaced++}`;
        double.registerRunner({ registrationToken: registration.token, name });
        names[names.indexOf(victim.name)] = name;
      }
      // One reconcile pass: every pod asks the registry about its runner; none lists by itself.
      const offset = (t / TICK_MS) % (RUNNERS / PODS_PER_TICK);
      const pods = names.slice(offset * PODS_PER_TICK, (offset + 1) * PODS_PER_TICK);
      const found = await Promise.all(pods.map((n) => client.registry.lookupByName(SCOPE, n)));
      if (found.some((r) => r === undefined) && scenario.replacementsPerHour === 0) {
        throw new Error('an idle fleet lost a runner');
      }
    }
    const log = double.log.slice(start);
    const final = await client.registry.refreshNow(SCOPE);
    if (final.runners.length !== RUNNERS)
      throw new Error(`expected ${RUNNERS} runners, saw ${final.runners.length}`);
    client.close();
    return {
      rateLimitedRequests: log.filter((e) => e.countedAgainstRateLimit).length,
      totalRequests: log.length,
      notModified: log.filter((e) => e.notModified).length,
      listings: client.registry.refreshes - refreshesBefore - 1,
    };
  } finally {
    await double.stop();
  }
}

const json = process.argv.includes('--json');
const started = performance.now();
const idle = await run({ conditionalRequests: true, replacementsPerHour: 0 });
const churn = await run({ conditionalRequests: true, replacementsPerHour: 30 });
const idlePlain = await run({ conditionalRequests: false, replacementsPerHour: 0 });
const churnPlain = await run({ conditionalRequests: false, replacementsPerHour: 30 });
const seconds = (performance.now() - started) / 1000;

if (json) {
  console.log(
    JSON.stringify({
      runners: RUNNERS,
      rateLimitedRequestsPerHourIdle: idle.rateLimitedRequests,
      rateLimitedRequestsPerHourChurn30: churn.rateLimitedRequests,
      withoutConditionalRequests: {
        rateLimitedRequestsPerHourIdle: idlePlain.rateLimitedRequests,
        rateLimitedRequestsPerHourChurn30: churnPlain.rateLimitedRequests,
      },
    }),
  );
} else {
  const row = (name: string, r: Result) =>
    `${name.padEnd(34)}${String(r.rateLimitedRequests).padStart(12)}${String(r.totalRequests).padStart(10)}${String(r.notModified).padStart(8)}${String(r.listings).padStart(10)}`;
  console.log(`GitHub API budget, 1 organization, ${RUNNERS} runners, 1 simulated hour (steady state)`);
  console.log(
    `${'scenario'.padEnd(34)}${'counted/h'.padStart(12)}${'sent/h'.padStart(10)}${'304s'.padStart(8)}${'listings'.padStart(10)}`,
  );
  console.log(row('idle, conditional requests', idle));
  console.log(row('30 replacements/h, conditional', churn));
  console.log(row('idle, unconditional', idlePlain));
  console.log(row('30 replacements/h, unconditional', churnPlain));
  console.log(`reference: ARC >= 0.22 (60 s cache, 10 pages/refresh) lists ~600 counted requests/h idle`);
  console.log(`took ${seconds.toFixed(1)} s`);
}
