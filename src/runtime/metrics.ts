import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { QueueMetrics } from './workqueue.ts';

/**
 * Prometheus metrics under controller-runtime's names, so existing dashboards and alerts for Go
 * controllers work unchanged.
 */
export class RuntimeMetrics {
  readonly registry: Registry;
  readonly reconcileTotal: Counter<'controller' | 'result'>;
  readonly reconcileErrors: Counter<'controller'>;
  readonly terminalErrors: Counter<'controller'>;
  readonly reconcilePanics: Counter<'controller'>;
  readonly reconcileTime: Histogram<'controller'>;
  readonly maxConcurrent: Gauge<'controller'>;
  readonly activeWorkers: Gauge<'controller'>;
  readonly queueDepth: Gauge<'name' | 'controller'>;
  readonly queueAdds: Counter<'name' | 'controller'>;
  readonly queueRetries: Counter<'name' | 'controller'>;
  readonly queueLatency: Histogram<'name' | 'controller'>;
  readonly workDuration: Histogram<'name' | 'controller'>;
  readonly unfinishedWork: Gauge<'name' | 'controller'>;
  readonly longestRunning: Gauge<'name' | 'controller'>;
  readonly leaderStatus: Gauge<'name'>;
  private readonly processing = new Map<string, () => number[]>();
  private readonly nowSeconds: () => number;

  constructor(opts: { registry?: Registry; processMetrics?: boolean; now?: () => number } = {}) {
    this.registry = opts.registry ?? new Registry();
    this.nowSeconds = () => (opts.now ?? Date.now)() / 1000;
    if (opts.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    const r = [this.registry];
    const buckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60];
    this.reconcileTotal = new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller',
      labelNames: ['controller', 'result'],
      registers: r,
    });
    this.reconcileErrors = new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller',
      labelNames: ['controller'],
      registers: r,
    });
    this.terminalErrors = new Counter({
      name: 'controller_runtime_terminal_reconcile_errors_total',
      help: 'Total number of terminal reconciliation errors per controller',
      labelNames: ['controller'],
      registers: r,
    });
    this.reconcilePanics = new Counter({
      name: 'controller_runtime_reconcile_panics_total',
      help: 'Total number of reconciliations that threw something other than an Error',
      labelNames: ['controller'],
      registers: r,
    });
    this.reconcileTime = new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller',
      labelNames: ['controller'],
      buckets,
      registers: r,
    });
    this.maxConcurrent = new Gauge({
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Maximum number of concurrent reconciles per controller',
      labelNames: ['controller'],
      registers: r,
    });
    this.activeWorkers = new Gauge({
      name: 'controller_runtime_active_workers',
      help: 'Number of currently used workers per controller',
      labelNames: ['controller'],
      registers: r,
    });
    const q = ['name', 'controller'] as const;
    this.queueDepth = new Gauge({
      name: 'workqueue_depth',
      help: 'Current depth of workqueue',
      labelNames: q,
      registers: r,
    });
    this.queueAdds = new Counter({
      name: 'workqueue_adds_total',
      help: 'Total number of adds handled by workqueue',
      labelNames: q,
      registers: r,
    });
    this.queueRetries = new Counter({
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by workqueue',
      labelNames: q,
      registers: r,
    });
    this.queueLatency = new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames: q,
      buckets,
      registers: r,
    });
    this.workDuration = new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes',
      labelNames: q,
      buckets,
      registers: r,
    });
    const processing = this.processing;
    const nowSeconds = this.nowSeconds;
    this.unfinishedWork = new Gauge({
      name: 'workqueue_unfinished_work_seconds',
      help: 'How many seconds of work has been done that is in progress and has not been observed by work_duration',
      labelNames: q,
      registers: r,
      collect() {
        for (const [name, since] of processing) {
          const now = nowSeconds();
          this.set(
            { name, controller: name },
            since().reduce((s, t) => s + (now - t / 1000), 0),
          );
        }
      },
    });
    this.longestRunning = new Gauge({
      name: 'workqueue_longest_running_processor_seconds',
      help: 'How many seconds has the longest running processor for workqueue been running',
      labelNames: q,
      registers: r,
      collect() {
        for (const [name, since] of processing) {
          const started = since();
          this.set(
            { name, controller: name },
            started.length ? nowSeconds() - Math.min(...started) / 1000 : 0,
          );
        }
      },
    });
    this.leaderStatus = new Gauge({
      name: 'leader_election_master_status',
      help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master',
      labelNames: ['name'],
      registers: r,
    });
  }

  /** Queue observations for one controller's queue. */
  queueMetrics(controller: string, processingSince: () => number[]): QueueMetrics {
    this.processing.set(controller, processingSince);
    const labels = { name: controller, controller };
    return {
      depth: (n) => this.queueDepth.set(labels, n),
      added: () => this.queueAdds.inc(labels),
      retried: () => this.queueRetries.inc(labels),
      queued: (s) => this.queueLatency.observe(labels, s),
      worked: (s) => this.workDuration.observe(labels, s),
    };
  }
}
