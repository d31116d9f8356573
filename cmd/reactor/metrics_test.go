package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMetricsAtStart: a fresh reactor's scrape, before any effect, already has at 0 the series
// docs/operations.md alerts on (per connector: fenced writes, dispatch durations by outcome,
// status-check answers, the transitions reactors make, settle latencies, queue lag; the sweeper's
// reasons, connector-sync errors, turn endings, retention errors, STUCK effects), the shared
// statistics computed at its start (effects' and sagas', by this reactor: one live reactor, their
// age under the interval), reckon_build_info = 1, and passes `promtool check metrics` (skipped
// without /usr/bin/promtool, except under CI=true).
func TestMetricsAtStart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.put(f.bankWire("bank.wire", 5*time.Second))
	p := f.startReactor("-retention-interval", "0")
	var body string
	require.Eventually(t, func() bool {
		body = scrape(t, p)
		return strings.Contains(body, "\nreckon_reactor_http_connectors 1\n")
	}, 30*time.Second, 20*time.Millisecond, p.Stderr())

	lines := strings.Split(body, "\n")
	for _, want := range []string{
		`reckon_effect_fenced_writes_total{connector="bank.wire"} 0`,
		`reckon_effect_compensations_total{connector="bank.wire"} 0`,
		`reckon_effect_dispatch_duration_seconds_count{connector="bank.wire",outcome="unknown"} 0`,
		`reckon_effect_dispatch_duration_seconds_count{connector="bank.wire",outcome="failed"} 0`,
		`reckon_effect_status_checks_total{connector="bank.wire",status="inconclusive"} 0`,
		`reckon_effect_swept_total{reason="worker presumed dead: job running past its timeout"} 0`,
		`reckon_reactor_jobs_taken_over_total{kind="reckon_dispatch"} 0`,
		`reckon_reactor_connector_syncs_total{result="error"} 0`,
		`reckon_turn_ended_total{status="FAILED"} 0`,
		`reckon_turn_decisions_total{action="SUPERSEDE",decider="default"} 0`,
		`reckon_effects{state="STUCK"} 0`,
		`reckon_effects{state="PENDING"} 0`,
		`reckon_effects_oldest_pending_seconds{connector="bank.wire"} 0`,
		`reckon_effect_transitions_total{connector="bank.wire",from="PENDING",policy="compensatable",to="CONFIRMED"} 0`,
		`reckon_effect_transitions_total{connector="bank.wire",from="UNKNOWN",policy="compensatable",to="STUCK"} 0`,
		`reckon_effect_settle_latency_seconds_count{connector="bank.wire",state="CONFIRMED"} 0`,
		`reckon_effect_settle_latency_seconds_count{connector="bank.wire",state="FAILED"} 0`,
		`reckon_stats_computations_total{part="effects"} 1`,
		`reckon_stats_computations_total{part="sagas"} 1`,
		`reckon_reactors_live 1`,
	} {
		require.Contains(t, lines, want)
	}
	var age float64
	for _, line := range lines {
		if rest, ok := strings.CutPrefix(line, "reckon_stats_age_seconds "); ok {
			var err error
			age, err = strconv.ParseFloat(rest, 64)
			require.NoError(t, err, line)
		}
	}
	require.Less(t, age, 15.0, "computed at start, within the default interval:\n%s", body)
	var buildInfo []string
	for _, line := range lines {
		if strings.HasPrefix(line, "reckon_build_info{") {
			buildInfo = append(buildInfo, line)
		}
	}
	require.Len(t, buildInfo, 1, body)
	require.Regexp(t, `^reckon_build_info\{goversion="go[^"]+",revision="[^"]+",version="[^"]+"\} 1$`, buildInfo[0])

	promtool := "/usr/bin/promtool"
	if _, err := os.Stat(promtool); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI (Debian's prometheus package): %v", promtool, err)
		}
		t.Logf("%s missing: promtool check metrics skipped", promtool)
	} else {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Run(), "promtool check metrics:\n%s", out.String())
	}
	p.Stop(t)
}

// TestStatsIntervalConfig: -stats-interval is the interval at which the shared statistics are
// computed (TestReactorConfig has the values out of range).
func TestStatsIntervalConfig(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := f.startReactor("-retention-interval", "0", "-stats-interval", "200ms")
	var first time.Time
	require.NoError(t, f.pool.QueryRow(context.Background(), `SELECT computed_at FROM reckon_stats WHERE part = 'effects'`).Scan(&first))
	require.Eventually(t, func() bool {
		var at time.Time
		require.NoError(t, f.pool.QueryRow(context.Background(), `SELECT computed_at FROM reckon_stats WHERE part = 'effects'`).Scan(&at))
		return at.Sub(first) >= 200*time.Millisecond
	}, 10*time.Second, 20*time.Millisecond, "computed again an interval later")
	p.Stop(t)
}
