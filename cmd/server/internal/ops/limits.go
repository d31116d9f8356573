package ops

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// ErrSharedLimit is what changing a connector's limit in a scope of some tenants returns: limits
// are shared by every tenant, so only an operator of all tenants changes them.
var ErrSharedLimit = errors.New("limits are shared by every tenant: only an operator of all tenants may change them")

// addLimits adds to the summaries the operators' limits and the state of the limit keys in scope
// (the shared keys, and the per-tenant keys of tenants in scope).
func (o *Ops) addLimits(ctx context.Context, scope Scope, summary func(string) *ConnectorSummary) error {
	settings, states, err := o.Limits(ctx, scope)
	if err != nil {
		return fmt.Errorf("ops: %w", err)
	}
	for _, setting := range settings {
		summary(setting.Connector).Override = &setting
	}
	for _, state := range states {
		s := summary(state.Connector)
		s.LimitStates = append(s.LimitStates, state)
	}
	return nil
}

// readLimits reads the operators' limits and the limit keys of the connectors keep keeps, the keys
// in scope: the keys shared by every tenant, and the per-tenant keys of tenants in scope. The
// lists are never nil.
func (o *Ops) readLimits(ctx context.Context, scope Scope, keep func(connector string) bool) ([]effects.LimitSetting, []effects.LimitState, error) {
	settings, err := o.effects.LimitSettings(ctx)
	if err != nil {
		return nil, nil, err
	}
	states, err := o.effects.LimitStates(ctx)
	if err != nil {
		return nil, nil, err
	}
	kept := []effects.LimitSetting{}
	for _, setting := range settings {
		if keep(setting.Connector) {
			kept = append(kept, setting)
		}
	}
	seen := []effects.LimitState{}
	for _, state := range states {
		if keep(state.Connector) && (state.TenantID == "" || scope.Sees(state.TenantID)) {
			seen = append(seen, state)
		}
	}
	return kept, seen, nil
}

// Limits returns every operator's limit and the state of every limit key in scope (the keys
// shared by every tenant and those of the tenants in scope): what GET /v1/limits and `server
// connectors limit show` answer. The lists are never nil.
func (o *Ops) Limits(ctx context.Context, scope Scope) ([]effects.LimitSetting, []effects.LimitState, error) {
	return o.readLimits(ctx, scope, func(string) bool { return true })
}

// ConnectorLimit is Limits of one connector: its operator's limit (nil when it has none) and its
// keys in scope. Errors: a *FieldError for the name (CheckLimitName).
func (o *Ops) ConnectorLimit(ctx context.Context, scope Scope, connector string) (*effects.LimitSetting, []effects.LimitState, error) {
	if err := CheckLimitName(connector); err != nil {
		return nil, nil, err
	}
	settings, states, err := o.readLimits(ctx, scope, func(name string) bool { return name == connector })
	if err != nil || len(settings) == 0 {
		return nil, states, err
	}
	return &settings[0], states, nil
}

// Connector returns the connector name as Connectors lists it. Errors: ErrNotFound when it does
// not list it.
func (o *Ops) Connector(ctx context.Context, scope Scope, name string) (*ConnectorSummary, error) {
	list, err := o.Connectors(ctx, scope)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i], nil
		}
	}
	return nil, ErrNotFound
}

// limitField is a field of the limit form: its name and where its value goes.
type limitField struct {
	name     string
	duration bool
	set      func(l *effects.Limit, value int64)
}

var limitFields = []limitField{
	{"rate", false, func(l *effects.Limit, v int64) { l.Rate = int(v) }},
	{"per", true, func(l *effects.Limit, v int64) { l.Per = time.Duration(v) }},
	{"burst", false, func(l *effects.Limit, v int64) { l.Burst = int(v) }},
	{"max_in_flight", false, func(l *effects.Limit, v int64) { l.MaxInFlight = int(v) }},
	{"break_after", false, func(l *effects.Limit, v int64) { l.BreakAfter = int(v) }},
	{"break_for", true, func(l *effects.Limit, v int64) { l.BreakFor = time.Duration(v) }},
}

// limitFormFields names effects.Limit's fields (effects.LimitError.Field) as the console's form
// does, limitWireFields as the HTTP API does (and the CLI, which names each by its flag).
var (
	limitFormFields = map[string]string{
		"Rate": "rate", "Per": "per", "Burst": "burst", "MaxInFlight": "max_in_flight",
		"BreakAfter": "break_after", "BreakFor": "break_for",
	}
	limitWireFields = map[string]string{
		"Rate": "rate", "Per": "per_ms", "Burst": "burst", "MaxInFlight": "max_in_flight",
		"BreakAfter": "break_after", "BreakFor": "break_for_ms",
	}
)

