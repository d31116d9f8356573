package ops

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/reckonhq/reckon/effects"
)

// ErrSharedLimit is what changing a connector's limit in a scope of some tenants returns: limits
// are shared by every tenant, so only an operator of all tenants changes them.
var ErrSharedLimit = errors.New("limits are shared by every tenant: only an operator of all tenants may change them")

// addLimits adds to the summaries the operators' limits and the state of the limit keys in scope
// (the shared keys, and the per-tenant keys of tenants in scope).
func (o *Ops) addLimits(ctx context.Context, scope Scope, summary func(string) *ConnectorSummary) error {
	settings, err := o.effects.LimitSettings(ctx)
	if err != nil {
		return fmt.Errorf("ops: %w", err)
	}
	for _, setting := range settings {
		summary(setting.Connector).Override = &setting
	}
	states, err := o.effects.LimitStates(ctx)
	if err != nil {
		return fmt.Errorf("ops: %w", err)
	}
	for _, state := range states {
		if state.TenantID == "" || scope.Sees(state.TenantID) {
			s := summary(state.Connector)
			s.LimitStates = append(s.LimitStates, state)
		}
	}
	return nil
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

// limitFormFields names effects.Limit's fields (effects.LimitError.Field) as the form does.
var limitFormFields = map[string]string{
	"Rate": "rate", "Per": "per", "Burst": "burst", "MaxInFlight": "max_in_flight",
	"BreakAfter": "break_after", "BreakFor": "break_for",
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
	var bad *effects.LimitError
	if _, err := limit.WithDefaults(); errors.As(err, &bad) {
		return limit, &FieldError{Field: limitFormFields[bad.Field], Message: err.Error()}
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
