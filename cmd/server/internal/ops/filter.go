package ops

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/ident"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/saga"
)

// FieldError is a bad value of one field of a filter or an action (a query parameter, a form
// field, a CLI flag of the same name): the console answers it with 400, the CLI with exit status 2.
type FieldError struct {
	Field, Message string
}

// Error is the field, a colon and what is wrong with it; only the latter when Field is "" (the
// whole of a value, such as an operator's limit).
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Limits of the filters' and actions' values, in bytes.
const (
	maxNameLen   = 200  // connector, run, actor
	maxKeyLen    = 512  // idempotency_key, business_key
	maxReasonLen = 1000 // reason

	// DefaultLimit and MaxLimit bound a page of a listing.
	DefaultLimit = 50
	MaxLimit     = 500
)

// EffectFilter selects effects for Effects and PreviewResolve. The zero value of a field means
// "any".
type EffectFilter struct {
	Scope          Scope
	Tenant         string // one tenant (outside Scope: nothing matches), or "" for all in scope
	State          effects.State
	Connector      string
	IdempotencyKey string
	BusinessKey    string
	RunID          string
	TurnID         uuid.UUID // zero: any
	CreatedAfter   time.Time // zero: any; inclusive
	CreatedBefore  time.Time // zero: any; exclusive
	Limit          int       // default DefaultLimit, at most MaxLimit
	After          string    // the cursor of a previous page (its next), or ""
}

// ParseEffectFilter reads a filter (without its Scope) from v, the console's query string or the
// url.Values the CLI builds from its flags, with the names tenant, state, connector,
// idempotency_key, business_key, run, turn, created_after, created_before (RFC 3339), limit and
// after. Empty values are "any". A bad value, or a name it does not know, is a *FieldError naming
// the field.
func ParseEffectFilter(v url.Values) (EffectFilter, error) {
	var f EffectFilter
	for name, values := range v {
		if !knownEffectParams[name] {
			return f, &FieldError{Field: name, Message: "unknown filter"}
		}
		if len(values) > 1 {
			return f, &FieldError{Field: name, Message: "given more than once"}
		}
	}
	text := func(name string, max int) (string, error) {
		s := v.Get(name)
		if err := checkField(name, s, max); err != nil {
			return "", err
		}
		return s, nil
	}
	var err error
	if f.Tenant, err = text("tenant", 63); err != nil {
		return f, err
	}
	if f.Tenant != "" {
		if err := ident.ValidateTenantID(f.Tenant); err != nil {
			return f, &FieldError{Field: "tenant", Message: err.Error()}
		}
	}
	if s := v.Get("state"); s != "" {
		state, err := effects.ParseState(strings.ToUpper(s))
		if err != nil {
			return f, &FieldError{Field: "state", Message: fmt.Sprintf("%q: want one of %s", jsonx.SafeText(s), stateNames())}
		}
		f.State = state
	}
	if f.Connector, err = text("connector", maxNameLen); err != nil {
		return f, err
	}
	if f.IdempotencyKey, err = text("idempotency_key", maxKeyLen); err != nil {
		return f, err
	}
	if f.BusinessKey, err = text("business_key", maxKeyLen); err != nil {
		return f, err
	}
	if f.RunID, err = text("run", maxNameLen); err != nil {
		return f, err
	}
	if s := v.Get("turn"); s != "" {
		if f.TurnID, err = uuid.Parse(s); err != nil {
			return f, &FieldError{Field: "turn", Message: fmt.Sprintf("%q is not a UUID", jsonx.SafeText(s))}
		}
	}
	if f.CreatedAfter, err = parseTime(v, "created_after"); err != nil {
		return f, err
	}
	if f.CreatedBefore, err = parseTime(v, "created_before"); err != nil {
		return f, err
	}
	if f.Limit, err = parseLimit(v.Get("limit")); err != nil {
		return f, err
	}
	if s := v.Get("after"); s != "" {
		if _, _, err := uuidCursor(s); err != nil {
			return f, err
		}
		f.After = s
	}
	return f, nil
}

var knownEffectParams = map[string]bool{
	"tenant": true, "state": true, "connector": true, "idempotency_key": true, "business_key": true, "run": true,
	"turn": true, "created_after": true, "created_before": true, "limit": true, "after": true,
}

// stateNames lists the effect states for an error message.
func stateNames() string {
	names := make([]string, len(effects.States))
	for i, s := range effects.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func parseTime(v url.Values, name string) (time.Time, error) {
	s := v.Get(name)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() < 1 || t.Year() > 9999 {
		return time.Time{}, &FieldError{Field: name, Message: fmt.Sprintf("%q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", jsonx.SafeText(s))}
	}
	return t, nil
}

// ParsePageLimit reads a page size given as text (a query parameter, a CLI flag): "" is
// DefaultLimit, else 1 to MaxLimit; the error is a *FieldError for "limit".
func ParsePageLimit(s string) (int, error) { return parseLimit(s) }

// parseLimit reads a page size: "" is DefaultLimit, else 1 to MaxLimit.
func parseLimit(s string) (int, error) {
	if s == "" {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxLimit {
		return 0, &FieldError{Field: "limit", Message: fmt.Sprintf("%q: want 1 to %d", jsonx.SafeText(s), MaxLimit)}
	}
	return n, nil
}

// checkLimit applies the defaults and bounds of a page size given in code.
func checkLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultLimit, nil
	case n < 0 || n > MaxLimit:
		return 0, &FieldError{Field: "limit", Message: fmt.Sprintf("%d: want 1 to %d", n, MaxLimit)}
	}
	return n, nil
}

// checkText refuses what Postgres cannot store in text: invalid UTF-8 and NUL.
func checkText(s string) error { return jsonx.CheckText(s) }

// ResolveTargets are the decisions an operator may take on a STUCK effect: CONFIRMED (it
// happened), FAILED (it did not) or PENDING (dispatch it again).
var ResolveTargets = []effects.State{effects.StateConfirmed, effects.StateFailed, effects.StatePending}

// ParseResolveTarget reads a resolve decision, in any case; another is a *FieldError on "to".
func ParseResolveTarget(s string) (effects.State, error) {
	to := effects.State(strings.ToUpper(s))
	if !slices.Contains(ResolveTargets, to) {
		return "", &FieldError{Field: "to", Message: fmt.Sprintf("%q: want CONFIRMED, FAILED or PENDING", jsonx.SafeText(s))}
	}
	return to, nil
}

// ParseDecision reads an operator's decision on a STUCK saga; another is a *FieldError on
// "decision".
func ParseDecision(s string) (saga.Decision, error) {
	switch d := saga.Decision(s); d {
	case saga.RetryCompensation, saga.MarkCompensated:
		return d, nil
	}
	return "", &FieldError{Field: "decision", Message: fmt.Sprintf("%q: want %s or %s", jsonx.SafeText(s), saga.RetryCompensation, saga.MarkCompensated)}
}

// CheckAction checks an operator action's actor and reason (required, UTF-8 without NUL,
// bounded): a *FieldError on "actor" or "reason". Every action checks them; the CLI also calls it
// before opening the database.
func CheckAction(actor, reason string) error {
	if strings.TrimSpace(actor) == "" {
		return &FieldError{Field: "actor", Message: "required"}
	}
	if err := checkField("actor", actor, maxNameLen); err != nil {
		return err
	}
	if strings.TrimSpace(reason) == "" {
		return &FieldError{Field: "reason", Message: "required: it goes to the audit trail"}
	}
	return checkField("reason", reason, maxReasonLen)
}
