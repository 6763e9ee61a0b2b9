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

/** JSON logs to stdout (or `destination`), with secrets redacted. */
export function createLogger(
  opts: { level?: string; destination?: pino.DestinationStream; name?: string } = {},
): Logger {
  return pino(
    {
      name: opts.name ?? 'paddock',
      level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: undefined,
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
