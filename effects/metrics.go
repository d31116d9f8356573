package effects

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Metrics are the Prometheus collectors of a Client, registered on Config.Registerer:
//
//	reckon_effect_transitions_total{connector,policy,from,to}    transitions made by this process
//	reckon_effect_dispatch_duration_seconds{connector,outcome}   connector calls
//	reckon_effect_status_checks_total{connector,status}          status-check answers
//	reckon_effect_compensations_total{connector}                 compensations enqueued
//	reckon_effect_fenced_writes_total{connector}                 late outcomes refused by the fence
//	reckon_effect_swept_total{reason}                            effects the sweeper took over
//	reckon_effect_accepted_total{connector}                      acceptances awaiting a callback
//	reckon_effect_callbacks_total{connector,to}                  callbacks that resolved an effect
//	reckon_effect_deadlines_total{connector,to}                  async deadlines that passed
//	reckon_effects{state}                                        PENDING, UNKNOWN and STUCK effects now
//	reckon_reactor_jobs_taken_over_total{kind}                   River jobs of dead reactors handed back
//	reckon_reactor_takeover_seconds                              a dead reactor's last heartbeat to the takeover
//
// The series operators alert on exist at 0 before their first event (see connectorCollector,
// sweptReasons and precreatedJobKinds), so rate() over them works from the first scrape.
type Metrics struct {
	transitions     *prometheus.CounterVec
	dispatchSeconds *prometheus.HistogramVec
	statusChecks    *prometheus.CounterVec
	compensations   *prometheus.CounterVec
	fenced          *prometheus.CounterVec
	swept           *prometheus.CounterVec
	accepted        *prometheus.CounterVec
	callbacks       *prometheus.CounterVec
	deadlines       *prometheus.CounterVec
	takenOver       *prometheus.CounterVec
	takeoverSeconds prometheus.Histogram
}

// dispatchBuckets are the upper bounds of reckon_effect_dispatch_duration_seconds: from 5 ms, and
// past every call timeout — a call cut at the default 30 s timeout lands in the 60 s bucket, one
// cut at the longest (5 m) in the 600 s one — so timed-out calls are told apart from the fast
// ones and never only in +Inf.
var dispatchBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Series pre-created at 0 so that rate() and alerts on them work before the first event: every
// registered connector's dispatch durations by these outcomes (accepted, only for async
// connectors, appears with its first), and the job kinds of this package.
var (
	precreatedOutcomes = []outcomeKind{outcomeConfirmed, outcomeFailed, outcomeRetry, outcomeUnknown}
	precreatedStatuses = []StatusKind{StatusPresent, StatusAbsent, StatusDuplicate, StatusInconclusive}
	precreatedJobKinds = []string{dispatchArgs{}.Kind(), reconcileArgs{}.Kind(), deadlineArgs{}.Kind()}
)

func newMetrics(registerer prometheus.Registerer, queries *dbsqlc.Queries, registry *Registry) (*Metrics, error) {
	m := &Metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "transitions_total",
			Help: "Effect state transitions made by this process.",
		}, []string{"connector", "policy", "from", "to"}),
		dispatchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "dispatch_duration_seconds",
			Help:    "Duration of connector dispatch calls, by classified outcome.",
			Buckets: dispatchBuckets,
		}, []string{"connector", "outcome"}),
		statusChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "status_checks_total",
			Help: "Status-check answers while reconciling UNKNOWN effects.",
		}, []string{"connector", "status"}),
		compensations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "compensations_total",
			Help: "Compensation effects enqueued.",
		}, []string{"connector"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "fenced_writes_total",
			Help: "Late outcomes refused because the effect had moved on (recorded in the audit trail only).",
		}, []string{"connector"}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "swept_total",
			Help: "Effects the sweeper took over because their attempt or job was gone.",
		}, []string{"reason"}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "accepted_total",
			Help: "Dispatches the upstream accepted, to finish by callback.",
		}, []string{"connector"}),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "callbacks_total",
			Help: "Callbacks that resolved an effect, by the state they set.",
		}, []string{"connector", "to"}),
		deadlines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "deadlines_total",
			Help: "Async deadlines that passed before the callback, by the state they set.",
		}, []string{"connector", "to"}),
		takenOver: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "reactor", Name: "jobs_taken_over_total",
			Help: "Running River jobs of dead reactors that this process handed back to River, by job kind.",
		}, []string{"kind"}),
		takeoverSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "reckon", Subsystem: "reactor", Name: "takeover_seconds",
			Help:    "Time from a dead reactor's last heartbeat (it died within a liveness interval after it) to the takeover of its jobs.",
			Buckets: []float64{0.5, 1, 2, 3, 4, 5, 7.5, 10, 15, 30, 60, 300},
		}),
	}
	for _, reason := range sweptReasons {
		m.swept.WithLabelValues(reason)
	}
	for _, kind := range precreatedJobKinds {
		m.takenOver.WithLabelValues(kind)
	}
	if registerer == nil {
		return m, nil
	}
	perConnector := &connectorCollector{metrics: m, registry: registry}
	for _, c := range []prometheus.Collector{m.transitions, perConnector, m.swept, m.callbacks, m.deadlines, m.takenOver, m.takeoverSeconds, &stateCollector{queries: queries}} {
		if err := registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// connectorCollector collects the metrics by connector whose series docs/operations.md names for
// alerts: at each scrape it first creates, at 0, those of every connector registered then
// (connectors come and go while a reactor runs: HTTP connectors are reloaded), so a series exists
// from the first scrape after its connector is registered. Per connector: the dispatch durations
// by outcome (precreatedOutcomes), fenced writes, compensations, acceptances and, for a connector
// with a status check, its answers by status.
type connectorCollector struct {
	metrics  *Metrics
	registry *Registry
}

func (c *connectorCollector) collectors() []prometheus.Collector {
	m := c.metrics
	return []prometheus.Collector{m.dispatchSeconds, m.statusChecks, m.compensations, m.fenced, m.accepted}
}

func (c *connectorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, collector := range c.collectors() {
		collector.Describe(ch)
	}
}

func (c *connectorCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.metrics
	for _, name := range c.registry.Names() {
		connector, ok := c.registry.Get(name)
		if !ok {
			continue // unregistered meanwhile
		}
		for _, outcome := range precreatedOutcomes {
			m.dispatchSeconds.WithLabelValues(name, string(outcome))
		}
		m.fenced.WithLabelValues(name)
		m.compensations.WithLabelValues(name)
		m.accepted.WithLabelValues(name)
		if connector.StatusCheck != nil {
			for _, status := range precreatedStatuses {
				m.statusChecks.WithLabelValues(name, status.String())
			}
		}
	}
	for _, collector := range c.collectors() {
		collector.Collect(ch)
	}
}

// stateCollector reports how many effects are PENDING, UNKNOWN and STUCK, read from the database
// at scrape time (an index scan over unresolved effects only).
type stateCollector struct{ queries *dbsqlc.Queries }

var stateDesc = prometheus.NewDesc("reckon_effects", "Effects currently in each unresolved state.", []string{"state"}, nil)

func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- stateDesc }

func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := s.queries.EffectCountUnresolved(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(stateDesc, err)
		return
	}
	counts := map[State]int64{StatePending: 0, StateUnknown: 0, StateStuck: 0}
	for _, row := range rows {
		counts[State(row.State)] = row.Count
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, float64(n), string(state))
	}
}
