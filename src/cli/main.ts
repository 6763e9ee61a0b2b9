import { UsageError } from './flags.ts';
import { RUN_SUMMARY, runCommand, StartupError } from './run.ts';
import { SANDBOX_SUMMARY, sandboxCommand } from './sandbox.ts';
import { UNINSTALL_SUMMARY, uninstallCommand } from './uninstall.ts';
import { WEBHOOK_SERVER_SUMMARY, webhookServerCommand } from './webhook-server.ts';

const USAGE = `Usage: paddock <command> [flags]

Commands:
  sandbox   ${SANDBOX_SUMMARY.split('\n')[0]}
  run       ${RUN_SUMMARY.split('\n')[0]}
  webhook-server  ${WEBHOOK_SERVER_SUMMARY.split('\n')[0]}
  uninstall ${UNINSTALL_SUMMARY.split('\n')[0]}
  help      show this text; \`paddock <command> --help\` explains a command's flags
`;

/** Entry point of the `paddock` binary; returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'run':
        return await runCommand(rest);
      case 'sandbox':
        return await sandboxCommand(rest);
      case 'webhook-server':
        return await webhookServerCommand(rest);
      case 'uninstall':
        return await uninstallCommand(rest);
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
