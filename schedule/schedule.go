package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/ident"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// Missed is a schedule's policy for the ticks that came due while no scheduler could enqueue
// them (package doc, "Missed ticks").
type Missed string

// The missed-tick policies.
const (
	// Skip enqueues the latest due tick only and drops the earlier ones.
	Skip Missed = "skip"
	// CatchUp enqueues every missed tick of the last CatchUpWindow, at most the latest CatchUpMax,
	// oldest first.
	CatchUp Missed = "catch_up"
)

// The bounds of CatchUp, and of the ticks one round enqueues for one schedule.
const (
	CatchUpWindow = 24 * time.Hour
	CatchUpMax    = 1000
	CatchUpBatch  = 100
)

// MinInterval and MaxInterval bound a schedule's interval.
const (
	MinInterval = time.Second
	MaxInterval = 366 * 24 * time.Hour
)

// maxNameLen bounds a schedule's name, in bytes.
const maxNameLen = 200

// Definition is what a schedule's maker says: the rest of a Schedule is the scheduler's.
type Definition struct {
	// Tenant is the tenant whose effects the schedule enqueues. Required.
	Tenant string
	// Name identifies the schedule within its tenant: 1 to 200 bytes of ident.NameRule. Required.
	Name string
	// Connector is the connector of the effects. Required: one the registry knows and makes
	// available to Tenant.
	Connector string
	// Args are the effects' args, a JSON document. Default {}.
	Args json.RawMessage
	// Cron is a standard 5-field cron expression or a descriptor (@hourly …), optionally prefixed
	// CRON_TZ=<zone>. Exactly one of Cron and Interval.
	Cron string
	// Interval ticks at each multiple of it since the Unix epoch: whole seconds, from MinInterval
	// to MaxInterval. Exactly one of Cron and Interval.
	Interval time.Duration
	// Missed is the missed-tick policy. Default Skip.
	Missed Missed
	// Disabled stops the schedule's ticks. Default: enabled.
	Disabled bool
}

// Schedule is a stored schedule.
type Schedule struct {
	Definition
	// NextTick is the next tick to enqueue: due once it is past.
	NextTick time.Time
	// LastTick and LastEffectID are the latest tick enqueued and its effect; nil before the first.
	LastTick     *time.Time
	LastEffectID *uuid.UUID
	// LastError is why the latest round could not enqueue a due tick; "" when it could.
	LastError            string
	CreatedAt, UpdatedAt time.Time
	CreatedBy, UpdatedBy string
}

// Spec is the schedule's timing as text: the cron expression, or "every <interval>".
func (s *Definition) Spec() string {
	if s.Cron != "" {
		return s.Cron
	}
	return "every " + s.Interval.String()
}

// ErrInvalid is wrapped by every *Error.
var ErrInvalid = errors.New("schedule: invalid schedule")

// ErrNotFound is what Get and Delete return for a schedule that does not exist.
var ErrNotFound = errors.New("schedule: no such schedule")

// Error is a definition's field that cannot be stored, named as on the HTTP API ("tenant",
// "name", "connector", "args", "cron", "interval_seconds", "missed"). It wraps ErrInvalid.
type Error struct {
	Field, Problem string
}

