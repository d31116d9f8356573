package main

import (
	"context"
	"fmt"
	"strings"
)

// Passes of -events: on (the schema as shipped: the event stream written by triggers), off (the
// bench database writing no events, as before the event stream's migration, eventsMigration) or
// both (each scenario off, then on, and their ratio).
const (
	eventsOn   = "on"
	eventsOff  = "off"
	eventsBoth = "both"
)

// eventsOffSuffix marks the results of a scenario run without the event stream.
const eventsOffSuffix = "-events_off"

// eventsPasses are the passes of -events, in order. Both is off, on, on, off: a scenario run later
// meets a database that earlier runs have grown (and, measured, runs up to 10 % slower for it), so
// each setting gets one earlier and one later run, and its results are their mean.
func eventsPasses(mode string) []string {
	if mode == eventsBoth {
		return []string{eventsOff, eventsOn, eventsOn, eventsOff}
	}
	return []string{mode}
}

// runScenarioEvents runs scenario once per pass of -events, the bench database writing events or
// not (setEvents). A setting's second run is folded into its first's results (mergeRun).
func (b *bench) runScenarioEvents(ctx context.Context, scenario string) error {
	seen := map[string]bool{}
	for _, mode := range eventsPasses(b.o.events) {
		if err := b.setEvents(ctx, mode == eventsOn); err != nil {
			return fmt.Errorf("events %s: %w", mode, err)
		}
		first := len(b.results.Results)
		if mode == eventsOff {
			b.progress("== %s, without the event stream", scenario)
		}
		if err := b.runScenarioTraced(ctx, scenario); err != nil {
			return err
		}
		if mode == eventsOff {
			for i := first; i < len(b.results.Results); i++ {
				res := &b.results.Results[i]
				res.Name += eventsOffSuffix
				res.Label += " (events off)"
			}
		}
		if seen[mode] {
			b.mergeRun(first)
		}
		seen[mode] = true
	}
	return nil
}

// mergeRun folds the results from index first on into the earlier results of the same names: the
// mean of their rates and extras, their counts and seconds summed.
func (b *bench) mergeRun(first int) {
	r := &b.results
	for _, again := range r.Results[first:] {
		earlier := r.get(again.Name)
		earlier.Count += again.Count
		earlier.Seconds += again.Seconds
		earlier.PerSecond = (earlier.PerSecond + again.PerSecond) / 2
		for k, v := range again.Extra {
			earlier.Extra[k] = (earlier.Extra[k] + v) / 2
		}
		if label, ok := strings.CutSuffix(earlier.Label, ")"); ok {
			earlier.Label = label + ", mean of 2 runs)"
		} else {
			earlier.Label += " (mean of 2 runs)"
		}
	}
	r.Results = r.Results[:first]
}

// eventTriggers are the triggers of eventsMigration that write events, by table.
var eventTriggers = [][2]string{
	{"reckon_effects", "reckon_effect_progress_event"}, {"reckon_effects", "reckon_effect_leased_insert_event"},
	{"river_job", "reckon_dispatch_event"}, {"reckon_saga_transitions", "reckon_saga_transition_event"},
	{"reckon_turns", "reckon_turn_event"}, {"reckon_turn_decisions", "reckon_turn_decision_event"},
	{"reckon_messages", "reckon_message_event"}, {"reckon_runs", "reckon_run_event"},
}

// setEvents makes the bench database write events (on, the schema as migrated) or not (off): the
// triggers that write events and notify are disabled, and effect transitions get no transaction
// id and no position index, as before eventsMigration. The schema's version stays current, so
// that the clients start.
func (b *bench) setEvents(ctx context.Context, on bool) error {
	if on && b.o.citus {
		return nil // as migrated; -citus allows nothing else
	}
	verb := "DISABLE"
	sql := []string{
		`ALTER TABLE reckon_effect_transitions ALTER COLUMN xid DROP DEFAULT`,
		`DROP INDEX IF EXISTS reckon_effect_transitions_position_idx`,
	}
	if on {
		verb = "ENABLE"
		sql = []string{
			`ALTER TABLE reckon_effect_transitions ALTER COLUMN xid SET DEFAULT pg_current_xact_id()`,
			`CREATE INDEX IF NOT EXISTS reckon_effect_transitions_position_idx ON reckon_effect_transitions (xid, id) WHERE xid IS NOT NULL`,
		}
	}
	for _, t := range eventTriggers {
		sql = append(sql, fmt.Sprintf("ALTER TABLE %s %s TRIGGER %s", t[0], verb, t[1]))
	}
	for _, stmt := range sql {
		if _, err := b.pool.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// reportEvents prints, for each result also run without the event stream, the ratio with/without
// of its rate (and of its p99 latency, where it has one), and records them in the ratios.
func (b *bench) reportEvents() {
	b.reportRatios("EVENT STREAM written / not written, same run", eventsOffSuffix, false,
		" throughput %.0f/s with events, %.0f/s without: %.3f", "  p99 %.1f ms with, %.1f ms without: %.2f")
}
