package fakebank

import (
	"net/http"
	"strings"

	"github.com/reckonhq/reckon/internal/testkit/fakehttp"
)

// The bank also speaks Reckon's HTTP connector wire protocol (docs/connectors.md), so that it can
// stand behind an HTTP connector (package effects/httpconn) in tests and in the demo:
//
//	POST /reckon/wires             dispatch: headers Idempotency-Key, Reckon-Effect-Id,
//	                               Reckon-Attempt; body {"effect_id","idempotency_key",
//	                               "business_key","args":{"account","amount"},"attempt"}
//	POST /reckon/wires/status      status check, same body → {"status":…}
//	POST /reckon/wires/compensate  compensation; the body adds "original":{"effect_id","result"},
//	                               whose result is the wire's {"wire_id","key","amount"}
//
// A saga step of a declarative definition (package saga/sagadef) sends args
// {"input":{"account","amount"},"results":{…}}: the bank reads account and amount from "input"
// when args has no amount of its own.
//
// They share the ledger and the scripts of /wires: a key scripted with PerformThenDrop drops the
// connection after performing, whichever door the call came through. Three behaviors exist only
// here: TooManyRequests, RequestTimeout and ServerError.

// Behaviors answered only on the /reckon/ endpoints (elsewhere they answer 500).
const (
	// TooManyRequests performs nothing and answers 429 with "Retry-After: 0".
	TooManyRequests Behavior = 100 + iota
	// RequestTimeout performs nothing and answers 408.
	RequestTimeout
	// ServerError performs nothing and answers 500.
	ServerError
)

// ReckonPrefix is the path prefix of the wire-protocol endpoints.
const ReckonPrefix = "/reckon"

// reckonRequest is the body of a wire-protocol call.
type reckonRequest struct {
	EffectID       string `json:"effect_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Args           struct {
		Account string `json:"account"`
		Amount  int64  `json:"amount"`
		Input   *struct {
			Account string `json:"account"`
			Amount  int64  `json:"amount"`
		} `json:"input"`
	} `json:"args"`
	Attempt  int `json:"attempt"`
	Original *struct {
		EffectID string     `json:"effect_id"`
		Result   wireResult `json:"result"`
	} `json:"original"`
}

// serveReckon answers the /reckon/ endpoints; it reports false for any other path.
func (b *Bank) serveReckon(w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasPrefix(r.URL.Path, ReckonPrefix+"/") {
		return false
	}
	if !allow(w, r, http.MethodPost) {
		return true
	}
	var req reckonRequest
	if err := fakehttp.ReadJSON(w, r, &req); err != nil {
		fakehttp.WriteError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return true
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" || key != req.IdempotencyKey {
		fakehttp.WriteError(w, http.StatusBadRequest, "Idempotency-Key header missing or different from the body's idempotency_key")
		return true
	}
	if req.Args.Amount == 0 && req.Args.Input != nil {
		req.Args.Account, req.Args.Amount = req.Args.Input.Account, req.Args.Input.Amount
	}
	switch strings.TrimPrefix(r.URL.Path, ReckonPrefix) {
	case "/wires":
		b.reckonWire(w, r, key, req.Args.Amount)
	case "/wires/status":
		b.mu.Lock()
		out := b.statusLocked(key)
		b.mu.Unlock()
		if out.Status == "" {
			fakehttp.WriteError(w, http.StatusInternalServerError, "unknown scripted status behavior")
			return true
		}
		fakehttp.WriteJSON(w, http.StatusOK, out)
	case "/wires/compensate":
		if req.Original == nil || req.Original.Result.Key == "" || req.Original.Result.Amount <= 0 {
			fakehttp.WriteError(w, http.StatusBadRequest, "original.result must be the wire's result")
			return true
		}
		b.reckonCompensate(w, r, key, req.Original.Result.Key, req.Original.Result.Amount)
	default:
		fakehttp.WriteError(w, http.StatusNotFound, "not found")
	}
	return true
}

func (b *Bank) reckonWire(w http.ResponseWriter, r *http.Request, key string, amount int64) {
	if !positiveAmount(w, amount) {
		return
	}
	beh, res := b.wire(key, amount)
	if !b.respondReckonOnly(w, beh) {
		b.respond(w, r, beh, res)
	}
}

func (b *Bank) reckonCompensate(w http.ResponseWriter, r *http.Request, key, of string, amount int64) {
	beh, res := b.compensate(key, of, amount)
	if !b.respondReckonOnly(w, beh) {
		b.respond(w, r, beh, res)
	}
}

// respondReckonOnly answers the behaviors that exist only on the /reckon/ endpoints.
func (b *Bank) respondReckonOnly(w http.ResponseWriter, beh Behavior) bool {
	switch beh {
	case TooManyRequests:
		w.Header().Set("Retry-After", "0")
		fakehttp.WriteError(w, http.StatusTooManyRequests, "slow down")
	case RequestTimeout:
		fakehttp.WriteError(w, http.StatusRequestTimeout, "request timeout")
	case ServerError:
		fakehttp.WriteError(w, http.StatusInternalServerError, "internal error")
	default:
		return false
	}
	return true
}

// statusLocked answers a status check for key from the scripts and the ledger; Status is empty
// for a status behavior it does not know.
func (b *Bank) statusLocked(key string) statusResult {
	sb := StatusFromLedger
	if q := b.statusScripts[key]; len(q) > 0 {
		sb = q[0]
		b.statusScripts[key] = q[1:]
	}
	var out statusResult
	switch sb {
	case StatusFromLedger:
	case StatusInconclusive:
		out.Status = "inconclusive"
		return out
	default:
		return out // no status: the caller answers 500
	}
	idx := b.wires[key]
	switch len(idx) {
	case 0:
		out.Status = "absent"
	case 1:
		res := wireResultOf(b.ledger[idx[0]])
		out.Status, out.Result = "present", &res
	default:
		res := wireResultOf(b.ledger[idx[0]])
		out.Status, out.Count, out.Result = "duplicate", len(idx), &res
	}
	return out
}
