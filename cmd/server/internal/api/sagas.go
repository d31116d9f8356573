package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
)

// Sagas over HTTP (docs/sagas.md): definitions stored as data (package saga/sagadef),
// shared by every tenant like connectors; sagas started and inspected per tenant.

func (s *Server) requireSagas() error {
	if s.config.Sagas == nil {
		return errorf(http.StatusNotImplemented, codeNotImplemented, "this server runs no saga client")
	}
	return nil
}

// definitionsResponse is the answer to GET /v1/saga-definitions.
type definitionsResponse struct {
	Definitions []sagadef.Definition `json:"definitions"`
}

// putSagaDefinition: POST /v1/saga-definitions; 201 when new, 200 when the same definition is
// stored already, 409 when another one of that name is.
func (s *Server) putSagaDefinition(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	if err := requireSystem(call, "saga definitions"); err != nil {
		return 0, nil, err
	}
	if err := s.requireSagas(); err != nil {
		return 0, nil, err
	}
	if err := call.Decode(&struct{}{}); err != nil && asError(err).Code == codeInvalidJSON {
		return 0, nil, err
	}
	def, err := sagadef.Parse(call.Body)
	if err != nil {
		return 0, nil, badRequest(codeInvalidDefinition, "%s", strings.TrimPrefix(err.Error(), "sagadef: "))
	}
	registry := s.effects.Registry()
	if def.Validate(registry) != nil {
		// Another server may have just added a connector it names: reload them (outside this
		// transaction) and run again.
		if err := call.refreshFirst("connectors", s.config.RefreshConnectors); err != nil {
			return 0, nil, err
		}
	}
	stored, created, err := ops.PutSagaDefinition(ctx, tx, def, registry, changer(call))
	switch {
	case errors.Is(err, sagadef.ErrInvalid):
		return 0, nil, badRequest(codeInvalidDefinition, "%s", strings.TrimPrefix(err.Error(), "sagadef: "))
	case errors.Is(err, sagadef.ErrExists):
		return 0, nil, errorf(http.StatusConflict, codeDefinitionExists, "%s", strings.TrimPrefix(err.Error(), "sagadef: "))
	case err != nil:
		return 0, nil, err
	}
	call.OnCommit(func(ctx context.Context) {
		if err := s.config.RefreshSagas(ctx); err != nil {
			s.logger.WarnContext(ctx, "refresh saga definitions", slog.Any("error", err))
		}
	})
	if created {
		return http.StatusCreated, stored, nil
	}
	return http.StatusOK, stored, nil
}

// listSagaDefinitions: GET /v1/saga-definitions, by name.
func (s *Server) listSagaDefinitions(ctx context.Context, call *Call) (int, any, error) {
	if _, err := (listParams{}).parse(call); err != nil {
		return 0, nil, err
	}
	defs, err := sagadef.List(ctx, s.pool)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, definitionsResponse{Definitions: defs}, nil
}

