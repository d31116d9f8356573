package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects/httpconn"
)

// connectorsResponse is the answer to GET /v1/connectors.
type connectorsResponse struct {
	Connectors []httpconn.Definition `json:"connectors"`
}

// requireSystem refuses a tenant's token (admin or not) a change of what every tenant shares, such
// as "HTTP connectors": only a system token makes one.
func requireSystem(call *Call, what string) error {
	if !call.Token.System {
		return errorf(http.StatusForbidden, codeForbidden, "%s are shared by every tenant: changing them needs a system token (server tokens create -system), not a tenant's token", what)
	}
	return nil
}

// changer is the call's token as the maker of a change (ops.RecordChange).
func changer(call *Call) ops.Changer {
	tokenID := call.Token.ID
	return ops.Changer{Actor: call.Actor(""), TokenID: &tokenID}
}

// refreshAfterCommit makes this server's registry pick up a connector change once it commits.
func (s *Server) refreshAfterCommit(call *Call) {
	call.OnCommit(func(ctx context.Context) {
		if err := s.config.RefreshConnectors(ctx); err != nil {
			s.logger.WarnContext(ctx, "refresh connectors", slog.Any("error", err))
		}
	})
}

// putConnector: POST /v1/connectors, a definition as JSON; 201 when new, 200 when it replaced one.
func (s *Server) putConnector(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	if err := requireSystem(call, "HTTP connectors"); err != nil {
		return 0, nil, err
	}
	if err := call.Decode(&struct{}{}); err != nil && asError(err).Code == codeInvalidJSON {
		return 0, nil, err // malformed JSON is malformed JSON, whatever its fields
	}
	var def httpconn.Definition
	if err := def.UnmarshalJSON(call.Body); err != nil {
		return 0, nil, badRequest(codeInvalidConnector, "%s", strings.TrimPrefix(err.Error(), "httpconn: "))
	}
	stored, created, err := ops.PutConnector(ctx, tx, def, changer(call))
	if errors.Is(err, httpconn.ErrInvalid) {
		return 0, nil, badRequest(codeInvalidConnector, "%s", strings.TrimPrefix(err.Error(), "httpconn: "))
	}
	if err != nil {
		return 0, nil, err
	}
	s.refreshAfterCommit(call)
	if created {
		return http.StatusCreated, stored, nil
	}
	return http.StatusOK, stored, nil
}

// listConnectors: GET /v1/connectors, by name.
func (s *Server) listConnectors(ctx context.Context, call *Call) (int, any, error) {
	if _, err := (listParams{}).parse(call); err != nil {
		return 0, nil, err
	}
	defs, err := httpconn.List(ctx, s.pool)
	if err != nil {
		return 0, nil, err
	}
	visible := []httpconn.Definition{}
	for _, def := range defs {
		if def, ok := visibleTo(call, def); ok {
			visible = append(visible, def)
		}
	}
	return http.StatusOK, connectorsResponse{Connectors: visible}, nil
}

// visibleTo is def as call's token may see it: a system token sees every connector as it is; a
// tenant's token does not see a connector its tenant may not use (Definition.Tenants), and sees
// no other tenant named in the tenants of one it may.
func visibleTo(call *Call, def httpconn.Definition) (httpconn.Definition, bool) {
	if call.Token.System || len(def.Tenants) == 0 {
		return def, true
	}
	connector := def.Connector(nil)
	if !connector.AvailableTo(call.Tenant()) {
		return httpconn.Definition{}, false
	}
	def.Tenants = []string{call.Tenant()}
	return def, true
}

// getConnector: GET /v1/connectors/{name}.
func (s *Server) getConnector(ctx context.Context, call *Call) (int, any, error) {
	name := call.Request.PathValue("name")
	def, err := httpconn.Get(ctx, s.pool, name)
	if err == nil {
		var visible bool
		if def, visible = visibleTo(call, def); !visible {
			err = httpconn.ErrNotFound // another tenant's connector is as missing as one that does not exist
		}
	}
	if errors.Is(err, httpconn.ErrNotFound) {
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no HTTP connector %q", name)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, def, nil
}

// deleteConnector: DELETE /v1/connectors/{name}; refused while it has PENDING or UNKNOWN effects.
func (s *Server) deleteConnector(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	if err := requireSystem(call, "HTTP connectors"); err != nil {
		return 0, nil, err
	}
	name := call.Request.PathValue("name")
	err := ops.DeleteConnector(ctx, tx, name, changer(call))
	switch {
	case errors.Is(err, httpconn.ErrNotFound):
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no HTTP connector %q", name)
	case errors.Is(err, httpconn.ErrInUse):
		return 0, nil, errorf(http.StatusConflict, codeConnectorInUse, "%s", strings.TrimPrefix(err.Error(), "httpconn: "))
	case err != nil:
		return 0, nil, fmt.Errorf("delete connector: %w", err)
	}
	s.refreshAfterCommit(call)
	return http.StatusOK, map[string]any{"name": name, "deleted": true}, nil
}
