package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/schedule"
)

// Schedules over HTTP (package schedule; docs/api.md "Schedules"): a tenant's periodic effects. As
// for turn handlers, a tenant's tokens read its own tenant's schedules and its admin tokens set
// and delete them; system tokens do both for any tenant. To a tenant's token another tenant's
// schedule is absent (404). The reads and changes are ops.Ops's, the path of the console and the
// server's CLI too; each change is one statement (handleAction).

// scheduleRequest is the body of PUT /v1/schedules/{tenant}/{name}.
type scheduleRequest struct {
	Connector       string          `json:"connector"`
	Args            json.RawMessage `json:"args"`
	Cron            string          `json:"cron"`
	IntervalSeconds int64           `json:"interval_seconds"`
	Missed          string          `json:"missed"`
	Enabled         *bool           `json:"enabled"`
}

type scheduleListResponse struct {
	Schedules  []*schedule.Schedule `json:"schedules"`
	NextCursor string               `json:"next_cursor,omitempty"`
}

// scheduleTarget is the {tenant} and {name} of a /v1/schedules/{tenant}/{name} request.
func scheduleTarget(call *Call) (tenant, name string) {
	return call.Request.PathValue("tenant"), call.Request.PathValue("name")
}

// requireScheduleAdmin refuses a tenant's token that is not an admin a change of its schedules.
func requireScheduleAdmin(call *Call) error {
	if !call.Token.System && !call.Token.Admin {
		return errorf(http.StatusForbidden, codeForbidden, "changing a tenant's schedules needs an admin token of the tenant (server tokens create -tenant %s -admin) or a system token", call.Tenant())
	}
	return nil
}

// scheduleErr maps ops's errors: a bad field is 400 naming it (the name: invalid_parameter, a
// path value), a schedule missing or another tenant's 404.
func scheduleErr(err error, tenant, name string) error {
	var bad *ops.FieldError
	switch {
	case errors.Is(err, ops.ErrNotFound):
		return errorf(http.StatusNotFound, codeNotFound, "no schedule %q of tenant %q", name, tenant)
	case errors.As(err, &bad) && (bad.Field == "name" || bad.Field == "tenant"):
		return badRequest(codeInvalidParameter, "path value %s: %s", bad.Field, bad.Message)
	case errors.As(err, &bad) && bad.Field == "after":
		return badRequest(codeInvalidCursor, "cursor was not issued by this API")
	case errors.As(err, &bad):
		return badRequest(codeInvalidRequest, "field %q: %s", bad.Field, bad.Message)
	}
	return err
}

// listSchedules: GET /v1/schedules, the schedules the token sees (a tenant token its tenant's), by
// tenant and name; tenant filters, limit (1 to 500, default 100) and cursor page.
func (s *Server) listSchedules(ctx context.Context, call *Call) (int, any, error) {
	query, err := listParams{filters: []string{"tenant", "cursor"}, limit: 100, maxLimit: ops.MaxLimit}.parse(call)
	if err != nil {
		return 0, nil, err
	}
	page, next, err := s.ops.Schedules(ctx, callScope(call), query.filters["tenant"], query.limit, query.filters["cursor"])
	if err != nil {
		var bad *ops.FieldError
		if errors.As(err, &bad) && bad.Field == "tenant" {
			return 0, nil, badRequest(codeInvalidParameter, "query parameter tenant: %s", bad.Message)
		}
		return 0, nil, scheduleErr(err, "", "")
	}
	return http.StatusOK, scheduleListResponse{Schedules: page, NextCursor: next}, nil
}

// getSchedule: GET /v1/schedules/{tenant}/{name}.
func (s *Server) getSchedule(ctx context.Context, call *Call) (int, any, error) {
	tenant, name := scheduleTarget(call)
	sched, err := s.ops.Schedule(ctx, callScope(call), tenant, name)
	if err != nil {
		return 0, nil, scheduleErr(err, tenant, name)
	}
	return http.StatusOK, sched, nil
}

// putSchedule: PUT /v1/schedules/{tenant}/{name} (the tenant's admin tokens, system tokens); 201
// when new, 200 when replaced. A bad field is 400 naming it, and nothing is stored.
func (s *Server) putSchedule(ctx context.Context, call *Call) (int, any, error) {
	tenant, name := scheduleTarget(call)
	if !callScope(call).Sees(tenant) {
		return 0, nil, errNoTenant(tenant)
	}
	if err := requireScheduleAdmin(call); err != nil {
		return 0, nil, err
	}
	var req scheduleRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	const maxSeconds = int64(schedule.MaxInterval / time.Second)
	if req.IntervalSeconds < 0 || req.IntervalSeconds > maxSeconds {
		return 0, nil, badRequest(codeInvalidRequest, "field %q: %s: want whole seconds from 1 to %d", "interval_seconds", strconv.FormatInt(req.IntervalSeconds, 10), maxSeconds)
	}
	def := schedule.Definition{
		Tenant: tenant, Name: name, Connector: req.Connector, Args: req.Args, Cron: req.Cron,
		Interval: time.Duration(req.IntervalSeconds) * time.Second, Missed: schedule.Missed(req.Missed),
		Disabled: req.Enabled != nil && !*req.Enabled,
	}
	sched, created, err := s.ops.PutSchedule(ctx, callScope(call), def, call.Actor(""))
	if err != nil {
		return 0, nil, scheduleErr(err, tenant, name)
	}
	if created {
		return http.StatusCreated, sched, nil
	}
	return http.StatusOK, sched, nil
}

// deleteSchedule: DELETE /v1/schedules/{tenant}/{name} (the tenant's admin tokens, system
// tokens): no tick of it is enqueued after.
func (s *Server) deleteSchedule(ctx context.Context, call *Call) (int, any, error) {
	tenant, name := scheduleTarget(call)
	if !callScope(call).Sees(tenant) {
		return 0, nil, scheduleErr(ops.ErrNotFound, tenant, name)
	}
	if err := requireScheduleAdmin(call); err != nil {
		return 0, nil, err
	}
	if err := s.ops.DeleteSchedule(ctx, callScope(call), tenant, name); err != nil {
		return 0, nil, scheduleErr(err, tenant, name)
	}
	return http.StatusOK, map[string]any{"tenant": tenant, "name": name, "deleted": true}, nil
}
