package api

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// Error codes, stable across versions: clients branch on them (docs/api.md lists them). The tests
// of this package spell them out as clients see them.
const (
	codeInvalidJSON          = "invalid_json"              // 400: the body is not one JSON object
	codeInvalidRequest       = "invalid_request"           // 400: a field is missing, unknown or out of range
	codeInvalidParameter     = "invalid_parameter"         // 400: a query parameter or path id is malformed or unknown
	codeInvalidState         = "invalid_state"             // 400: not a state name, or not one allowed here
	codeInvalidCursor        = "invalid_cursor"            // 400: a pagination cursor that this server did not issue
	codeInvalidIdempotency   = "invalid_idempotency_key"   // 400: an empty or overlong Idempotency-Key header
	codeUnauthenticated      = "unauthenticated"           // 401: no bearer token
	codeInvalidToken         = "invalid_token"             // 401: unknown or revoked token, or disabled tenant
	codeInvalidSignature     = "invalid_signature"         // 401: a signed callback whose Reckon-Signature or Reckon-Effect-Id is missing, malformed or does not match
	codeSignatureExpired     = "signature_expired"         // 401: a signed callback whose signature's timestamp is more than 5 minutes from the server's clock
	codeForbidden            = "forbidden"                 // 403: the token may not do this (a system token, a tenant's admin token, or a tenant token is needed)
	codeNotFound             = "not_found"                 // 404: no such resource for this tenant
	codeMethodNotAllowed     = "method_not_allowed"        // 405
	codeIdempotencyConflict  = "idempotency_conflict"      // 409: the effect's idempotency key is taken by another connector or other args
	codeEffectPruned         = "effect_pruned"             // 409: the idempotency key belonged to an effect that settled and was pruned; its dedup window has not ended
	codeNotStuck             = "not_stuck"                 // 409: resolve of an effect or a saga that is not STUCK
	codeConnectorInUse       = "connector_in_use"          // 409: delete of a connector with PENDING or UNKNOWN effects
	codeInvalidConnector     = "invalid_connector"         // 400: a connector definition that breaks the registration rules
	codeNotCancellable       = "not_cancellable"           // 409: cancel of an effect that is not PENDING and unattempted
	codeNotAwaitingConfirm   = "not_awaiting_confirmation" // 409: confirm or decline of an effect that does not await a confirmation
	codeFourEyes             = "four_eyes"                 // 409: a confirmation by the actor that enqueued the effect, refused by the four-eyes rule
	codeCallbackConflict     = "callback_conflict"         // 409: a callback reporting another outcome than the recorded one
	codeEffectStuck          = "effect_stuck"              // 409: a callback for a STUCK effect (an operator resolves it)
	codeNotAwaitingCallback  = "not_awaiting_callback"     // 409: a callback for an effect that does not await one (never accepted upstream, no attempt in flight)
	codeCallbackReplayed     = "callback_replayed"         // 409: a signed callback whose signature was used already
	codeEventsExpired        = "events_expired"            // 410: an event stream's position is older than events retention kept
	codeBodyTooLarge         = "body_too_large"            // 413
	codeUnsupportedMediaType = "unsupported_media_type"    // 415: a Content-Type other than application/json
	codeIdempotencyKeyReused = "idempotency_key_reused"    // 422: Idempotency-Key already used for another request
	codeUnknownConnector     = "unknown_connector"         // 422: the connector is not registered
	codeInvalidDefinition    = "invalid_saga_definition"   // 400: a saga definition that breaks the rules of package saga/sagadef
	codeDefinitionExists     = "saga_definition_exists"    // 409: another saga definition of that name is stored (they never change)
	codeUnknownDefinition    = "unknown_saga_definition"   // 422: no saga definition of that name
	codeStartKeyConflict     = "start_key_conflict"        // 409: the saga start_key belongs to a saga of another definition or input
	codeResolveEffect        = "resolve_effect"            // 409: resolve of a saga held by a STUCK effect (resolve the effect)
	codeSessionForbidden     = "session_tenant_mismatch"   // 403: a session key whose tenant segment is not the caller's tenant
	codeInvalidSessionKey    = "invalid_session_key"       // 400: not tenant:agent:interlocutor:channel
	codeInvalidTurnHandler   = "invalid_turn_handler"      // 400: a turn handler URL or timeout that cannot be stored
	codeRunHalted            = "run_halted"                // 409: the run refuses effects: its max_steps or max_consecutive_failures is reached
	codeRunCancelled         = "run_cancelled"             // 409: the run was cancelled: it refuses effects
	codeNotFailed            = "not_failed"                // 409: redrive of an effect that is not FAILED
	codeRedriveCompensation  = "redrive_compensation"      // 409: redrive of a compensation (its original's owner enqueues another)
	codeRedriveDeclined      = "redrive_declined"          // 409: redrive of an effect whose confirmation was declined or expired
	codeRedriveOwned         = "redrive_owned"             // 409: redrive of an owned effect (a saga step): its saga has acted on the failure
	codeBusinessKeyConflict  = "business_key_conflict"     // 409: the connector dedups by business key, and an effect not FAILED holds the key with other args
	codeBusinessKeyTaken     = "business_key_taken"        // 409: redrive of an effect whose deduplicating business key a newer effect holds
	codeInternal             = "internal"                  // 500
	codeNotImplemented       = "not_implemented"           // 501: a feature this server was not configured with
	codeUnavailable          = "unavailable"               // 503: the request ended while waiting for the busy server, or it is stopping
	codeDatabaseUnavailable  = "database_unavailable"      // 503: the database could not be reached or went away; Retry-After says when to try again
)

