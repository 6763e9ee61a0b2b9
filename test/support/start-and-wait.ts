// Starts a control plane, prints its process IDs and waits to be killed (used by the harness test
// that SIGKILLs a test process and checks nothing survives it).
import { startControlPlane } from '../../src/testenv/control-plane.ts';

const plane = await startControlPlane({ controllerManager: false, log: () => undefined });
process.stdout.write(`PIDS ${JSON.stringify(plane.pids())}\n`);
setInterval(() => undefined, 60_000);
