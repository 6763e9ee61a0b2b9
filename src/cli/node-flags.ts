/**
 * Node/V8 flags paddock's process runs with: the image's entry point, and the sandbox and benches
 * (so they measure what ships).
 *
 * `--max-semi-space-size=2` (MiB): V8 otherwise grows the young generation to 16 MiB per semi-space
 * under paddock's allocation pattern (informer events, listings), and keeps it. Capped, a RunnerDeployment
 * of 100 runners ran at 117–119 MiB steady instead of 145 MiB, with the same GitHub spend (0.6 requests
 * per runner-hour) and replacement latency (`node bench/fleet.ts --node-flags=…`); 1 MiB saved no more.
 * An earlier trial of the cap had raised runner listings 2–6×: the cause was the runner registry
 * dropping a scope's fresh snapshot whenever reconcile timing briefly emptied it (fixed), not the GC.
 *
 * `--heap-growing-percent=20`: after a full GC V8 lets the old generation grow by a factor it picks
 * from GC and allocation speeds (up to 4×) before collecting again. paddock's survivors are few (36 MiB
 * in a heap snapshot at 1,000 runners) and its garbage plentiful (decoded lists and watch events), so
 * the heap sat at 110–115 MiB, 50–95 MiB of it garbage, and RSS at 222–229 MiB. Growing by 20 %:
 * 145–153 MiB RSS (three runs of `node bench/fleet.ts --runs runnerdeployment:1000`) for about 10 %
 * more CPU (38–39 s against 31–36 s in 120 s), replacement p99 344–669 ms against 402–1,067 ms;
 * 10 % saved nothing more. At 100 runners the heap is at V8's floor either way (116–118 MiB RSS).
 *
 * Left out, measured with `node bench/fleet.ts --node-flags=…` (steady RSS at 100 runners against
 * 97–98 MiB; CPU seconds in 120 s and replacement p50/p99 at 1,000 runners against 36 s, 164–191 /
 * 1,085 ms in the same hour). The optimising compilers' own code is 7 MiB of the node binary's pages
 * (`/proc/<pid>/pagemap` against `nm`), so capping the tier saves memory but costs CPU and latency:
 * - `--max-opt=2` (Maglev, no TurboFan): 90 MiB; 1,000 runners 113–116 MiB, 37–38 s, p50 230–324 ms.
 * - `--max-opt=1` (Sparkplug only): 85 MiB; 1,000 runners 100 MiB, 44 s, p50 651 ms, p99 3.1 s (that
 *   run shared the machine with other work, so its CPU and latency overstate the cost).
 * - `--lite-mode` 78 MiB, `--jitless` 83 MiB; 1,000 runners (lite) 48 s, p99 2.7 s.
 * - `--optimize-for-size` with `--max-opt=1`: 81 MiB; 1,000 runners 50 s.
 * - `--single-threaded-gc`: 104 MiB (the heap grows further between collections).
 */
export const PADDOCK_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=2', '--heap-growing-percent=20'];

/**
 * Environment paddock's process runs with, beside PADDOCK_NODE_FLAGS (the image's `Env`, the sandbox,
 * the benches).
 *
 * `MALLOC_ARENA_MAX=2`: glibc gives each thread that allocates (libuv's pool hashing and TLS, V8's GC
 * helpers) an arena of its own, up to eight per core, and freed memory stays in the arena that held
 * it. paddock's C++ side allocates little, so two arenas suffice. `node bench/fleet.ts` steady RSS:
 * 100 runners 108.5 MiB against 116.4–118.7 (anonymous 57.6 against 69.6–71.3 MiB); 1,000 runners
 * 138–143 MiB against 148–151, same CPU, spend and replacement latency. One arena saved 2 MiB more,
 * within noise, at the price of the main thread and the pool contending for one lock.
 */
export const PADDOCK_PROCESS_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' };
