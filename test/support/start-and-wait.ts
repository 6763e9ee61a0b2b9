// Starts a control plane, prints its process IDs and waits to be killed (used by the harness test
// that SIGKILLs a test process and checks nothing survives it).
import { startControlPlane } from '../../src/testenv/control-plane.ts';

const plane = await startControlPlane({ controllerManager: false, log: () => undefined });
// Its data directory too: a SIGKILL skips the exit hook that removes it, so the test does.
process.stdout.write(`DIR ${plane.dataDir}\nPIDS ${JSON.stringify(plane.pids())}\n`);
setInterval(() => undefined, 60_000);
