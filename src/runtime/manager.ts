import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { Gauge } from 'prom-client';
import { type Clock, realClock } from './clock.ts';
import { Controller, type ControllerOptions } from './controller.ts';
import { EventRecorder } from './events.ts';
import { Informer, type InformerOptions, type ResourceRef } from './informer.ts';
import { type ClusterAccess, KubeHttp } from './kube-http.ts';
import { type LeaderElectionTimings, LeaderElector } from './leader-election.ts';
import { RuntimeMetrics } from './metrics.ts';
import { http } from './node-builtins.ts';
import { StartupTimeline } from './startup-timeline.ts';
import type { KubeObject } from './store.ts';

/**
 * Runs informers and controllers together: caches start at once (so every replica is ready to
 * take over), controllers only while this replica holds the lease; one HTTP server answers
 * /healthz, /readyz (caches synced) and /metrics; SIGTERM/SIGINT drain gracefully.
 */

export interface ManagerOptions {
  /** Our kubeconfig (runtime/kubeconfig.ts) or client-node's KubeConfig. */
  kubeConfig: ClusterAccess;
  /** Stands in for the client made from `kubeConfig` (unit tests with a fake API server). */
  http?: KubeHttp;
  log: Logger;
  clock?: Clock;
  metrics?: RuntimeMetrics;
  /**
   * Where to serve /healthz, /readyz and /metrics (one address or several; see parseListenAddress):
   * `:8080` is every interface, `127.0.0.1:0` a free loopback port. Omit to serve nothing.
   */
  probeAddress?: string | string[];
  leaderElection?: { namespace: string; name: string; identity: string; timings?: LeaderElectionTimings };
  /**
   * Called at once when the lease is lost, after the controllers stopped handing out work (reconciles
   * in flight have been told to abort through their signal but may still be running). Default: exit
   * the process with 1 without waiting for them, as controller-runtime does: another replica may
   * already be taking over.
   */
  onLostLeadership?: () => void;
  /** Install SIGTERM/SIGINT handlers that stop the manager and exit. */
  handleSignals?: boolean;
  /** Name reported on Events (`reportingController`). */
  controllerName?: string;
  /** Where the start's steps are recorded (one made here by default); the manager adds its own. */
  startup?: StartupTimeline;
  /** Called once, when /readyz first would answer 200 (caches synced, gates open, probes served). */
  onReady?: () => void;
}

export class Manager {
  readonly http: KubeHttp;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: RuntimeMetrics;
  readonly events: EventRecorder;
  private readonly opts: ManagerOptions;
  private readonly informers = new Map<string, Informer<KubeObject>>();
  /** The transform each shared informer was created with (one cache, one shape). */
  private readonly transforms = new Map<string, unknown>();
  private readonly controllers: Controller[] = [];
  private servers: Server[] = [];
  private elector: LeaderElector | undefined;
  private controllersRunning = false;
  private stopping: Promise<void> | undefined;
  private readonly readinessGates = new Map<string, boolean>();
  /** start() has served the probes: gates are added before it, so no earlier moment is `ready`. */
  private probesServed = false;
  /** The steps of this process's start, as `StartupTimeline` steps (`ready` last). */
  readonly startup: StartupTimeline;

  constructor(opts: ManagerOptions) {
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
    this.log = opts.log;
    this.metrics = opts.metrics ?? new RuntimeMetrics({ now: () => this.clock.now() });
    this.http = opts.http ?? new KubeHttp(opts.kubeConfig);
    this.startup = opts.startup ?? new StartupTimeline();
    const startup = this.startup;
    new Gauge({
      name: 'process_startup_step_seconds',
      help: 'Seconds from the process start to each step of its start-up (code loaded, each cache synced, ready, ...)',
      labelNames: ['step'],
      registers: [this.metrics.registry],
      collect() {
        for (const [step, ms] of startup.entries()) this.set({ step }, ms / 1000);
      },
    });
    this.events = new EventRecorder({
      http: this.http,
      clock: this.clock,
      log: this.log.child({ component: 'events' }),
      reportingController: opts.controllerName ?? 'paddock',
      reportingInstance: opts.leaderElection?.identity ?? process.env.HOSTNAME ?? 'paddock',
    });
  }

