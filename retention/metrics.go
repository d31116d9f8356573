package retention

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/internal/metric"
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
		rowsPruned: metric.CounterVec("reckon_retention_rows_pruned_total",
			"Rows deleted by retention runs, per table.", "table"),
		partitionsDropped: metric.CounterVec("reckon_retention_partitions_dropped_total",
			"Partitions of the audit histories dropped past the audit retention, per history.", "table"),
		partitionsCreated: metric.Counter("reckon_retention_partitions_created_total",
			"Partitions of the audit histories made ahead by retention runs."),
		runs: metric.CounterVec("reckon_retention_runs_total",
			"Retention runs by result: ok, error, or busy (another run held the retention lock).", "result"),
		lastSuccess: metric.Gauge("reckon_retention_last_success_timestamp_seconds",
			"Unix time at which the last retention run that ended ok ended."),
		duration: metric.Histogram("reckon_retention_run_duration_seconds",
			"Duration of retention runs.", []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600}),
		held: metric.Gauge("reckon_retention_partitions_held",
			"Partitions past the audit retention that the last run kept because an effect or saga they tell of still exists."),
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
	if err := metric.Register(registerer, m.rowsPruned, m.partitionsDropped, m.partitionsCreated, m.runs, m.lastSuccess, m.duration, m.held); err != nil {
		return nil, fmt.Errorf("retention: register metrics: %w", err)
	}
	return m, nil
}
