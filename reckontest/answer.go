package reckontest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Answer is what an Upstream does with one dispatch or compensate call: whether it performs the
// operation (and how many times), and how it answers — a status code, a dropped connection, or no
// answer at all. Build one with Succeed, Reject, Retryable, ServerError, PerformThenDrop, Hang,
// PerformThenHang or Accept, or with Respond for any other status; Times makes it perform more
// than once.
//
// What each answer becomes, through a connector of Upstream.Definition (package effects/httpconn
// classifies the answers; docs/connectors.md):
//
//	Succeed            performed   200 and the result       CONFIRMED
//	Reject             not         422                      FAILED (effects.Permanent)
//	Retryable          not         503 with Retry-After     PENDING, retried (effects.RetryAfter)
//	ServerError        not         500                      UNKNOWN: the status check finds it absent
//	PerformThenDrop    performed   connection closed        UNKNOWN: the status check finds it present
//	Hang               not         none, until the timeout  UNKNOWN: absent
//	PerformThenHang    performed   none, until the timeout  UNKNOWN: present
//	Accept             performed   202                      PENDING, awaiting Client.Callback
//	Respond            not         any status               as docs/connectors.md says
type Answer struct {
	name     string
	performs int             // how many times the call performs the operation
	status   int             // the HTTP status answered; 0 for no answer
	drop     bool            // close the connection instead of answering
	result   json.RawMessage // Succeed's result; nil for the upstream's own
	message  string          // the error of a refusal
	header   []string        // headers of the answer, name and value pairs
	respond  bool            // Respond: the status with an error body, whatever it is
}

// Succeed performs the operation and answers 200 with result as JSON: a json.RawMessage as it
// is, anything else through json.Marshal. A nil result answers the upstream's own,
// {"id":"op-N","key":"…"} (N counts the operations the upstream performed, the key is the call's
// idempotency key). A result that cannot be encoded panics: it is a mistake in the test.
func Succeed(result any) Answer {
	a := Answer{name: "succeed", performs: 1, status: http.StatusOK}
	if result != nil {
		raw, err := json.Marshal(result)
		if err != nil {
			panic(fmt.Sprintf("reckontest: Succeed(%v): %v", result, err))
		}
		a.result = raw
	}
	return a
}

// Reject performs nothing and answers 422 {"error": reason}: the upstream refused the call for
// good, and the effect becomes FAILED without another attempt.
func Reject(reason string) Answer {
	return Answer{name: "reject", status: http.StatusUnprocessableEntity, message: reason}
}

// Retryable performs nothing and answers 503 with a Retry-After header of retryAfter (whole
// seconds, rounded up; 0 says "now"): the upstream provably did not perform the call, and the
// effect is tried again — after the connector's backoff, and with the connector paused for
// retryAfter on every reactor. Keep retryAfter 0 in tests that should not wait.
func Retryable(retryAfter time.Duration) Answer {
	return Answer{name: "retryable", status: http.StatusServiceUnavailable, message: "unavailable",
		header: []string{"Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds())))}}
}

// ServerError performs nothing and answers 500: an outcome the caller cannot read, so the effect
// becomes UNKNOWN and the status check finds the call absent (it is dispatched again).
func ServerError() Answer {
	return Answer{name: "server-error", status: http.StatusInternalServerError, message: "internal error"}
}

// Respond performs nothing and answers status with {"error": the status text} and headers, given
// as name and value pairs: the answers the others leave out, e.g. Respond(429, "Retry-After",
// "0") (retried), Respond(408) or Respond(302) (UNKNOWN), Respond(409) (FAILED). A 2xx performs
// nothing either: an upstream that says yes without doing it.
func Respond(status int, headers ...string) Answer {
	return Answer{name: fmt.Sprintf("respond-%d", status), status: status, message: http.StatusText(status),
		header: headers, respond: true}
}

// PerformThenDrop performs the operation, then closes the connection without answering: the
// response was lost. The effect becomes UNKNOWN and the status check finds the call present.
func PerformThenDrop() Answer {
	return Answer{name: "perform-then-drop", performs: 1, drop: true}
}

// Hang performs nothing and never answers: the request is held until the caller gives up (the
// connector's timeout) or the upstream is closed. The effect becomes UNKNOWN and the status check
// finds the call absent. A test that uses it wants a short connector Timeout.
func Hang() Answer {
	return Answer{name: "hang"}
}

// PerformThenHang performs the operation and then never answers, like Hang: the effect becomes
// UNKNOWN and the status check finds the call present.
func PerformThenHang() Answer {
	return Answer{name: "perform-then-hang", performs: 1}
}

// Accept takes the operation on and answers 202 Accepted, naming the correlation id the connector
// sent (Call.CorrelationID): the effect stays PENDING until effects.Client.Callback reports its
// outcome, or its async deadline passes (docs/async.md). The upstream counts the operation as
// performed.
func Accept() Answer {
	return Answer{name: "accept", performs: 1, status: http.StatusAccepted}
}

// Times returns a copy of a that performs the operation n times (n ≥ 0) and then answers as a
// does: PerformThenDrop().Times(2) is an upstream that applied the call twice and lost the
// response, which the status check reports as a duplicate — the effect is CONFIRMED and the extra
// operation compensated. An upstream in idempotent mode (SetIdempotent) still performs a key once.
func (a Answer) Times(n int) Answer {
	a.performs = max(n, 0)
	if n != 1 {
		a.name = fmt.Sprintf("%s×%d", a.name, n)
	}
	return a
}

// String names the answer, as Call.Answer records it: "succeed", "reject", "retryable",
// "server-error", "perform-then-drop", "hang", "perform-then-hang", "accept" or "respond-STATUS",
// with "×N" when Times changed how many times it performs.
func (a Answer) String() string { return a.name }
