package retention

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Prometheus collectors of a Retention, registered on Config.Registerer:
//
//	reckon_retention_rows_pruned_total{table}          rows deleted by retention runs, per table
//	reckon_retention_partitions_dropped_total{table}   partitions of a history dropped, per history
//	reckon_retention_partitions_created_total          partitions of the histories made ahead
//	reckon_retention_runs_total{result}                runs: ok, error, or busy (another held the lock)
//	reckon_retention_last_success_timestamp_seconds    when the last run that ended ok ended
//	reckon_retention_run_duration_seconds              how long runs took
//	reckon_retention_partitions_held                   partitions past the audit retention that the last run kept
//
// Dry runs count in none of them.
type metrics struct {
	rowsPruned        *prometheus.CounterVec
	partitionsDropped *prometheus.CounterVec
	partitionsCreated prometheus.Counter
	runs              *prometheus.CounterVec
	lastSuccess       prometheus.Gauge
	duration          prometheus.Histogram
	held              prometheus.Gauge
}

// Run results, the values of reckon_retention_runs_total's label.
const (
	resultOK    = "ok"
	resultError = "error"
	resultBusy  = "busy"
)

func newMetrics(registerer prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		rowsPruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "retention", Name: "rows_pruned_total",
			Help: "Rows deleted by retention runs, per table.",
		}, []string{"table"}),
		partitionsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "retention", Name: "partitions_dropped_total",
			Help: "Partitions of the audit histories dropped past the audit retention, per history.",
		}, []string{"table"}),
		partitionsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "retention", Name: "partitions_created_total",
			Help: "Partitions of the audit histories made ahead by retention runs.",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "retention", Name: "runs_total",
			Help: "Retention runs by result: ok, error, or busy (another run held the retention lock).",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "reckon", Subsystem: "retention", Name: "last_success_timestamp_seconds",
			Help: "Unix time at which the last retention run that ended ok ended.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "reckon", Subsystem: "retention", Name: "run_duration_seconds",
			Help:    "Duration of retention runs.",
			Buckets: []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600},
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "reckon", Subsystem: "retention", Name: "partitions_held",
			Help: "Partitions past the audit retention that the last run kept because an effect or saga they tell of still exists.",
		}),
	}
	for _, table := range prunedTables {
		m.rowsPruned.WithLabelValues(table)
	}
	for _, parent := range histories {
		m.partitionsDropped.WithLabelValues(parent)
	}
	for _, result := range []string{resultOK, resultError, resultBusy} {
		m.runs.WithLabelValues(result)
	}
	if registerer == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.rowsPruned, m.partitionsDropped, m.partitionsCreated, m.runs, m.lastSuccess, m.duration, m.held} {
		if err := registerer.Register(c); err != nil {
			return nil, fmt.Errorf("retention: register metrics: %w", err)
		}
	}
	return m, nil
}
