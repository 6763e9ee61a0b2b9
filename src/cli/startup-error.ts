/**
 * A configuration, cluster or credential problem found while starting a command. Exit code 2: a
 * restart without a change would fail the same way.
 */
export class StartupError extends Error {
  readonly exitCode = 2;
}
