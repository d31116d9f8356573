package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Field limits of requests.
const (
	maxNameLen   = 200  // connector, run_id, actor
	maxKeyLen    = 512  // idempotency_key, business_key, turn_group, ordering_key
	maxReasonLen = 2000 // reason
	maxAttempts  = 1000
)

// EffectJSON is an effect on the wire: what the API answers (GET /v1/effects/{id} with its History),
// and what the operator CLI prints with -o json.
type EffectJSON struct {
	ID             uuid.UUID       `json:"id"`
	TenantID       string          `json:"tenant_id"`
	Connector      string          `json:"connector"`
	State          effects.State   `json:"state"`
	Policy         effects.Policy  `json:"policy"`
	Tags           []effects.Tag   `json:"tags"`
	Args           json.RawMessage `json:"args"`
	IdempotencyKey string          `json:"idempotency_key"`
	BusinessKey    string          `json:"business_key,omitempty"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"max_attempts"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          string          `json:"error,omitempty"`
	TimeoutMS      int64           `json:"timeout_ms"`
	DeadlineAt     *time.Time      `json:"deadline_at,omitempty"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	RunID          string          `json:"run_id,omitempty"`
	TurnID         *uuid.UUID      `json:"turn_id,omitempty"`
	TurnGroup      string          `json:"turn_group,omitempty"`
	CompensatesID  *uuid.UUID      `json:"compensates_id,omitempty"`
	// OrderingKey is the effect's ordering key, absent for an unordered effect. HeldBy, in
	// GET /v1/effects/{id} only, is the effect that holds this one back in the key's order.
	OrderingKey string     `json:"ordering_key,omitempty"`
	HeldBy      *uuid.UUID `json:"held_by,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	// Confirmation is the effect's confirmation hold, absent if it was never held.
	Confirmation *ConfirmationJSON `json:"confirmation,omitempty"`
	// Deduplicated is set in answers to POST /v1/effects only.
	Deduplicated *bool            `json:"deduplicated,omitempty"`
	History      []TransitionJSON `json:"history,omitempty"`
}

// ConfirmationJSON is an effect's confirmation hold on the wire: where it stands (AWAITING,
// CONFIRMED, DECLINED, EXPIRED), the rendered prompt, the expiry, and the decision's who, when and
// why.
type ConfirmationJSON struct {
	State     effects.Confirmation `json:"state"`
	Prompt    string               `json:"prompt"`
	ExpiresAt *time.Time           `json:"expires_at,omitempty"`
	By        string               `json:"by,omitempty"`
	At        *time.Time           `json:"at,omitempty"`
	Reason    string               `json:"reason,omitempty"`
}

// TransitionJSON is one transition of an effect's history on the wire.
type TransitionJSON struct {
	ID      int64           `json:"id"`
	From    effects.State   `json:"from,omitempty"`
	To      effects.State   `json:"to"`
	Actor   string          `json:"actor"`
	Reason  string          `json:"reason"`
	Attempt int             `json:"attempt"`
	At      time.Time       `json:"at"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

// EffectToJSON is e on the wire, without its history (see TransitionsToJSON).
func EffectToJSON(e *effects.Effect) *EffectJSON {
	tags := e.Tags
	if tags == nil {
		tags = []effects.Tag{}
	}
	var confirmation *ConfirmationJSON
	if e.Confirmation != effects.ConfirmationNone {
		confirmation = &ConfirmationJSON{State: e.Confirmation, Prompt: e.ConfirmationPrompt, ExpiresAt: e.ConfirmationExpiresAt,
			By: e.ConfirmationBy, At: e.ConfirmationAt, Reason: e.ConfirmationReason}
	}
	return &EffectJSON{
		Confirmation: confirmation,
		ID:           e.ID, TenantID: e.TenantID, Connector: e.Connector, State: e.State, Policy: e.Policy, Tags: tags,
		Args: e.Args, IdempotencyKey: e.IdempotencyKey, BusinessKey: e.BusinessKey, Attempts: e.Attempts,
		MaxAttempts: e.MaxAttempts, Result: e.Result, Error: e.Error, TimeoutMS: e.Timeout.Milliseconds(),
		DeadlineAt: e.DeadlineAt, CorrelationID: e.CorrelationID, RunID: e.RunID, TurnID: e.TurnID, TurnGroup: e.TurnGroup,
		CompensatesID: e.CompensatesID, OrderingKey: e.OrderingKey, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
}

// enqueueRequest is the body of POST /v1/effects.
type enqueueRequest struct {
	Connector      string          `json:"connector"`
	Args           json.RawMessage `json:"args"`
	IdempotencyKey string          `json:"idempotency_key"`
	Position       *positionJSON   `json:"position"`
	BusinessKey    string          `json:"business_key"`
	RunID          string          `json:"run_id"`
	TurnID         *uuid.UUID      `json:"turn_id"`
	TurnGroup      string          `json:"turn_group"`
	MaxAttempts    int             `json:"max_attempts"`
	// AsyncTimeoutMS and AsyncHardTimeout are Spec.AsyncTimeout and Spec.AsyncHardTimeout.
	AsyncTimeoutMS   *int64 `json:"async_timeout_ms"`
	AsyncHardTimeout bool   `json:"async_hard_timeout"`
	// RequireConfirmation and ConfirmationTTLMS are Spec.RequireConfirmation and
	// Spec.ConfirmationTTL: hold the effect until POST /v1/effects/{id}/confirm.
	RequireConfirmation bool   `json:"require_confirmation"`
	ConfirmationTTLMS   *int64 `json:"confirmation_ttl_ms"`
	// OrderingKey is Spec.OrderingKey.
	OrderingKey string `json:"ordering_key"`
}

type positionJSON struct {
	TurnGroup string `json:"turn_group"`
	Decision  *int   `json:"decision"`
	CallIndex *int   `json:"call_index"`
}

func (req *enqueueRequest) spec(tenant string) (effects.Spec, error) {
	spec := effects.Spec{
		TenantID: tenant, Connector: req.Connector, IdempotencyKey: req.IdempotencyKey, BusinessKey: req.BusinessKey,
		RunID: req.RunID, TurnID: req.TurnID, TurnGroup: req.TurnGroup, MaxAttempts: req.MaxAttempts,
		AsyncHardTimeout: req.AsyncHardTimeout, OrderingKey: req.OrderingKey,
	}
	switch {
	case req.Connector == "":
		return spec, badRequest(codeInvalidRequest, "connector is required")
	case len(req.Connector) > maxNameLen || len(req.RunID) > maxNameLen:
		return spec, badRequest(codeInvalidRequest, "connector and run_id are limited to %d bytes", maxNameLen)
	case len(req.IdempotencyKey) > maxKeyLen || len(req.BusinessKey) > maxKeyLen || len(req.TurnGroup) > maxKeyLen:
		return spec, badRequest(codeInvalidRequest, "idempotency_key, business_key and turn_group are limited to %d bytes", maxKeyLen)
	case len(req.OrderingKey) > maxKeyLen:
		return spec, badRequest(codeInvalidRequest, "ordering_key is limited to %d bytes", maxKeyLen)
	case req.MaxAttempts < 0 || req.MaxAttempts > maxAttempts:
		return spec, badRequest(codeInvalidRequest, "max_attempts must be between 1 and %d (or absent for the connector's)", maxAttempts)
	case req.AsyncTimeoutMS != nil && (*req.AsyncTimeoutMS < 1 || *req.AsyncTimeoutMS > effects.MaxAsyncTimeout.Milliseconds()):
		return spec, badRequest(codeInvalidRequest, "async_timeout_ms must be between 1 and %d (7 days), or absent for the connector's", effects.MaxAsyncTimeout.Milliseconds())
	case req.ConfirmationTTLMS != nil && (*req.ConfirmationTTLMS < 1000 || *req.ConfirmationTTLMS > effects.MaxConfirmationTTL.Milliseconds()):
		return spec, badRequest(codeInvalidRequest, "confirmation_ttl_ms must be between 1000 and %d (30 days), or absent for the server's", effects.MaxConfirmationTTL.Milliseconds())
	case req.IdempotencyKey != "" && req.Position != nil:
		return spec, badRequest(codeInvalidRequest, "give idempotency_key or position, not both")
	case req.IdempotencyKey == "" && req.Position == nil:
		return spec, badRequest(codeInvalidRequest, "idempotency_key or position is required: the effect's identity, never a hash of its args")
	}
	if req.Position != nil {
		p := req.Position
		if p.TurnGroup == "" || p.Decision == nil || p.CallIndex == nil || *p.Decision < 0 || *p.CallIndex < 0 {
			return spec, badRequest(codeInvalidRequest, "position needs turn_group and non-negative decision and call_index")
		}
		if len(p.TurnGroup) > maxKeyLen {
			return spec, badRequest(codeInvalidRequest, "position.turn_group is limited to %d bytes", maxKeyLen)
		}
		spec.Position = &effects.Position{TurnGroup: p.TurnGroup, Decision: *p.Decision, CallIndex: *p.CallIndex}
	}
	if req.AsyncTimeoutMS != nil {
		spec.AsyncTimeout = time.Duration(*req.AsyncTimeoutMS) * time.Millisecond
	}
	spec.RequireConfirmation = req.RequireConfirmation
	if req.ConfirmationTTLMS != nil {
		spec.ConfirmationTTL = time.Duration(*req.ConfirmationTTLMS) * time.Millisecond
	}
	args := strings.TrimSpace(string(req.Args))
	switch {
	case args == "" || args == "null":
		spec.Args = json.RawMessage(`{}`)
	case strings.HasPrefix(args, "{"):
		spec.Args = req.Args
	default:
		return spec, badRequest(codeInvalidRequest, "args must be a JSON object")
	}
	return spec, nil
}

// createEffect: POST /v1/effects.
func (s *Server) createEffect(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	var req enqueueRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	spec, err := req.spec(call.Tenant())
	if err != nil {
		return 0, nil, err
	}
	if err := s.requireConnector(call, spec.Connector); err != nil {
		return 0, nil, err
	}
	effect, err := s.effects.EnqueueTx(ctx, tx, spec, &effects.EnqueueOpts{Actor: call.Actor(""), Reason: "enqueued over the API"})
	if apiErr := enqueueError(err); apiErr != nil {
		return 0, nil, apiErr
	}
	switch {
	case errors.Is(err, effects.ErrUnknownConnector):
		return 0, nil, unknownConnector(spec.Connector)
	case errors.Is(err, effects.ErrIdempotencyConflict):
		return 0, nil, errorf(http.StatusConflict, codeIdempotencyConflict, "%v", err)
	case err != nil:
		return 0, nil, fmt.Errorf("enqueue: %w", err)
	}
	out := EffectToJSON(effect)
	dedup := effect.Deduplicated
	out.Deduplicated = &dedup
	if dedup {
		return http.StatusOK, out, nil
	}
	return http.StatusCreated, out, nil
}

// enqueueError maps the refusals of an enqueue (effects' run guardrails, a key kept by the
// tombstone of a pruned effect, args the connector refuses) to API errors; nil for any other
// error. Run ids and tombstones are per tenant, so an enqueue never meets another tenant's.
func enqueueError(err error) *Error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, effects.ErrInvalidArgs):
		return badRequest(codeInvalidRequest, "%s; nothing was enqueued", strings.TrimPrefix(err.Error(), "effects: "))
	case errors.Is(err, effects.ErrBusinessKeyConflict):
		return errorf(http.StatusConflict, codeBusinessKeyConflict, "%s; nothing was enqueued", strings.TrimPrefix(err.Error(), "effects: "))
	case errors.Is(err, effects.ErrPruned):
		return errorf(http.StatusConflict, codeEffectPruned, "%s; nothing was enqueued", strings.TrimPrefix(err.Error(), "effects: "))
	case errors.Is(err, effects.ErrRunCancelled):
		return errorf(http.StatusConflict, codeRunCancelled, "%s; nothing was enqueued", strings.TrimPrefix(err.Error(), "effects: "))
	case errors.Is(err, effects.ErrRunMaxSteps), errors.Is(err, effects.ErrRunMaxFailures):
		return errorf(http.StatusConflict, codeRunHalted, "%s; nothing was enqueued", strings.TrimPrefix(err.Error(), "effects: "))
	}
	return nil
}

