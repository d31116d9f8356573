// Package fakebank is a fake upstream "bank" HTTP server for tests, benchmarks and demos of the
// transactional outbox engine.
//
// A Bank is a real HTTP server listening on 127.0.0.1 that keeps a ledger of what it actually
// performed. Each idempotency key can be scripted to succeed, reject, time out without performing,
// perform and then drop the connection, perform twice, answer 503, or perform and then hang; status
// checks can be scripted to be inconclusive. Checkpoints let crash tests hold a process under test
// at an interesting point.
//
// Endpoints (JSON bodies):
//
//	POST /wires              Idempotency-Key header (or "key" in the body), {"account":"...","amount":123}
//	                         -> 200 {"wire_id":"w-1","key":"...","amount":123}
//	POST /wires/status       {"key":"..."}
//	                         -> {"status":"present","result":{...}} | {"status":"absent"}
//	                         |  {"status":"duplicate","count":2,"result":{...first wire...}}
//	                         |  {"status":"inconclusive"}
//	POST /wires/compensate   Idempotency-Key header (or "key" in the body), {"original_key":"...","amount":123}
//	                         -> 200 {"reversal_id":"r-1","key":"...","of":"..."}
//	GET  /checkpoint?name=NAME&key=KEY
//	                         -> 204 unless armed (see Bank.Arm)
//	POST /reckon/wires, /reckon/wires/status, /reckon/wires/compensate
//	                         the same operations in Reckon's HTTP connector wire protocol (reckon.go)
//
// Invalid requests (bad JSON, missing key, non-positive amount) get 400 {"error":"..."} and perform
// nothing.
//
// Note for clients: Go's http.Transport transparently retries a request that carries an
// Idempotency-Key header when a reused keep-alive connection fails before a response is read. A
// PerformThenDrop on a reused connection can therefore be followed by an automatic second attempt
// with the same key, which consumes the key's next scripted behavior.
package fakebank

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/reckonhq/reckon/internal/testkit/fakehttp"
)

// Behavior is what the bank does with one POST /wires (or POST /wires/compensate) call.
type Behavior int

const (
	// Succeed performs the operation once and answers 200 with the result.
	Succeed Behavior = iota
	// Reject performs nothing and answers 400 {"error":"rejected"}.
	Reject
	// Timeout performs nothing and holds the request without answering until the client goes away
	// or the bank is closed.
	Timeout
	// PerformThenDrop performs the operation, then closes the connection without writing a
	// response.
	PerformThenDrop
	// PerformTwice records two ledger entries for the same key, then answers 200 like Succeed
	// (with the first entry's result).
	PerformTwice
	// Unavailable performs nothing and answers 503 with "Retry-After: 0".
	Unavailable
	// PerformThenHang performs the operation, then holds the request like Timeout.
	PerformThenHang
	// PerformTwiceThenDrop records two ledger entries for the same key (the bank applied a
	// request twice), then closes the connection without a response.
	PerformTwiceThenDrop
)

// String returns the behavior's name.
func (b Behavior) String() string {
	switch b {
	case Succeed:
		return "Succeed"
	case Reject:
		return "Reject"
	case Timeout:
		return "Timeout"
	case PerformThenDrop:
		return "PerformThenDrop"
	case PerformTwice:
		return "PerformTwice"
	case Unavailable:
		return "Unavailable"
	case PerformThenHang:
		return "PerformThenHang"
	case PerformTwiceThenDrop:
		return "PerformTwiceThenDrop"
	default:
		return fmt.Sprintf("Behavior(%d)", int(b))
	}
}

// StatusBehavior is how the bank answers one POST /wires/status call.
type StatusBehavior int

const (
	// StatusFromLedger answers from the ledger: "present" with the wire's result if the key has
	// exactly one wire entry, "absent" if none, "duplicate" with the count (and the first wire's
	// result) if more than one.
	StatusFromLedger StatusBehavior = iota
	// StatusInconclusive always answers {"status":"inconclusive"}.
	StatusInconclusive
)

