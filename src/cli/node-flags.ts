/**
 * V8 flags paddock's process runs with, in the image's entry point and in the sandbox and benches
 * (so they measure what ships). A 2 MiB young generation instead of V8's default (up to 16 MiB per
 * semi-space, which V8 grows under allocation bursts such as a relist) costs more frequent, short
 * scavenges and saves about 20 MiB of RSS with 100 runners at unchanged replacement latency
 * (`node bench/fleet.ts --node-flags=...` compares).
 */
export const PADDOCK_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=2'];
