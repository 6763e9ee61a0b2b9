import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { GitHubDouble, type RunnerRecord } from '../testenv/github-double/index.ts';
import { GitHubClient } from './client.ts';
import { GitHubApiError } from './errors.ts';
import { GitHubMetrics } from './metrics.ts';
import {
  diffRunners,
  type GitHubRunner,
  type RunnerChange,
  type RunnerPage,
  type RunnerPageLister,
  RunnerRegistry,
  releaseDelayMs,
} from './registry.ts';
import type { GitHubScope } from './scope.ts';
import { NO_TIMEOUT_MS, realSleep, SteppingClock, silentLogger, until } from './test-support.ts';

const org: GitHubScope = { kind: 'organization', org: 'acme' };
const LIST = 'GET /orgs/{org}/actions/runners';

function summary(changes: RunnerChange[]): string[] {
  return changes.map((c) => `${c.type}:${c.runner.name}`);
}

describe('RunnerRegistry against the double (250 runners, 3 pages)', () => {
  const clock = new SteppingClock();
  const double = new GitHubDouble({ now: () => clock.now() });
  let token: string;
  let runners: RunnerRecord[] = [];
  const lists = () => double.requestCount(LIST);
  const makeClient = (extra: { conditionalRequests?: boolean; maxRetries?: number } = {}) =>
    new GitHubClient({
      credentials: { kind: 'token', token },
      endpoints: { apiUrl: double.apiUrl },
      clock,
      logger: silentLogger(),
      requestTimeoutMs: NO_TIMEOUT_MS,
      ...extra,
    });

  before(async () => {
    await double.start();
    double.addOrg('acme');
    token = double.addToken({ login: 'registry' }).token;
    const t = double.model.issueToken('orgs/acme', 'registration');
    runners = Array.from({ length: 250 }, (_, i) =>
      double.registerRunner({ registrationToken: t.token, name: `pod-${i}` }),
    );
  });
  after(() => double.stop());

  test('100 lookups for 100 pods cost one list call per page per refresh; an unchanged refresh costs 0', async () => {
    const client = makeClient();
    const before = lists();
    const budgetBefore = double.rateLimitedRequestCount(token);
    const lookup = () =>
      Promise.all(Array.from({ length: 100 }, (_, i) => client.registry.lookupByName(org, `pod-${i}`)));
    const found = await lookup();
    assert.equal(found.filter((r) => r !== undefined).length, 100);
    assert.equal(lists() - before, 3, 'one listing of three pages for 100 lookups');
    const paths = double.log.slice(-3).map((e) => e.path);
    assert.deepEqual(
      paths,
      [1, 2, 3].map((p) => `/orgs/acme/actions/runners?per_page=100&page=${p}`),
    );
    assert.equal(double.rateLimitedRequestCount(token) - budgetBefore, 3);

    await lookup();
    await Promise.all(runners.slice(0, 100).map((r) => client.registry.lookupById(org, r.id)));
    assert.equal(lists() - before, 3, 'younger than max-age: no call at all');

    await clock.advance(60_000);
    await lookup();
    assert.equal(lists() - before, 6, 'max-age reached: one more listing');
    assert.equal(double.rateLimitedRequestCount(token) - budgetBefore, 3, 'three 304s cost nothing');
    const s = double.stats({ credential: token })[LIST]!;
    assert.equal(s.notModified, 3);
    client.close();
  });

  test('a busy flip costs exactly the page it is on', async () => {
    const client = makeClient();
    await client.registry.refreshNow(org);
    const spent = double.rateLimitedRequestCount(token);
    await client.registry.refreshNow(org);
    assert.equal(double.rateLimitedRequestCount(token), spent, 'unchanged: free');
    double.setRunnerBusy(runners[150]!.id, true);
    const snap = await client.registry.refreshNow(org);
    assert.equal(snap.byName('pod-150')?.busy, true);
    assert.equal(double.rateLimitedRequestCount(token) - spent, 1, 'only page 2 changed');
    double.setRunnerBusy(runners[150]!.id, false);
    client.close();
  });

  test('without conditional requests every refresh pays for every page', async () => {
    const client = makeClient({ conditionalRequests: false });
    const spent = double.rateLimitedRequestCount(token);
    await client.registry.refreshNow(org);
    await client.registry.refreshNow(org);
    assert.equal(double.rateLimitedRequestCount(token) - spent, 6);
    assert.equal(
      double.log.slice(-6).every((e) => e.status === 200),
      true,
    );
    client.close();
  });

  test('Cache-Control max-age decides when a lookup refreshes', async () => {
    double.cacheMaxAgeSeconds = 120;
    try {
      const client = makeClient();
      await client.registry.get(org);
      const before = lists();
      await clock.advance(61_000);
      await client.registry.lookupByName(org, 'pod-1');
      assert.equal(lists(), before, 'GitHub said 120 s');
      await clock.advance(59_000);
      await client.registry.lookupByName(org, 'pod-1');
      assert.equal(lists(), before + 3);
      assert.equal(client.registry.peek(org)?.maxAgeMs, 120_000);
      client.close();
    } finally {
      double.cacheMaxAgeSeconds = 60;
    }
  });

  test('change notifications: appeared, busy/idle, offline/online, vanished', async () => {
    const client = makeClient();
    const events: RunnerChange[] = [];
    const unsubscribe = client.registry.subscribe((c) => events.push(c));
    await client.registry.refreshNow(org);
    assert.equal(events.length, 250);
    assert.ok(events.every((e) => e.type === 'appeared' && e.initialLoad && e.scope === 'orgs/acme'));
    events.length = 0;

    const step = async (act: () => void) => {
      act();
      await client.registry.refreshNow(org);
      const got = summary(events);
      events.length = 0;
      return got;
    };
    const t = double.model.issueToken('orgs/acme', 'registration');
    let fresh: RunnerRecord | undefined;
    assert.deepEqual(
      await step(() => {
        fresh = double.registerRunner({ registrationToken: t.token, name: 'newcomer' });
      }),
      ['appeared:newcomer'],
    );
    assert.deepEqual(await step(() => double.setRunnerBusy(fresh!.id, true)), ['busy:newcomer']);
    assert.deepEqual(await step(() => double.setRunnerBusy(fresh!.id, false)), ['idle:newcomer']);
    assert.deepEqual(await step(() => double.setRunnerStatus(fresh!.id, 'offline')), ['offline:newcomer']);
    assert.deepEqual(await step(() => double.setRunnerStatus(fresh!.id, 'online')), ['online:newcomer']);
    assert.deepEqual(await step(() => double.vanishRunner(fresh!.id)), ['vanished:newcomer']);
    assert.deepEqual(await step(() => {}), [], 'no change, no event');
    unsubscribe();
    client.close();
  });

  test('removeRunner and JIT creation update the view without a list call', async () => {
    const client = makeClient();
    const events: RunnerChange[] = [];
    client.registry.subscribe((c) => events.push(c));
    await client.registry.refreshNow(org);
    events.length = 0;
    const before = lists();
    const victim = runners[249]!;
    assert.deepEqual(await client.removeRunner(org, victim.id), { kind: 'removed' });
    assert.deepEqual(summary(events), ['vanished:pod-249']);
    assert.equal(await client.registry.lookupById(org, victim.id), undefined);
    const jit = await client.generateJitConfig(org, { name: 'jit-pod', runnerGroupId: 1, labels: ['x'] });
    assert.equal(jit.kind, 'created');
    assert.deepEqual(summary(events.slice(1)), ['appeared:jit-pod']);
    assert.equal((await client.registry.lookupByName(org, 'jit-pod'))?.status, 'offline');
    assert.equal(lists(), before, 'no listing needed');
    events.length = 0;
    const snap = await client.registry.refreshNow(org);
    assert.deepEqual(summary(events), [], 'the next listing agrees: no duplicate events');
    assert.equal(snap.runners.length, 250);
    client.close();
  });

  test('concurrent refreshNow callers share one follow-up listing', async () => {
    const client = makeClient();
    const before = lists();
    const [a, b, c] = await Promise.all([
      client.registry.refreshNow(org),
      client.registry.refreshNow(org),
      client.registry.refreshNow(org),
    ]);
    assert.equal(lists() - before, 6, 'the running listing plus one follow-up');
    assert.equal(b, c);
    assert.notEqual(a, b);
    client.close();
  });

  test('a failed refresh is held briefly, callers may take the stale view, then it recovers', async () => {
    const client = makeClient({ maxRetries: 0 });
    const good = await client.registry.get(org);
    await clock.advance(60_000);
    double.injectFault({ route: LIST, status: 500 });
    try {
      await assert.rejects(
        client.registry.get(org),
        (e: unknown) => e instanceof GitHubApiError && e.kind === 'server' && e.status === 500,
      );
      const before = lists();
      await assert.rejects(client.registry.get(org), GitHubApiError);
      assert.equal(lists(), before, 'held: not sent again');
      assert.equal(await client.registry.get(org, { allowStale: true }), good);
    } finally {
      double.clearFaults();
    }
    await clock.advance(5000);
    const recovered = await client.registry.get(org);
    assert.notEqual(recovered, good);
    assert.equal(recovered.fetchedAt, clock.now());
    client.close();
  });

  test('keepFresh refreshes at max-age without callers, so events flow', async () => {
    const client = makeClient();
    const events: RunnerChange[] = [];
    client.registry.subscribe((c) => events.push(c));
    const before = lists();
    const stop = client.registry.keepFresh(org);
    await clock.advance(0);
    await until(() => lists() - before === 3 && client.registry.refreshes === 1, 'first refresh');
    events.length = 0;
    double.setRunnerBusy(runners[10]!.id, true);
    await clock.advance(60_000);
    await until(() => client.registry.refreshes === 2, 'second refresh');
    assert.deepEqual(summary(events), ['busy:pod-10']);
    stop();
    await clock.advance(180_000);
    await realSleep(20);
    assert.equal(lists() - before, 6, 'stopped');
    double.setRunnerBusy(runners[10]!.id, false);
    client.close();
  });
});

