package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/metric"
)

// metrics are the Prometheus collectors of a Client, registered on Config.Registerer:
//
//	reckon_saga_started_total{name}            sagas started by this process
//	reckon_saga_transitions_total{name,to}     saga state changes written by this process
//	reckon_sagas{name,state}                   sagas in each state, from the shared statistics
//
// The outcomes are reckon_sagas{state="COMPLETED"|"COMPENSATED"|"STUCK"} (exact as of the last
// computation of the shared statistics) and their rates reckon_saga_transitions_total{to=…}. A
// transition is counted when the settle hook writes it; the rare transaction that rolls back after
// its hook ran (and is then written again) counts twice. Every series of a registered definition
// exists at 0 from the first scrape after it is registered (sagaCollector).
type metrics struct {
	started     *prometheus.CounterVec
	transitions *prometheus.CounterVec
}

// StatsPart is the saga package's part of the shared statistics (effects.PluginHost.AddStats): how
// many sagas of each definition are in each state, computed by one reactor per
// effects.Config.StatsInterval for the whole fleet.
const StatsPart = "sagas"

// states are every state of a saga, each also a state a saga can move to (RUNNING again from
// STUCK): the states of the series pre-created for each registered definition.
var states = []State{StateRunning, StateCompleted, StateCompensating, StateCompensated, StateStuck}

func newMetrics(registerer prometheus.Registerer, client *Client) (*metrics, error) {
	m := &metrics{
		started: metric.CounterVec("reckon_saga_started_total", "Sagas started by this process.", "name"),
		transitions: metric.CounterVec("reckon_saga_transitions_total",
			"Saga state changes written by this process, by target state.", "name", "to"),
	}
	if err := metric.Register(registerer, &sagaCollector{client: client, metrics: m}); err != nil {
		return nil, err
	}
	return m, nil
}

// sagaStats is the stored value of the saga part: definition name → state → count.
type sagaStats map[string]map[State]int64

// computeStats is the saga part's effects.StatsFunc: every saga, grouped by definition and state.
func computeStats(ctx context.Context, tx pgx.Tx) (any, error) {
	rows, err := dbsqlc.New(tx).SagaCountByState(ctx)
	if err != nil {
		return nil, err
	}
	out := sagaStats{}
	for _, row := range rows {
		if out[row.Name] == nil {
			out[row.Name] = map[State]int64{}
		}
		out[row.Name][State(row.State)] = row.Count
	}
	return out, nil
}

// sagaCollector collects the saga metrics. At each scrape it first creates, at 0, the counters of
// every definition registered then (definitions are loaded while a reactor runs: sagadef's sync),
// started and transitions to each state, then reads the stored saga part (one primary-key read)
// and reports every registered definition in every state (0 where none) and any other definition
// with sagas. If the part cannot be read, or was never computed, reckon_sagas is left out of the
// scrape (a read failure is logged); the rest is served.
type sagaCollector struct {
	client  *Client
	metrics *metrics
}

var stateDesc = prometheus.NewDesc("reckon_sagas",
	"Sagas in each state, by definition, in the whole database, as of the last computation of the shared statistics.",
	[]string{"name", "state"}, nil)

func (s *sagaCollector) Describe(ch chan<- *prometheus.Desc) {
	s.metrics.started.Describe(ch)
	s.metrics.transitions.Describe(ch)
	ch <- stateDesc
}

func (s *sagaCollector) Collect(ch chan<- prometheus.Metric) {
	names := s.client.names()
	for _, name := range names {
		s.metrics.started.WithLabelValues(name)
		for _, state := range states {
			s.metrics.transitions.WithLabelValues(name, string(state))
		}
	}
	s.metrics.started.Collect(ch)
	s.metrics.transitions.Collect(ch)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stats, err := s.read(ctx)
	if errors.Is(effects.SchemaError(err), effects.ErrSchemaNotCurrent) {
		return // the database is not migrated (yet): no statistics, and the server says so once
	}
	if err != nil {
		s.client.logger.WarnContext(ctx, "metrics: read the sagas' shared statistics; left out of this scrape", slog.String("error", err.Error()))
		return
	}
	if stats == nil {
		return // never computed
	}
	for _, name := range names {
		if stats[name] == nil {
			stats[name] = map[State]int64{}
		}
	}
	for name, counts := range stats {
		for _, state := range states {
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, float64(counts[state]), name, string(state))
		}
	}
}

// read returns the stored saga part, nil if it was never computed.
func (s *sagaCollector) read(ctx context.Context) (sagaStats, error) {
	rows, err := s.client.queries.StatsList(ctx, []string{StatsPart})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || !rows[0].Computed {
		return nil, nil
	}
	var stats sagaStats
	if err := json.Unmarshal(rows[0].Value, &stats); err != nil {
		return nil, fmt.Errorf("stats part %q: %w", StatsPart, err)
	}
	if stats == nil {
		stats = sagaStats{}
	}
	return stats, nil
}

// names returns the names of the registered definitions, sorted.
func (c *Client) names() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	names := make([]string, 0, len(c.defs))
	for name := range c.defs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