// requireConnector checks that the registry holds the connector; if not, it asks mutate to reload
// the connectors (outside the request's transaction) and run the handler again, once.
func (s *Server) requireConnector(call *Call, name string) error {
	if _, ok := s.effects.Registry().Get(name); ok {
		return nil
	}
	if err := call.refreshFirst("connectors", s.config.RefreshConnectors); err != nil {
		return err
	}
	return unknownConnector(name)
}

func unknownConnector(name string) *Error {
	return errorf(http.StatusUnprocessableEntity, codeUnknownConnector, "connector %q is not registered", name)
}

// effectOf returns the caller's effect named by the {id} path value, or 404.
func (s *Server) effectOf(ctx context.Context, call *Call) (*effects.Effect, error) {
	id, err := pathID(call)
	if err != nil {
		return nil, err
	}
	effect, err := s.effects.Get(ctx, id)
	if errors.Is(err, effects.ErrNotFound) || (err == nil && effect.TenantID != call.Tenant()) {
		// Another tenant's effect is indistinguishable from a missing one.
		return nil, errorf(http.StatusNotFound, codeNotFound, "no effect %s", id)
	}
	if err != nil {
		return nil, err
	}
	return effect, nil
}

func pathID(call *Call) (uuid.UUID, error) {
	raw := call.Request.PathValue("id")
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, badRequest(codeInvalidParameter, "effect id %q is not a UUID", raw)
	}
	return id, nil
}

