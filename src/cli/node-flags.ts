/**
 * Node/V8 flags paddock's process runs with: the image's entry point, and the sandbox and benches
 * (so they measure what ships). None for now. A smaller young generation was measured
 * (`node bench/fleet.ts --node-flags=--max-semi-space-size=N`): 2 MiB saves ~20 MiB of RSS at 100
 * runners and 8 MiB ~14 MiB, but both made paddock list runners 2–6 times as often (GitHub spend up
 * from 0.6 to 1.2–1.9 requests per runner-hour), a trade the spend targets do not allow; why GC
 * timing changes the listing rate is not understood yet.
 */
export const PADDOCK_NODE_FLAGS: readonly string[] = [];
