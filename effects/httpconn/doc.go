// Package httpconn runs connectors that are HTTP endpoints instead of Go code, so that services in
// any language can perform effects (the wire protocol is in docs/connectors.md).
//
// # Basics
//
// A Definition names the connector, its tags and its URLs: dispatch (required), status check,
// compensate and cancel (optional). Put stores it in reckon_connectors after checking it with the same rules
// as a Go connector (effects.ValidateConnector); Sync loads the stored definitions into an
// effects.Registry, and a reactor that calls Sync periodically picks up new, changed and deleted
// connectors while it runs. cmd/reactor does exactly that; `server connectors put|list|delete`
// manages the rows.
//
// # Wire protocol
//
// The reactor is the client; every call is a JSON POST over HTTP/1.1 with the headers
// Idempotency-Key, Reckon-Effect-Id and Reckon-Attempt (and, when the call's context carries a
// span, the W3C traceparent and tracestate of the connector call's span) and the body
// {"effect_id","idempotency_key","business_key","args","attempt"} (compensations add
// "original":{"effect_id","result"} and carry their own idempotency key). Dispatch and compensate
// answers map to outcomes:
//
//   - 200 or 201 with a JSON body → CONFIRMED with that body as the result;
//   - 400–499 except 408, 425 and 429 → FAILED (effects.Permanent): the endpoint refused and
//     applied nothing;
//   - 429, 425, 503 with a Retry-After header, and a connection that could not be opened
//     (refused, no route, unknown host) → retried later (effects.Retryable / RetryAfter): nothing
//     was applied;
//   - anything else — another 5xx, 408, a timeout, a reset or dropped connection, a truncated or
//     invalid body, a redirect — → UNKNOWN, resolved by the status check.
//
// 202 Accepted means the endpoint took the call and will report its outcome later with POST
// /v1/callbacks/{correlation_id}: the effect stays PENDING, awaiting the callback until its
// deadline (effects.Accepted). The correlation id is the one the body names
// ({"correlation_id":…}), else the one Reckon sent in the Reckon-Correlation-Id header and the
// body's correlation_id field. The effect awaits it for its own async timeout
// (effects.Spec.AsyncTimeout), else the definition's AsyncTimeout, else the reactor's
// (effects.Config.AsyncTimeout); under a hard timeout (HardTimeout, or the effect's own) a passed
// deadline calls CancelURL, as does cancelling the effect's run. Dispatch, compensate and cancel
// calls carry the effect's callback secret in the Reckon-Callback-Secret header: the endpoint
// signs its callback with it (Reckon-Signature, docs/async.md) and needs no API token.
//
// A cancel is a POST to CancelURL with the dispatch's headers and body. 200, 201 or 204 means the
// upstream abandoned the operation (the effect becomes FAILED); any other answer, a timeout or a
// dropped connection leaves its outcome unknown (UNKNOWN, reconciled; a callback still counts).
//
// A status check answers 200 with {"status":"present","result":…}, {"status":"absent"},
// {"status":"duplicate","count":n,"result":…} or {"status":"inconclusive"}; any other answer
// counts as inconclusive.
//
// # Caveats
//
//   - The HTTP client never follows redirects and never replays a request on its own (a POST to
//     an endpoint that moves money must not be sent twice behind the reactor's back).
//   - Connectors are shared by every tenant, like the Go connectors a reactor registers.
package httpconn
