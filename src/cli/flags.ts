import { parseArgs } from 'node:util';

/**
 * Command-line flags with environment-variable equivalents, one table per command, so parsing,
 * `--help` and validation never disagree. A flag beats its variable; the variable beats the default.
 */

export type FlagType = 'string' | 'boolean' | 'duration' | 'integer' | 'number' | 'list';

export interface FlagSpec {
  name: string;
  type: FlagType;
  env?: string;
  default?: string;
  help: string;
  /** Other names accepted for compatibility (ARC's spelling). */
  aliases?: string[];
  /** Shown in --help grouped under this heading. */
  group: string;
}

export type FlagValues = Record<string, string | boolean | number | string[] | undefined>;

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** `90s`, `1m`, `1m30s`, `2h`, `500ms`, or a plain number of seconds (`--duration 60`) → ms. */
export function parseDuration(text: string): number {
  const t = text.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Number(t) * 1000;
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/g;
  let total = 0;
  let consumed = 0;
  for (const m of t.matchAll(re)) {
    const n = Number(m[1]);
    total += n * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
    consumed += m[0].length;
  }
  if (consumed === 0 || consumed !== t.length)
    throw new UsageError(`not a duration: "${text}" (use e.g. 30s, 1m, 1m30s)`);
  return total;
}

function convert(spec: FlagSpec, raw: string | boolean | string[]): string | boolean | number | string[] {
  const where = `--${spec.name}${spec.env ? ` / ${spec.env}` : ''}`;
  switch (spec.type) {
    case 'boolean':
      if (typeof raw === 'boolean') return raw;
      if (/^(true|1|yes)$/i.test(String(raw))) return true;
      if (/^(false|0|no|)$/i.test(String(raw))) return false;
      throw new UsageError(`${where}: expected true or false, got "${raw}"`);
    case 'duration':
      try {
        return parseDuration(String(raw));
      } catch (err) {
        throw new UsageError(`${where}: ${(err as Error).message}`);
      }
    case 'integer': {
      const n = Number(raw);
      if (!Number.isInteger(n)) throw new UsageError(`${where}: expected an integer, got "${raw}"`);
      return n;
    }
    case 'number': {
      const n = Number(raw);
      if (!Number.isFinite(n)) throw new UsageError(`${where}: expected a number, got "${raw}"`);
      return n;
    }
    case 'list': {
      const items = Array.isArray(raw) ? raw : [String(raw)];
      return items
        .flatMap((i) => i.split(','))
        .map((i) => i.trim())
        .filter((i) => i !== '');
    }
    default:
      return String(raw);
  }
}

export function parseFlags(
  specs: FlagSpec[],
  argv: string[],
  env: NodeJS.ProcessEnv,
): { values: FlagValues; help: boolean; positionals: string[] } {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {
    help: { type: 'boolean' },
  };
  for (const s of specs) {
    for (const n of [s.name, ...(s.aliases ?? [])]) {
      options[n] = {
        type: s.type === 'boolean' ? 'boolean' : 'string',
        ...(s.type === 'list' ? { multiple: true } : {}),
      };
    }
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/\. To specify.*$/s, ''));
  }
  const values: FlagValues = {};
  for (const s of specs) {
    let raw: string | boolean | string[] | undefined;
    for (const n of [s.name, ...(s.aliases ?? [])]) {
      const v = parsed.values[n];
      if (v !== undefined) raw = v as string | boolean | string[];
    }
    if (raw === undefined && s.env && env[s.env] !== undefined && env[s.env] !== '') raw = env[s.env];
    if (raw === undefined && s.default !== undefined) raw = s.default;
    values[s.name] = raw === undefined ? undefined : convert(s, raw);
  }
  return { values, help: parsed.values.help === true, positionals: parsed.positionals };
}

export function renderHelp(command: string, summary: string, specs: FlagSpec[]): string {
  const lines = [`Usage: paddock ${command} [flags]`, '', summary, ''];
  const groups = [...new Set(specs.map((s) => s.group))];
  for (const g of groups) {
    lines.push(`${g}:`);
    for (const s of specs.filter((x) => x.group === g)) {
      const names = [s.name, ...(s.aliases ?? [])].map((n) => `--${n}`).join(', ');
      const arg = s.type === 'boolean' ? '' : ` <${s.type === 'list' ? 'a,b' : s.type}>`;
      const extra = [
        s.env ? `env ${s.env}` : '',
        s.default !== undefined && s.default !== '' ? `default ${s.default}` : '',
      ]
        .filter(Boolean)
        .join('; ');
      lines.push(`  ${names}${arg}`);
      lines.push(`      ${s.help}${extra ? ` (${extra})` : ''}`);
    }
    lines.push('');
  }
  return lines.join('\n');
}
