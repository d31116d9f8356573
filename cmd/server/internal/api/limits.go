package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// Operators' connector limits (effects.Client.SetLimit and the rest), shared by every tenant like
// the connectors: any token reads them, a system token changes them. The functions exported here
// are the one path of both the API and the server's CLI (`server connectors limit`): the same
// checks, the same errors naming the field, the same JSON.

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

// Limit is the limit f describes, unchecked (CheckLimit checks it).
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

// LimitFieldError is a value of an operator's limit that cannot be stored: Field is its name in
// the API ("name" for the connector, then "rate", "per_ms", "burst", "max_in_flight",
// "break_after", "break_for_ms", "reason"; "" for the limit as a whole). The API answers it with
// 400, the CLI with exit status 2 naming its flag.
type LimitFieldError struct {
	Field, Problem string
}

func (e *LimitFieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// CheckLimitName checks the connector name of an operator's limit: 1 to 200 bytes of text
// Postgres can store. The error is a *LimitFieldError for "name".
func CheckLimitName(connector string) error {
	if connector == "" || len(connector) > maxNameLen {
		return &LimitFieldError{Field: "name", Problem: fmt.Sprintf("must be 1 to %d bytes", maxNameLen)}
	}
	if err := jsonx.CheckText(connector); err != nil {
		return &LimitFieldError{Field: "name", Problem: err.Error()}
	}
	return nil
}

// CheckLimit checks an operator's limit of connector before anything is stored, and returns it
// with its defaults filled in. The ranges are effects.Limit.WithDefaults's, whose error names the
// field; reason is text of at most 2000 bytes. The error is a
// *LimitFieldError.
func CheckLimit(connector string, limit effects.Limit, reason string) (effects.Limit, error) {
	if err := CheckLimitName(connector); err != nil {
		return limit, err
	}
	withDefaults, err := limit.WithDefaults()
	var bad *effects.LimitError
	if errors.As(err, &bad) {
		return limit, &LimitFieldError{Field: limitWireFields[bad.Field], Problem: err.Error()}
	}
	if len(reason) > maxReasonLen {
		return limit, &LimitFieldError{Field: "reason", Problem: fmt.Sprintf("limited to %d bytes", maxReasonLen)}
	}
	if err := jsonx.CheckText(reason); err != nil {
		return limit, &LimitFieldError{Field: "reason", Problem: err.Error()}
	}
	return withDefaults, nil
}

// limitWireFields names effects.Limit's fields (effects.LimitError.Field) as the API does.
var limitWireFields = map[string]string{
	"Rate": "rate", "Per": "per_ms", "Burst": "burst", "MaxInFlight": "max_in_flight",
	"BreakAfter": "break_after", "BreakFor": "break_for_ms",
}

// limitError names the field of an effects.ErrInvalidLimit (what CheckLimit let through); other
// errors are returned as they are.
func limitError(err error) error {
	if !errors.Is(err, effects.ErrInvalidLimit) {
		return err
	}
	var text *jsonx.Error
	if errors.As(err, &text) {
		field := text.Path
		if field == "connector" {
			field = "name"
		}
		return &LimitFieldError{Field: field, Problem: text.Problem}
	}
	return &LimitFieldError{Problem: strings.TrimPrefix(err.Error(), "effects: ")}
}

// SetLimit checks an operator's limit of connector (CheckLimit) and stores it by actor, for reason
// (effects.Client.SetLimit): every reactor applies it within moments. It returns the stored
// setting. Errors: a *LimitFieldError, nothing stored.
func SetLimit(ctx context.Context, client *effects.Client, connector string, limit effects.Limit, actor, reason string) (*LimitJSON, error) {
	if _, err := CheckLimit(connector, limit, reason); err != nil {
		return nil, err
	}
	set, err := client.SetLimit(ctx, connector, limit, actor, reason)
	if err != nil {
		return nil, limitError(err)
	}
	out := limitToJSON(*set)
	return &out, nil
}

// ClearLimit deletes the operator's limit of connector (effects.Client.ClearLimit): its own limit
// applies again. It reports whether there was one. Errors: a *LimitFieldError for the name.
func ClearLimit(ctx context.Context, client *effects.Client, connector string) (bool, error) {
	if err := CheckLimitName(connector); err != nil {
		return false, err
	}
	cleared, err := client.ClearLimit(ctx, connector)
	return cleared, limitError(err)
}

// ResetLimit closes connector's circuits and ends its pauses (effects.Client.ResetLimit). It
// reports whether anything was paused, open or counting failures. Errors: a *LimitFieldError for
// the name.
func ResetLimit(ctx context.Context, client *effects.Client, connector string) (bool, error) {
	if err := CheckLimitName(connector); err != nil {
		return false, err
	}
	changed, err := client.ResetLimit(ctx, connector)
	return changed, limitError(err)
}

// Limits returns every operator's limit and the state of every limit key as a caller of tenant
// sees them: a tenant sees the keys shared by every tenant and its own, never another tenant's;
// "" (a system token, the CLI) sees every key.
func Limits(ctx context.Context, client *effects.Client, tenant string) (*LimitsJSON, error) {
	limits, states, err := readLimits(ctx, client, tenant, func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	return &LimitsJSON{Limits: limits, States: states}, nil
}

// ConnectorLimit is Limits of one connector: its operator's limit (nil when it has none) and its
// keys. Errors: a *LimitFieldError for the name.
func ConnectorLimit(ctx context.Context, client *effects.Client, tenant, connector string) (*ConnectorLimitJSON, error) {
	if err := CheckLimitName(connector); err != nil {
		return nil, err
	}
	limits, states, err := readLimits(ctx, client, tenant, func(name string) bool { return name == connector })
	if err != nil {
		return nil, err
	}
	out := &ConnectorLimitJSON{States: states}
	if len(limits) > 0 {
		out.Limit = &limits[0]
	}
	return out, nil
}

// readLimits reads the operators' limits and the limit keys of the connectors keep keeps, the keys
// as a caller of tenant sees them (Limits). The lists are never nil.
func readLimits(ctx context.Context, client *effects.Client, tenant string, keep func(connector string) bool) ([]LimitJSON, []LimitStateJSON, error) {
	settings, err := client.LimitSettings(ctx)
	if err != nil {
		return nil, nil, err
	}
	states, err := client.LimitStates(ctx)
	if err != nil {
		return nil, nil, err
	}
	limits := []LimitJSON{}
	for _, s := range settings {
		if keep(s.Connector) {
			limits = append(limits, limitToJSON(s))
		}
	}
	seen := []LimitStateJSON{}
	for _, s := range states {
		if keep(s.Connector) && (tenant == "" || s.TenantID == "" || s.TenantID == tenant) {
			seen = append(seen, LimitStateJSON{
				Connector: s.Connector, TenantID: s.TenantID, NextAt: s.NextAt, PausedUntil: s.PausedUntil,
				Failures: s.Failures, Circuit: s.Circuit, OpenUntil: s.OpenUntil, InFlight: s.InFlight, Waiting: s.Waiting,
			})
		}
	}
	return limits, seen, nil
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

// limitCallError answers a *LimitFieldError with 400 naming the field: a path value for the name,
// a body field otherwise.
func limitCallError(err error) error {
	var bad *LimitFieldError
	switch {
	case !errors.As(err, &bad):
		return err
	case bad.Field == "name":
		return badRequest(CodeInvalidParameter, "path value name: %s", bad.Problem)
	case bad.Field == "":
		return badRequest(CodeInvalidRequest, "%s", bad.Problem)
	default:
		return badRequest(CodeInvalidRequest, "field %q: %s", bad.Field, bad.Problem)
	}
}

// listLimits: GET /v1/limits, every operator's limit and the state of every limit key (a tenant
// token sees the keys shared by every tenant and its own).
func (s *Server) listLimits(ctx context.Context, call *Call) (int, any, error) {
	if _, err := (listParams{}).parse(call); err != nil {
		return 0, nil, err
	}
	out, err := Limits(ctx, s.effects, call.Tenant())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

// getLimit: GET /v1/connectors/{name}/limit, the operator's limit of a connector and the state of
// its keys; 404 when it has none.
func (s *Server) getLimit(ctx context.Context, call *Call) (int, any, error) {
	name := call.Request.PathValue("name")
	out, err := ConnectorLimit(ctx, s.effects, call.Tenant(), name)
	if err != nil {
		return 0, nil, limitCallError(err)
	}
	if out.Limit == nil {
		return 0, nil, Errorf(http.StatusNotFound, CodeNotFound,
			"no operator's limit for connector %q: its own applies (GET /v1/limits shows the state of every limit key)", name)
	}
	return http.StatusOK, out, nil
}

// The changes run in effects.Client's own statements (HandleAction): the request holds no
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
	set, err := SetLimit(ctx, s.effects, call.Request.PathValue("name"), req.Limit(), call.Actor(""), req.Reason)
	if err != nil {
		return 0, nil, limitCallError(err)
	}
	return http.StatusOK, set, nil
}

// deleteLimit: DELETE /v1/connectors/{name}/limit; 404 when the connector has no operator's limit.
func (s *Server) deleteLimit(ctx context.Context, call *Call) (int, any, error) {
	if err := requireSystem(call, "connector limits"); err != nil {
		return 0, nil, err
	}
	name := call.Request.PathValue("name")
	cleared, err := ClearLimit(ctx, s.effects, name)
	if err != nil {
		return 0, nil, limitCallError(err)
	}
	if !cleared {
		return 0, nil, Errorf(http.StatusNotFound, CodeNotFound, "no operator's limit for connector %q", name)
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
	changed, err := ResetLimit(ctx, s.effects, name)
	if err != nil {
		return 0, nil, limitCallError(err)
	}
	return http.StatusOK, map[string]any{"connector": name, "reset": changed}, nil
}
