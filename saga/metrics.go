package saga

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// metrics are the Prometheus collectors of a Client, registered on Config.Registerer:
//
//	reckon_saga_started_total{name}            sagas started by this process
//	reckon_saga_transitions_total{name,to}     saga state changes written by this process
//	reckon_sagas{name,state}                   sagas in each state now, read from the database
//
// The outcomes are reckon_sagas{state="COMPLETED"|"COMPENSATED"|"STUCK"} (exact, from the
// database) and their rates reckon_saga_transitions_total{to=…}. A transition is counted when the
// settle hook writes it; the rare transaction that rolls back after its hook ran (and is then
// written again) counts twice.
type metrics struct {
	started     *prometheus.CounterVec
	transitions *prometheus.CounterVec
}

func newMetrics(registerer prometheus.Registerer, queries *dbsqlc.Queries) (*metrics, error) {
	m := &metrics{
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "saga", Name: "started_total",
			Help: "Sagas started by this process.",
		}, []string{"name"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "saga", Name: "transitions_total",
			Help: "Saga state changes written by this process, by target state.",
		}, []string{"name", "to"}),
	}
	if registerer == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.started, m.transitions, &stateCollector{queries: queries}} {
		if err := registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// stateCollector reports how many sagas of each definition are in each state, read at scrape time.
type stateCollector struct{ queries *dbsqlc.Queries }

var stateDesc = prometheus.NewDesc("reckon_sagas", "Sagas currently in each state, by definition.", []string{"name", "state"}, nil)

func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- stateDesc }

func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := s.queries.SagaCountByState(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(stateDesc, err)
		return
	}
	for _, row := range rows {
		ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, float64(row.Count), row.Name, string(row.State))
	}
}