// Entry is one operation the bank actually performed.
type Entry struct {
	// Key is the idempotency key of the wire (for compensations: the compensation's own key).
	Key string
	// Of is, for compensations, the key of the wire being undone; "" for wires.
	Of string
	// Amount is positive for wires and negative for compensations.
	Amount int64
	// WireID is the bank's identifier of the entry: "w-<n>" for wires, "r-<n>" for compensations.
	WireID string
	// At is when the entry was performed.
	At time.Time
}

// Bank is a fake bank HTTP server with a ledger. All methods are safe for concurrent use.
type Bank struct {
	srv       *httptest.Server // nil for NewHandler
	url       string
	closing   chan struct{}
	closeOnce sync.Once
	performed chan Entry

	mu            sync.Mutex
	ledger        []Entry
	wires         map[string][]int // wire key -> ledger indexes of its wire entries
	comps         map[string]int   // compensation key -> ledger index of its first entry
	scripts       map[string][]Behavior
	statusScripts map[string][]StatusBehavior
	armed         map[string][]chan string
	armedKeys     map[[2]string][]chan string // (name, key) -> armed by ArmKey
	calls         map[string]int
	defaultBeh    Behavior
	idempotent    bool
	nWires        int
	nReversals    int
}

// performedBuffer is the capacity of the channel returned by Performed.
const performedBuffer = 10000

// New starts a bank and closes it when the test ends.
func New(tb testing.TB) *Bank {
	tb.Helper()
	b := NewServer()
	tb.Cleanup(b.Close)
	return b
}

// NewServer starts a bank without a testing.TB (for benchmarks and demos); the caller must Close
// it.
func NewServer() *Bank {
	b := newBank()
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	b.url = b.srv.URL
	return b
}

// NewHandler returns a bank that listens nowhere itself, for a program to serve (it is an
// http.Handler) with its own server at baseURL, e.g. "http://127.0.0.1:9091", which URL returns.
// Close releases the requests it holds; the server is the caller's to stop.
func NewHandler(baseURL string) *Bank {
	b := newBank()
	b.url = baseURL
	return b
}

// ServeHTTP answers the bank's endpoints.
func (b *Bank) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.serve(w, r) }

func newBank() *Bank {
	return &Bank{
		closing:       make(chan struct{}),
		performed:     make(chan Entry, performedBuffer),
		wires:         make(map[string][]int),
		comps:         make(map[string]int),
		scripts:       make(map[string][]Behavior),
		statusScripts: make(map[string][]StatusBehavior),
		armed:         make(map[string][]chan string),
		armedKeys:     make(map[[2]string][]chan string),
		calls:         make(map[string]int),
	}
}

// URL returns the bank's base URL, e.g. http://127.0.0.1:port.
func (b *Bank) URL() string { return b.url }

// Close releases held requests (Timeout, PerformThenHang, armed checkpoints) by dropping their
// connections, then shuts the server down. It is idempotent.
func (b *Bank) Close() {
	b.closeOnce.Do(func() {
		close(b.closing)
		if b.srv != nil {
			b.srv.Close()
		}
	})
}

// Script queues behaviors for successive POST /wires (or POST /wires/compensate) calls with this
// idempotency key. When the key's queue is empty, wires get the default behavior (Succeed unless
// changed by SetDefault) and compensations get Succeed.
func (b *Bank) Script(key string, behaviors ...Behavior) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.scripts[key] = append(b.scripts[key], behaviors...)
}

// SetDefault sets the behavior of POST /wires calls whose key has no script left.
func (b *Bank) SetDefault(behavior Behavior) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.defaultBeh = behavior
}

// SetIdempotent switches idempotent mode. When on, a POST /wires whose key already has at least one
// ledger entry performs nothing more and answers with the first wire's result (the scripted
// behavior still decides how the answer is delivered: dropped, held, rejected...). When off (the
// default), every performing behavior performs again.
func (b *Bank) SetIdempotent(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.idempotent = on
}

// ScriptStatus queues answers for successive POST /wires/status calls for this key. When the
// queue is empty the answer is StatusFromLedger.
func (b *Bank) ScriptStatus(key string, behaviors ...StatusBehavior) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.statusScripts[key] = append(b.statusScripts[key], behaviors...)
}

