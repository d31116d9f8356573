package reckontest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit/fakehttp"
)

// Op is what a call to an Upstream asks for.
type Op string

// The operations of Reckon's HTTP connector protocol that an Upstream answers.
const (
	// OpDispatch performs an effect.
	OpDispatch Op = "dispatch"
	// OpStatus asks whether an effect was performed (reconciling an UNKNOWN outcome).
	OpStatus Op = "status"
	// OpCompensate undoes a confirmed effect; the call carries the compensation's own key.
	OpCompensate Op = "compensate"
)

// Call is one call an Upstream received, as Calls returns it.
type Call struct {
	// Op is what the call asked for.
	Op Op
	// Connector is the connector's name, from the URL the call came to (Definition).
	Connector string
	// Key is the call's idempotency key: the effect's for dispatch and status calls, the
	// compensation's own for compensate calls.
	Key string
	// EffectID is the effect the call is for (for a compensate call: the compensation effect).
	EffectID uuid.UUID
	// Attempt is the dispatch attempt the call belongs to, from 1.
	Attempt int
	// Args are the effect's args, BusinessKey its business key ("" for none).
	Args        json.RawMessage
	BusinessKey string
	// Original is, for a compensate call, the effect being undone; uuid.Nil otherwise.
	Original uuid.UUID
	// CorrelationID is the id an accepted call's callback names (effects.Call.CorrelationID).
	CorrelationID string
	// Answer says what the upstream did (Answer.String), or, for a status call, what it said:
	// "present", "absent", "duplicate" or "inconclusive".
	Answer string
	// Performed is how many times this call performed the operation: 0, 1, or more under Times.
	Performed int
	// At is when the call arrived.
	At time.Time
}

// Upstream is a fake of the outside world for tests: a real HTTP server on 127.0.0.1 that speaks
// Reckon's HTTP connector protocol (package effects/httpconn, docs/connectors.md) and does what
// the test scripts. It keeps a record of what it performed, by idempotency key, and of every call
// it received, so that a test can say "performed exactly once".
//
// Dispatch and compensate calls take, in order: the next Answer scripted for their key (Script),
// else the next one scripted for any call (Next), else the default — SetDefault's for dispatch
// calls (Succeed(nil) unless changed), Succeed(nil) for compensations. Status calls take the next
// effects.Status scripted for their key (ScriptStatus), else the truth from the record: absent,
// present with the first result, or a duplicate with the count.
//
// One Upstream can stand behind several connectors: each has URLs of its own (Definition),
// POST {URL}/{connector}/dispatch, /status and /compensate, taking the protocol's headers
// (Idempotency-Key, required, and the Reckon-… ones) and body (httpconn.Request). A Go connector
// of your own may call them too. Every method is safe for concurrent use.
type Upstream struct {
	srv       *httptest.Server
	client    *http.Client
	closing   chan struct{}
	closeOnce sync.Once

	mu            sync.Mutex
	scripts       map[string][]Answer
	next          []Answer
	statusScripts map[string][]effects.Status
	defaultAnswer Answer
	idempotent    bool
	results       map[string][]json.RawMessage // key -> the result of each operation performed
	operations    int
	calls         []Call
}

// NewUpstream starts an Upstream on 127.0.0.1 and closes it when the test ends.
func NewUpstream(tb testing.TB) *Upstream {
	tb.Helper()
	u := &Upstream{
		// One connection per call: a dropped connection can never be one a later call reuses.
		client:        &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		closing:       make(chan struct{}),
		scripts:       map[string][]Answer{},
		statusScripts: map[string][]effects.Status{},
		defaultAnswer: Succeed(nil),
		results:       map[string][]json.RawMessage{},
	}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	tb.Cleanup(u.Close)
	return u
}

// URL returns the upstream's base URL, e.g. http://127.0.0.1:41234.
func (u *Upstream) URL() string { return u.srv.URL }

// Close releases the requests it holds (Hang, PerformThenHang) by dropping their connections and
// shuts the server down; the connectors' calls fail from then on as refused connections. It is
// called when the test ends, and may be called before to make the upstream unreachable.
func (u *Upstream) Close() {
	u.closeOnce.Do(func() {
		close(u.closing)
		u.srv.Close()
		u.client.CloseIdleConnections()
	})
}

