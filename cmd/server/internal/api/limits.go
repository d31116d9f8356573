package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
)

// Operators' connector limits (effects.Client.SetLimit and the rest), shared by every tenant like
// the connectors: any token reads them, a system token changes them. The reads and changes are
// ops.Ops's, the one path of both the API and the server's CLI (`server connectors limit`): the
// same checks, the same errors naming the field; the JSON is this file's, for both.

// LimitFields is an operator's limit on the wire, durations in milliseconds: the body of PUT
// /v1/connectors/{name}/limit, and most of what the API answers (LimitJSON). Every field is
// optional; zero is no rate, no cap, no circuit breaker, or the default (per_ms 1000, burst the
// rate, break_for_ms 30000). It embeds nothing: the request decoder names a field of the wrong type
// by its path in the Go type.
type LimitFields struct {
	Rate        int    `json:"rate"`
	PerMS       int64  `json:"per_ms"`
	Burst       int    `json:"burst"`
	MaxInFlight int    `json:"max_in_flight"`
	PerTenant   bool   `json:"per_tenant"`
	BreakAfter  int    `json:"break_after"`
	BreakForMS  int64  `json:"break_for_ms"`
	Reason      string `json:"reason,omitempty"`
}

// Limit is the limit f describes, unchecked (ops.CheckLimit checks it).
func (f LimitFields) Limit() effects.Limit {
	return effects.Limit{
		Rate: f.Rate, Per: msDuration(f.PerMS), Burst: f.Burst, MaxInFlight: f.MaxInFlight,
		PerTenant: f.PerTenant, BreakAfter: f.BreakAfter, BreakFor: msDuration(f.BreakForMS),
	}
}

// msDuration is ms milliseconds, saturated rather than wrapped around: a value beyond the range of
// a time.Duration stays out of every limit's range.
func msDuration(ms int64) time.Duration {
	const most = math.MaxInt64 / int64(time.Millisecond)
	return time.Duration(max(-most, min(ms, most))) * time.Millisecond
}

// LimitJSON is an operator's limit of a connector on the wire, its defaults filled in: what the
// API answers and what `server connectors limit show -o json` prints.
type LimitJSON struct {
	Connector string `json:"connector"`
	LimitFields
	SetBy string    `json:"set_by"`
	SetAt time.Time `json:"set_at"`
}

// LimitStateJSON is the state of one limit key on the wire (effects.LimitState): tenant_id is ""
// for a key shared by every tenant.
type LimitStateJSON struct {
	Connector   string     `json:"connector"`
	TenantID    string     `json:"tenant_id"`
	NextAt      *time.Time `json:"next_at,omitempty"`
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	Failures    int        `json:"failures"`
	Circuit     string     `json:"circuit"`
	OpenUntil   *time.Time `json:"open_until,omitempty"`
	InFlight    int        `json:"in_flight"`
	Waiting     int        `json:"waiting"`
}

// LimitsJSON is the answer to GET /v1/limits: every operator's limit, and the state of every limit
// key the caller sees.
type LimitsJSON struct {
	Limits []LimitJSON      `json:"limits"`
	States []LimitStateJSON `json:"states"`
}

// ConnectorLimitJSON is the answer to GET /v1/connectors/{name}/limit: the operator's limit of the
// connector (nil when it has none) and the state of its limit keys the caller sees.
type ConnectorLimitJSON struct {
	Limit  *LimitJSON       `json:"limit"`
	States []LimitStateJSON `json:"states"`
}

// LimitsToJSON is every operator's limit and the state of limit keys (ops.Ops.Limits) on the
// wire: the answer to GET /v1/limits, and what `server connectors limit show -o json` prints.
func LimitsToJSON(settings []effects.LimitSetting, states []effects.LimitState) *LimitsJSON {
	out := &LimitsJSON{Limits: make([]LimitJSON, len(settings)), States: limitStatesToJSON(states)}
	for i, setting := range settings {
		out.Limits[i] = limitToJSON(setting)
	}
	return out
}

// ConnectorLimitToJSON is one connector's operator's limit (nil when it has none) and the state of
// its limit keys (ops.Ops.ConnectorLimit) on the wire: the answer to GET
// /v1/connectors/{name}/limit, and what `server connectors limit show NAME -o json` prints.
func ConnectorLimitToJSON(setting *effects.LimitSetting, states []effects.LimitState) *ConnectorLimitJSON {
	out := &ConnectorLimitJSON{States: limitStatesToJSON(states)}
	if setting != nil {
		limit := limitToJSON(*setting)
		out.Limit = &limit
	}
	return out
}

func limitStatesToJSON(states []effects.LimitState) []LimitStateJSON {
	out := make([]LimitStateJSON, len(states))
	for i, s := range states {
		out[i] = LimitStateJSON{
			Connector: s.Connector, TenantID: s.TenantID, NextAt: s.NextAt, PausedUntil: s.PausedUntil,
			Failures: s.Failures, Circuit: s.Circuit, OpenUntil: s.OpenUntil, InFlight: s.InFlight, Waiting: s.Waiting,
		}
	}
	return out
}

