package turns

import (
	"github.com/prometheus/client_golang/prometheus"
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
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "turn", Name: "decisions_total",
			Help: "Supersede decisions taken by turns, by action and decider.",
		}, []string{"action", "decider"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "turn", Name: "ended_total",
			Help: "Turns ended by this process, by final status.",
		}, []string{"status"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "turn", Name: "attempt_failures_total",
			Help: "Turn attempts whose handler or commit failed.",
		}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "reckon", Subsystem: "turn", Name: "mutex_wait_seconds",
			Help:    "Time to acquire the session mutex, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 3, 12),
		}, []string{"outcome"}),
		artifacts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "turn", Name: "artifacts_total",
			Help: "Turn artifacts: lookups that reused a stored artifact, found it invalidated or found none (miss), and saves.",
		}, []string{"result"}),
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
	if registerer == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.decisions, m.ended, m.failures, m.wait, m.artifacts} {
		if err := registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
