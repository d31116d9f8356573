package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/metric"
)

// metrics are the Prometheus collectors of a Client, registered on Config.Registerer:
//
//	reckon_effect_transitions_total{connector,policy,from,to}    transitions made by this process
//	reckon_effect_settle_latency_seconds{connector,state}        enqueue to CONFIRMED or FAILED, settled by this process
//	reckon_effect_dispatch_duration_seconds{connector,outcome}   connector calls
//	reckon_effect_status_checks_total{connector,status}          status-check answers
//	reckon_effect_compensations_total{connector}                 compensations enqueued
//	reckon_effect_fenced_writes_total{connector}                 late outcomes refused by the fence
//	reckon_effect_swept_total{reason}                            effects the sweeper took over
//	reckon_effect_claim_batch_size                               effects per claim of unclaimed effects (claim.go)
//	reckon_connector_limit_waits_total{connector,reason}         calls held back by a limit, pause or circuit (limit.go)
//	reckon_connector_paused_seconds{connector}                   how long an upstream's Retry-After still pauses the connector
//	reckon_connector_operator_paused_seconds{connector}          how long an operator's pause has held the connector (pause.go)
//	reckon_connector_circuit{connector}                          the connector's circuit: 0 closed, 1 half open, 2 open
//	reckon_effect_accepted_total{connector}                      acceptances awaiting a callback
//	reckon_effect_callbacks_total{connector,to}                  callbacks that resolved an effect
//	reckon_effect_deadlines_total{connector,to}                  async deadlines that passed
//	reckon_effects{state}                                        PENDING, UNKNOWN and STUCK effects (shared statistics)
//	reckon_effects_oldest_pending_seconds{connector}             queue lag (shared statistics)
//	reckon_effects_awaiting_confirmation{connector}              effects awaiting their confirmation (shared statistics)
//	reckon_effects_oldest_awaiting_confirmation_seconds{connector} the age of the oldest (shared statistics)
//	reckon_stats_age_seconds                                     how old the shared statistics reported are
//	reckon_stats_computations_total{part}                        shared statistics computed by this process
//	reckon_reactors_live                                         reactors of the queue with a current heartbeat
//	reckon_reactor_jobs_taken_over_total{kind}                   River jobs of dead reactors handed back
//	reckon_reactor_takeover_seconds                              a dead reactor's last heartbeat to the takeover
//
// The series operators alert on exist at 0 before their first event (see connectorCollector,
// sweptReasons and precreatedJobKinds), so rate() over them works from the first scrape.
type metrics struct {
	transitions     *prometheus.CounterVec
	settleSeconds   *prometheus.HistogramVec
	dispatchSeconds *prometheus.HistogramVec
	statusChecks    *prometheus.CounterVec
	compensations   *prometheus.CounterVec
	fenced          *prometheus.CounterVec
	swept           *prometheus.CounterVec
	claimBatch      prometheus.Histogram
	limitWaits      *prometheus.CounterVec
	accepted        *prometheus.CounterVec
	callbacks       *prometheus.CounterVec
	deadlines       *prometheus.CounterVec
	takenOver       *prometheus.CounterVec
	takeoverSeconds prometheus.Histogram
	// statsComputations counts the parts of the shared statistics this process computed.
	statsComputations *prometheus.CounterVec
}

// dispatchBuckets are the upper bounds of reckon_effect_dispatch_duration_seconds: from 5 ms, and
// past every call timeout — a call cut at the default 30 s timeout lands in the 60 s bucket, one
// cut at the longest (5 m) in the 600 s one — so timed-out calls are told apart from the fast
// ones and never only in +Inf.
var dispatchBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// settleBuckets are the upper bounds of reckon_effect_settle_latency_seconds, from enqueue to
// CONFIRMED or FAILED: from 5 ms (an effect dispatched at once) through retries and
// reconciliations (minutes) and async effects awaiting their callback (the default 10 m) to past
// the longest async timeout (MaxAsyncTimeout, 7 days: a deadline that passed at it lands in the
// 14-day bucket). An operator's decision on a STUCK effect can take longer: +Inf.
var settleBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800,
	3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600, 14 * 24 * 3600,
}

