export type { AccessTokenSource } from './auth.ts';
export { InstallationTokenSource, StaticTokenSource, signAppJwt } from './auth.ts';
export type { BudgetDecision, RateLimitObservation, RequestKind, ResourceState } from './budget.ts';
export { decideBudget, parseRateLimitHeaders, RateLimitBudget, reserveFor } from './budget.ts';
export type {
  CallFailure,
  CallOptions,
  GitHubClientOptions,
  JitConfigInput,
  JitConfigOutcome,
  RemoveRunnerOutcome,
} from './client.ts';
export { GITHUB_LOG_REDACT_PATHS, GitHubClient } from './client.ts';
export type {
  CredentialFields,
  GitHubCredentials,
  LoadedCredentialsSecret,
  ParsedCredentialsSecret,
  SecretObject,
  SecretReader,
  SecretValue,
} from './credentials.ts';
export {
  assertCredentialsSupportScope,
  CREDENTIAL_SECRET_KEYS,
  credentialId,
  decodeSecretData,
  loadCredentialsFromSecret,
  parseCredentialFields,
  parseCredentialsSecret,
  secretDataHash,
} from './credentials.ts';
export type { GitHubErrorKind, RateLimitCause } from './errors.ts';
export { classifyResponse, GitHubApiError, GitHubConfigError } from './errors.ts';
export { nodeFetch } from './http.ts';
export { GitHubMetrics } from './metrics.ts';
export type { GitHubClientPoolOptions, ResourceRef } from './pool.ts';
export { GitHubClientPool } from './pool.ts';
export type { RegistrationToken } from './registration-tokens.ts';
export {
  REGISTRATION_TOKEN_MIN_VALIDITY_MS,
  RegistrationTokenCache,
  shouldReuseRegistrationToken,
} from './registration-tokens.ts';
export type {
  GetOptions,
  GitHubRunner,
  ListOptions,
  RunnerChange,
  RunnerChangeListener,
  RunnerLabel,
  RunnerPage,
  RunnerPageLister,
} from './registry.ts';
export { diffRunners, RunnerRegistry, RunnerSnapshot } from './registry.ts';
export type { GitHubEndpointOptions, GitHubEndpoints, GitHubScope, ScopeFields } from './scope.ts';
export {
  resolveEndpoints,
  resolveScope,
  scopeIfValid,
  scopeKey,
  scopeRouteParams,
  scopeRoutePrefix,
} from './scope.ts';
export type { GitHubRequestOptions, GitHubResponse, GitHubTransportOptions } from './transport.ts';
export {
  API_VERSION,
  GitHubTransport,
  maxAgeFromCacheControl,
  resourceForRoute,
  retryDelay,
} from './transport.ts';
