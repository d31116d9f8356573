// Package metric declares Reckon's Prometheus collectors in one line each and registers them
// together. Names are given whole (reckon_<subsystem>_<name>), so a series named in docs or an
// alert rule is found by searching for it.
package metric

import "github.com/prometheus/client_golang/prometheus"

// Counter declares a counter.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec declares a counter with labels.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Gauge declares a gauge.
func Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// Histogram declares a histogram with the given upper bounds.
func Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// HistogramVec declares a histogram with labels and the given upper bounds.
func HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// Register registers the collectors on reg in order and returns the first error. A nil reg
// registers nothing: metrics are then kept in memory only, for a client built without a registry.
func Register(reg prometheus.Registerer, collectors ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