function runner(id: number, extra: Partial<GitHubRunner> = {}): GitHubRunner {
  return {
    id,
    name: `r-${id}`,
    os: 'Linux',
    status: 'online',
    busy: false,
    ephemeral: false,
    runnerGroupId: 1,
    labels: [],
    ...extra,
  };
}

/** A lister scripted page by page; each call may wait on a gate. */
class ScriptedLister implements RunnerPageLister {
  readonly credentialId = 'token:test';
  calls = 0;
  gate: Promise<void> | undefined;
  private readonly pages: (call: number, page: number) => RunnerPage;
  constructor(pages: (call: number, page: number) => RunnerPage) {
    this.pages = pages;
  }
  async listRunnerPage(_scope: GitHubScope, page: number): Promise<RunnerPage> {
    const call = this.calls++;
    if (this.gate) await this.gate;
    return this.pages(call, page);
  }
}

/**
 * Pages that disagree, as runners coming and going mid-listing make them: page 1 counts 3 runners,
 * page 2 counts 2 and runner 2 has shifted off both.
 */
function disagreeingPage(page: number): RunnerPage {
  return page === 1
    ? { runners: [runner(1)], totalCount: 3, hasNext: true, maxAgeMs: 60_000, notModified: false }
    : { runners: [runner(3)], totalCount: 2, hasNext: false, maxAgeMs: 60_000, notModified: false };
}

