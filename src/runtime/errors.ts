/**
 * The one error type of the Kubernetes boundary, with the fields callers decide on: the Status
 * `reason`, the HTTP `code`, whether a retry can help, and how long the server asked us to wait.
 */
export class KubeError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  /** Status `details.causes`, when the server gave them (field validation errors). */
  readonly causes: { reason?: string; message?: string; field?: string }[];

  constructor(init: {
    code: number;
    reason: string;
    message: string;
    retryAfterMs?: number;
    causes?: { reason?: string; message?: string; field?: string }[];
  }) {
    super(init.message);
    this.name = 'KubeError';
    this.code = init.code;
    this.reason = init.reason;
    this.retryAfterMs = init.retryAfterMs;
    this.causes = init.causes ?? [];
    this.retryable = isRetryableCode(init.code, init.reason);
  }
}

function isRetryableCode(code: number, reason: string): boolean {
  if (code === 0) return true; // network
  if (code === 409 && reason === 'Conflict') return true;
  if (code === 429 || code >= 500) return true;
  return reason === 'ServerTimeout' || reason === 'Timeout' || reason === 'TooManyRequests';
}

const REASON_BY_CODE: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Expired',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

interface StatusBody {
  kind?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: { causes?: { reason?: string; message?: string; field?: string }[]; retryAfterSeconds?: number };
}

/** Builds a KubeError from an HTTP status and a (possibly non-JSON) body. */
export function kubeErrorFromResponse(
  code: number,
  body: unknown,
  retryAfterHeader?: string | null,
): KubeError {
  let status: StatusBody | undefined;
  if (typeof body === 'string') {
    try {
      status = JSON.parse(body) as StatusBody;
    } catch {
      status = undefined;
    }
  } else if (body && typeof body === 'object') {
    status = body as StatusBody;
  }
  const headerSeconds = retryAfterHeader ? Number(retryAfterHeader) : Number.NaN;
  const seconds = Number.isFinite(headerSeconds) ? headerSeconds : status?.details?.retryAfterSeconds;
  return new KubeError({
    code,
    reason: status?.reason || REASON_BY_CODE[code] || 'Unknown',
    message:
      status?.message ||
      (typeof body === 'string' && body.trim() ? body.trim().slice(0, 500) : `HTTP ${code}`),
    ...(seconds !== undefined ? { retryAfterMs: seconds * 1000 } : {}),
    ...(status?.details?.causes ? { causes: status.details.causes } : {}),
  });
}

/**
 * Normalises anything thrown by client-node (ApiException with a raw-text body), fetch/undici,
 * or our own HTTP layer into a KubeError.
 */
export function toKubeError(err: unknown): KubeError {
  if (err instanceof KubeError) return err;
  const e = err as { code?: unknown; statusCode?: unknown; body?: unknown; headers?: Record<string, string> };
  const code =
    typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : undefined;
  if (code !== undefined && code >= 100) {
    return kubeErrorFromResponse(code, e.body, e.headers?.['retry-after']);
  }
  const message = err instanceof Error ? `${err.message}${causeText(err)}` : String(err);
  return new KubeError({ code: 0, reason: 'NetworkError', message });
}

function causeText(err: Error): string {
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Error ? ` (${cause.message})` : '';
}

export const isNotFound = (e: unknown) => toKubeError(e).code === 404;
export const isConflict = (e: unknown) =>
  toKubeError(e).code === 409 && toKubeError(e).reason !== 'AlreadyExists';
export const isAlreadyExists = (e: unknown) => toKubeError(e).reason === 'AlreadyExists';
export const isGone = (e: unknown) => toKubeError(e).code === 410;
export const isTooManyRequests = (e: unknown) => toKubeError(e).code === 429;
export const isForbidden = (e: unknown) => toKubeError(e).code === 403;
export const isInvalid = (e: unknown) => toKubeError(e).code === 422;
