package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestIntervalTicksOnTheEpochGrid(t *testing.T) {
	t.Parallel()
	every := interval(60)
	require.Equal(t, at("2026-11-29T12:01:00Z"), every.Next(at("2026-11-29T12:00:00Z")), "strictly after")
	require.Equal(t, at("2026-11-29T12:01:00Z"), every.Next(at("2026-11-29T12:00:59.9Z")))
	require.Equal(t, at("2026-11-29T13:00:00Z"), interval(3600).Next(at("2026-11-29T12:30:00Z")))
	require.Equal(t, time.Unix(0, 0).UTC(), interval(7).Next(time.Unix(-1, 0)), "before the epoch too")
}

func TestCronTicksInUTCUnlessAZoneIsGiven(t *testing.T) {
	t.Parallel()
	utc, err := parseCron("0 2 * * *")
	require.NoError(t, err)
	require.Equal(t, at("2026-11-30T02:00:00Z"), utc.Next(at("2026-11-29T12:00:00+01:00")))
	paris, err := parseCron("CRON_TZ=Europe/Paris 0 2 * * *")
	require.NoError(t, err)
	require.Equal(t, at("2026-11-30T01:00:00Z"), paris.Next(at("2026-11-29T12:00:00Z")))
	hourly, err := parseCron("@hourly")
	require.NoError(t, err)
	require.Equal(t, at("2026-11-29T13:00:00Z"), hourly.Next(at("2026-11-29T12:00:00Z")))
}

func TestDueRound(t *testing.T) {
	t.Parallel()
	minute := interval(60)
	now := at("2026-11-29T12:10:30Z")
	tests := []struct {
		name    string
		missed  Missed
		next    time.Time
		ticks   []time.Time
		dropped bool
		more    bool
	}{
		{"on time, skip", Skip, at("2026-11-29T12:10:00Z"), []time.Time{at("2026-11-29T12:10:00Z")}, false, false},
		{"on time, catch_up", CatchUp, at("2026-11-29T12:10:00Z"), []time.Time{at("2026-11-29T12:10:00Z")}, false, false},
		{"missed, skip keeps the latest", Skip, at("2026-11-29T12:07:00Z"), []time.Time{at("2026-11-29T12:10:00Z")}, true, false},
		{"missed, catch_up keeps each", CatchUp, at("2026-11-29T12:07:00Z"),
			[]time.Time{at("2026-11-29T12:07:00Z"), at("2026-11-29T12:08:00Z"), at("2026-11-29T12:09:00Z"), at("2026-11-29T12:10:00Z")}, false, false},
		{"a year missed, skip", Skip, at("2025-11-01T00:00:00Z"), []time.Time{at("2026-11-29T12:10:00Z")}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := dueRound(minute, tt.missed, tt.next, now)
			require.Equal(t, tt.ticks, r.ticks)
			require.Equal(t, tt.dropped, r.dropped)
			require.Equal(t, tt.more, r.more)
			require.Equal(t, at("2026-11-29T12:11:00Z"), r.following(minute))
		})
	}
}

func TestCatchUpIsBounded(t *testing.T) {
	t.Parallel()
	second := interval(1)
	now := at("2026-11-29T12:00:00Z")
	r := dueRound(second, CatchUp, now.Add(-48*time.Hour), now)
	require.True(t, r.dropped, "ticks beyond the bounds are dropped")
	require.True(t, r.more, "one round takes CatchUpBatch ticks")
	require.Len(t, r.ticks, CatchUpBatch)
	require.Equal(t, now.Add(-(CatchUpMax-1)*time.Second), r.ticks[0], "the latest CatchUpMax ticks are kept")

	// A daily cron down 3 days: the ticks of the last 24h only.
	daily, err := parseCron("0 0 * * *")
	require.NoError(t, err)
	r = dueRound(daily, CatchUp, at("2026-11-26T00:00:00Z"), at("2026-11-29T12:00:00Z"))
	require.Equal(t, []time.Time{at("2026-11-29T00:00:00Z")}, r.ticks)
	require.True(t, r.dropped)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	registry := effects.NewRegistry()
	noop := func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
	registry.MustRegister(effects.Connector{Name: "report.run", Tags: []effects.Tag{effects.TagIdempotent}, Dispatch: noop})
	registry.MustRegister(effects.Connector{Name: "acme.only", Tenants: []string{"acme"}, Tags: []effects.Tag{effects.TagIdempotent}, Dispatch: noop})
	good := Definition{Tenant: "acme", Name: "nightly", Connector: "report.run", Cron: "0 2 * * *"}
	require.NoError(t, good.Validate(registry))
	tests := []struct {
		field  string
		change func(d *Definition)
	}{
		{"tenant", func(d *Definition) { d.Tenant = "" }},
		{"name", func(d *Definition) { d.Name = "a/b" }},
		{"name", func(d *Definition) { d.Name = "" }},
		{"connector", func(d *Definition) { d.Connector = "nope" }},
		{"connector", func(d *Definition) { d.Tenant, d.Connector = "other", "acme.only" }},
		{"args", func(d *Definition) { d.Args = []byte(`{"a":`) }},
		{"missed", func(d *Definition) { d.Missed = "sometimes" }},
		{"cron", func(d *Definition) { d.Cron = "61 * * * *" }},
		{"cron", func(d *Definition) { d.Cron = "* * * * * *" }},
		{"cron", func(d *Definition) { d.Cron = "@every 1h" }},
		{"cron", func(d *Definition) { d.Cron = "0 0 30 2 *" }},
		{"cron", func(d *Definition) { d.Interval = time.Minute }},
		{"cron", func(d *Definition) { d.Cron = "" }},
		{"interval_seconds", func(d *Definition) { d.Cron, d.Interval = "", 500*time.Millisecond }},
		{"interval_seconds", func(d *Definition) { d.Cron, d.Interval = "", 1500*time.Millisecond }},
		{"interval_seconds", func(d *Definition) { d.Cron, d.Interval = "", 400*24*time.Hour }},
	}
	for _, tt := range tests {
		d := good
		tt.change(&d)
		err := d.Validate(registry)
		var bad *Error
		require.True(t, errors.As(err, &bad), "%+v: %v", d, err)
		require.Equal(t, tt.field, bad.Field, "%+v: %v", d, err)
		require.ErrorIs(t, err, ErrInvalid)
	}
}
