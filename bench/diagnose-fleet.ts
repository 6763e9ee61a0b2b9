/**
 * Where a fleet run's time and API requests go (a diagnostic, not a bench line): a RunnerDeployment
 * fleet as in bench/fleet.ts, paddock's queue depths and event-loop lag every 2 s, API server requests
 * per replacement by verb and resource between second 30 and the end, API latencies, reconcile totals.
 *
 *   node bench/diagnose-fleet.ts [runners=1000] [seconds=90]
 *   DIAG_API=1 ...   also API requests every 2 s (scraping /metrics that often loads the API server)
 */
import { Sandbox } from '../src/sandbox/sandbox.ts';

process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
const runners = Number(process.argv[2] ?? 1000);
const seconds = Number(process.argv[3] ?? 90);
const sandbox = new Sandbox({
  kind: 'RunnerDeployment' as never,
  runners,
  jobRate: runners,
  jobDurationMs: 30_000,
  ephemeral: true,
  startupDelayMs: 2000,
  simulate: true,
  chaos: { podKillsPerMinute: 0, github5xxRate: 0, rateLimitPerHour: undefined, nodeLossAfterMs: undefined },
  log: () => {},
  paddockArgs: ['--log-level', 'warn', ...(process.env.DIAG_ARGS ? process.env.DIAG_ARGS.split(' ') : [])],
});
async function scrape(): Promise<Map<string, number>> {
  const user = { token: sandbox.plane!.kubeConfig.getCurrentUser()?.token ?? '' };
  const r = await fetch(`${sandbox.plane!.server}/metrics`, {
    headers: { authorization: `Bearer ${user.token}` },
  });
  const t = await r.text();
  const m = new Map<string, number>();
  for (const line of t.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const verb = /verb="([^"]*)"/.exec(line)?.[1];
    const res = /resource="([^"]*)"/.exec(line)?.[1];
    const sub = /subresource="([^"]*)"/.exec(line)?.[1];
    const code = /code="([^"]*)"/.exec(line)?.[1];
    const k = `${verb} ${res}${sub ? '/' + sub : ''} ${code}`;
    m.set(k, (m.get(k) ?? 0) + Number(line.split(' ').pop()));
  }
  return m;
}
async function scrapePaddock(): Promise<string> {
  return (await fetch(`${sandbox.metricsUrl}/metrics`)).text();
}
try {
  await sandbox.start();
  const t0 = Date.now();
  let prevApi = new Map<string, number>();
  let seenRepl = 0;
  let seenLists = 0;
  const sampler = setInterval(async () => {
    try {
      const t = await scrapePaddock();
      const pick = (re: RegExp) =>
        t
          .split('\n')
          .filter((l) => re.test(l) && !l.startsWith('#'))
          .map((l) => l.replace(/\{[^}]*controller="([^"]*)"[^}]*\}/, '[$1]').replace('nodejs_', ''))
          .join(' ');
      const cur = process.env.DIAG_API ? await scrape() : new Map<string, number>();
      const deltas = [...cur]
        .map(([k, v]) => [k, v - (prevApi.get(k) ?? 0)] as const)
        .filter(([, v]) => v > 0)
        .sort((x, y) => y[1] - x[1]);
      prevApi = cur;
      const apiTotal = deltas.reduce((n, [, v]) => n + v, 0);
      const apiTop = deltas
        .slice(0, 4)
        .map(([k, v]) => `${k.replace(/ 20[01]$/, '')}:${v}`)
        .join(',');
      const lat = sandbox.replacementLatencies.slice(seenRepl);
      seenRepl = sandbox.replacementLatencies.length;
      const lists = sandbox.double.log.filter(
        (e) => e.method === 'GET' && /\/actions\/runners(\?|$)/.test(e.path),
      ).length;
      const rounds = Number(
        /reconcile_total\{controller="runnerreplicaset-controller",result="[a-z_]+"\} (\d+)/g.exec(t)?.[1] ??
          0,
      );
      console.log(
        `t=${Math.round((Date.now() - t0) / 1000)} repl=${lat.length} maxLat=${Math.max(0, ...lat)} ghLists=${lists - seenLists} rrsRounds~${rounds} api=${apiTotal} ${apiTop} ${pick(/^workqueue_depth/)} ${pick(/^nodejs_eventloop_lag_max_seconds|^nodejs_heap_size_used_bytes|^nodejs_gc_duration_seconds_sum\{kind="major"/)}`,
      );
      seenLists = lists;
    } catch {}
  }, 2000);
  await new Promise((r) => setTimeout(r, 30_000));
  const a = await scrape();
  const la = sandbox.replacementLatencies.length;
  const ta = Date.now();
  await new Promise((r) => setTimeout(r, (seconds - 30) * 1000));
  const b = await scrape();
  const lb = sandbox.replacementLatencies.length;
  const tb = Date.now();
  const { execSync } = await import('node:child_process');
  console.log(execSync('ps -eo pid,times,rss,args --sort=-times | head -8 | cut -c1-120').toString());
  clearInterval(sampler);
  const s = await sandbox.summarize();
  const repl = lb - la;
  const secs = (tb - ta) / 1000;
  const w = sandbox.replacementLatencies.slice(la, lb).sort((a, b) => a - b);
  const q = (p: number) => w[Math.min(w.length - 1, Math.ceil(p * w.length) - 1)];
  const buckets: string[] = [];
  for (let i = 0; i < sandbox.replacementLatencies.length; i += 100) {
    const b = sandbox.replacementLatencies.slice(i, i + 100).sort((a, c) => a - c);
    buckets.push(`${b[Math.floor(b.length / 2)]}/${b[Math.ceil(0.99 * b.length) - 1]}`);
  }
  console.log(
    'windowP50',
    q(0.5),
    'windowP99',
    q(0.99),
    'max',
    w[w.length - 1],
    'by 100s:',
    buckets.join(' '),
  );
  console.log(
    JSON.stringify({
      p50: s.replacementLatencyMs.p50,
      p99: s.replacementLatencyMs.p99,
      replacements: s.replacementLatencyMs.count,
      windowRepl: repl,
      secs,
    }),
  );
  const rows = [...b]
    .map(([k, v]) => [k, v - (a.get(k) ?? 0)] as const)
    .filter(([, v]) => v > 0)
    .sort((x, y) => y[1] - x[1]);
  let total = 0;
  for (const [, v] of rows) total += v;
  console.log(
    `total ${total} req in ${secs}s = ${(total / secs).toFixed(0)}/s, per replacement ${(total / repl).toFixed(1)}`,
  );
  for (const [k, v] of rows) console.log(`${k.padEnd(60)} ${v}  ${(v / repl).toFixed(2)}/repl`);
  {
    const user = { token: sandbox.plane!.kubeConfig.getCurrentUser()?.token ?? '' };
    const t = await (
      await fetch(`${sandbox.plane!.server}/metrics`, { headers: { authorization: `Bearer ${user.token}` } })
    ).text();
    const sums = new Map<string, { s: number; c: number }>();
    for (const line of t.split('\n')) {
      const m =
        /^(apiserver_admission_webhook_admission_duration_seconds|apiserver_request_duration_seconds)_(sum|count)\{(.*)\} (\S+)$/.exec(
          line,
        );
      if (!m) continue;
      const labels = m[3];
      const key = m[1]!.startsWith('apiserver_admission')
        ? `webhook ${/name="([^"]*)"/.exec(labels!)?.[1]} ${/operation="([^"]*)"/.exec(labels!)?.[1]}`
        : `${/verb="([^"]*)"/.exec(labels!)?.[1]} ${/resource="([^"]*)"/.exec(labels!)?.[1]}/${/subresource="([^"]*)"/.exec(labels!)?.[1]}`;
      const e = sums.get(key) ?? { s: 0, c: 0 };
      if (m[2] === 'sum') e.s += Number(m[4]!);
      else e.c += Number(m[4]!);
      sums.set(key, e);
    }
    for (const [k, v] of [...sums]
      .filter(([, v]) => v.c > 200)
      .sort((a, b) => b[1].s - a[1].s)
      .slice(0, 14))
      console.log(`LAT ${k.padEnd(70)} n=${v.c} avg=${Math.round((v.s / v.c) * 1000)}ms`);
  }
  const pm = await scrapePaddock();
  console.log(
    pm
      .split('\n')
      .filter(
        (l) =>
          /workqueue_depth|reconcile_total|queue_duration_seconds_sum|work_duration_seconds_sum|reconcile_time_seconds_sum/.test(
            l,
          ) && !l.startsWith('#'),
      )
      .join('\n'),
  );
} finally {
  try {
    (await import('node:fs')).copyFileSync(
      `${sandbox.plane!.dataDir}/paddock.log`,
      `${process.env.TMPDIR ?? '/tmp'}/diagnose-fleet-paddock.log`,
    );
  } catch {}
  await sandbox.stop();
}
