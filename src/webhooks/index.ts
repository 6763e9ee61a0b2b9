export type {
  CertificateAuthorityOptions,
  KeyPairPem,
  PersistedCertificatesOptions,
  ServingCertificateOptions,
  WebhookCertificates,
} from './certs.ts';
export {
  certificatesUsable,
  generateCertificateAuthority,
  generateWebhookCertificates,
  issueClientCertificate,
  issueServingCertificate,
  loadOrCreateWebhookCertificates,
} from './certs.ts';
export type {
  ConfigurationOwner,
  RunnerPodWebhookOptions,
  RunnerResourceWebhookOptions,
  WebhookClientConfig,
  WebhookEndpoint,
} from './configuration.ts';
export {
  applyRunnerPodWebhookConfiguration,
  applyRunnerResourceWebhookConfigurations,
  clusterRoleOwner,
  DEFAULT_RUNNER_RESOURCE_CONFIGURATION_NAME,
  DEFAULT_WEBHOOK_CONFIGURATION_NAME,
  deleteRunnerPodWebhookConfiguration,
  deleteRunnerResourceWebhookConfigurations,
  RUNNER_POD_WEBHOOK_NAME,
  readingAhead,
  runnerPodWebhookConfiguration,
  runnerResourceWebhookConfiguration,
  webhookConfigurationPaths,
} from './configuration.ts';
export type { JitCollisionVerdict } from './jit-collision.ts';
export { recordedRunnerFor, staleRunnerVerdict } from './jit-collision.ts';
export type { JsonPatchOp } from './json-patch.ts';
export { diffJson, escapePointerToken } from './json-patch.ts';
export type { CertificateChange, CertificateRenewalOptions } from './renewal.ts';
export { certificateChange, transitionCaBundle, WebhookCertificateRenewal } from './renewal.ts';
export type { RunnerResourceWebhook } from './runner-admission.ts';
export {
  RUNNER_RESOURCE_WEBHOOKS,
  runnerResourceAdmissionHandlers,
  validateRunnerResourceRequest,
} from './runner-admission.ts';
export type {
  OwnerVerdict,
  RunnerPodClaims,
  RunnerPodCluster,
  VerifiedOwner,
} from './runner-set-owner.ts';
export {
  cachedRunnerPodCluster,
  claimedRunnerSet,
  claimedStatefulSet,
  kubeRunnerPodCluster,
  runnerSetMismatch,
  verifyRunnerSetPod,
} from './runner-set-owner.ts';
export type {
  AdmissionContext,
  AdmissionResult,
  AdmissionStatus,
  JitSettings,
  RunnerTokenClient,
  RunnerTokenClientSource,
  RunnerTokenInjectorDeps,
} from './runner-token.ts';
export {
  ANNOTATION_TOKEN_EXPIRES_AT,
  ENV_JIT_CONFIG,
  LABEL_INJECT_REGISTRATION_TOKEN,
  MUTATE_RUNNER_POD_PATH,
  mutateRunnerPod,
  runnerPodAdmissionHandler,
} from './runner-token.ts';
export type { FieldError, FieldErrorType, RunnerResourceKind } from './runner-validation.ts';
export {
  formatFieldError,
  invalidMessage,
  validateLabelSelector,
  validateRunner,
  validateRunnerDeployment,
  validateRunnerReplicaSet,
  validateRunnerResource,
  validateRunnerSpec,
} from './runner-validation.ts';
export type {
  AdmissionHandler,
  AdmissionRequest,
  AdmissionReviewResponse,
  WebhookServerOptions,
} from './server.ts';
export { admissionReviewFor, reviewAdmission, WebhookServer } from './server.ts';
export type { JitRunnerRecord, RunnerCredential, TokenSecretInput } from './token-secret.ts';
export {
  ANNOTATION_JIT_RUNNER_ID,
  ANNOTATION_JIT_RUNNER_NAME,
  invalidTokenSecretName,
  JIT_CONFIG_SECRET_KEY,
  recordedJitRunner,
  TOKEN_SECRET_KEY,
  tokenSecret,
  tokenSecretKey,
  tokenSecretName,
} from './token-secret.ts';
