import { parseSandboxKind, type SandboxKind } from './sample.ts';

/**
 * Which (kind, fleet size) runs the fleet benchmark makes. `runs` lists them (`runnerdeployment:100,…`);
 * otherwise every kind of `kinds` runs at every size of `runners`. With neither, the default runs:
 * both kinds at 100 runners and the RunnerDeployment at 1,000 (a RunnerSet at 1,000 is one more
 * run of several minutes on 2 cores, so it is asked for: `--runs runnerset:1000`).
 */

export const DEFAULT_FLEET_RUNS = 'runnerdeployment:100,runnerset:100,runnerdeployment:1000';

export interface FleetRun {
  kind: SandboxKind;
  runners: number;
}

function kindOf(text: string): SandboxKind {
  const kind = parseSandboxKind(text);
  if (!kind) throw new Error(`unknown kind "${text}" (runnerdeployment or runnerset)`);
  return kind;
}

function sizeOf(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`not a fleet size: "${text}"`);
  return n;
}

export function fleetRuns(opts: { runs?: string; kinds?: string; runners?: string }): FleetRun[] {
  if (opts.runs !== undefined || (opts.kinds === undefined && opts.runners === undefined)) {
    return (opts.runs ?? DEFAULT_FLEET_RUNS).split(',').map((r) => {
      const [kind = '', size = ''] = r.split(':');
      return { kind: kindOf(kind), runners: sizeOf(size) };
    });
  }
  const kinds = (opts.kinds ?? 'runnerdeployment,runnerset').split(',').map(kindOf);
  const sizes = (opts.runners ?? '100,1000').split(',').map(sizeOf);
  return sizes.flatMap((runners) => kinds.map((kind) => ({ kind, runners })));
}
