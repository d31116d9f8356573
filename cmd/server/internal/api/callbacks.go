package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

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
