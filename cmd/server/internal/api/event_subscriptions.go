package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/internal/ident"
)

// Webhook subscriptions (package events; docs/api.md "Webhook subscriptions"): the reactors POST
// the events that match one to its URL, as effects of the connector reckon.webhook. A tenant's
// tokens create, see and change its own tenant's subscriptions only (another tenant's is absent,
// 404); system tokens any, and create those of every tenant (no tenant) or of one (tenant).

// subscriptionRequest is the body of POST /v1/event-subscriptions.
type subscriptionRequest struct {
	URL      string   `json:"url"`
	Patterns []string `json:"patterns"`
	// Tenant: a system token's choice ("" for every tenant's events); a tenant token's must be its
	// own or absent.
	Tenant string `json:"tenant"`
	// Secret signs the deliveries; default a random one, returned in the answer only.
	Secret string `json:"secret"`
}

// pauseRequest is the optional body of POST /v1/event-subscriptions/{id}/pause.
type pauseRequest struct {
	Reason string `json:"reason"`
}

type subscriptionListResponse struct {
	Subscriptions []*events.Subscription `json:"subscriptions"`
}

// subscriptionError maps the events package's errors: a bad field is 400 naming it, another
// scope's or a missing subscription 404.
func subscriptionError(err error) error {
	var field *events.SubscriptionError
	switch {
	case errors.As(err, &field):
		return badRequest(codeInvalidRequest, "field %q %s", field.Field, field.Problem)
	case errors.Is(err, events.ErrSubscriptionNotFound):
		return errorf(http.StatusNotFound, codeNotFound, "%s", strings.TrimPrefix(err.Error(), "events: "))
	}
	return err
}

func subscriptionID(call *Call) (uuid.UUID, error) {
	raw := call.Request.PathValue("id")
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, badRequest(codeInvalidParameter, "subscription id %q is not a UUID", raw)
	}
	return id, nil
}

// createSubscription: POST /v1/event-subscriptions; 201 with the subscription and its secret.
func (s *Server) createSubscription(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	var req subscriptionRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	tenant := req.Tenant
	if !call.Token.System {
		if tenant != "" && tenant != call.Tenant() {
			return 0, nil, badRequest(codeInvalidRequest, "field %q: a tenant token subscribes to its own tenant's events (%q) only", "tenant", call.Tenant())
		}
		tenant = call.Tenant()
	} else if err := ident.ValidateTenantID(tenant); tenant != "" && err != nil {
		return 0, nil, badRequest(codeInvalidRequest, "field %q: %v", "tenant", err)
	}
	sub, err := events.NewSubscriptions(tx).Create(ctx, events.NewSubscription{
		Tenant: tenant, URL: req.URL, Patterns: req.Patterns, Secret: req.Secret, CreatedBy: call.Actor(""),
	})
	if err != nil {
		return 0, nil, subscriptionError(err)
	}
	return http.StatusCreated, sub, nil
}

// subscriptionListParams are the query parameters of GET /v1/event-subscriptions.
var subscriptionListParams = listParams{limit: 100, maxLimit: 1000}

// listSubscriptions: GET /v1/event-subscriptions?limit=, oldest first.
func (s *Server) listSubscriptions(ctx context.Context, call *Call) (int, any, error) {
	query, err := subscriptionListParams.parse(call)
	if err != nil {
		return 0, nil, err
	}
	subs, err := events.NewSubscriptions(s.pool).List(ctx, call.Tenant(), &events.ListOpts{Limit: query.limit})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, subscriptionListResponse{Subscriptions: subs}, nil
}

// getSubscription: GET /v1/event-subscriptions/{id}.
func (s *Server) getSubscription(ctx context.Context, call *Call) (int, any, error) {
	id, err := subscriptionID(call)
	if err != nil {
		return 0, nil, err
	}
	sub, err := events.NewSubscriptions(s.pool).Get(ctx, call.Tenant(), id)
	if err != nil {
		return 0, nil, subscriptionError(err)
	}
	return http.StatusOK, sub, nil
}

// deleteSubscription: DELETE /v1/event-subscriptions/{id}.
func (s *Server) deleteSubscription(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	id, err := subscriptionID(call)
	if err != nil {
		return 0, nil, err
	}
	if err := events.NewSubscriptions(tx).Delete(ctx, call.Tenant(), id); err != nil {
		return 0, nil, subscriptionError(err)
	}
	return http.StatusOK, map[string]string{"deleted": id.String()}, nil
}

// pauseSubscription: POST /v1/event-subscriptions/{id}/pause, with an optional {"reason": …}.
func (s *Server) pauseSubscription(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	id, err := subscriptionID(call)
	if err != nil {
		return 0, nil, err
	}
	var req pauseRequest
	if err := call.decodeOptional(&req); err != nil {
		return 0, nil, err
	}
	if req.Reason == "" {
		req.Reason = "paused by " + call.Actor("")
	}
	sub, err := events.NewSubscriptions(tx).Pause(ctx, call.Tenant(), id, req.Reason)
	if err != nil {
		return 0, nil, subscriptionError(err)
	}
	return http.StatusOK, sub, nil
}

// resumeSubscription: POST /v1/event-subscriptions/{id}/resume.
func (s *Server) resumeSubscription(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	id, err := subscriptionID(call)
	if err != nil {
		return 0, nil, err
	}
	if err := call.decodeOptional(&struct{}{}); err != nil {
		return 0, nil, err
	}
	sub, err := events.NewSubscriptions(tx).Resume(ctx, call.Tenant(), id)
	if err != nil {
		return 0, nil, subscriptionError(err)
	}
	return http.StatusOK, sub, nil
}