func limitToJSON(s effects.LimitSetting) LimitJSON {
	l := s.Limit
	return LimitJSON{
		Connector: s.Connector, SetBy: s.SetBy, SetAt: s.SetAt,
		LimitFields: LimitFields{
			Rate: l.Rate, PerMS: l.Per.Milliseconds(), Burst: l.Burst, MaxInFlight: l.MaxInFlight,
			PerTenant: l.PerTenant, BreakAfter: l.BreakAfter, BreakForMS: l.BreakFor.Milliseconds(),
			Reason: s.Reason,
		},
	}
}

// fieldError answers an *ops.FieldError with 400 naming the field: a path value for the name,
// a body field otherwise. Other errors pass through.
func fieldError(err error) error {
	var bad *ops.FieldError
	switch {
	case !errors.As(err, &bad):
		return err
	case bad.Field == "name":
		return badRequest(codeInvalidParameter, "path value name: %s", bad.Message)
	case bad.Field == "":
		return badRequest(codeInvalidRequest, "%s", bad.Message)
	default:
		return badRequest(codeInvalidRequest, "field %q: %s", bad.Field, bad.Message)
	}
}

// callScope is what the call's token sees: its tenant, or every tenant for a system token.
func callScope(call *Call) ops.Scope {
	if tenant := call.Tenant(); tenant != "" {
		return ops.Scope{Tenants: []string{tenant}}
	}
	return ops.Scope{}
}

// listLimits: GET /v1/limits, every operator's limit and the state of every limit key (a tenant
// token sees the keys shared by every tenant and its own).
func (s *Server) listLimits(ctx context.Context, call *Call) (int, any, error) {
	if _, err := (listParams{}).parse(call); err != nil {
		return 0, nil, err
	}
	settings, states, err := s.ops.Limits(ctx, callScope(call))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, LimitsToJSON(settings, states), nil
}

// getLimit: GET /v1/connectors/{name}/limit, the operator's limit of a connector and the state of
// its keys; 404 when it has none.
func (s *Server) getLimit(ctx context.Context, call *Call) (int, any, error) {
	name := call.Request.PathValue("name")
	setting, states, err := s.ops.ConnectorLimit(ctx, callScope(call), name)
	if err != nil {
		return 0, nil, fieldError(err)
	}
	if setting == nil {
		return 0, nil, errorf(http.StatusNotFound, codeNotFound,
			"no operator's limit for connector %q: its own applies (GET /v1/limits shows the state of every limit key)", name)
	}
	return http.StatusOK, ConnectorLimitToJSON(setting, states), nil
}

// The changes run in effects.Client's own statements (handleAction): the request holds no
// connection meanwhile, and each is idempotent by itself (a set replaces, a clear or a reset done
// twice finds nothing the second time).

// putLimit: PUT /v1/connectors/{name}/limit, an operator's limit replacing the connector's own;
// 200 with the stored setting, its defaults filled in.
func (s *Server) putLimit(ctx context.Context, call *Call) (int, any, error) {
	if err := requireSystem(call, "connector limits"); err != nil {
		return 0, nil, err
	}
	var req LimitFields
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	set, err := s.ops.SetLimitByName(ctx, call.Request.PathValue("name"), req.Limit(), call.Actor(""), req.Reason)
	if err != nil {
		return 0, nil, fieldError(err)
	}
	return http.StatusOK, limitToJSON(*set), nil
}

// deleteLimit: DELETE /v1/connectors/{name}/limit; 404 when the connector has no operator's limit.
func (s *Server) deleteLimit(ctx context.Context, call *Call) (int, any, error) {
	if err := requireSystem(call, "connector limits"); err != nil {
		return 0, nil, err
	}
	name := call.Request.PathValue("name")
	cleared, err := s.ops.ClearLimitByName(ctx, name)
	if err != nil {
		return 0, nil, fieldError(err)
	}
	if !cleared {
		return 0, nil, errorf(http.StatusNotFound, codeNotFound, "no operator's limit for connector %q", name)
	}
	return http.StatusOK, map[string]any{"connector": name, "cleared": true}, nil
}

// resetLimit: POST /v1/connectors/{name}/limit/reset, closes the connector's circuits and ends
// its pauses; "reset" says whether anything was paused, open or counting failures.
func (s *Server) resetLimit(ctx context.Context, call *Call) (int, any, error) {
	if err := requireSystem(call, "connector limits"); err != nil {
		return 0, nil, err
	}
	if len(call.Body) > 0 {
		if err := call.Decode(&struct{}{}); err != nil {
			return 0, nil, err
		}
	}
	name := call.Request.PathValue("name")
	changed, err := s.ops.ResetLimitByName(ctx, name)
	if err != nil {
		return 0, nil, fieldError(err)
	}
	return http.StatusOK, map[string]any{"connector": name, "reset": changed}, nil
}