// Definition returns an HTTP connector named name whose dispatch, status check and compensation
// are this upstream's, with settings for tests: not retry safe (tags write and external, so that
// an unknown outcome is reconciled through the status check, never called blindly again), a 2s
// timeout per call, a backoff of 10ms doubling up to 100ms, and httpconn's other defaults
// (5 attempts, 5 inconclusive status checks before STUCK). Change what the test needs, then
// register def.Connector(nil), or store it with httpconn.Put for reactors that load it.
func (u *Upstream) Definition(name string) httpconn.Definition {
	base := u.URL() + "/" + url.PathEscape(name)
	return httpconn.Definition{
		Name:        name,
		Tags:        []effects.Tag{effects.TagWrite, effects.TagExternal},
		DispatchURL: base + "/dispatch", StatusURL: base + "/status", CompensateURL: base + "/compensate",
		Timeout:        2 * time.Second,
		BackoffInitial: 10 * time.Millisecond,
		BackoffMax:     100 * time.Millisecond,
	}
}

// Connector returns the Go connector of Definition(name), calling the upstream over a client of
// its own that opens a connection per call.
func (u *Upstream) Connector(name string) effects.Connector {
	return u.Definition(name).Connector(u.client)
}

// Script queues answers for the successive dispatch or compensate calls whose idempotency key is
// key: the first call takes the first answer, and so on. When the key's queue is empty its calls
// go on to Next's and then the default.
func (u *Upstream) Script(key string, answers ...Answer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.scripts[key] = append(u.scripts[key], answers...)
}

// Next queues answers for the next dispatch or compensate calls of any key that has no script of
// its own left, in the order they arrive.
func (u *Upstream) Next(answers ...Answer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.next = append(u.next, answers...)
}

// SetDefault sets the answer of dispatch calls that nothing scripted (initially Succeed(nil)).
// Compensations that nothing scripted always succeed.
func (u *Upstream) SetDefault(answer Answer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.defaultAnswer = answer
}

// SetIdempotent makes the upstream honour idempotency keys (on) or not (off, the default). When
// on, a call whose key was performed already performs nothing more, and an answer that carries a
// result (Succeed) carries the key's first one; it is still delivered as scripted (dropped, held,
// refused). When off, every performing answer performs again — the upstream a blind retry would
// harm.
func (u *Upstream) SetIdempotent(on bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.idempotent = on
}

// ScriptStatus queues the answers of the successive status checks of key: effects.Present(result),
// effects.Absent(), effects.Duplicate(count, result) or effects.Inconclusive(reason) (which the
// connector reports as inconclusive, its reason its own). They need not be true. When the queue
// is empty the upstream answers from its record.
func (u *Upstream) ScriptStatus(key string, answers ...effects.Status) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.statusScripts[key] = append(u.statusScripts[key], answers...)
}

// Performed returns how many times the upstream performed the operation of key: a dispatch's
// (the effect's idempotency key) or a compensation's (its own key).
func (u *Upstream) Performed(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.results[key])
}

// Received returns how many dispatch and compensate calls came with key, whatever they did.
func (u *Upstream) Received(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.calls {
		if c.Key == key && c.Op != OpStatus {
			n++
		}
	}
	return n
}

// Calls returns every call received so far, in the order they arrived, status checks included.
func (u *Upstream) Calls() []Call {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Call(nil), u.calls...)
}

// serve answers POST /{connector}/{dispatch|status|compensate}.
func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	connector, op, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case !ok || (Op(op) != OpDispatch && Op(op) != OpStatus && Op(op) != OpCompensate):
		fakehttp.WriteError(w, http.StatusNotFound, "not found: "+r.URL.Path)
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		fakehttp.WriteError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	var req httpconn.Request
	if err := fakehttp.ReadJSON(w, r, &req); err != nil {
		fakehttp.WriteError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return
	}
	key := r.Header.Get(httpconn.HeaderIdempotencyKey)
	if key == "" || key != req.IdempotencyKey {
		fakehttp.WriteError(w, http.StatusBadRequest, "the Idempotency-Key header is missing or differs from the body's idempotency_key")
		return
	}
	call := Call{
		Op: Op(op), Connector: connector, Key: key, EffectID: req.EffectID, Attempt: req.Attempt, Args: req.Args,
		CorrelationID: cmp.Or(r.Header.Get(httpconn.HeaderCorrelationID), req.CorrelationID), At: time.Now(),
	}
	if req.BusinessKey != nil {
		call.BusinessKey = *req.BusinessKey
	}
	if req.Original != nil {
		call.Original = req.Original.EffectID
	}
	if call.Op == OpStatus {
		fakehttp.WriteJSON(w, http.StatusOK, u.status(call))
		return
	}
	answer, result := u.perform(&call)
	u.respond(w, r, answer, result, call)
}