// getEffect: GET /v1/effects/{id}, with the effect's history.
func (s *Server) getEffect(ctx context.Context, call *Call) (int, any, error) {
	effect, err := s.effectOf(ctx, call)
	if err != nil {
		return 0, nil, err
	}
	history, err := s.effects.History(ctx, effect.ID)
	if err != nil {
		return 0, nil, err
	}
	out := EffectToJSON(effect)
	out.History = TransitionsToJSON(history)
	heldBy, err := s.ops.HeldBy(ctx, effect)
	if err != nil {
		return 0, nil, err
	}
	if heldBy != nil {
		out.HeldBy = &heldBy.ID
	}
	return http.StatusOK, out, nil
}

// TransitionsToJSON is an effect's history on the wire (EffectJSON.History), never nil.
func TransitionsToJSON(history []effects.Transition) []TransitionJSON {
	out := make([]TransitionJSON, len(history))
	for i, t := range history {
		out[i] = TransitionJSON{ID: t.ID, From: t.From, To: t.To, Actor: t.Actor, Reason: t.Reason, Attempt: t.Attempt, At: t.At, Detail: t.Detail}
	}
	return out
}

// listResponse is the answer to GET /v1/effects.
type listResponse struct {
	Effects []*EffectJSON `json:"effects"`
	// NextCursor continues the listing; absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// effectListParams are the query parameters of GET /v1/effects.
var effectListParams = listParams{
	filters: []string{"state", "connector", "run"}, limit: 100, maxLimit: 1000, cursor: true,
	states: stateNames(effects.States),
}

// listEffects: GET /v1/effects?state=&connector=&run=&limit=&cursor=, newest first.
func (s *Server) listEffects(ctx context.Context, call *Call) (int, any, error) {
	list := func(ctx context.Context, query listQuery) ([]*effects.Effect, *effects.Cursor, error) {
		return s.effects.List(ctx, effects.ListFilter{
			TenantID: call.Tenant(), State: effects.State(query.filters["state"]), Connector: query.filters["connector"],
			RunID: query.filters["run"], Limit: query.limit, After: afterOf[effects.Cursor](query),
		})
	}
	var out listResponse
	var err error
	if out.Effects, out.NextCursor, err = listPage(ctx, call, effectListParams, list, EffectToJSON); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

// resolveRequest is the body of POST /v1/effects/{id}/resolve and /cancel.
type resolveRequest struct {
	To     string `json:"to"`
	Reason string `json:"reason"`
	// Actor names the person deciding; the audit trail records it after the token's name.
	Actor string `json:"actor"`
}

func (req *resolveRequest) validate() error {
	return (&decisionRequest{Reason: req.Reason, Actor: req.Actor}).validate()
}

// decisionRequest is the body of POST /v1/effects/{id}/confirm, /decline and /redrive, and resolveRequest
// without its "to". (Two flat types: the request decoder names unknown fields by the top-level
// fields of the type it decodes into.)
type decisionRequest struct {
	Reason string `json:"reason"`
	// Actor names the person deciding; the audit trail records it after the token's name.
	Actor string `json:"actor"`
}

func (req *decisionRequest) validate() error {
	switch {
	case strings.TrimSpace(req.Reason) == "":
		return badRequest(codeInvalidRequest, "reason is required: it goes to the audit trail")
	case len(req.Reason) > maxReasonLen:
		return badRequest(codeInvalidRequest, "reason is limited to %d bytes", maxReasonLen)
	case len(req.Actor) > maxNameLen:
		return badRequest(codeInvalidRequest, "actor is limited to %d bytes", maxNameLen)
	}
	return nil
}

// resolveEffect: POST /v1/effects/{id}/resolve. From STUCK: to CONFIRMED, FAILED or PENDING. From
// PENDING: to FAILED, which cancels an effect that was never attempted.
func (s *Server) resolveEffect(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	var req resolveRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	to, err := effects.ParseState(req.To)
	if err != nil || (to != effects.StateConfirmed && to != effects.StateFailed && to != effects.StatePending) {
		return 0, nil, badRequest(codeInvalidState, "to %q: want CONFIRMED, FAILED or PENDING", req.To)
	}
	if err := req.validate(); err != nil {
		return 0, nil, err
	}
	id, err := pathID(call)
	if err != nil {
		return 0, nil, err
	}
	// Read through the request's transaction: it holds this request's connection, and asking the
	// pool for a second one while holding it can deadlock a busy server.
	row, err := dbsqlc.New(tx).EffectGetByID(ctx, id)
	if postgres.NoRows(err) || (err == nil && row.TenantID != call.Tenant()) {
		// Another tenant's effect is indistinguishable from a missing one.
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no effect %s", id)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("get effect %s: %w", id, err)
	}
	opts := &effects.OperatorOpts{TenantID: call.Tenant()}
	if effects.State(row.State) == effects.StatePending && to == effects.StateFailed {
		return s.cancel(ctx, tx, call, id, req)
	}
	resolved, err := s.effects.ResolveTx(ctx, tx, id, effects.Resolution{To: to, Actor: call.Actor(req.Actor), Reason: req.Reason}, opts)
	if err != nil {
		return 0, nil, operatorError(err)
	}
	return http.StatusOK, EffectToJSON(resolved), nil
}

// cancelEffect: POST /v1/effects/{id}/cancel, the same as resolving a PENDING effect to FAILED.
func (s *Server) cancelEffect(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	var req resolveRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	if req.To != "" {
		return 0, nil, badRequest(codeInvalidRequest, "cancel takes no \"to\": it always means FAILED")
	}
	if err := req.validate(); err != nil {
		return 0, nil, err
	}
	id, err := pathID(call)
	if err != nil {
		return 0, nil, err
	}
	return s.cancel(ctx, tx, call, id, req)
}

func (s *Server) cancel(ctx context.Context, tx pgx.Tx, call *Call, id uuid.UUID, req resolveRequest) (int, any, error) {
	cancelled, err := s.effects.CancelTx(ctx, tx, id, call.Actor(req.Actor), req.Reason, &effects.OperatorOpts{TenantID: call.Tenant()})
	if err != nil {
		return 0, nil, operatorError(err)
	}
	return http.StatusOK, EffectToJSON(cancelled), nil
}

// confirmEffect: POST /v1/effects/{id}/confirm. The effect, awaiting its confirmation, is
// dispatched.
func (s *Server) confirmEffect(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	return s.decide(ctx, tx, call, s.effects.ConfirmTx)
}

// declineEffect: POST /v1/effects/{id}/decline. The effect, awaiting its confirmation, is FAILED.
func (s *Server) declineEffect(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	return s.decide(ctx, tx, call, s.effects.DeclineTx)
}

// redriveEffect: POST /v1/effects/{id}/redrive. The FAILED effect is PENDING again, dispatched
// with the same idempotency key and a fresh attempt budget (effects.Client.RedriveTx).
func (s *Server) redriveEffect(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	return s.decide(ctx, tx, call, s.effects.RedriveTx)
}

func (s *Server) decide(ctx context.Context, tx pgx.Tx, call *Call,
	decide func(context.Context, pgx.Tx, uuid.UUID, string, string, *effects.OperatorOpts) (*effects.Effect, error)) (int, any, error) {
	var req decisionRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	if err := req.validate(); err != nil {
		return 0, nil, err
	}
	id, err := pathID(call)
	if err != nil {
		return 0, nil, err
	}
	decided, err := decide(ctx, tx, id, call.Actor(req.Actor), req.Reason, &effects.OperatorOpts{TenantID: call.Tenant()})
	if err != nil {
		return 0, nil, operatorError(err)
	}
	return http.StatusOK, EffectToJSON(decided), nil
}

func operatorError(err error) error {
	switch {
	case errors.Is(err, effects.ErrNotAwaitingConfirmation):
		return errorf(http.StatusConflict, codeNotAwaitingConfirm, "%v", strings.TrimPrefix(err.Error(), "effects: "))
	case errors.Is(err, effects.ErrFourEyes):
		return errorf(http.StatusConflict, codeFourEyes, "%v", strings.TrimPrefix(err.Error(), "effects: "))
	case errors.Is(err, effects.ErrNotFound):
		return errorf(http.StatusNotFound, codeNotFound, "%v", strings.TrimPrefix(err.Error(), "effects: "))
	case errors.Is(err, effects.ErrNotStuck):
		return errorf(http.StatusConflict, codeNotStuck, "%v; only a STUCK effect can be resolved (a PENDING one can be cancelled with to=FAILED)", strings.TrimPrefix(err.Error(), "effects: "))
	case errors.Is(err, effects.ErrNotCancellable):
		return errorf(http.StatusConflict, codeNotCancellable, "%v; only a PENDING effect that was never attempted can be cancelled", strings.TrimPrefix(err.Error(), "effects: "))
	}
	return redriveError(err)
}

// redriveError maps a redrive's refusals (effects.Client.Redrive) to 409s; anything else is err.
func redriveError(err error) error {
	code := ""
	switch {
	case errors.Is(err, effects.ErrNotFailed):
		code = codeNotFailed
	case errors.Is(err, effects.ErrRedriveCompensation):
		code = codeRedriveCompensation
	case errors.Is(err, effects.ErrRedriveDeclined):
		code = codeRedriveDeclined
	case errors.Is(err, effects.ErrRedriveOwned):
		code = codeRedriveOwned
	case errors.Is(err, effects.ErrRedriveBusinessKeyTaken):
		code = codeBusinessKeyTaken
	case errors.Is(err, effects.ErrRunCancelled):
		code = codeRunCancelled
	case errors.Is(err, effects.ErrRunMaxFailures):
		code = codeRunHalted
	default:
		return err
	}
	return errorf(http.StatusConflict, code, "%v", strings.TrimPrefix(err.Error(), "effects: "))
}
