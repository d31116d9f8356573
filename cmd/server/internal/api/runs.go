package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
)

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

// runRequest is the body of POST /v1/runs.
type runRequest struct {
	ID                     string `json:"id"`
	MaxSteps               int    `json:"max_steps"`
	MaxConsecutiveFailures int    `json:"max_consecutive_failures"`
}

func (req *runRequest) validate() error {
	switch {
	case req.ID == "":
		return badRequest(codeInvalidRequest, "id is required: the run id that effects name in run_id")
	case len(req.ID) > maxNameLen:
		return badRequest(codeInvalidRequest, "id is limited to %d bytes", maxNameLen)
	case req.MaxSteps < 0 || req.MaxSteps > math.MaxInt32:
		return badRequest(codeInvalidRequest, "max_steps must be from 0 (no limit) to %d", math.MaxInt32)
	case req.MaxConsecutiveFailures < 0 || req.MaxConsecutiveFailures > math.MaxInt32:
		return badRequest(codeInvalidRequest, "max_consecutive_failures must be from 0 (no limit) to %d", math.MaxInt32)
	}
	return nil
}

// startRun: POST /v1/runs, a run of the caller's tenant with guardrails, or new guardrails for an
// existing run (effects.Client.StartRunTx). Effects naming the id in run_id join it.
func (s *Server) startRun(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	var req runRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	if err := req.validate(); err != nil {
		return 0, nil, err
	}
	run, err := s.effects.StartRunTx(ctx, tx, effects.RunSpec{
		ID: req.ID, TenantID: call.Tenant(), MaxSteps: req.MaxSteps, MaxConsecutiveFailures: req.MaxConsecutiveFailures,
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, RunToJSON(run), nil
}

// runCancellationJSON is what POST /v1/runs/{id}/cancel answers (effects.RunCancellation).
type runCancellationJSON struct {
	Run      *RunJSON    `json:"run"`
	Failed   []uuid.UUID `json:"failed"`
	Awaiting []uuid.UUID `json:"awaiting"`
	Left     []uuid.UUID `json:"left"`
}

// cancelRun: POST /v1/runs/{id}/cancel. The caller's run refuses further effects and what has not
// taken effect is stopped (effects.Client.CancelRun, through ops as for the console and the CLI).
// It calls upstreams (a connector's Cancel) and commits in transactions of its own: an action.
func (s *Server) cancelRun(ctx context.Context, call *Call) (int, any, error) {
	var req decisionRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	if err := req.validate(); err != nil {
		return 0, nil, err
	}
	id := call.Request.PathValue("id")
	if len(id) > maxNameLen {
		return 0, nil, badRequest(codeInvalidParameter, "path value id is limited to %d bytes", maxNameLen)
	}
	res, err := s.ops.CancelRun(ctx, callScope(call), call.Tenant(), id, call.Actor(req.Actor), req.Reason)
	if errors.Is(err, ops.ErrNotFound) {
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no run %q", id)
	}
	if err != nil {
		return 0, nil, fieldError(err)
	}
	nonNil := func(ids []uuid.UUID) []uuid.UUID {
		if ids == nil {
			return []uuid.UUID{}
		}
		return ids
	}
	return http.StatusOK, &runCancellationJSON{
		Run: RunToJSON(res.Run), Failed: nonNil(res.Failed), Awaiting: nonNil(res.Awaiting), Left: nonNil(res.Left),
	}, nil
}
