package turns

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/internal/metric"
)

// metrics are a Client's Prometheus collectors, registered on Config.Registerer:
//
//	reckon_turn_decisions_total{action,decider}   supersede decisions taken (decider: application, default)
//	reckon_turn_ended_total{status}               turns ended: COMPLETE, SUPERSEDED, FAILED
//	reckon_turn_attempt_failures_total            handler or commit failures (the turn is retried)
//	reckon_turn_mutex_wait_seconds{outcome}       session-mutex acquisitions: acquired, busy
//	reckon_turn_artifacts_total{result}           artifact lookups and saves: reused, invalidated, miss, saved
type metrics struct {
	decisions *prometheus.CounterVec
	ended     *prometheus.CounterVec
	failures  prometheus.Counter
	wait      *prometheus.HistogramVec
	artifacts *prometheus.CounterVec
}

func newMetrics(registerer prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: metric.CounterVec("reckon_turn_decisions_total",
			"Supersede decisions taken by turns, by action and decider.", "action", "decider"),
		ended: metric.CounterVec("reckon_turn_ended_total",
			"Turns ended by this process, by final status.", "status"),
		failures: metric.Counter("reckon_turn_attempt_failures_total",
			"Turn attempts whose handler or commit failed."),
		wait: metric.HistogramVec("reckon_turn_mutex_wait_seconds",
			"Time to acquire the session mutex, by outcome.", prometheus.ExponentialBuckets(0.0005, 3, 12), "outcome"),
		artifacts: metric.CounterVec("reckon_turn_artifacts_total",
			"Turn artifacts: lookups that reused a stored artifact, found it invalidated or found none (miss), and saves.", "result"),
	}
	// Every series at 0 before its first event, so rate() and alerts on them work from the start.
	for _, status := range []Status{StatusComplete, StatusSuperseded, StatusFailed} {
		m.ended.WithLabelValues(string(status))
	}
	for _, action := range []Action{ActionSupersede, ActionAbsorb, ActionQueue, ActionForceComplete} {
		for _, decider := range []string{"default", "application"} {
			m.decisions.WithLabelValues(string(action), decider)
		}
	}
	for _, result := range []string{"reused", "invalidated", "miss", "saved"} {
		m.artifacts.WithLabelValues(result)
	}
	if err := metric.Register(registerer, m.decisions, m.ended, m.failures, m.wait, m.artifacts); err != nil {
		return nil, err
	}
	return m, nil
}