// checkLimitRanges checks limit's ranges (effects.Limit.WithDefaults) and returns it with its
// defaults filled in; a value out of range is a *FieldError naming its field as names does.
func checkLimitRanges(limit effects.Limit, names map[string]string) (effects.Limit, error) {
	withDefaults, err := limit.WithDefaults()
	var bad *effects.LimitError
	if errors.As(err, &bad) {
		return limit, &FieldError{Field: names[bad.Field], Message: err.Error()}
	}
	return withDefaults, nil
}

// ParseLimit reads a limit from the values rate, burst, max_in_flight, break_after (whole numbers;
// empty: 0), per and break_for (durations such as "1s" or "500ms", in whole milliseconds; empty:
// the default) and per_tenant ("on", or absent). A bad value is a *FieldError naming its field,
// its range that of effects.Limit.
func ParseLimit(values url.Values) (effects.Limit, error) {
	var limit effects.Limit
	for _, f := range limitFields {
		raw := values.Get(f.name)
		if raw == "" {
			continue
		}
		var value int64
		if f.duration {
			d, err := time.ParseDuration(raw)
			if err != nil {
				return limit, &FieldError{Field: f.name, Message: fmt.Sprintf("%q is not a duration such as 1s, 500ms or 1m", raw)}
			}
			if d%time.Millisecond != 0 {
				return limit, &FieldError{Field: f.name, Message: fmt.Sprintf("%v: want whole milliseconds", d)}
			}
			value = int64(d)
		} else {
			n, err := strconv.ParseInt(raw, 10, 32)
			if err != nil {
				return limit, &FieldError{Field: f.name, Message: fmt.Sprintf("%q is not a whole number", raw)}
			}
			value = n
		}
		f.set(&limit, value)
	}
	if _, err := checkLimitRanges(limit, limitFormFields); err != nil {
		return limit, err
	}
	switch values.Get("per_tenant") {
	case "":
	case "on":
		limit.PerTenant = true
	default:
		return limit, &FieldError{Field: "per_tenant", Message: `want "on" (checked) or nothing`}
	}
	return limit, nil
}

// SetLimit sets the operator's limit of connector name (one Connectors lists), which replaces its
// own in every reactor within moments; actor is recorded as "operator:{actor}", with reason.
// Errors: ErrSharedLimit for a scope of some tenants, a *FieldError for a bad actor, reason or
// limit, ErrNotFound for a connector not listed; nothing changes then.
func (o *Ops) SetLimit(ctx context.Context, scope Scope, name string, limit effects.Limit, actor, reason string) (*effects.LimitSetting, error) {
	if scope.Tenants != nil {
		return nil, ErrSharedLimit
	}
	if err := CheckAction(actor, reason); err != nil {
		return nil, err
	}
	if err := o.checkLimitTarget(ctx, scope, name); err != nil {
		return nil, err
	}
	setting, err := o.effects.SetLimit(ctx, name, limit, "operator:"+actor, reason)
	if errors.Is(err, effects.ErrInvalidLimit) {
		return nil, &FieldError{Field: "limit", Message: err.Error()}
	}
	return setting, err
}

// ClearLimit deletes the operator's limit of connector name: its own applies again. It reports
// whether there was one. Errors as SetLimit's. The effects package keeps no record of who cleared
// it.
func (o *Ops) ClearLimit(ctx context.Context, scope Scope, name string) (bool, error) {
	if err := o.checkLimitTarget(ctx, scope, name); err != nil {
		return false, err
	}
	return o.effects.ClearLimit(ctx, name)
}

// ResetLimit closes the circuits of connector name and ends its pauses, every tenant's. It reports
// whether anything was paused, open or counting failures. Errors as SetLimit's. The effects
// package keeps no record of who reset it.
func (o *Ops) ResetLimit(ctx context.Context, scope Scope, name string) (bool, error) {
	if err := o.checkLimitTarget(ctx, scope, name); err != nil {
		return false, err
	}
	return o.effects.ResetLimit(ctx, name)
}