/** A one-page listing that agrees with itself. */
function agreeingPage(): RunnerPage {
  return { runners: [runner(1)], totalCount: 1, hasNext: false, maxAgeMs: 60_000, notModified: false };
}

describe('RunnerRegistry logic', () => {
  test('diffRunners', () => {
    const before = [runner(1), runner(2, { busy: true }), runner(3), runner(4, { status: 'offline' })];
    const after = [runner(1), runner(2), runner(3, { busy: true, status: 'offline' }), runner(4), runner(5)];
    assert.deepEqual(summary(diffRunners(before, after, 's')), [
      'idle:r-2',
      'busy:r-3',
      'offline:r-3',
      'online:r-4',
      'appeared:r-5',
    ]);
    assert.deepEqual(summary(diffRunners(after, [runner(1)], 's')), [
      'vanished:r-2',
      'vanished:r-3',
      'vanished:r-4',
      'vanished:r-5',
    ]);
    const renamed = diffRunners([runner(1, { name: 'x' })], [runner(9, { name: 'x' })], 's');
    assert.deepEqual(summary(renamed), ['appeared:x', 'vanished:x'], 'identity is the ID');
  });

  test('the pages after the first are asked for a few at a time; a list that grew is followed, one that shrank ends', async () => {
    // 12 pages of 2 runners; `total` is what GitHub holds when a page is answered.
    let total = 24;
    let inFlight = 0;
    let mostInFlight = 0;
    const asked: number[] = [];
    const lister: RunnerPageLister = {
      credentialId: 'token:test',
      async listRunnerPage(_scope, page) {
        asked.push(page);
        inFlight++;
        mostInFlight = Math.max(mostInFlight, inFlight);
        await realSleep(5);
        inFlight--;
        const ids = [2 * page - 1, 2 * page].filter((id) => id <= total);
        return {
          runners: ids.map((id) => runner(id)),
          totalCount: total,
          hasNext: 2 * page < total,
          maxAgeMs: 60_000,
          notModified: false,
        };
      },
    };
    const registry = new RunnerRegistry({
      lister,
      clock: new SteppingClock(),
      logger: silentLogger(),
      inconsistentRetries: 0, // one pass per refresh, to see it whole
    });
    const all = await registry.refreshNow(org);
    assert.equal(all.runners.length, 24);
    assert.equal(all.complete, true);
    assert.deepEqual(asked, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], 'each page once, none past the end');
    assert.equal(mostInFlight, 5, 'five pages at a time after the first');

    // Grown to 27 after page 1 was answered: pages 13 and 14 are followed one by one.
    asked.length = 0;
    total = 24;
    const grow = lister.listRunnerPage.bind(lister);
    lister.listRunnerPage = async (scope, page, options) => {
      const p = await grow(scope, page, options);
      if (page === 1) total = 27;
      return p;
    };
    const grown = await registry.refreshNow(org);
    assert.deepEqual(asked, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    assert.equal(grown.runners.length, 27);
    assert.equal(grown.complete, false, "page 1's count disagrees with the rest");

    // Shrunk to 7 after page 1: the batch holding the new end is the last one asked for.
    asked.length = 0;
    total = 24;
    lister.listRunnerPage = async (scope, page, options) => {
      const p = await grow(scope, page, options);
      if (page === 1) total = 7;
      return p;
    };
    const shrunk = await registry.refreshNow(org);
    assert.deepEqual(asked, [1, 2, 3, 4, 5, 6]);
    assert.equal(shrunk.complete, false);
  });

  test('pages that disagree (runners changed mid-listing) are listed again', async () => {
    const lister = new ScriptedLister((call, page) => {
      const shifted = call < 2; // first pass: page 2 shifted by a removal, runner 2 is listed twice
      if (page === 1)
        return {
          runners: [runner(1), runner(2)],
          totalCount: 4,
          hasNext: true,
          maxAgeMs: 60_000,
          notModified: false,
        };
      return {
        runners: shifted ? [runner(2), runner(3)] : [runner(3), runner(4)],
        totalCount: shifted ? 3 : 4,
        hasNext: false,
        maxAgeMs: 60_000,
        notModified: false,
      };
    });
    const registry = new RunnerRegistry({ lister, clock: new SteppingClock(), logger: silentLogger() });
    const snap = await registry.refreshNow(org);
    assert.equal(lister.calls, 4, 'two passes of two pages');
    assert.deepEqual(
      snap.runners.map((r) => r.id),
      [1, 2, 3, 4],
    );
    assert.equal(snap.complete, true, 'the second pass agreed');
  });

  test('a listing whose pages keep disagreeing proves no absence and reports no vanished runner', async () => {
    let firstPass = true;
    const lister = new ScriptedLister((_call, page) => {
      if (firstPass) {
        return {
          runners: [runner(1), runner(2)],
          totalCount: 2,
          hasNext: false,
          maxAgeMs: 60_000,
          notModified: false,
        };
      }
      // From now on every pass skips runner 2 (it shifted between pages) and counts differently.
      return disagreeingPage(page);
    });
    const clock = new SteppingClock();
    const registry = new RunnerRegistry({ lister, clock, logger: silentLogger() });
    assert.equal((await registry.refreshNow(org)).complete, true);
    firstPass = false;
    const events: RunnerChange[] = [];
    registry.subscribe((c) => events.push(c));
    const snap = await registry.refreshNow(org);
    assert.equal(snap.complete, false);
    assert.equal(snap.byName('r-2'), undefined, 'missing from the listing…');
    assert.deepEqual(summary(events), ['appeared:r-3'], '…but not reported as vanished');
    assert.equal(
      snap.isFresh(clock.now() + 59_000),
      true,
      'served for its max-age: it shows who is registered',
    );
    assert.equal(snap.isFresh(clock.now() + 60_000), false);
    const proof = await registry.fresherThan(org, clock.now() + 1);
    assert.notEqual(proof, snap, 'a caller that must prove an absence gets a new listing');
  });

  test("a listing whose pages disagreed is served, and kept fresh, at GitHub's max-age", async () => {
    let disagree = true;
    const lister = new ScriptedLister((_call, page) => (disagree ? disagreeingPage(page) : agreeingPage()));
    const clock = new SteppingClock();
    const registry = new RunnerRegistry({ lister, clock, logger: silentLogger(), inconsistentRetries: 0 });
    const stop = registry.keepFresh(org);
    await clock.advance(0);
    await until(() => registry.refreshes === 1, 'first refresh');
    // Under churn nearly every listing disagrees: listing one again early would multiply the spend.
    await clock.advance(59_000);
    await realSleep(10);
    assert.equal(registry.refreshes, 1, 'the keeper does not list an incomplete snapshot again early');
    assert.equal((await registry.get(org)).complete, false);
    assert.equal(registry.refreshes, 1, 'nor does a lookup');
    // A caller that must prove an absence asks for a listing newer than the one it has.
    assert.equal((await registry.fresherThan(org, clock.now() + 1)).complete, false);
    assert.equal(registry.refreshes, 2);
    disagree = false;
    await clock.advance(60_000); // 119 s: the keeper lists at 60 s after the last listing (59 s)
    await until(() => registry.refreshes === 3, 'the keeper lists again at max-age');
    assert.equal((await registry.get(org)).complete, true);
    await clock.advance(50_000); // 169 s: the listing of 119 s is fresh until 179 s
    await realSleep(10);
    assert.equal(registry.refreshes, 3, 'a complete listing is kept for its max-age');
    stop();
  });

  test('only a listing asked for to prove an absence is repeated when its pages disagree', async () => {
    let passes = 0;
    const lister = new ScriptedLister((_call, page) => {
      if (page === 1) passes++;
      return disagreeingPage(page);
    });
    const clock = new SteppingClock();
    const registry = new RunnerRegistry({ lister, clock, logger: silentLogger(), inconsistentRetries: 2 });
    assert.equal((await registry.get(org)).complete, false);
    assert.equal(passes, 1, 'a lookup is served what one pass found');
    await clock.advance(60_000);
    assert.equal((await registry.get(org)).complete, false);
    assert.equal(passes, 2, 'so is the next one after max-age');
    assert.equal((await registry.fresherThan(org, clock.now() + 1)).complete, false);
    assert.equal(passes, 5, 'a proof of absence is worth two more passes');
  });

  test('pages that disagree by many runners (a fleet scaling up) are not listed again at once', async () => {
    let passes = 0;
    const lister = new ScriptedLister((_call, page) => {
      if (page === 1) {
        passes++;
        return { runners: [runner(1)], totalCount: 2, hasNext: true, maxAgeMs: 60_000, notModified: false };
      }
      // Eight runners registered while page 1 was read.
      return { runners: [runner(2)], totalCount: 10, hasNext: false, maxAgeMs: 60_000, notModified: false };
    });
    const registry = new RunnerRegistry({
      lister,
      clock: new SteppingClock(),
      logger: silentLogger(),
      inconsistentRetries: 2,
    });
    const snap = await registry.refreshNow(org);
    assert.equal(snap.complete, false);
    assert.equal(passes, 1, 'one pass: another would disagree as much');
    assert.deepEqual(
      snap.runners.map((r) => r.id),
      [1, 2],
      'what was listed is kept',
    );
  });

  test('while runners keep changing, a listing whose pages disagree is not repeated at once', async () => {
    let churn = true;
    let passes = 0;
    const lister = new ScriptedLister((_call, page) => {
      if (page === 1) passes++;
      return churn ? disagreeingPage(page) : agreeingPage();
    });
    const metrics = new GitHubMetrics(new Registry());
    const registry = new RunnerRegistry({
      lister,
      clock: new SteppingClock(),
      logger: silentLogger(),
      inconsistentRetries: 2,
      metrics,
    });
    assert.equal((await registry.refreshNow(org)).complete, false);
    assert.equal(passes, 3, 'the first disagreement is listed again twice');
    assert.equal((await registry.refreshNow(org)).complete, false);
    assert.equal(passes, 4, 'still disagreeing: one pass, no re-listing');
    churn = false;
    assert.equal((await registry.refreshNow(org)).complete, true);
    assert.equal(passes, 5);
    churn = true;
    assert.equal((await registry.refreshNow(org)).complete, false);
    assert.equal(passes, 8, 'after a listing that agreed, a disagreement is listed again');
    const byReason = Object.fromEntries(
      (await metrics.registryListings.get()).values.map((v) => [v.labels.reason, v.value]),
    );
    assert.deepEqual(byReason, { requested: 4, 'pages-disagreed': 4 }, 'each pass counted once, by reason');
  });

  test('fresherThan: the cached snapshot when recent enough, else a listing that started late enough', async () => {
    const lister = new ScriptedLister(() => ({
      runners: [runner(1)],
      totalCount: 1,
      hasNext: false,
      maxAgeMs: 60_000,
      notModified: false,
    }));
    const clock = new SteppingClock();
    const registry = new RunnerRegistry({ lister, clock, logger: silentLogger() });
    const first = await registry.refreshNow(org);
    assert.equal(lister.calls, 1);
    assert.equal(await registry.fresherThan(org, first.fetchedAt), first, 'recent enough: no call');
    await clock.advance(5000);
    const second = await registry.fresherThan(org, clock.now() - 1000);
    assert.equal(lister.calls, 2, 'older than asked: listed again');
    assert.ok(second.fetchedAt >= clock.now() - 1000);
  });

  test('a scope its last user forgot keeps a fresh snapshot: the next user lists nothing until it expires', async () => {
    const lister = new ScriptedLister(() => ({
      runners: [runner(1)],
      totalCount: 1,
      hasNext: false,
      maxAgeMs: 60_000,
      notModified: false,
    }));
    const clock = new SteppingClock();
    const registry = new RunnerRegistry({ lister, clock, logger: silentLogger() });
    // What RegistryInterest does as the last pod of a scope goes and the next one arrives.
    let stop = registry.keepFresh(org);
    await clock.advance(0);
    await until(() => registry.refreshes === 1, 'first refresh');
    stop();
    registry.forget(org);
    await clock.advance(30_000);
    stop = registry.keepFresh(org);
    await clock.advance(0);
    await realSleep(10);
    assert.equal((await registry.get(org)).byId(1)?.name, 'r-1');
    assert.equal(lister.calls, 1, 'the snapshot of 30 s ago is served, not listed again');
    await clock.advance(30_000);
    await until(() => registry.refreshes === 2, 'the keeper lists at max-age as before');
    stop();
    registry.forget(org);
    await clock.advance(59_000);
    assert.ok(registry.peek(org), 'held while fresh');
    await clock.advance(1000);
    assert.equal(registry.peek(org), undefined, 'dropped once stale');
    assert.equal(lister.calls, 2);
  });

  test('releaseDelayMs: a forgotten scope is held until its snapshot expires', () => {
    assert.equal(releaseDelayMs(undefined, false, 1000), 0, 'nothing to keep');
    assert.equal(releaseDelayMs({ fetchedAt: 0, maxAgeMs: 60_000 }, false, 45_000), 15_000);
    assert.equal(releaseDelayMs({ fetchedAt: 0, maxAgeMs: 60_000 }, false, 90_000), 0, 'stale');
    assert.ok(releaseDelayMs(undefined, true, 0) > 0, 'a listing in flight is waited for');
  });

  test('our removal during an in-flight listing is not undone by that listing', async () => {
    let open!: () => void;
    const lister = new ScriptedLister(() => ({
      runners: [runner(1), runner(2)],
      totalCount: 2,
      hasNext: false,
      maxAgeMs: 60_000,
      notModified: false,
    }));
    const clock = new SteppingClock();
    const registry = new RunnerRegistry({ lister, clock, logger: silentLogger() });
    await registry.refreshNow(org);
    const events: RunnerChange[] = [];
    registry.subscribe((c) => events.push(c));
    lister.gate = new Promise((r) => {
      open = r;
    });
    const pending = registry.refreshNow(org);
    await realSleep(1);
    registry.recordRemoved(org, 2);
    registry.recordCreated(org, runner(7));
    open();
    const snap = await pending;
    assert.deepEqual(
      snap.runners.map((r) => r.id),
      [1, 7],
    );
    assert.deepEqual(summary(events), ['vanished:r-2', 'appeared:r-7'], 'no flapping back');
  });
});