// getSagaDefinition: GET /v1/saga-definitions/{name}.
func (s *Server) getSagaDefinition(ctx context.Context, call *Call) (int, any, error) {
	name := call.Request.PathValue("name")
	def, err := sagadef.Get(ctx, s.pool, name)
	if errors.Is(err, sagadef.ErrNotFound) {
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no saga definition %q", name)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, def, nil
}

// SagaJSON is a saga on the wire: what the API answers (GET /v1/sagas/{id} with its History), and
// what the operator CLI prints with -o json.
type SagaJSON struct {
	ID          uuid.UUID       `json:"id"`
	TenantID    string          `json:"tenant_id"`
	Definition  string          `json:"definition"`
	StartKey    string          `json:"start_key,omitempty"`
	Input       json.RawMessage `json:"input"`
	State       saga.State      `json:"state"`
	CurrentStep int             `json:"current_step"`
	StepCount   int             `json:"step_count"`
	Error       string          `json:"error,omitempty"`
	StuckReason string          `json:"stuck_reason,omitempty"`
	Steps       []sagaStepJSON  `json:"steps"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	// Deduplicated is set in answers to POST /v1/sagas only.
	Deduplicated *bool                `json:"deduplicated,omitempty"`
	History      []SagaTransitionJSON `json:"history,omitempty"`
}

type sagaStepJSON struct {
	Index                int             `json:"index"`
	Name                 string          `json:"name"`
	State                saga.StepState  `json:"state"`
	EffectID             uuid.UUID       `json:"effect_id"`
	Result               json.RawMessage `json:"result,omitempty"`
	Error                string          `json:"error,omitempty"`
	CompensationEffectID *uuid.UUID      `json:"compensation_effect_id,omitempty"`
	CompensationAttempts int             `json:"compensation_attempts,omitempty"`
	CompensationResult   json.RawMessage `json:"compensation_result,omitempty"`
}

// SagaTransitionJSON is one transition of a saga's history on the wire.
type SagaTransitionJSON struct {
	From   saga.State `json:"from,omitempty"`
	To     saga.State `json:"to"`
	Step   int        `json:"step"`
	Actor  string     `json:"actor"`
	Reason string     `json:"reason"`
	At     time.Time  `json:"at"`
}

// SagaToJSON is sg on the wire, without its history (see SagaHistoryToJSON).
func SagaToJSON(sg *saga.Saga) *SagaJSON {
	out := &SagaJSON{
		ID: sg.ID, TenantID: sg.TenantID, Definition: sg.Name, StartKey: sg.StartKey, Input: sg.Input, State: sg.State,
		CurrentStep: sg.CurrentStep, StepCount: sg.StepCount, Error: sg.Error, StuckReason: sg.StuckReason,
		Steps: make([]sagaStepJSON, len(sg.Steps)), CreatedAt: sg.CreatedAt, UpdatedAt: sg.UpdatedAt,
	}
	for i, st := range sg.Steps {
		out.Steps[i] = sagaStepJSON{
			Index: st.Index, Name: st.Name, State: st.State, EffectID: st.EffectID, Result: st.Result, Error: st.Error,
			CompensationEffectID: st.CompensationEffectID, CompensationAttempts: st.CompensationAttempts,
			CompensationResult: st.CompensationResult,
		}
	}
	return out
}

// startRequest is the body of POST /v1/sagas.
type startRequest struct {
	Definition string          `json:"definition"`
	Input      json.RawMessage `json:"input"`
	StartKey   string          `json:"start_key"`
}

// startSaga: POST /v1/sagas; 201 for a new saga, 200 for the existing one of the same start_key.
func (s *Server) startSaga(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	if err := s.requireSagas(); err != nil {
		return 0, nil, err
	}
	var req startRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	input := strings.TrimSpace(string(req.Input))
	switch {
	case req.Definition == "":
		return 0, nil, badRequest(codeInvalidRequest, "definition is required: the name of a saga definition")
	case len(req.Definition) > maxNameLen:
		return 0, nil, badRequest(codeInvalidRequest, "definition is limited to %d bytes", maxNameLen)
	case len(req.StartKey) > maxKeyLen:
		return 0, nil, badRequest(codeInvalidRequest, "start_key is limited to %d bytes", maxKeyLen)
	case input == "" || input == "null":
		req.Input = json.RawMessage(`{}`)
	case !strings.HasPrefix(input, "{"):
		return 0, nil, badRequest(codeInvalidRequest, "input must be a JSON object")
	}
	opts := &saga.StartOpts{TenantID: call.Tenant(), Key: req.StartKey, Actor: call.Actor(""), Reason: "started over the API"}
	started, err := s.config.Sagas.StartTx(ctx, tx, req.Definition, req.Input, opts)
	// The definition, or the first step's connector, may have just been added by another server:
	// reload (outside this transaction, which is rolled back) and run again, once.
	switch {
	case errors.Is(err, saga.ErrUnknownDefinition):
		if rerr := call.refreshFirst("saga definitions", s.config.RefreshSagas); rerr != nil {
			return 0, nil, rerr
		}
	case errors.Is(err, effects.ErrUnknownConnector):
		if rerr := call.refreshFirst("connectors", s.config.RefreshConnectors); rerr != nil {
			return 0, nil, rerr
		}
	}
	if apiErr := enqueueError(err); apiErr != nil {
		return 0, nil, apiErr
	}
	switch {
	case errors.Is(err, saga.ErrUnknownDefinition):
		return 0, nil, errorf(http.StatusUnprocessableEntity, codeUnknownDefinition, "no saga definition %q (POST /v1/saga-definitions stores one)", req.Definition)
	case errors.Is(err, effects.ErrUnknownConnector):
		return 0, nil, errorf(http.StatusUnprocessableEntity, codeUnknownConnector, "%s", strings.TrimPrefix(err.Error(), "saga "))
	case errors.Is(err, saga.ErrStartKeyConflict):
		return 0, nil, errorf(http.StatusConflict, codeStartKeyConflict, "%s", strings.TrimPrefix(err.Error(), "saga: "))
	case err != nil:
		return 0, nil, fmt.Errorf("start saga: %w", err)
	}
	out := SagaToJSON(started)
	dedup := started.Deduplicated
	out.Deduplicated = &dedup
	if dedup {
		return http.StatusOK, out, nil
	}
	return http.StatusCreated, out, nil
}

// sagaID is the {id} of a /v1/sagas/{id} request: 400 when it is not a UUID, 501 on a server
// without a saga client.
func (s *Server) sagaID(call *Call) (uuid.UUID, error) {
	if err := s.requireSagas(); err != nil {
		return uuid.Nil, err
	}
	raw := call.Request.PathValue("id")
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, badRequest(codeInvalidParameter, "saga id %q is not a UUID", raw)
	}
	return id, nil
}

// getSaga: GET /v1/sagas/{id}, with its steps and history.
func (s *Server) getSaga(ctx context.Context, call *Call) (int, any, error) {
	id, err := s.sagaID(call)
	if err != nil {
		return 0, nil, err
	}
	sg, err := s.config.Sagas.Get(ctx, id)
	if errors.Is(err, saga.ErrNotFound) || (err == nil && sg.TenantID != call.Tenant()) {
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no saga %s", id)
	}
	if err != nil {
		return 0, nil, err
	}
	history, err := s.config.Sagas.History(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	out := SagaToJSON(sg)
	out.History = SagaHistoryToJSON(history)
	return http.StatusOK, out, nil
}

// SagaHistoryToJSON is a saga's history on the wire (SagaJSON.History), never nil.
func SagaHistoryToJSON(history []saga.Transition) []SagaTransitionJSON {
	out := make([]SagaTransitionJSON, len(history))
	for i, t := range history {
		out[i] = SagaTransitionJSON{From: t.From, To: t.To, Step: t.Step, Actor: t.Actor, Reason: t.Reason, At: t.At}
	}
	return out
}

// sagaListResponse is the answer to GET /v1/sagas.
type sagaListResponse struct {
	Sagas      []*SagaJSON `json:"sagas"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// sagaListParams are the query parameters of GET /v1/sagas.
var sagaListParams = listParams{
	filters: []string{"state", "definition"}, limit: 100, maxLimit: 1000, cursor: true,
	states: stateNames([]saga.State{saga.StateRunning, saga.StateCompleted, saga.StateCompensating, saga.StateCompensated, saga.StateStuck}),
}

// listSagas: GET /v1/sagas?state=&definition=&limit=&cursor=, newest first.
func (s *Server) listSagas(ctx context.Context, call *Call) (int, any, error) {
	if err := s.requireSagas(); err != nil {
		return 0, nil, err
	}
	list := func(ctx context.Context, query listQuery) ([]*saga.Saga, *saga.Cursor, error) {
		return s.config.Sagas.List(ctx, saga.ListFilter{
			TenantID: call.Tenant(), State: saga.State(query.filters["state"]), Name: query.filters["definition"],
			Limit: query.limit, After: afterOf[saga.Cursor](query),
		})
	}
	var out sagaListResponse
	var err error
	if out.Sagas, out.NextCursor, err = listPage(ctx, call, sagaListParams, list, SagaToJSON); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

// resolveSagaRequest is the body of POST /v1/sagas/{id}/resolve.
type resolveSagaRequest struct {
	Action string `json:"action"`
	Reason string `json:"reason"`
	Actor  string `json:"actor"`
}

// resolveSaga: POST /v1/sagas/{id}/resolve, an operator's decision on a saga STUCK on a
// compensation (saga.Client.Resolve): retry_compensation or mark_compensated. 200 with the saga;
// 409 not_stuck when it is not STUCK, 409 resolve_effect when a STUCK effect holds it (resolve
// that effect instead).
func (s *Server) resolveSaga(ctx context.Context, call *Call) (int, any, error) {
	id, err := s.sagaID(call)
	if err != nil {
		return 0, nil, err
	}
	var req resolveSagaRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	decision := saga.Decision(req.Action)
	switch {
	case decision != saga.RetryCompensation && decision != saga.MarkCompensated:
		return 0, nil, badRequest(codeInvalidRequest, "action %q: want %q or %q", req.Action, saga.RetryCompensation, saga.MarkCompensated)
	case strings.TrimSpace(req.Reason) == "":
		return 0, nil, badRequest(codeInvalidRequest, "reason is required: it goes to the saga's history")
	case len(req.Reason) > maxReasonLen || len(req.Actor) > maxNameLen:
		return 0, nil, badRequest(codeInvalidRequest, "reason is limited to %d bytes and actor to %d", maxReasonLen, maxNameLen)
	}
	sg, err := s.config.Sagas.Get(ctx, id)
	if errors.Is(err, saga.ErrNotFound) || (err == nil && sg.TenantID != call.Tenant()) {
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no saga %s", id)
	}
	if err != nil {
		return 0, nil, err
	}
	// saga.Client.Resolve runs in a transaction of its own (it locks the saga): handleAction, the
	// request holds no connection meanwhile.
	resolved, err := s.config.Sagas.Resolve(ctx, id, decision, call.Actor(req.Actor), req.Reason)
	switch {
	case errors.Is(err, saga.ErrNotFound):
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no saga %s", id)
	case errors.Is(err, saga.ErrNotStuck):
		return 0, nil, errorf(http.StatusConflict, codeNotStuck, "%s", strings.TrimPrefix(err.Error(), "saga: "))
	case errors.Is(err, saga.ErrResolveEffect):
		return 0, nil, errorf(http.StatusConflict, codeResolveEffect, "%s (POST /v1/effects/{id}/resolve)", strings.TrimPrefix(err.Error(), "saga: "))
	case err != nil:
		return 0, nil, fmt.Errorf("resolve saga %s: %w", id, err)
	}
	return http.StatusOK, SagaToJSON(resolved), nil
}
