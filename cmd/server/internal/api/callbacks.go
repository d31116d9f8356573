package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/txn"
)

// Limits of callbacks.
const (
	maxCorrelationIDLen = 512
	maxCallbackErrorLen = 4000
)

// callbackRequest is the body of POST /v1/callbacks/{correlation_id}: exactly one of result and
// error. A present "result" (even null) reports success.
type callbackRequest struct {
	Result json.RawMessage `json:"result"`
	Error  *string         `json:"error"`
}

// callback: POST /v1/callbacks/{correlation_id}, the async result of an accepted effect
// (docs/async.md): of the caller's tenant with a bearer token, or of the one effect whose callback
// secret signed the request (signature.go). 200 when applied or repeated; 404 for an unknown
// correlation id (or another tenant's, or another effect's than the signed one); 409 when the
// effect does not await a callback, when the callback conflicts with the recorded outcome or the
// effect is STUCK (recorded in the effect's audit trail all the same), and when a signature is
// replayed.
func (s *Server) callback(ctx context.Context, call *Call) (int, any, error) {
	id := call.Request.PathValue("correlation_id")
	if id == "" || len(id) > maxCorrelationIDLen {
		return 0, nil, badRequest(codeInvalidParameter, "correlation id: want 1 to %d bytes", maxCorrelationIDLen)
	}
	var req callbackRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	var result json.RawMessage
	var errMsg string
	switch {
	case req.Result != nil && req.Error != nil:
		return 0, nil, badRequest(codeInvalidRequest, `give "result" or "error", not both`)
	case req.Result == nil && req.Error == nil:
		return 0, nil, badRequest(codeInvalidRequest, `give "result" (success) or "error" (failure)`)
	case req.Error != nil:
		errMsg = strings.TrimSpace(*req.Error)
		if errMsg == "" {
			return 0, nil, badRequest(codeInvalidRequest, `"error" must say what went wrong`)
		}
		if len(errMsg) > maxCallbackErrorLen {
			return 0, nil, badRequest(codeInvalidRequest, `"error" is limited to %d bytes`, maxCallbackErrorLen)
		}
	case !bytes.Equal(bytes.TrimSpace(req.Result), []byte("null")):
		result = req.Result
	}
	// The callback runs in a transaction of its own (handleAction: the request holds none), which
	// commits a refused callback too: it is recorded in the effect's audit trail. A signed one also
	// uses up its signature there, so that a callback that rolls back may be sent again. It is
	// idempotent by itself.
	sig := signatureOf(call)
	opts := &effects.CallbackOpts{TenantID: call.Tenant()}
	if sig != nil {
		opts.EffectID = sig.effectID
	}
	var (
		effect  *effects.Effect
		refused error
	)
	err := txn.Run(ctx, s.pool, s.logger, func(tx pgx.Tx) error {
		refused = nil
		if sig != nil {
			if err := useSignature(ctx, tx, sig); err != nil {
				return err
			}
		}
		var err error
		effect, err = s.effects.CallbackTx(ctx, tx, id, result, errMsg, opts)
		if err != nil && effect != nil {
			refused = err // recorded in the effect's audit trail: committed
			return nil
		}
		return err
	})
	if err == nil {
		err = refused
	}
	switch {
	case errors.Is(err, effects.ErrUnknownCorrelation):
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no effect awaits correlation id %q", id)
	case errors.Is(err, effects.ErrNotAwaitingCallback):
		return 0, nil, errorf(http.StatusConflict, codeNotAwaitingCallback, "%s; the callback is recorded in its history",
			strings.TrimPrefix(err.Error(), "effects: "))
	case errors.Is(err, effects.ErrCallbackConflict):
		return 0, nil, errorf(http.StatusConflict, codeCallbackConflict, "effect %s is already %s with another outcome; the callback is recorded in its history", effect.ID, effect.State)
	case errors.Is(err, effects.ErrCallbackStuck):
		return 0, nil, errorf(http.StatusConflict, codeEffectStuck, "effect %s is STUCK: an operator resolves it (POST /v1/effects/%s/resolve); the callback is recorded in its history", effect.ID, effect.ID)
	case err != nil:
		return 0, nil, fmt.Errorf("callback %q: %w", id, err)
	}
	return http.StatusOK, EffectToJSON(effect), nil
}

// RunJSON is a run on the wire: what the API answers (GET /v1/runs/{id}), and what the operator CLI
// prints with -o json.
type RunJSON struct {
	ID                     string         `json:"id"`
	TenantID               string         `json:"tenant_id"`
	MaxSteps               int            `json:"max_steps,omitempty"`
	MaxConsecutiveFailures int            `json:"max_consecutive_failures,omitempty"`
	Steps                  int            `json:"steps"`
	ConsecutiveFailures    int            `json:"consecutive_failures"`
	Failures               int            `json:"failures"`
	Effects                map[string]int `json:"effects"`
	Unresolved             int            `json:"unresolved"`
	// Settled is the completion gate: no effect of the run is PENDING or UNKNOWN.
	Settled      bool       `json:"settled"`
	Halted       string     `json:"halted,omitempty"`
	CancelledAt  *time.Time `json:"cancelled_at,omitempty"`
	CancelledBy  string     `json:"cancelled_by,omitempty"`
	CancelReason string     `json:"cancel_reason,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// getRun: GET /v1/runs/{id}, a run's status with its guardrails and effects by state.
func (s *Server) getRun(ctx context.Context, call *Call) (int, any, error) {
	if _, err := (listParams{}).parse(call); err != nil {
		return 0, nil, err
	}
	id := call.Request.PathValue("id")
	// Run ids are per tenant: this is the caller's run of that id, whatever other tenants' are.
	run, err := s.effects.GetRun(ctx, id, &effects.RunOpts{TenantID: call.Tenant()})
	if errors.Is(err, effects.ErrRunNotFound) {
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no run %q", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, RunToJSON(run), nil
}

// RunToJSON is run on the wire.
func RunToJSON(run *effects.Run) *RunJSON {
	out := &RunJSON{
		ID: run.ID, TenantID: run.TenantID, MaxSteps: run.MaxSteps, MaxConsecutiveFailures: run.MaxConsecutiveFailures,
		Steps: run.Steps, ConsecutiveFailures: run.ConsecutiveFailures, Failures: run.Failures,
		Effects: map[string]int{}, Unresolved: run.Unresolved(), Settled: run.Unresolved() == 0,
		CancelledAt: run.CancelledAt, CancelledBy: run.CancelledBy, CancelReason: run.CancelReason,
		CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt,
	}
	for state, n := range run.Effects {
		out.Effects[string(state)] = n
	}
	if run.Halted != nil {
		out.Halted = strings.TrimPrefix(run.Halted.Error(), "effects: ")
	}
	return out
}
