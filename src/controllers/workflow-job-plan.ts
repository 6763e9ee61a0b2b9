import * as z from '../runtime/zod.ts';
import {
  DEFAULT_TRIGGER_DURATION_MS,
  type JobOp,
  jobFitsLabels,
  type ScaleTargetScope,
  scaleTargetKeys,
} from './capacity-reservations.ts';

/**
 * What one checked GitHub delivery asks of the autoscalers (spec §7.5.1, §7.5.3), as a pure
 * decision: the HTTP answer and, for a queued or completed job that an HRA serves, the reservation
 * change for that HRA. The server fetches the HRAs and their targets and performs the result.
 * Where ARC answers 500 (an unknown event, another known event), paddock answers 200 and says why:
 * GitHub retries nothing on 200, and nothing is wrong with the delivery.
 */

/**
 * The repository's `owner/name` becomes part of a reservation name in the HRA's spec: held to
 * GitHub's own limits (100 and 39 characters; 100 for both here), a delivery cannot make a
 * reservation the API server refuses to store, which the writer would retry for good, holding up
 * every later delivery for that HRA.
 */
const GITHUB_NAME_MAX = 100;

const workflowJobPayload = z.object({
  action: z.string(),
  workflow_job: z.object({
    id: z.int().check(z.positive()),
    labels: z._default(z.array(z.string()), []),
    conclusion: z.nullish(z.string()),
    runner_id: z.nullish(z.number()),
  }),
  repository: z.object({
    name: z.string().check(z.minLength(1), z.maxLength(GITHUB_NAME_MAX)),
    owner: z.object({
      login: z.string().check(z.minLength(1), z.maxLength(GITHUB_NAME_MAX)),
      type: z.optional(z.string()),
    }),
  }),
  enterprise: z.nullish(z.object({ slug: z.string() })),
});

export interface HraCandidate {
  namespace: string;
  name: string;
  deleting: boolean;
  /** The `scaleUpTriggers` entries: only a single workflowJob trigger makes an HRA webhook-driven. */
  triggers: readonly { workflowJob: boolean; durationMs: number | undefined }[];
  /** Its scale target's scope and labels, or undefined when the target does not exist. */
  target: (ScaleTargetScope & { labels: readonly string[] }) | undefined;
}

export interface RunnerGroup {
  scope: 'Organization' | 'Enterprise';
  kind: 'Default' | 'Custom';
  name: string;
}

export type WorkflowJobDecision = {
  status: 200 | 400;
  body: string;
  /** The HRA and the reservation change, when there is one. */
  scale?: { namespace: string; name: string; op: JobOp };
};

/** The first webhook-driven HRA answering to `key` whose target fits the job's labels. */
function hraFor(key: string, labels: readonly string[], hras: readonly HraCandidate[]) {
  if (!key) return undefined;
  for (const h of hras) {
    if (!h.target || !scaleTargetKeys(h.target).includes(key)) continue;
    if (h.deleting || h.triggers.length !== 1 || !h.triggers[0]!.workflowJob) continue;
    if (!jobFitsLabels(labels, h.target.labels)) continue;
    const d = h.triggers[0]!.durationMs;
    return { hra: h, durationMs: d && d > 0 ? d : DEFAULT_TRIGGER_DURATION_MS };
  }
  return undefined;
}

const GROUP_ORDER: readonly [RunnerGroup['kind'], RunnerGroup['scope']][] = [
  ['Default', 'Organization'],
  ['Default', 'Enterprise'],
  ['Custom', 'Organization'],
  ['Custom', 'Enterprise'],
];

/**
 * The HRA a job from `owner/repo` scales (spec §7.5.3): repository runners first; then, unless the
 * owner is a user, the runner groups the HRAs manage (restricted to `visibleGroups` when GitHub was
 * asked which groups the repository may use), default before custom, organization before enterprise.
 */