// perform takes call's answer, performs what it performs and records the call; it returns the
// answer and the result to answer with: the result of the call's first operation, or in
// idempotent mode the key's first one.
func (u *Upstream) perform(call *Call) (Answer, json.RawMessage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	answer := u.nextAnswerLocked(call.Op, call.Key)
	result := answer.result
	if done := u.results[call.Key]; u.idempotent && len(done) > 0 {
		result = done[0]
	} else {
		for i := range answer.performs {
			u.operations++
			r := answer.result
			if r == nil {
				r, _ = json.Marshal(map[string]string{"id": fmt.Sprintf("op-%d", u.operations), "key": call.Key})
			}
			u.results[call.Key] = append(u.results[call.Key], r)
			if i == 0 {
				result = r
			}
			call.Performed++
		}
	}
	if result == nil { // an answer of 200 that performed nothing (Succeed(nil).Times(0))
		result, _ = json.Marshal(map[string]string{"key": call.Key})
	}
	call.Answer = answer.String()
	u.calls = append(u.calls, *call)
	return answer, result
}

// nextAnswerLocked pops the answer of a dispatch or compensate call with key.
func (u *Upstream) nextAnswerLocked(op Op, key string) Answer {
	if q := u.scripts[key]; len(q) > 0 {
		if len(q) == 1 {
			delete(u.scripts, key)
		} else {
			u.scripts[key] = q[1:]
		}
		return q[0]
	}
	if len(u.next) > 0 {
		a := u.next[0]
		u.next = u.next[1:]
		return a
	}
	if op == OpCompensate {
		return Succeed(nil)
	}
	return u.defaultAnswer
}

// respond delivers answer to the caller of call.
func (u *Upstream) respond(w http.ResponseWriter, r *http.Request, answer Answer, result json.RawMessage, call Call) {
	for i := 0; i+1 < len(answer.header); i += 2 {
		w.Header().Set(answer.header[i], answer.header[i+1])
	}
	switch {
	case answer.drop:
		fakehttp.Drop(w)
	case answer.status == 0:
		fakehttp.Hold(w, r, u.closing)
	case answer.respond: // Respond: the status as it was given, whatever it is
		fakehttp.WriteError(w, answer.status, answer.message)
	case answer.status == http.StatusOK:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(result)
	case answer.status == http.StatusAccepted:
		fakehttp.WriteJSON(w, http.StatusAccepted, map[string]string{"correlation_id": call.CorrelationID})
	default:
		fakehttp.WriteError(w, answer.status, answer.message)
	}
}

// status answers a status check, from its script or from the record, and records the call.
func (u *Upstream) status(call Call) httpconn.StatusResponse {
	u.mu.Lock()
	defer u.mu.Unlock()
	var answer httpconn.StatusResponse
	if q := u.statusScripts[call.Key]; len(q) > 0 {
		u.statusScripts[call.Key] = q[1:]
		answer = httpconn.StatusResponse{Status: q[0].Kind.String(), Result: q[0].Result, Count: q[0].Count}
	} else {
		switch done := u.results[call.Key]; len(done) {
		case 0:
			answer.Status = effects.StatusAbsent.String()
		case 1:
			answer = httpconn.StatusResponse{Status: effects.StatusPresent.String(), Result: done[0]}
		default:
			answer = httpconn.StatusResponse{Status: effects.StatusDuplicate.String(), Result: done[0], Count: len(done)}
		}
	}
	call.Answer = answer.Status
	u.calls = append(u.calls, call)
	return answer
}