  /**
   * A shared informer: one list+watch per (resource, namespace, selectors), however many users. Every
   * user must ask with the same `transform` (the cache holds one shape of object); a different one
   * throws, so no reader can get objects shaped for another.
   */
  informer<T extends KubeObject = KubeObject>(
    resource: ResourceRef,
    opts: Pick<
      InformerOptions<T>,
      'namespace' | 'labelSelector' | 'fieldSelector' | 'indexers' | 'transform'
    > = {},
  ): Informer<T> {
    const key = JSON.stringify([
      resource.group,
      resource.version,
      resource.plural,
      opts.namespace,
      opts.labelSelector,
      opts.fieldSelector,
    ]);
    let inf = this.informers.get(key);
    if (!inf) {
      inf = new Informer<T>({
        http: this.http,
        resource,
        clock: this.clock,
        log: this.log,
        ...opts,
      }) as unknown as Informer<KubeObject>;
      this.informers.set(key, inf);
      this.transforms.set(key, opts.transform);
      void inf.waitForSync().then(() => {
        this.startup.mark(
          `cache synced: ${resource.plural}${opts.labelSelector ? ` (${opts.labelSelector})` : ''}`,
        );
        if (this.ready) this.startup.mark('caches synced');
        this.checkReady();
      });
    } else {
      if (this.transforms.get(key) !== opts.transform) {
        throw new Error(
          `the shared ${resource.plural} informer ${key} was created with another transform: ask for it the same way everywhere`,
        );
      }
      for (const [name, fn] of Object.entries(opts.indexers ?? {})) {
        inf.store.addIndexer(name, fn as unknown as (o: KubeObject) => string[]);
      }
    }
    return inf as unknown as Informer<T>;
  }

  controller(opts: Omit<ControllerOptions, 'clock' | 'log' | 'metrics'>): Controller {
    const c = new Controller({ ...opts, clock: this.clock, log: this.log, metrics: this.metrics });
    this.controllers.push(c);
    return c;
  }

  /** Every cache has synced (what the controllers wait for; /readyz waits for the gates too). */
  get ready(): boolean {
    return [...this.informers.values()].every((i) => i.hasSynced());
  }

  /**
   * Something besides the caches /readyz waits for (e.g. `webhook`: a server that starts while the
   * caches list, so that neither waits for the other). Closed until the function returned is called.
   */
  addReadinessGate(name: string): () => void {
    this.readinessGates.set(name, false);
    return () => {
      if (this.readinessGates.get(name) !== false) return;
      this.readinessGates.set(name, true);
      this.startup.mark(`gate open: ${name}`);
      this.checkReady();
    };
  }

  /** Records the `ready` step (and tells `onReady`) the first time nothing keeps /readyz at 503. */
  private checkReady(): void {
    if (this.startup.has('ready') || this.stopping || !this.probesServed) return;
    if (this.notReady().length > 0) return;
    this.startup.mark('ready');
    this.opts.onReady?.();
  }

  /** Why /readyz says 503: the caches not synced yet and the gates not open, empty when ready. */
  private notReady(): string[] {
    const pending = [...this.informers.values()].filter((i) => !i.hasSynced()).map((i) => i.resource.plural);
    const closed = [...this.readinessGates].filter(([, open]) => !open).map(([name]) => name);
    return [
      ...(pending.length > 0 ? [`caches not synced: ${pending.join(', ')}`] : []),
      ...closed.map((g) => `${g} not ready`),
    ];
  }

  get isLeader(): boolean {
    return this.opts.leaderElection ? (this.elector?.isLeader ?? false) : true;
  }

  /** Address of the (first) probe/metrics server once started. */
  get probeUrl(): string | undefined {
    return this.probeUrls[0];
  }

  get probeUrls(): string[] {
    return this.servers.map((s) => {
      const addr = s.address() as AddressInfo;
      const host = addr.address === '0.0.0.0' || addr.address === '::' ? '127.0.0.1' : addr.address;
      return `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}`;
    });
  }

  get allControllers(): readonly Controller[] {
    return this.controllers;
  }

  /**
   * Starts listing and watching with every informer made so far (start() starts them too): the
   * caches can fill while the process checks its configuration; stop() ends them if it gives up.
   */
  startCaches(): void {
    if (this.stopping) return;
    this.startup.mark('caches started');
    for (const inf of this.informers.values()) inf.start();
  }

