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
