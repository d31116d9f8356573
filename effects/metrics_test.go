package effects_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
)

// TestMetricsPrecreated: before any event, a client's first scrape already has, at 0, the series
// that docs/operations.md alerts on — for each registered connector the transitions reactors make
// (under its policy), its settle latencies, its dispatch durations by outcome, fenced writes,
// compensations and acceptances, its status-check answers if it has a status check (and none if
// not), every sweeper reason and the job kinds taken over — and the shared statistics computed at
// Start (no effect in any state, no queue lag, one live reactor); a connector registered later has
// its series from the next scrape. Lint clean.
func TestMetricsPrecreated(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.start()

	got := testkit.Series(t, h.metrics)
	for _, outcome := range []string{"confirmed", "failed", "retryable", "unknown"} {
		key := fmt.Sprintf(`reckon_effect_dispatch_duration_seconds{connector="bank.wire",outcome=%q}`, outcome)
		require.Contains(t, got, key)
		require.Zero(t, got[key])
	}
	for _, name := range []string{"fenced_writes_total", "compensations_total", "accepted_total"} {
		key := `reckon_effect_` + name + `{connector="bank.wire"}`
		require.Contains(t, got, key)
		require.Zero(t, got[key])
	}
	for _, status := range []string{"present", "absent", "duplicate", "inconclusive"} {
		require.Contains(t, got, fmt.Sprintf(`reckon_effect_status_checks_total{connector="bank.wire",status=%q}`, status))
	}
	for _, reason := range []string{"job gone without an outcome", "inline attempt's lease expired", "worker presumed dead: job running past its timeout"} {
		require.Contains(t, got, fmt.Sprintf(`reckon_effect_swept_total{reason=%q}`, reason))
		require.Contains(t, got, fmt.Sprintf(`reckon_effect_swept_total{reason=%q}`, "reconcile "+reason))
	}
	for _, kind := range []string{"reckon_dispatch", "reckon_reconcile", "reckon_deadline"} {
		require.Contains(t, got, fmt.Sprintf(`reckon_reactor_jobs_taken_over_total{kind=%q}`, kind))
	}
	for _, pair := range [][2]string{
		{"PENDING", "CONFIRMED"}, {"PENDING", "FAILED"}, {"PENDING", "UNKNOWN"},
		{"UNKNOWN", "CONFIRMED"}, {"UNKNOWN", "PENDING"}, {"UNKNOWN", "FAILED"}, {"UNKNOWN", "STUCK"},
	} {
		require.Contains(t, got, fmt.Sprintf(`reckon_effect_transitions_total{connector="bank.wire",from=%q,policy="irreversible",to=%q}`, pair[0], pair[1]))
	}
	require.NotContains(t, got, `reckon_effect_transitions_total{connector="bank.wire",from="STUCK",policy="irreversible",to="CONFIRMED"}`,
		"an operator's decision is not a reactor's: it comes with the first")
	for _, state := range []string{"CONFIRMED", "FAILED"} {
		require.Contains(t, got, fmt.Sprintf(`reckon_effect_settle_latency_seconds{connector="bank.wire",state=%q}`, state))
	}
	for _, state := range []string{"PENDING", "UNKNOWN", "STUCK"} {
		require.Contains(t, got, fmt.Sprintf(`reckon_effects{state=%q}`, state))
	}
	require.Contains(t, got, `reckon_effects_oldest_pending_seconds{connector="bank.wire"}`)
	require.Equal(t, 1.0, got[`reckon_stats_computations_total{part="effects"}`], "computed at Start")
	require.Equal(t, 1.0, got[`reckon_reactors_live{}`])
	require.Contains(t, got, `reckon_stats_age_seconds{}`)
	require.Less(t, got[`reckon_stats_age_seconds{}`], 10.0)
	for key, value := range got {
		switch key {
		case `reckon_stats_computations_total{part="effects"}`, `reckon_reactors_live{}`, `reckon_stats_age_seconds{}`:
		default:
			if strings.HasPrefix(key, "reckon_") {
				require.Zero(t, value, key)
			}
		}
	}

	// A connector registered while the client runs, without a status check.
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "mail.send", Tags: idempotentTags,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return nil, nil },
	}))
	got = testkit.Series(t, h.metrics)
	require.Contains(t, got, `reckon_effect_dispatch_duration_seconds{connector="mail.send",outcome="unknown"}`)
	require.Contains(t, got, `reckon_effect_fenced_writes_total{connector="mail.send"}`)
	require.Contains(t, got, `reckon_effect_transitions_total{connector="mail.send",from="PENDING",policy="idempotent",to="CONFIRMED"}`)
	require.Contains(t, got, `reckon_effect_settle_latency_seconds{connector="mail.send",state="FAILED"}`)
	require.Contains(t, got, `reckon_effects_oldest_pending_seconds{connector="mail.send"}`)
	for key := range got {
		require.False(t, strings.HasPrefix(key, `reckon_effect_status_checks_total{connector="mail.send"`), "no status check, no status series: %s", key)
	}
	problems, err := testutil.GatherAndLint(h.metrics)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestDispatchBucketsPastTimeouts: the dispatch-duration histogram has a bucket above each call
// timeout within twice it — the default (30 s) and the longest a connector may have (5 m, Register
// refuses more) — so a call cut at its timeout is counted in a finite bucket, apart from the calls
// that ended in time.
func TestDispatchBucketsPastTimeouts(t *testing.T) {
	t.Parallel()
	registry := effects.NewRegistry()
	dispatch := func(context.Context, effects.Call) (json.RawMessage, error) { return nil, nil }
	longest := 5 * time.Minute
	require.NoError(t, registry.Register(effects.Connector{Name: "slow", Tags: idempotentTags, Timeout: longest, Dispatch: dispatch}))
	require.Error(t, registry.Register(effects.Connector{Name: "slower", Tags: idempotentTags, Timeout: longest + time.Millisecond, Dispatch: dispatch}),
		"5m is the longest call timeout")

	h := setupWired(t)
	families, err := h.metrics.Gather()
	require.NoError(t, err)
	var bounds []float64
	for _, family := range families {
		if family.GetName() == "reckon_effect_dispatch_duration_seconds" {
			for _, bucket := range family.GetMetric()[0].GetHistogram().GetBucket() {
				bounds = append(bounds, bucket.GetUpperBound())
			}
		}
	}
	require.NotEmpty(t, bounds, "the histogram's series exist before the first call")
	for _, timeout := range []time.Duration{30 * time.Second, longest} {
		require.True(t, slices.ContainsFunc(bounds, func(b float64) bool {
			return b > timeout.Seconds() && b <= 2*timeout.Seconds()
		}), "a bucket in (%v, %v]: %v", timeout, 2*timeout, bounds)
	}
	require.Contains(t, bounds, 30.0, "calls that ended just in time are told from those cut at 30 s")
	require.Less(t, bounds[0], 0.01, "fast calls are told apart too")
}
