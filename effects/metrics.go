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

func newMetrics(registerer prometheus.Registerer, queries *dbsqlc.Queries) (*Metrics, error) {
	m := &Metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "transitions_total",
			Help: "Effect state transitions made by this process.",
		}, []string{"connector", "policy", "from", "to"}),
		dispatchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "reckon", Subsystem: "effect", Name: "dispatch_duration_seconds",
			Help:    "Duration of connector dispatch calls, by classified outcome.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
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
	if registerer == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.transitions, m.dispatchSeconds, m.statusChecks, m.compensations, m.fenced, m.swept, m.accepted, m.callbacks, m.deadlines, m.takenOver, m.takeoverSeconds, &stateCollector{queries: queries}} {
		if err := registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
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