// Error is "schedule: <field>: <problem>".
func (e *Error) Error() string { return fmt.Sprintf("schedule: %s: %s", e.Field, e.Problem) }

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &Error{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Validate checks d before anything is stored: its names, its args, its timing and policy and,
// with a registry, that its connector is known and available to its tenant. The error is an
// *Error naming the first bad field.
func (d *Definition) Validate(registry *effects.Registry) error {
	if err := ident.ValidateTenantID(d.Tenant); err != nil {
		return invalid("tenant", "%v", err)
	}
	if d.Name == "" || len(d.Name) > maxNameLen || !ident.IsName(d.Name) {
		return invalid("name", "%q: want 1 to %d bytes of %s", jsonx.SafeText(d.Name), maxNameLen, ident.NameRule)
	}
	if err := d.validateConnector(registry); err != nil {
		return err
	}
	if len(d.Args) > 0 {
		if err := jsonx.Check(d.Args); err != nil {
			return invalid("args", "%v", err)
		}
	}
	switch d.Missed {
	case "", Skip, CatchUp:
	default:
		return invalid("missed", "%q: want %q or %q", jsonx.SafeText(string(d.Missed)), Skip, CatchUp)
	}
	_, err := d.ticker()
	return err
}

func (d *Definition) validateConnector(registry *effects.Registry) error {
	if d.Connector == "" {
		return invalid("connector", "required")
	}
	if err := jsonx.CheckText(d.Connector); err != nil {
		return invalid("connector", "%v", err)
	}
	if registry == nil {
		return nil
	}
	c, ok := registry.Get(d.Connector)
	if !ok {
		return invalid("connector", "%q is not a connector this server knows (GET /v1/connectors)", d.Connector)
	}
	if !c.AvailableTo(d.Tenant) {
		return invalid("connector", "%q is not available to tenant %q (its tenants list)", d.Connector, d.Tenant)
	}
	return nil
}

// ticker gives the ticks of a schedule.
type ticker interface {
	// Next is the first tick strictly after t, in UTC; the zero time when there is none.
	Next(t time.Time) time.Time
}

// ticker checks the definition's timing and returns its ticks.
func (d *Definition) ticker() (ticker, error) {
	switch {
	case d.Cron != "" && d.Interval != 0:
		return nil, invalid("cron", "give a cron expression or an interval, not both")
	case d.Cron != "":
		return parseCron(d.Cron)
	case d.Interval == 0:
		return nil, invalid("cron", "give a cron expression or an interval (interval_seconds)")
	case d.Interval < MinInterval || d.Interval > MaxInterval || d.Interval%time.Second != 0:
		return nil, invalid("interval_seconds", "%d: want whole seconds from %d to %d",
			int64(d.Interval/time.Second), int64(MinInterval/time.Second), int64(MaxInterval/time.Second))
	}
	return interval(d.Interval / time.Second), nil
}

// cronParser reads standard 5-field expressions and descriptors, with an optional CRON_TZ= (or
// TZ=) prefix.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// maxCronLen bounds a cron expression, in bytes.
const maxCronLen = 200

func parseCron(expr string) (ticker, error) {
	if len(expr) > maxCronLen {
		return nil, invalid("cron", "longer than %d bytes", maxCronLen)
	}
	if err := jsonx.CheckText(expr); err != nil {
		return nil, invalid("cron", "%v", err)
	}
	if strings.Contains(expr, "@every") {
		return nil, invalid("cron", "%q: use an interval (interval_seconds) instead of @every", expr)
	}
	parsed, err := cronParser.Parse(expr)
	if err != nil {
		return nil, invalid("cron", "%q: %v (want 5 fields: minute hour day-of-month month day-of-week, or @hourly, @daily …)", expr, err)
	}
	t := cronTicker{parsed}
	if t.Next(time.Now()).IsZero() {
		return nil, invalid("cron", "%q never fires", expr)
	}
	return t, nil
}

type cronTicker struct{ schedule cron.Schedule }

// Next: an expression without CRON_TZ reads in the zone of the time it is given, UTC here.
func (c cronTicker) Next(t time.Time) time.Time {
	next := c.schedule.Next(t.UTC())
	if next.IsZero() {
		return next
	}
	return next.UTC()
}

// interval ticks at each multiple of its seconds since the Unix epoch.
type interval int64

func (i interval) Next(t time.Time) time.Time {
	s := t.Unix() // floor, also for times before the epoch
	n := s / int64(i)
	if s%int64(i) != 0 && s < 0 {
		n--
	}
	return time.Unix((n+1)*int64(i), 0).UTC()
}

// IdempotencyKey is the idempotency key of the effect of a schedule's tick:
// schedule/<name>/<tick RFC 3339, UTC>.
func IdempotencyKey(name string, tick time.Time) string {
	return "schedule/" + name + "/" + tick.UTC().Format(time.RFC3339)
}
