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
 */
export const PADDOCK_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=2'];
