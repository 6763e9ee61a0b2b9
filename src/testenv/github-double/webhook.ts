import { createHmac, randomUUID } from 'node:crypto';
import type { JobRecord } from './model.ts';
import type { GitHubDouble } from './server.ts';

/** `X-Hub-Signature-256` value for a raw body, as GitHub computes it. */
export function signWebhookBody(secret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export type WorkflowJobAction = 'queued' | 'waiting' | 'in_progress' | 'completed';

/** A `workflow_job` event payload for a job of the double, with the documented envelope. */
export function workflowJobPayload(double: GitHubDouble, job: JobRecord, action: WorkflowJobAction) {
  return {
    action,
    workflow_job: double.jobJson(job),
    repository: {
      id: 1,
      name: job.repo,
      full_name: `${job.owner}/${job.repo}`,
      private: true,
      owner: { login: job.owner, type: 'Organization' },
    },
    organization: { login: job.owner },
    sender: { login: 'octocat', type: 'User' },
  };
}

export interface DeliveryResult {
  status: number;
  deliveryId: string;
  body: string;
}

/**
 * POSTs a signed webhook the way GitHub does: `X-GitHub-Event`, `X-GitHub-Delivery` (a GUID that a
 * redelivery repeats), `X-Hub-Signature-256` over the exact bytes sent.
 */
export async function deliverWebhook(input: {
  url: string;
  secret?: string;
  event?: string;
  payload: unknown;
  deliveryId?: string;
  /** Sign with this instead of the correct signature (for negative tests). */
  signatureOverride?: string;
}): Promise<DeliveryResult> {
  const body = JSON.stringify(input.payload);
  const deliveryId = input.deliveryId ?? randomUUID();
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'GitHub-Hookshot/paddock-double',
    'x-github-event': input.event ?? 'workflow_job',
    'x-github-delivery': deliveryId,
    'x-github-hook-id': '1',
  };
  const signature =
    input.signatureOverride ?? (input.secret === undefined ? undefined : signWebhookBody(input.secret, body));
  if (signature !== undefined) headers['x-hub-signature-256'] = signature;
  const res = await fetch(input.url, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, deliveryId, body: await res.text() };
}

export interface WebhookSenderOptions {
  double: GitHubDouble;
  /** Where deliveries go (the webhook server's URL). */
  url: string;
  secret: string;
  /** Share of deliveries never sent (0–1). */
  dropRate?: number;
  /** Share of deliveries sent twice, under the same delivery ID (a redelivery) or a new one, half each. */
  duplicateRate?: number;
  /** Deliveries wait up to this long, at random, before they go (so some arrive out of order). */
  maxDelayMs?: number;
  random?: () => number;
}

export interface WebhookSenderStats {
  events: number;
  sent: number;
  dropped: number;
  duplicated: number;
  /** Answered with a status other than 2xx, or not answered. */
  failed: number;
}

/**
 * GitHub's webhook side for the double: every job change (queued, in_progress, completed) becomes
 * a signed `workflow_job` delivery to `url`, as a repository or organization webhook would send it,
 * with optional chaos (dropped, duplicated and delayed deliveries). Payloads are taken when the
 * job changes, not when they are sent.
 */
export class WebhookSender {
  private opts: WebhookSenderOptions;
  private readonly random: () => number;
  private unsubscribe: (() => void) | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  readonly stats: WebhookSenderStats = { events: 0, sent: 0, dropped: 0, duplicated: 0, failed: 0 };
  /** When the first `queued` delivery of each job was sent (epoch ms). */
  readonly queuedSentAt = new Map<number, number>();
  /** When that delivery was answered 2xx. */
  readonly queuedAnsweredAt = new Map<number, number>();

  constructor(opts: WebhookSenderOptions) {
    this.opts = opts;
    this.random = opts.random ?? Math.random;
  }

  /** Changes the delivery chaos from now on (a soak turns it on and off). */
  setChaos(chaos: { dropRate: number; duplicateRate: number; maxDelayMs: number }): void {
    this.opts = { ...this.opts, ...chaos };
  }

  start(): void {
    this.unsubscribe = this.opts.double.model.on((e) => {
      if (e.type !== 'job-changed') return;
      const action = e.job.status as WorkflowJobAction;
      this.stats.events++;
      if (this.random() < (this.opts.dropRate ?? 0)) {
        this.stats.dropped++;
        return;
      }
      const payload = workflowJobPayload(this.opts.double, e.job, action);
      const deliveryId = randomUUID();
      const jobId = e.job.id;
      this.later(payload, deliveryId, action === 'queued' ? jobId : undefined);
      if (this.random() < (this.opts.duplicateRate ?? 0)) {
        this.stats.duplicated++;
        this.later(payload, this.random() < 0.5 ? deliveryId : randomUUID(), undefined);
      }
    });
  }

  private later(payload: unknown, deliveryId: string, queuedJob: number | undefined): void {
    const delay = Math.floor(this.random() * (this.opts.maxDelayMs ?? 0));
    const p = (async () => {
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
      if (queuedJob !== undefined && !this.queuedSentAt.has(queuedJob))
        this.queuedSentAt.set(queuedJob, Date.now());
      this.stats.sent++;
      try {
        const res = await deliverWebhook({
          url: this.opts.url,
          secret: this.opts.secret,
          payload,
          deliveryId,
        });
        if (res.status >= 300) this.stats.failed++;
        else if (queuedJob !== undefined && !this.queuedAnsweredAt.has(queuedJob)) {
          this.queuedAnsweredAt.set(queuedJob, Date.now());
        }
      } catch {
        this.stats.failed++;
      }
    })();
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  /** Stops listening and waits for the deliveries under way. */
  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    await Promise.all([...this.inFlight]);
  }
}