// checkLimitTarget refuses a change of a connector's limits in a scope of some tenants, or of a
// connector Connectors does not list.
func (o *Ops) checkLimitTarget(ctx context.Context, scope Scope, name string) error {
	if scope.Tenants != nil {
		return ErrSharedLimit
	}
	if err := checkText(name); err != nil {
		return &FieldError{Field: "connector", Message: err.Error()}
	}
	_, err := o.Connector(ctx, scope, name)
	return err
}

// The changes of the HTTP API and the server's CLI, made by an operator of every tenant (a system
// token, the CLI) and named as on the wire: they take any connector name, one this server knows or
// not (a limit may come before its connector, or be for a Go connector of the reactors), check the
// limit with CheckLimit, and record actor as it is given. Each runs in effects.Client's own
// statements and is idempotent by itself (a set replaces, a clear or a reset done twice finds
// nothing the second time).

// maxLimitReasonLen bounds the reason of an operator's limit set by name, in bytes.
const maxLimitReasonLen = 2000

// CheckLimitName checks the connector name of an operator's limit: 1 to 200 bytes of text
// Postgres can store. The error is a *FieldError for "name".
func CheckLimitName(connector string) error {
	if connector == "" || len(connector) > maxNameLen {
		return &FieldError{Field: "name", Message: fmt.Sprintf("must be 1 to %d bytes", maxNameLen)}
	}
	if err := checkText(connector); err != nil {
		return &FieldError{Field: "name", Message: err.Error()}
	}
	return nil
}

// CheckLimit checks an operator's limit of connector before anything is stored, and returns it
// with its defaults filled in. The ranges are effects.Limit.WithDefaults's; reason is text of at
// most 2000 bytes. The error is a *FieldError naming the field as the HTTP API does ("name",
// "rate", "per_ms", "burst", "max_in_flight", "break_after", "break_for_ms", "reason").
func CheckLimit(connector string, limit effects.Limit, reason string) (effects.Limit, error) {
	if err := CheckLimitName(connector); err != nil {
		return limit, err
	}
	withDefaults, err := checkLimitRanges(limit, limitWireFields)
	if err != nil {
		return limit, err
	}
	if len(reason) > maxLimitReasonLen {
		return limit, &FieldError{Field: "reason", Message: fmt.Sprintf("limited to %d bytes", maxLimitReasonLen)}
	}
	if err := checkText(reason); err != nil {
		return limit, &FieldError{Field: "reason", Message: err.Error()}
	}
	return withDefaults, nil
}

// SetLimitByName checks an operator's limit of connector (CheckLimit) and stores it by actor, for
// reason (effects.Client.SetLimit): every reactor applies it within moments. It returns the stored
// setting. Errors: a *FieldError, nothing stored.
func (o *Ops) SetLimitByName(ctx context.Context, connector string, limit effects.Limit, actor, reason string) (*effects.LimitSetting, error) {
	if _, err := CheckLimit(connector, limit, reason); err != nil {
		return nil, err
	}
	set, err := o.effects.SetLimit(ctx, connector, limit, actor, reason)
	return set, wireLimitError(err)
}

// ClearLimitByName deletes the operator's limit of connector (effects.Client.ClearLimit): its own
// limit applies again. It reports whether there was one. Errors: a *FieldError for the name.
func (o *Ops) ClearLimitByName(ctx context.Context, connector string) (bool, error) {
	if err := CheckLimitName(connector); err != nil {
		return false, err
	}
	cleared, err := o.effects.ClearLimit(ctx, connector)
	return cleared, wireLimitError(err)
}

// ResetLimitByName closes connector's circuits and ends its pauses (effects.Client.ResetLimit). It
// reports whether anything was paused, open or counting failures. Errors: a *FieldError for the
// name.
func (o *Ops) ResetLimitByName(ctx context.Context, connector string) (bool, error) {
	if err := CheckLimitName(connector); err != nil {
		return false, err
	}
	changed, err := o.effects.ResetLimit(ctx, connector)
	return changed, wireLimitError(err)
}

// wireLimitError makes an effects.ErrInvalidLimit (what CheckLimit let through) a *FieldError
// named as the HTTP API does ("" for the limit as a whole); other errors are returned as they are.
func wireLimitError(err error) error {
	if !errors.Is(err, effects.ErrInvalidLimit) {
		return err
	}
	var text *jsonx.Error
	if errors.As(err, &text) {
		field := text.Path
		if field == "connector" {
			field = "name"
		}
		return &FieldError{Field: field, Message: text.Problem}
	}
	return &FieldError{Message: strings.TrimPrefix(err.Error(), "effects: ")}
}
