package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
)

// Operators' pauses of connectors (ops.Ops.PauseConnector), shared by every tenant like the
// limits: any token reads them (a tenant token sees the pauses of every tenant and its own), a
// system token pauses and resumes, for every tenant or for one.

// connectorPauseRequest is the body of POST /v1/connectors/{name}/pause and .../resume.
type connectorPauseRequest struct {
	// TenantID is the tenant whose effects are paused or resumed; absent or "": every tenant's.
	TenantID string `json:"tenant_id"`
	Reason   string `json:"reason"`
	// Actor names the person, recorded after the token's name ("api:{token}/{actor}").
	Actor string `json:"actor"`
}

// pauseAnswer is the answer to POST /v1/connectors/{name}/pause: the pause as it stands, and
// whether this call made it (false: it was paused already, and its pause is kept as it was).
type pauseAnswer struct {
	effects.ConnectorPause
	Created bool `json:"created"`
}

// listPauses: GET /v1/pauses, the operators' pauses the caller sees.
func (s *Server) listPauses(ctx context.Context, call *Call) (int, any, error) {
	if _, err := (listParams{}).parse(call); err != nil {
		return 0, nil, err
	}
	pauses, err := s.ops.ConnectorPauses(ctx, callScope(call))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"pauses": pauses}, nil
}

// decodePause reads a pause or resume request: a system token's, with a body.
func decodePause(call *Call) (connectorPauseRequest, error) {
	var req connectorPauseRequest
	if err := requireSystem(call, "connector pauses"); err != nil {
		return req, err
	}
	err := call.Decode(&req)
	return req, err
}

// pauseError answers ops.ErrNotFound with 404 and a *ops.FieldError with 400.
func pauseError(err error, name string) error {
	if errors.Is(err, ops.ErrNotFound) {
		return errorf(http.StatusNotFound, codeNotFound, "no connector %q (GET /v1/connectors lists them)", name)
	}
	return fieldError(err)
}

// pauseConnector: POST /v1/connectors/{name}/pause, stops every reactor from starting the
// connector's calls (for one tenant's effects with tenant_id); 200 with the pause.
func (s *Server) pauseConnector(ctx context.Context, call *Call) (int, any, error) {
	req, err := decodePause(call)
	if err != nil {
		return 0, nil, err
	}
	name := call.Request.PathValue("name")
	pause, created, err := s.ops.PauseConnector(ctx, callScope(call), name, req.TenantID, call.Actor(req.Actor), req.Reason)
	if err != nil {
		return 0, nil, pauseError(err, name)
	}
	return http.StatusOK, pauseAnswer{ConnectorPause: *pause, Created: created}, nil
}

// resumeConnector: POST /v1/connectors/{name}/resume, ends the pause (of every tenant, or of
// tenant_id's); "resumed" says whether there was one.
func (s *Server) resumeConnector(ctx context.Context, call *Call) (int, any, error) {
	req, err := decodePause(call)
	if err != nil {
		return 0, nil, err
	}
	name := call.Request.PathValue("name")
	resumed, err := s.ops.ResumeConnector(ctx, callScope(call), name, req.TenantID, call.Actor(req.Actor), req.Reason)
	if err != nil {
		return 0, nil, pauseError(err, name)
	}
	return http.StatusOK, map[string]any{"connector": name, "tenant_id": req.TenantID, "resumed": resumed}, nil
}