export function findScaleTarget(input: {
  owner: string;
  ownerType: string | undefined;
  repo: string;
  enterprise: string | undefined;
  labels: readonly string[];
  hras: readonly HraCandidate[];
  visibleGroups?: readonly RunnerGroup[] | undefined;
}) {
  const byRepo = hraFor(`${input.owner}/${input.repo}`, input.labels, input.hras);
  if (byRepo || input.ownerType === 'User') return byRepo;
  const managed: RunnerGroup[] = [];
  for (const h of input.hras) {
    const t = h.target;
    if (!t) continue;
    const [o, e, g] = [t.organization ?? '', t.enterprise ?? '', t.group ?? ''];
    if (g && !e && !o) continue;
    if (e !== (input.enterprise ?? '') && o !== input.owner) continue;
    managed.push({ scope: e ? 'Enterprise' : 'Organization', kind: g ? 'Custom' : 'Default', name: g });
  }
  const same = (a: RunnerGroup, b: RunnerGroup) =>
    a.scope === b.scope && a.kind === b.kind && a.name === b.name;
  const visible = input.visibleGroups
    ? managed.filter((m) => input.visibleGroups!.some((v) => same(v, m)))
    : managed;
  for (const [kind, scope] of GROUP_ORDER) {
    for (const g of visible) {
      if (g.kind !== kind || g.scope !== scope) continue;
      const base = scope === 'Organization' ? input.owner : `enterprises/${input.enterprise ?? ''}`;
      const hit = hraFor(kind === 'Default' ? base : `${base}/group/${g.name}`, input.labels, input.hras);
      if (hit) return hit;
    }
  }
  return undefined;
}

/** A sender's word in an answer: GitHub's event and action names are short lower-case words. */
const echo = (v: string) => (/^[a-z_]{1,40}$/.test(v) ? v : '(unrecognised)');

/** The answer to one delivery that passed the checks of `checkDelivery`. */
export function planWorkflowJob(input: {
  event: string;
  payload: unknown;
  hras: readonly HraCandidate[];
  visibleGroups?: readonly RunnerGroup[] | undefined;
}): WorkflowJobDecision {
  if (input.event === 'ping') return { status: 200, body: 'pong' };
  if (input.event !== 'workflow_job') {
    return { status: 200, body: `ignored: paddock scales on workflow_job events, not ${echo(input.event)}` };
  }
  const parsed = workflowJobPayload.safeParse(input.payload);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      status: 400,
      body: `malformed workflow_job payload: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`,
    };
  }
  const p = parsed.data;
  if (p.action !== 'queued' && p.action !== 'completed') {
    return { status: 200, body: `ignored: workflow_job action ${echo(p.action)}` };
  }
  const found = findScaleTarget({
    owner: p.repository.owner.login,
    ownerType: p.repository.owner.type,
    repo: p.repository.name,
    enterprise: p.enterprise?.slug,
    labels: p.workflow_job.labels,
    hras: input.hras,
    visibleGroups: input.visibleGroups,
  });
  if (!found) return { status: 200, body: 'no horizontalrunnerautoscaler to scale for this github event' };
  const job = p.workflow_job;
  if (p.action === 'completed' && job.conclusion === 'skipped') {
    return { status: 200, body: 'ignored: a skipped job never had a runner' };
  }
  if (p.action === 'completed' && job.conclusion === 'success' && job.runner_id == null) {
    return { status: 200, body: 'ignored: a completion without a runner (from a check run)' };
  }
  const amount = p.action === 'queued' ? 1 : -1;
  return {
    status: 200,
    body: `scaled ${found.hra.name} by ${amount}`,
    scale: {
      namespace: found.hra.namespace,
      name: found.hra.name,
      op: {
        jobId: job.id,
        repo: `${p.repository.owner.login}/${p.repository.name}`,
        action: p.action,
        durationMs: found.durationMs,
      },
    },
  };
}
