package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/turns/httpturn"
)

// Turn handlers over HTTP: where a tenant's turns go (package turns/httpturn, table
// reckon_turn_handlers). A tenant's tokens read its own, and its admin tokens set and delete it;
// system tokens do both for any tenant. To a tenant's token another tenant's turn handler is
// absent (404), whether it exists or not. Every change is recorded in reckon_definition_changes.

// turnHandlerTenant is the {tenant} of a /v1/turn-handlers/{tenant} request, and whether the call
// may see it: a tenant's token its own tenant only, a system token any.
func turnHandlerTenant(call *Call) (tenant string, visible bool) {
	tenant = call.Request.PathValue("tenant")
	return tenant, call.Token.System || tenant == call.Tenant()
}

// requireTurnHandlerAdmin refuses a tenant's token that is not an admin a change of its tenant's
// turn handler.
func requireTurnHandlerAdmin(call *Call) error {
	if !call.Token.System && !call.Token.Admin {
		return errorf(http.StatusForbidden, codeForbidden, "changing a tenant's turn handler needs an admin token of the tenant (server tokens create -tenant %s -admin) or a system token", call.Tenant())
	}
	return nil
}

// errNoTenant answers a turn handler change for a tenant that does not exist, or is not the
// caller's.
func errNoTenant(tenant string) error {
	return errorf(http.StatusNotFound, codeNotFound, "no tenant %q", tenant)
}

// errNoTurnHandler answers for a tenant without a turn handler, or one that is not the caller's.
func errNoTurnHandler(tenant string) error {
	return errorf(http.StatusNotFound, codeNotFound, "no turn handler for tenant %q: its turns go to the reactors' -turn-handler-url", tenant)
}

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

// putTurnHandler: PUT /v1/turn-handlers/{tenant} (the tenant's admin tokens, system tokens); 201
// when new, 200 when replaced.
func (s *Server) putTurnHandler(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	tenant, visible := turnHandlerTenant(call)
	if !visible {
		return 0, nil, errNoTenant(tenant)
	}
	if err := requireTurnHandlerAdmin(call); err != nil {
		return 0, nil, err
	}
	var req turnHandlerRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	if req.TimeoutMs < 0 || req.TimeoutMs > httpturn.MaxTimeout.Milliseconds() {
		return 0, nil, badRequest(codeInvalidTurnHandler, "timeout_ms %d: want 1 to %d (default %d)", req.TimeoutMs, httpturn.MaxTimeout.Milliseconds(), httpturn.DefaultTimeout.Milliseconds())
	}
	stored, created, err := httpturn.Put(ctx, tx, tenant, httpturn.Target{URL: req.URL, Timeout: time.Duration(req.TimeoutMs) * time.Millisecond})
	switch {
	case errors.Is(err, httpturn.ErrInvalid):
		return 0, nil, badRequest(codeInvalidTurnHandler, "%s", strings.TrimPrefix(err.Error(), "httpturn: "))
	case errors.Is(err, httpturn.ErrUnknownTenant):
		return 0, nil, errNoTenant(tenant)
	case err != nil:
		return 0, nil, err
	}
	if err := ops.RecordChange(ctx, tx, ops.ChangeTurnHandler, tenant, ops.CreateOrReplace(created), changer(call), turnHandlerToJSON(stored)); err != nil {
		return 0, nil, err
	}
	if created {
		return http.StatusCreated, turnHandlerToJSON(stored), nil
	}
	return http.StatusOK, turnHandlerToJSON(stored), nil
}

// getTurnHandler: GET /v1/turn-handlers/{tenant}, for the tenant's tokens and system tokens.
func (s *Server) getTurnHandler(ctx context.Context, call *Call) (int, any, error) {
	tenant, visible := turnHandlerTenant(call)
	if !visible {
		return 0, nil, errNoTurnHandler(tenant)
	}
	stored, err := httpturn.Get(ctx, s.pool, tenant)
	if errors.Is(err, httpturn.ErrNotFound) {
		return 0, nil, errNoTurnHandler(tenant)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, turnHandlerToJSON(stored), nil
}

// deleteTurnHandler: DELETE /v1/turn-handlers/{tenant} (the tenant's admin tokens, system tokens).
func (s *Server) deleteTurnHandler(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	tenant, visible := turnHandlerTenant(call)
	if !visible {
		return 0, nil, errNoTurnHandler(tenant)
	}
	if err := requireTurnHandlerAdmin(call); err != nil {
		return 0, nil, err
	}
	if err := httpturn.Delete(ctx, tx, tenant); errors.Is(err, httpturn.ErrNotFound) {
		return 0, nil, errNoTurnHandler(tenant)
	} else if err != nil {
		return 0, nil, err
	}
	if err := ops.RecordChange(ctx, tx, ops.ChangeTurnHandler, tenant, ops.ChangeDelete, changer(call), nil); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]string{"deleted": tenant}, nil
}