// Ledger returns a copy of the ledger, in the order the entries were performed.
func (b *Bank) Ledger() []Entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Entry, len(b.ledger))
	copy(out, b.ledger)
	return out
}

// Count returns the number of wire entries (Of == "") with this key.
func (b *Bank) Count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.wires[key])
}

// Net returns the sum of the amounts of the wires with this key plus the compensations whose Of
// is this key.
func (b *Bank) Net(key string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sum int64
	for _, e := range b.ledger {
		if (e.Of == "" && e.Key == key) || (e.Of != "" && e.Of == key) {
			sum += e.Amount
		}
	}
	return sum
}

// Calls returns the number of requests received on a path ("/wires", "/wires/status",
// "/wires/compensate", "/checkpoint"), valid or not.
func (b *Bank) Calls(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[path]
}

// Performed returns a channel on which every ledger entry is also sent as it is performed. The
// channel is buffered (10000); entries are dropped when it is full.
func (b *Bank) Performed() <-chan Entry { return b.performed }

// HangAfterPerforming scripts key PerformThenHang and returns a channel (buffered 1) that
// receives the key of the next call the bank performs: the moment a crash test kills the caller,
// with the upstream's effect made and no answer sent.
func (b *Bank) HangAfterPerforming(key string) <-chan string {
	b.Script(key, PerformThenHang)
	performed := make(chan string, 1)
	go func() {
		if entry, ok := <-b.Performed(); ok {
			performed <- entry.Key
		}
	}()
	return performed
}

// Arm arms checkpoint name once: the next GET /checkpoint?name=name&key=KEY sends KEY on the
// returned channel (buffered 1) and is then held without an answer until the client goes away or
// the bank is closed. Arming the same name several times arms that many successive requests, in
// order. Unarmed checkpoints answer 204 immediately.
func (b *Bank) Arm(name string) <-chan string {
	ch := make(chan string, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed[name] = append(b.armed[name], ch)
	return ch
}

// ArmKey is Arm for the requests of checkpoint name that carry key only: the next GET
// /checkpoint?name=name&key=key sends key on the returned channel and is held. Requests with other
// keys pass (unless armed by Arm, which is consulted after ArmKey).
func (b *Bank) ArmKey(name, key string) <-chan string {
	ch := make(chan string, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	k := [2]string{name, key}
	b.armedKeys[k] = append(b.armedKeys[k], ch)
	return ch
}

// wireResult is the success body of POST /wires and the result of a status check.
type wireResult struct {
	WireID string `json:"wire_id"`
	Key    string `json:"key"`
	Amount int64  `json:"amount"`
}

// reversalResult is the success body of POST /wires/compensate.
type reversalResult struct {
	ReversalID string `json:"reversal_id"`
	Key        string `json:"key"`
	Of         string `json:"of"`
}

// statusResult is the body of POST /wires/status.
type statusResult struct {
	Status string      `json:"status"`
	Count  int         `json:"count,omitempty"`
	Result *wireResult `json:"result,omitempty"`
}

func (b *Bank) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.calls[r.URL.Path]++
	b.mu.Unlock()

	if b.serveReckon(w, r) {
		return
	}
	route, ok := routes[r.URL.Path]
	if !ok {
		fakehttp.WriteError(w, http.StatusNotFound, "not found")
		return
	}
	if allow(w, r, route.method) {
		route.handle(b, w, r)
	}
}

// routes are the bank's plain endpoints (the /reckon/ ones are serveReckon's), by path.
var routes = map[string]struct {
	method string
	handle func(*Bank, http.ResponseWriter, *http.Request)
}{
	"/wires":            {http.MethodPost, (*Bank).handleWire},
	"/wires/status":     {http.MethodPost, (*Bank).handleStatus},
	"/wires/compensate": {http.MethodPost, (*Bank).handleCompensate},
	"/checkpoint":       {http.MethodGet, (*Bank).handleCheckpoint},
}

func (b *Bank) handleWire(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Account string `json:"account"`
		Amount  int64  `json:"amount"`
		Key     string `json:"key"`
	}
	key, ok := readKeyed(w, r, &req, &req.Key)
	if !ok {
		return
	}
	if !positiveAmount(w, req.Amount) {
		return
	}

	beh, res := b.wire(key, req.Amount)
	b.respond(w, r, beh, res)
}