// Series pre-created at 0 so that rate() and alerts on them work before the first event: every
// registered connector's dispatch durations by these outcomes (accepted, only for async
// connectors, appears with its first), its transitions made by reactors (those by operators,
// from STUCK, appear with their first), its settle latencies, and the job kinds of this package.
var (
	precreatedOutcomes    = []outcomeKind{outcomeConfirmed, outcomeFailed, outcomeRetry, outcomeUnknown}
	precreatedTransitions = [][2]State{
		{StatePending, StateConfirmed}, {StatePending, StateFailed}, {StatePending, StateUnknown},
		{StateUnknown, StateConfirmed}, {StateUnknown, StatePending}, {StateUnknown, StateFailed}, {StateUnknown, StateStuck},
	}
	precreatedSettled  = []State{StateConfirmed, StateFailed}
	precreatedStatuses = []StatusKind{StatusPresent, StatusAbsent, StatusDuplicate, StatusInconclusive}
	precreatedJobKinds = []string{dispatchArgs{}.Kind(), reconcileArgs{}.Kind(), deadlineArgs{}.Kind()}
)

func newMetrics(registerer prometheus.Registerer, client *Client) (*metrics, error) {
	m := &metrics{
		transitions: metric.CounterVec("reckon_effect_transitions_total",
			"Effect state transitions made by this process.", "connector", "policy", "from", "to"),
		settleSeconds: metric.HistogramVec("reckon_effect_settle_latency_seconds",
			"Time from an effect's enqueue to its settlement (CONFIRMED or FAILED) by this process, on the database's clock.", settleBuckets, "connector", "state"),
		dispatchSeconds: metric.HistogramVec("reckon_effect_dispatch_duration_seconds",
			"Duration of connector dispatch calls, by classified outcome.", dispatchBuckets, "connector", "outcome"),
		statusChecks: metric.CounterVec("reckon_effect_status_checks_total",
			"Status-check answers while reconciling UNKNOWN effects.", "connector", "status"),
		compensations: metric.CounterVec("reckon_effect_compensations_total",
			"Compensation effects enqueued.", "connector"),
		fenced: metric.CounterVec("reckon_effect_fenced_writes_total",
			"Late outcomes refused because the effect had moved on (recorded in the audit trail only).", "connector"),
		swept: metric.CounterVec("reckon_effect_swept_total",
			"Effects the sweeper took over because their attempt or job was gone.", "reason"),
		claimBatch: metric.Histogram("reckon_effect_claim_batch_size",
			"Effects enqueued one at a time that this process claimed into dispatch jobs, per claim transaction that found any (_sum: effects claimed).", []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
		limitWaits: metric.CounterVec("reckon_connector_limit_waits_total",
			"Calls held back (their effect snoozed, no attempt spent) by the connector's rate (rate), cap on calls in flight (in_flight), an upstream's Retry-After (paused), an open circuit (open), this process's other callers of the key asking first for longer than the call could wait (busy), or an operator's pause (operator).", "connector", "reason"),
		accepted: metric.CounterVec("reckon_effect_accepted_total",
			"Dispatches the upstream accepted, to finish by callback.", "connector"),
		callbacks: metric.CounterVec("reckon_effect_callbacks_total",
			"Callbacks that resolved an effect, by the state they set.", "connector", "to"),
		deadlines: metric.CounterVec("reckon_effect_deadlines_total",
			"Async deadlines that passed before the callback, by the state they set.", "connector", "to"),
		takenOver: metric.CounterVec("reckon_reactor_jobs_taken_over_total",
			"Running River jobs of dead reactors that this process handed back to River, by job kind.", "kind"),
		takeoverSeconds: metric.Histogram("reckon_reactor_takeover_seconds",
			"Time from a dead reactor's last heartbeat (it died within a liveness interval after it) to the takeover of its jobs.", []float64{0.5, 1, 2, 3, 4, 5, 7.5, 10, 15, 30, 60, 300}),
		statsComputations: metric.CounterVec("reckon_stats_computations_total",
			"Parts of the shared statistics this process computed for the whole fleet.", "part"),
	}
	for _, reason := range sweptReasons {
		m.swept.WithLabelValues(reason)
	}
	for _, kind := range precreatedJobKinds {
		m.takenOver.WithLabelValues(kind)
	}
	perConnector := &connectorCollector{metrics: m, registry: client.registry}
	shared := &statsCollector{client: client, metrics: m}
	throttles := &throttleCollector{client: client}
	if err := metric.Register(registerer, perConnector, throttles, m.swept, m.claimBatch, m.callbacks, m.deadlines, m.takenOver, m.takeoverSeconds, shared); err != nil {
		return nil, err
	}
	return m, nil
}

// connectorCollector collects the metrics by connector whose series docs/operations.md names for
// alerts: at each scrape it first creates, at 0, those of every connector registered then
// (connectors come and go while a reactor runs: HTTP connectors are reloaded), so a series exists
// from the first scrape after its connector is registered. Per connector: the transitions
// reactors make (precreatedTransitions, under the connector's policy now), the settle latencies
// (precreatedSettled), the dispatch durations by outcome (precreatedOutcomes), fenced writes,
// compensations, acceptances and, for a connector with a status check, its answers by status.
type connectorCollector struct {
	metrics  *metrics
	registry *Registry
}

func (c *connectorCollector) collectors() []prometheus.Collector {
	m := c.metrics
	return []prometheus.Collector{m.transitions, m.settleSeconds, m.dispatchSeconds, m.statusChecks, m.compensations, m.fenced, m.accepted, m.limitWaits}
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
		policy := string(PolicyOf(connector))
		for _, pair := range precreatedTransitions {
			m.transitions.WithLabelValues(name, policy, string(pair[0]), string(pair[1]))
		}
		for _, state := range precreatedSettled {
			m.settleSeconds.WithLabelValues(name, string(state))
		}
		for _, outcome := range precreatedOutcomes {
			m.dispatchSeconds.WithLabelValues(name, string(outcome))
		}
		m.fenced.WithLabelValues(name)
		for _, reason := range limitWaitReasons {
			m.limitWaits.WithLabelValues(name, reason)
		}
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

// limitWaitReasons are the values of reckon_connector_limit_waits_total's reason label.
var limitWaitReasons = []string{"rate", "in_flight", "paused", "open", "busy", pauseReason}

var (
	pausedDesc = prometheus.NewDesc("reckon_connector_paused_seconds",
		"Seconds an upstream's Retry-After still pauses the connector's calls (the longest of its tenants'); 0 when not paused.",
		[]string{"connector"}, nil)
	operatorPausedDesc = prometheus.NewDesc("reckon_connector_operator_paused_seconds",
		"Seconds since an operator paused the connector (its oldest pause, of every tenant or of one); 0 when not paused.",
		[]string{"connector"}, nil)
	circuitDesc = prometheus.NewDesc("reckon_connector_circuit",
		"The connector's circuit breaker (the worst of its tenants'): 0 closed, 1 half open (one probe call may go), 2 open.",
		[]string{"connector"}, nil)
)

// throttleCollector reports, at each scrape, the pauses and circuits of every registered connector
// (and of any other connector throttled) from the process's view of the limits (limit.go), read
// again when older than limitViewTTL.
type throttleCollector struct{ client *Client }

func (t *throttleCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pausedDesc
	ch <- operatorPausedDesc
	ch <- circuitDesc
}

func (t *throttleCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	throttled, pauses := t.client.limits.snapshot(ctx)
	names := t.client.registry.Names()
	for name := range throttled {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for name := range pauses {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	now := time.Now()
	for _, name := range names {
		th := throttled[name]
		circuit := 0.0
		switch {
		case th.open && now.Before(th.openUntil):
			circuit = 2
		case th.open:
			circuit = 1
		}
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, max(th.pausedUntil.Sub(now).Seconds(), 0), name)
		ch <- prometheus.MustNewConstMetric(circuitDesc, prometheus.GaugeValue, circuit, name)
		pausedFor := 0.0
		for _, p := range pauses[name] {
			pausedFor = max(pausedFor, now.Sub(p.PausedAt).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(operatorPausedDesc, prometheus.GaugeValue, pausedFor, name)
	}
}

// statsCollector reports the shared statistics (stats.go) as stored, read at each scrape: one
// primary-key read of this client's parts, and a count of the live reactors (a few rows of
// reckon_reactors). If the database cannot be read, these series are left out of the scrape (and
// the failure logged); the rest of the scrape is served.
type statsCollector struct {
	client  *Client
	metrics *metrics
}

var (
	stateDesc = prometheus.NewDesc("reckon_effects",
		"Effects in each unresolved state in the whole database, as of the last computation of the shared statistics.",
		[]string{"state"}, nil)
	oldestPendingDesc = prometheus.NewDesc("reckon_effects_oldest_pending_seconds",
		"Age of each connector's oldest PENDING effect not awaiting a callback (queue lag), as of the last computation of the shared statistics; 0 when none.",
		[]string{"connector"}, nil)
	awaitingConfirmationDesc = prometheus.NewDesc("reckon_effects_awaiting_confirmation",
		"PENDING effects of each connector awaiting their confirmation (a person's), as of the last computation of the shared statistics.",
		[]string{"connector"}, nil)
	oldestAwaitingConfirmationDesc = prometheus.NewDesc("reckon_effects_oldest_awaiting_confirmation_seconds",
		"Age of each connector's oldest effect awaiting its confirmation, as of the last computation of the shared statistics; 0 when none.",
		[]string{"connector"}, nil)
	statsAgeDesc = prometheus.NewDesc("reckon_stats_age_seconds",
		"Seconds since the shared statistics this process reports were computed (its oldest part; +Inf while one was never computed).",
		nil, nil)
	reactorsLiveDesc = prometheus.NewDesc("reckon_reactors_live",
		"Reactors of this queue whose heartbeat is current (at most 3 liveness intervals old) and that no reactor found dead.",
		nil, nil)
)

// liveHeartbeats is how many liveness intervals old a reactor's heartbeat may be for it to count
// as live (reckon_reactors_live); at least minLiveHeartbeat.
const (
	liveHeartbeats   = 3
	minLiveHeartbeat = 3 * time.Second
)

func (s *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{stateDesc, oldestPendingDesc, awaitingConfirmationDesc, oldestAwaitingConfirmationDesc, statsAgeDesc, reactorsLiveDesc} {
		ch <- desc
	}
	s.metrics.statsComputations.Describe(ch)
}

func (s *statsCollector) Collect(ch chan<- prometheus.Metric) {
	c := s.client
	for _, part := range c.statsParts() {
		s.metrics.statsComputations.WithLabelValues(part)
	}
	s.metrics.statsComputations.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// On a database not migrated yet (or not to 0022) the statistics are left out quietly: the
	// process says once that the schema is not current, and /readyz answers 503.
	if err := SchemaError(s.collectStats(ctx, ch)); err != nil && !errors.Is(err, ErrSchemaNotCurrent) {
		c.logger.WarnContext(ctx, "metrics: read the shared statistics; left out of this scrape", slog.String("error", err.Error()))
	}
	live, err := c.queries.ReactorCountLive(ctx, dbsqlc.ReactorCountLiveParams{
		Queue:   c.config.Queue,
		StaleMs: int32(max(liveHeartbeats*c.config.LivenessInterval, minLiveHeartbeat) / time.Millisecond),
	})
	if err != nil {
		c.logger.WarnContext(ctx, "metrics: count live reactors; left out of this scrape", slog.String("error", err.Error()))
		return
	}
	ch <- prometheus.MustNewConstMetric(reactorsLiveDesc, prometheus.GaugeValue, float64(live))
}

// collectStats reports the stored parts: the effects part's gauges and the age of the oldest part.
// A part never computed yet has no gauges, and makes the age +Inf.
func (s *statsCollector) collectStats(ctx context.Context, ch chan<- prometheus.Metric) error {
	c := s.client
	parts := c.statsParts()
	rows, err := c.queries.StatsList(ctx, parts)
	if err != nil {
		return err
	}
	age := 0.0
	if len(rows) < len(parts) {
		age = math.Inf(1)
	}
	for _, row := range rows {
		if !row.Computed {
			age = math.Inf(1)
			continue
		}
		age = max(age, row.AgeSeconds)
		if row.Part != StatsPartEffects {
			continue // a plugin's, reported by its own collector
		}
		var stats effectsStats
		if err := json.Unmarshal(row.Value, &stats); err != nil {
			return fmt.Errorf("stats part %q: %w", row.Part, err)
		}
		if stats.OldestPending == nil {
			stats.OldestPending = map[string]float64{}
		}
		for _, state := range []State{StatePending, StateUnknown, StateStuck} {
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, float64(stats.States[state]), string(state))
		}
		// Every registered connector, at 0 when none of its effects waits, and any other connector
		// with effects waiting (registered in other reactors only).
		for _, name := range c.registry.Names() {
			if _, ok := stats.OldestPending[name]; !ok {
				stats.OldestPending[name] = 0
			}
		}
		for name := range stats.AwaitingConfirmation {
			if _, ok := stats.OldestPending[name]; !ok {
				stats.OldestPending[name] = 0
			}
		}
		for name, seconds := range stats.OldestPending {
			ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, seconds, name)
			// The same connectors: every registered one, and any other with effects waiting.
			ch <- prometheus.MustNewConstMetric(awaitingConfirmationDesc, prometheus.GaugeValue, float64(stats.AwaitingConfirmation[name]), name)
			ch <- prometheus.MustNewConstMetric(oldestAwaitingConfirmationDesc, prometheus.GaugeValue, stats.OldestAwaitingConfirmation[name], name)
		}
	}
	ch <- prometheus.MustNewConstMetric(statsAgeDesc, prometheus.GaugeValue, age)
	return nil
}
