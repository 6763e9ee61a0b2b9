import { readFile } from 'node:fs/promises';
import { UsageError } from './flags.ts';
import { StartupError } from './startup-error.ts';

/**
 * Each command's module is imported only when that command runs: the image ships without the test
 * environment the sandbox needs, and `paddock run` starts faster without loading the others.
 */
const COMMANDS: Record<
  string,
  { summary: string; load: () => Promise<(args: string[]) => Promise<number>> }
> = {
  sandbox: {
    summary: 'the whole system locally: control plane, GitHub double, paddock and simulated jobs',
    load: async () => (await import('./sandbox.ts')).sandboxCommand,
  },
  run: {
    summary: 'the paddock controller manager (controllers and admission webhooks)',
    load: async () => (await import('./run.ts')).runCommand,
  },
  'webhook-server': {
    summary: "the GitHub workflow_job webhook server for HRAs' scaleUpTriggers",
    load: async () => (await import('./webhook-server.ts')).webhookServerCommand,
  },
  uninstall: {
    summary: "remove paddock's admission webhook configurations once its finalizers are drained",
    load: async () => (await import('./uninstall.ts')).uninstallCommand,
  },
};

const USAGE = `Usage: paddock <command> [flags]

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(15)} ${c.summary}`)
  .join('\n')}
  ${'version'.padEnd(15)} print paddock's version (also --version)
  ${'help'.padEnd(15)} show this text; \`paddock <command> --help\` explains a command's flags
`;

/** The version in package.json (two levels up from src/cli/ and from dist/cli/ alike). */
export async function paddockVersion(): Promise<string> {
  const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

/** Entry point of the `paddock` binary; returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    const known = command !== undefined && Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
    if (known) return await (await known.load())(rest);
    switch (command) {
      case 'version':
      case '--version':
        process.stdout.write(`paddock ${await paddockVersion()}\n`);
        return 0;
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(USAGE);
        return command === undefined ? 2 : 0;
      default:
        process.stderr.write(`paddock: unknown command "${command}"\n\n${USAGE}`);
        return 2;
    }
  } catch (err) {
    if (err instanceof UsageError || err instanceof StartupError) {
      process.stderr.write(`paddock ${command}: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}