func (b *Bank) handleCompensate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OriginalKey string `json:"original_key"`
		Amount      int64  `json:"amount"`
		Key         string `json:"key"`
	}
	key, ok := readKeyed(w, r, &req, &req.Key)
	if !ok {
		return
	}
	if req.OriginalKey == "" {
		fakehttp.WriteError(w, http.StatusBadRequest, "missing original_key")
		return
	}
	if !positiveAmount(w, req.Amount) {
		return
	}

	beh, res := b.compensate(key, req.OriginalKey, req.Amount)
	b.respond(w, r, beh, res)
}

// wire takes the next behavior scripted for a wire with key and performs what it performs (once,
// twice or not at all); respond then delivers the result as the behavior says.
func (b *Bank) wire(key string, amount int64) (Behavior, wireResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	beh := b.nextLocked(key, true)
	var res wireResult
	switch beh {
	case Succeed, PerformThenDrop, PerformThenHang:
		res = b.performWireLocked(key, amount, 1)
	case PerformTwice, PerformTwiceThenDrop:
		res = b.performWireLocked(key, amount, 2)
	}
	return beh, res
}

// compensate is wire for a compensation with key that reverses amount of the wire of.
func (b *Bank) compensate(key, of string, amount int64) (Behavior, reversalResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	beh := b.nextLocked(key, false)
	var res reversalResult
	switch beh {
	case Succeed, PerformThenDrop, PerformThenHang:
		res = b.performCompLocked(key, of, amount, 1)
	case PerformTwice:
		res = b.performCompLocked(key, of, amount, 2)
	}
	return beh, res
}

// respond delivers the outcome of a wire or compensation call according to its behavior.
func (b *Bank) respond(w http.ResponseWriter, r *http.Request, beh Behavior, res any) {
	switch beh {
	case Succeed, PerformTwice:
		fakehttp.WriteJSON(w, http.StatusOK, res)
	case Reject:
		fakehttp.WriteError(w, http.StatusBadRequest, "rejected")
	case Unavailable:
		w.Header().Set("Retry-After", "0")
		fakehttp.WriteError(w, http.StatusServiceUnavailable, "unavailable")
	case Timeout, PerformThenHang:
		fakehttp.Hold(w, r, b.closing)
	case PerformThenDrop, PerformTwiceThenDrop:
		fakehttp.Drop(w)
	default:
		fakehttp.WriteError(w, http.StatusInternalServerError, "unknown scripted behavior "+beh.String())
	}
}

func (b *Bank) handleStatus(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Key string `json:"key"`
	}
	if err := fakehttp.ReadJSON(w, r, &req); err != nil {
		fakehttp.WriteError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return
	}
	if req.Key == "" {
		fakehttp.WriteError(w, http.StatusBadRequest, "missing key")
		return
	}

	b.mu.Lock()
	out := b.statusLocked(req.Key)
	b.mu.Unlock()

	if out.Status == "" {
		fakehttp.WriteError(w, http.StatusInternalServerError, "unknown scripted status behavior")
		return
	}
	fakehttp.WriteJSON(w, http.StatusOK, out)
}

func (b *Bank) handleCheckpoint(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name, key := q.Get("name"), q.Get("key")
	if name == "" {
		fakehttp.WriteError(w, http.StatusBadRequest, "missing name")
		return
	}

	b.mu.Lock()
	var ch chan string
	if armed := b.armedKeys[[2]string{name, key}]; len(armed) > 0 {
		ch = armed[0]
		if len(armed) == 1 {
			delete(b.armedKeys, [2]string{name, key})
		} else {
			b.armedKeys[[2]string{name, key}] = armed[1:]
		}
	} else if armed := b.armed[name]; len(armed) > 0 {
		ch = armed[0]
		if len(armed) == 1 {
			delete(b.armed, name)
		} else {
			b.armed[name] = armed[1:]
		}
	}
	b.mu.Unlock()

	if ch == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ch <- key // buffered 1 and sent to exactly once: never blocks
	fakehttp.Hold(w, r, b.closing)
}