// Error is an API error: an HTTP status, a stable code and a message for people. Handlers return
// it (or wrap it); anything else becomes 500 internal.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter, when positive, is sent as the Retry-After header (whole seconds, rounded up).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// errorf returns an *Error with a formatted message.
func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(code, format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, code, format, args...)
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// RequestID is the request's X-Request-Id, which its log lines carry too.
	RequestID string `json:"request_id,omitempty"`
}

// asError returns err's *Error, or nil when err is not an API error.
func asError(err error) *Error {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return nil
}

// databaseRetryAfter is the Retry-After of a database_unavailable answer: long enough for the pool
// to reconnect to a restarted Postgres, short enough not to keep clients waiting after it is back.
const databaseRetryAfter = 2 * time.Second

// errDatabaseUnavailable answers a request that failed because the database could not be
// reached or went away.
var errDatabaseUnavailable = &Error{
	Status: http.StatusServiceUnavailable, Code: codeDatabaseUnavailable,
	Message: "the database is unavailable; retry later", RetryAfter: databaseRetryAfter,
}

// errBusyDatabase answers a request whose transaction Postgres aborted for concurrent work every
// time it was run (a deadlock, a migration's lock past lock_timeout): nothing was written.
var errBusyDatabase = &Error{
	Status: http.StatusServiceUnavailable, Code: codeUnavailable,
	Message:    "the database aborted this request for concurrent work (a deadlock, or a lock held by a migration); nothing was written: retry",
	RetryAfter: time.Second,
}

// databaseUnavailable reports whether err says that the database could not be reached or went away
// (a request that may succeed once it is back), as opposed to refusing the request. It decides
// by error types and SQLSTATEs, never by message:
//   - an error the server sent decides by its SQLSTATE: connection exceptions (class 08, except
//     08P01 protocol_violation), admin_shutdown (57P01), crash_shutdown (57P02),
//     cannot_connect_now (57P03: starting up, shutting down, in recovery) and
//     too_many_connections (53300). Any other SQLSTATE — a missing database, a failed
//     authentication, a constraint — is not unavailability, even inside a failed connection
//     attempt;
//   - otherwise, a network error (connection refused or reset, no route, unknown host, a dial
//     timeout), a connection that ended mid-message (io.ErrUnexpectedEOF), or a connection pgx
//     had already closed (pgconn.ErrConnClosed).
//
// Handlers talk to nothing else over the network, so a network error is the database's.
func databaseUnavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case pgerrcode.AdminShutdown, pgerrcode.CrashShutdown, pgerrcode.CannotConnectNow, pgerrcode.TooManyConnections:
			return true
		case pgerrcode.ProtocolViolation:
			return false
		}
		return pgerrcode.IsConnectionException(pgErr.Code)
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed)
}

// retryAfterSeconds formats d for a Retry-After header: whole seconds, rounded up.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}
