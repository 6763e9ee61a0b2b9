export type { AppCredential, Installation, Principal, TokenCredential } from './auth.ts';
export { principalId } from './auth.ts';
export type { JobRecord, RegisterRunnerInput, RunnerRecord, ScopeRef } from './model.ts';
export { DoubleError, scopeKey } from './model.ts';
export type { RateLimitResource, RateLimitView } from './rate-limits.ts';
export type {
  FaultRule,
  GitHubDoubleOptions,
  RequestLogEntry,
  RouteStats,
  SecondaryLimitRule,
} from './server.ts';
export { GitHubDouble, runnerJson } from './server.ts';
export type { WebhookSenderOptions, WebhookSenderStats } from './webhook.ts';
export { deliverWebhook, signWebhookBody, WebhookSender, workflowJobPayload } from './webhook.ts';