  async start(): Promise<void> {
    this.startCaches();
    const addresses = this.opts.probeAddress === undefined ? [] : [this.opts.probeAddress].flat();
    for (const address of addresses) await this.serve(address);
    if (addresses.length > 0) this.startup.mark('probes served');
    this.probesServed = true;
    this.checkReady();
    if (this.opts.handleSignals) {
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        process.once(signal, () => {
          this.log.info({ signal }, 'shutting down');
          void this.stop().then(() => process.exit(0));
        });
      }
    }
    const le = this.opts.leaderElection;
    if (!le) {
      await this.startControllers();
      return;
    }
    this.elector = new LeaderElector({
      http: this.http,
      clock: this.clock,
      log: this.log,
      ...le,
      onStartedLeading: () => {
        this.metrics.leaderStatus.set({ name: le.name }, 1);
        this.startControllers().catch((err: unknown) =>
          this.log.error({ err }, 'controllers could not start'),
        );
      },
      onStoppedLeading: () => {
        this.metrics.leaderStatus.set({ name: le.name }, 0);
        // stopControllers stops the hand-out of work before it returns its promise; the drain
        // that follows is not waited for.
        this.stopControllers().catch((err: unknown) =>
          this.log.error({ err }, 'controllers did not stop cleanly'),
        );
        (this.opts.onLostLeadership ?? exitOnLostLeadership)();
      },
    });
    this.metrics.leaderStatus.set({ name: le.name }, 0);
    this.elector.start();
  }

  private async startControllers(): Promise<void> {
    if (this.controllersRunning || this.stopping) return;
    this.controllersRunning = true;
    await Promise.all(this.controllers.map((c) => c.start()));
  }

  /** No controller hands out another key once this returns its promise; the promise waits for the drain. */
  private async stopControllers(): Promise<void> {
    await Promise.all(this.controllers.map((c) => c.stop()));
    this.controllersRunning = false;
  }

  /** Drains controllers, flushes Events, releases the lease, stops informers and the server. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.stopControllers();
      await this.events.flush();
      await this.elector?.shutdown();
      await Promise.all([...this.informers.values()].map((i) => i.stop()));
      for (const server of this.servers) {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
      this.http.close();
    })();
    return this.stopping;
  }

  private async serve(address: string): Promise<void> {
    const { host, port } = parseListenAddress(address);
    const server = http.createServer((req, res) => {
      void this.route(req.url ?? '/').then(({ status, body, type }) => {
        res.writeHead(status, { 'content-type': type });
        res.end(body);
      });
    });
    server.requestTimeout = 10_000;
    server.headersTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      // No host: every interface (IPv6 and IPv4 where the system has both), as Go's ":8080".
      if (host === undefined) server.listen(port, () => resolve());
      else server.listen(port, host, () => resolve());
    });
    this.servers.push(server);
  }

  private async route(url: string): Promise<{ status: number; body: string; type: string }> {
    const path = url.split('?')[0];
    if (path === '/healthz' || path === '/livez') return { status: 200, body: 'ok', type: 'text/plain' };
    if (path === '/readyz') {
      const why = this.notReady();
      return why.length === 0
        ? { status: 200, body: 'ok', type: 'text/plain' }
        : { status: 503, body: why.join('; '), type: 'text/plain' };
    }
    if (path === '/metrics') {
      return {
        status: 200,
        body: await this.metrics.registry.metrics(),
        type: this.metrics.registry.contentType,
      };
    }
    return { status: 404, body: 'not found', type: 'text/plain' };
  }
}

/**
 * A listen address as Go programs (and so ARC and kubebuilder) take them: `host:port`, `[v6]:port`,
 * or `:port` for every interface (host undefined). A bare port stays on loopback, the safe reading
 * of a value with no host at all. Port 0 picks a free port.
 */
export function parseListenAddress(address: string): { host: string | undefined; port: number } {
  const m = /^(?:\[([^\]]*)\]|([^:]*)):(\d+)$/.exec(address);
  const [host, portText] = m ? [m[1] ?? m[2], m[3]] : ['127.0.0.1', address];
  const port = Number(portText);
  if (!/^\d+$/.test(portText ?? '') || port > 65_535) {
    throw new Error(
      `invalid listen address ${JSON.stringify(address)}: want host:port, :port or [ipv6]:port`,
    );
  }
  return { host: host === '' ? undefined : host, port };
}

function exitOnLostLeadership(): never {
  process.exit(1);
}
