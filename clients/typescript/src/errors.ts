/**
 * Errors of the Reckon API, as typed exceptions.
 *
 * Every error the server answers has the shape `{"error": {"code", "message", "request_id"}}`
 * (docs/api.md, "Errors"); {@link ReckonError} carries those, the HTTP status, and for 429 and 503
 * the server's `Retry-After`. Subclasses group the codes by family so that callers can branch with
 * `instanceof`; `code` is the stable value to branch on within a family.
 */

/** Options of a {@link ReckonError}. */
export interface ReckonErrorInit {
  /** The HTTP status, or 0 when no answer was received (a timeout, a connection error). */
  status: number;
  /** The API's stable error code (`not_found`, `idempotency_conflict`, …), or a client code. */
  code: string;
  /** The `request_id` of the answer (its `X-Request-Id`), when there was one. */
  requestId?: string | undefined;
  /** For 429 and 503: the server's `Retry-After`, in milliseconds. */
  retryAfterMs?: number | undefined;
  /** The underlying error (a network failure, an abort). */
  cause?: unknown;
}

/** An error answered by the Reckon API, or a failure to get an answer from it. */
export class ReckonError extends Error {
  /** The HTTP status, or 0 when no answer was received. */
  readonly status: number;
  /** The stable error code: the API's (docs/api.md) or one of this client's (`timeout`, `connection_error`, …). */
  readonly code: string;
  /** The request id to quote when reporting the error (the server logs it). */
  readonly requestId: string | undefined;
  /** For 429 and 503: how long the server asked to wait, in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, init: ReckonErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.retryAfterMs = init.retryAfterMs;
  }
}

/** 400: the request was malformed (`invalid_request`, `invalid_json`, `invalid_parameter`, …). Nothing changed. */
export class BadRequestError extends ReckonError {}
/** 401: no token, an unknown or revoked one, or a callback signature that does not hold. */
export class AuthenticationError extends ReckonError {}
/** 403: the token may not do this (`forbidden`, `session_tenant_mismatch`). */
export class ForbiddenError extends ReckonError {}
/** 404: no such effect, run, saga, connector, … for this tenant (or no such route). */
export class NotFoundError extends ReckonError {}
/** 405: the path exists, the method does not. */
export class MethodNotAllowedError extends ReckonError {}
/** 409: the request conflicts with the state (`idempotency_conflict`, `not_stuck`, `run_halted`, …). */
export class ConflictError extends ReckonError {}
/** 410: `events_expired`: the event position is older than what retention kept. */
export class GoneError extends ReckonError {}
/** 413: `body_too_large`. */
export class PayloadTooLargeError extends ReckonError {}
/** 415: `unsupported_media_type`. */
export class UnsupportedMediaTypeError extends ReckonError {}
/** 422: `idempotency_key_reused`, `unknown_connector`, `unknown_saga_definition`. */
export class UnprocessableError extends ReckonError {}
/** 429: too many requests; `retryAfterMs` says when to come back. */
export class RateLimitedError extends ReckonError {}
/** 500 and other 5xx but 503: a server-side failure (`internal`), or 501 `not_implemented`. */
export class ServerError extends ReckonError {}
/** 503: `unavailable`, `database_unavailable`, `schema_not_current`; `retryAfterMs` when the server sent one. */
export class UnavailableError extends ReckonError {}
/** No answer within the request's timeout (code `timeout`). For a mutation the outcome is unknown: retry with the same `Idempotency-Key`. */
export class TimeoutError extends ReckonError {}
/** The connection failed or broke before an answer (code `connection_error`). */
export class ConnectionError extends ReckonError {}
/** The answer was not what the API documents (code `invalid_response`). */
export class InvalidResponseError extends ReckonError {}

/** The class for an HTTP status. */
export function errorClassForStatus(status: number): typeof ReckonError {
  switch (status) {
    case 400: return BadRequestError;
    case 401: return AuthenticationError;
    case 403: return ForbiddenError;
    case 404: return NotFoundError;
    case 405: return MethodNotAllowedError;
    case 409: return ConflictError;
    case 410: return GoneError;
    case 413: return PayloadTooLargeError;
    case 415: return UnsupportedMediaTypeError;
    case 422: return UnprocessableError;
    case 429: return RateLimitedError;
    case 503: return UnavailableError;
    default: return status >= 500 ? ServerError : ReckonError;
  }
}
