package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/turns/httpturn"
)

// Turn handlers over HTTP: where a tenant's turns go (package turns/httpturn, table
// reckon_turn_handlers). Admin tokens set and delete them; a tenant's own tokens may read its own.

// turnHandlerJSON is a stored turn handler on the wire.
type turnHandlerJSON struct {
	Tenant    string    `json:"tenant"`
	URL       string    `json:"url"`
	TimeoutMs int64     `json:"timeout_ms"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func turnHandlerToJSON(s httpturn.Stored) turnHandlerJSON {
	return turnHandlerJSON{Tenant: s.Tenant, URL: s.Target.URL, TimeoutMs: s.Target.Timeout.Milliseconds(), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// turnHandlerRequest is the body of PUT /v1/turn-handlers/{tenant}.
type turnHandlerRequest struct {
	URL       string `json:"url"`
	TimeoutMs int64  `json:"timeout_ms"`
}

// putTurnHandler: PUT /v1/turn-handlers/{tenant} (admin); 201 when new, 200 when replaced.
func (s *Server) putTurnHandler(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	if !call.Token.Admin {
		return 0, nil, Errorf(http.StatusForbidden, CodeForbidden, "setting a tenant's turn handler needs an admin token (server tokens create -admin)")
	}
	tenant := call.Request.PathValue("tenant")
	var req turnHandlerRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	if req.TimeoutMs < 0 || req.TimeoutMs > httpturn.MaxTimeout.Milliseconds() {
		return 0, nil, badRequest(CodeInvalidTurnHandler, "timeout_ms %d: want 1 to %d (default %d)", req.TimeoutMs, httpturn.MaxTimeout.Milliseconds(), httpturn.DefaultTimeout.Milliseconds())
	}
	stored, created, err := httpturn.Put(ctx, tx, tenant, httpturn.Target{URL: req.URL, Timeout: time.Duration(req.TimeoutMs) * time.Millisecond})
	switch {
	case errors.Is(err, httpturn.ErrInvalid):
		return 0, nil, badRequest(CodeInvalidTurnHandler, "%s", strings.TrimPrefix(err.Error(), "httpturn: "))
	case errors.Is(err, httpturn.ErrUnknownTenant):
		return 0, nil, Errorf(http.StatusNotFound, CodeNotFound, "no tenant %q", tenant)
	case err != nil:
		return 0, nil, err
	}
	if created {
		return http.StatusCreated, turnHandlerToJSON(stored), nil
	}
	return http.StatusOK, turnHandlerToJSON(stored), nil
}

// getTurnHandler: GET /v1/turn-handlers/{tenant}, for admin tokens and the tenant's own.
func (s *Server) getTurnHandler(ctx context.Context, call *Call) (int, any, error) {
	tenant := call.Request.PathValue("tenant")
	if !call.Token.Admin && tenant != call.Tenant() {
		return 0, nil, Errorf(http.StatusNotFound, CodeNotFound, "no turn handler for tenant %q", tenant)
	}
	stored, err := httpturn.Get(ctx, s.pool, tenant)
	if errors.Is(err, httpturn.ErrNotFound) {
		return 0, nil, Errorf(http.StatusNotFound, CodeNotFound, "no turn handler for tenant %q: its turns go to the reactors' -turn-handler-url", tenant)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, turnHandlerToJSON(stored), nil
}

// deleteTurnHandler: DELETE /v1/turn-handlers/{tenant} (admin).
func (s *Server) deleteTurnHandler(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	if !call.Token.Admin {
		return 0, nil, Errorf(http.StatusForbidden, CodeForbidden, "deleting a tenant's turn handler needs an admin token")
	}
	tenant := call.Request.PathValue("tenant")
	if err := httpturn.Delete(ctx, tx, tenant); errors.Is(err, httpturn.ErrNotFound) {
		return 0, nil, Errorf(http.StatusNotFound, CodeNotFound, "no turn handler for tenant %q", tenant)
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]string{"deleted": tenant}, nil
}
