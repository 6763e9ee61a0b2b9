import pino, { type Logger } from 'pino';

/** Paths that may carry secrets; pino replaces their values before anything is written. */
export const REDACT_PATHS = [
  'token',
  '*.token',
  'privateKey',
  '*.privateKey',
  'jitConfig',
  '*.jitConfig',
  'encoded_jit_config',
  '*.encoded_jit_config',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'registrationToken',
  '*.registrationToken',
];

/**
 * JSON logs to stdout (or `destination`), with secrets redacted.
 *
 * pino appends a child's bindings (and a call's fields) to those already bound without replacing
 * them, so a key bound twice appears twice in the line. Each key therefore has one owner:
 * `logger` is set here (not pino's `name`: `name` is the reconciled object's, as in ARC's logs);
 * `component` by the part that names itself (GitHubClient, WebhookServer) or, for parts that do
 * not, by whoever creates them (the Manager for Events, `paddock run` for the webhook handler);
 * `controller`, `namespace`, `name` by the Controller; `informer` by the Informer; `lease`,
 * `identity` by the LeaderElector. Pass a logger down unchanged to a part that binds its own keys.
 */
export function createLogger(
  opts: { level?: string; destination?: pino.DestinationStream; name?: string } = {},
): Logger {
  return pino(
    {
      level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: { logger: opts.name ?? 'paddock' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    opts.destination ?? pino.destination(1),
  );
}

/** A logger that drops everything (tests that do not look at logs). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