// nextLocked pops the next scripted behavior for key. Without a script, wires get the bank's
// default and compensations get Succeed.
func (b *Bank) nextLocked(key string, wire bool) Behavior {
	if q := b.scripts[key]; len(q) > 0 {
		if len(q) == 1 {
			delete(b.scripts, key)
		} else {
			b.scripts[key] = q[1:]
		}
		return q[0]
	}
	if wire {
		return b.defaultBeh
	}
	return Succeed
}

// performWireLocked records times wire entries for key (none if the bank is idempotent and the key
// already has one) and returns the result of the first entry recorded, or of the key's first
// existing entry.
func (b *Bank) performWireLocked(key string, amount int64, times int) wireResult {
	if existing := b.wires[key]; b.idempotent && len(existing) > 0 {
		return wireResultOf(b.ledger[existing[0]])
	}
	first := -1
	for range times {
		b.nWires++
		i := b.appendLocked(Entry{Key: key, Amount: amount, WireID: fmt.Sprintf("w-%d", b.nWires)})
		b.wires[key] = append(b.wires[key], i)
		if first < 0 {
			first = i
		}
	}
	return wireResultOf(b.ledger[first])
}

// performCompLocked records times compensation entries for key unless key already has one
// (compensations are always idempotent by their own key), and returns the result of the key's
// first entry.
func (b *Bank) performCompLocked(key, of string, amount int64, times int) reversalResult {
	if i, ok := b.comps[key]; ok {
		return reversalResultOf(b.ledger[i])
	}
	for n := range times {
		b.nReversals++
		i := b.appendLocked(Entry{Key: key, Of: of, Amount: -amount, WireID: fmt.Sprintf("r-%d", b.nReversals)})
		if n == 0 {
			b.comps[key] = i
		}
	}
	return reversalResultOf(b.ledger[b.comps[key]])
}

// appendLocked adds e to the ledger, publishes it on the Performed channel if there is room, and
// returns its index.
func (b *Bank) appendLocked(e Entry) int {
	e.At = time.Now()
	b.ledger = append(b.ledger, e)
	select {
	case b.performed <- e:
	default:
	}
	return len(b.ledger) - 1
}

func wireResultOf(e Entry) wireResult {
	return wireResult{WireID: e.WireID, Key: e.Key, Amount: e.Amount}
}

func reversalResultOf(e Entry) reversalResult {
	return reversalResult{ReversalID: e.WireID, Key: e.Key, Of: e.Of}
}

func idempotencyKey(r *http.Request, bodyKey string) string {
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		return k
	}
	return bodyKey
}

func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	fakehttp.WriteError(w, http.StatusMethodNotAllowed, "method not allowed")
	return false
}

// readKeyed reads a wire or compensation request into v, whose idempotency key field is bodyKey,
// and returns the call's key (idempotencyKey). It answers 400 and reports false when the body is
// not JSON or there is no key.
func readKeyed(w http.ResponseWriter, r *http.Request, v any, bodyKey *string) (string, bool) {
	if err := fakehttp.ReadJSON(w, r, v); err != nil {
		fakehttp.WriteError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return "", false
	}
	key := idempotencyKey(r, *bodyKey)
	if key == "" {
		fakehttp.WriteError(w, http.StatusBadRequest, "missing Idempotency-Key")
		return "", false
	}
	return key, true
}

// positiveAmount reports whether amount is positive, answering 400 when it is not: a wire or a
// compensation of nothing, or of a negative sum, is a caller's mistake the bank refuses.
func positiveAmount(w http.ResponseWriter, amount int64) bool {
	if amount <= 0 {
		fakehttp.WriteError(w, http.StatusBadRequest, "amount must be positive")
		return false
	}
	return true
}
