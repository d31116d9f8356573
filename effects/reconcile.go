package effects

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// reconcileWorker resolves UNKNOWN effects (docs/design.md). With a status check: present →
// CONFIRMED; absent → PENDING and a new dispatch (FAILED when no attempts are left); duplicate →
// CONFIRMED plus a compensation for each extra; inconclusive → counted, and asked again with
// backoff (River retries this job), STUCK at the connector's StatusCheckLimit-th inconclusive
// answer. Without one: retry-safe effects are dispatched again with the same key while attempts
// last; the rest become STUCK.
//
// The limit is compared with the effect's count of inconclusive answers (inconclusive_checks),
// added to in the transaction that records each one, never with the job's attempt: a run whose
// answer was not recorded — its reactor died and the job was handed back, or the write failed —
// asked nothing as far as the effect is concerned.
type reconcileWorker struct{ effectWorker[reconcileArgs] }

// NextRetry spaces the status checks of an inconclusive effect by the connector's backoff, retry n
// coming after the n-th inconclusive answer.
func (w *reconcileWorker) NextRetry(job *river.Job[reconcileArgs]) time.Time {
	return time.Now().Add(w.client.statusCheckDelay(job.Args.EffectID, job.Attempt))
}

// statusCheckDelay is how long an UNKNOWN effect waits for its next status check. jobAttempt
// stands in for the count of inconclusive answers when the effect cannot be read.
func (c *Client) statusCheckDelay(effectID uuid.UUID, jobAttempt int) time.Duration {
	row, err := c.queries.EffectGetByID(context.Background(), effectID)
	if err != nil {
		return jitter(defaultBackoff(jobAttempt))
	}
	retry := max(int(row.InconclusiveChecks), 1) // a run that recorded nothing waits as after one
	if connector, ok := c.registry.Get(row.Connector); ok {
		return connector.retryDelay(retry)
	}
	return jitter(defaultBackoff(retry))
}

func (w *reconcileWorker) Work(ctx context.Context, job *river.Job[reconcileArgs]) error {
	c := w.client
	row, err := c.loader.load(ctx, job.Args.EffectID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return river.JobSnooze(time.Second)
	}
	if State(row.State) != StateUnknown || row.JobID == nil || *row.JobID != job.ID {
		return nil
	}
	return workInEffectSpan(ctx, c, spanReconcile, job, row, w.reconcile)
}

// reconcile resolves row, an UNKNOWN effect of job; span is the reconciliation's.
func (w *reconcileWorker) reconcile(ctx context.Context, span trace.Span, job *river.Job[reconcileArgs], row dbsqlc.ReckonEffect) error {
	c := w.client
	connector, ok := c.registry.Get(row.Connector)
	if !ok {
		c.logger.ErrorContext(ctx, "reconcile: no connector registered in this reactor; waiting",
			slog.String("connector", row.Connector), slog.String("effect_id", row.ID.String()))
		setOutcome(span, "waiting: connector not registered", false, nil)
		return river.JobSnooze(unknownConnectorSnooze)
	}
	if c.ownerUnhooked(ctx, row.Owner, row.ID, "reconcile") {
		setOutcome(span, "waiting: owner has no settle hook", false, nil)
		return river.JobSnooze(unknownConnectorSnooze)
	}
	// An operator's pause stops status checks too (pause.go): it snoozes, no attempt spent, and
	// checks again when the pause is over (within River's scheduler interval of the resume).
	if c.limits.operatorPaused(ctx, row.Connector, row.TenantID) {
		setOutcome(span, "waiting: connector paused by an operator", false, nil)
		c.metrics.limitWaits.WithLabelValues(row.Connector, pauseReason).Inc()
		return river.JobSnooze(riverSchedulerInterval)
	}
	actor := "reactor:" + c.config.ID
	t := transition{from: StateUnknown, fence: fence{jobID: &job.ID}, actor: actor}
	duplicates, inconclusive := c.decideUnknown(ctx, row, connector, &t)
	if t.to == StatePending {
		c.holdCancelledRun(ctx, row, &t) // run.go: a cancelled run's effects are not dispatched again
	}

	var (
		compensations []*Effect
		checks        int // inconclusive answers recorded, this one included
		settled       dbsqlc.ReckonEffect
	)
	err := c.withTx(ctx, func(tx pgx.Tx) (err error) {
		if inconclusive != nil {
			t.to = "" // decided by the count (withTx may run this function again)
			if checks, err = countInconclusiveTx(ctx, tx, row.ID, job.ID); err != nil {
				return err
			}
			if checks < connector.StatusCheckLimit {
				return nil // the count commits; the job fails below and River retries it
			}
			t.to, t.errMsg = StateStuck, inconclusive.Reason
			t.reason = fmt.Sprintf("status check inconclusive %d times: %s", checks, inconclusive.Reason)
			t.detail["inconclusive_checks"] = checks
		}
		if t.to == StatePending {
			if t.newJobID, err = c.insertDispatchJob(ctx, tx, row.ID, row.TimeoutMs, time.Time{}); err != nil {
				return err
			}
		}
		if settled, err = c.settle(ctx, tx, row.ID, t); err != nil {
			return err
		}
		// Assigned, not appended: withTx runs this function again after a deadlock, and the
		// compensations of an aborted try were never recorded.
		if compensations, err = c.compensateDuplicatesTx(ctx, tx, settled, duplicates, actor); err != nil {
			return err
		}
		return completeJobTx(ctx, tx, job)
	})
	if errors.Is(err, errFencedOut) {
		what := "reconciliation to " + string(t.to)
		if t.to == "" {
			what = "inconclusive status check"
		}
		if span.IsRecording() {
			span.SetAttributes(attrFencedOut.Bool(true))
		}
		c.observeFencedOut(ctx, row.ID, row.Connector, actor, what, t.detail)
		return nil
	}
	if err != nil {
		return err
	}
	if t.to == "" { // an inconclusive answer below the limit, counted
		return fmt.Errorf("status check inconclusive (%d of %d): %s", checks, connector.StatusCheckLimit, inconclusive.Reason)
	}
	setOutcome(span, string(t.to), t.to == StateStuck || t.to == StateFailed, nil)
	c.countSettlement(row.Connector, row.Policy, StateUnknown, t.to, settled.CreatedAt, settled.UpdatedAt)
	for range compensations {
		c.metrics.compensations.WithLabelValues(row.Connector).Inc()
	}
	return nil
}

// decideUnknown sets where t takes row, an UNKNOWN effect: by its connector's status check when
// it has one (and row is not a compensation), else by its policy and attempts left. It returns how
// many compensations a duplicate needs, and an inconclusive answer, which leaves t.to to the count
// of such answers (reconcile).
func (c *Client) decideUnknown(ctx context.Context, row dbsqlc.ReckonEffect, connector *Connector, t *transition) (duplicates int, inconclusive *Status) {
	retrySafe := Policy(row.Policy).RetrySafe()
	attemptsLeft := row.Attempts < row.MaxAttempts
	if connector.StatusCheck == nil || row.CompensatesID != nil {
		switch {
		case retrySafe && attemptsLeft:
			t.to, t.reason = StatePending, "retry safe, no status check: dispatch again with the same idempotency key"
		case retrySafe:
			t.to, t.reason = StateStuck, fmt.Sprintf("retry safe but all %d attempts made and the last one's outcome is unknown", row.MaxAttempts)
		default:
			t.to, t.reason = StateStuck, "not retry safe and no status check: a person must decide"
		}
		return 0, nil
	}
	status := c.checkStatus(ctx, row, connector)
	t.detail = map[string]any{"status": status.Kind.String(), "inconclusive_checks": row.InconclusiveChecks}
	switch status.Kind {
	case StatusPresent:
		t.to, t.result, t.reason = StateConfirmed, status.Result, "status check: present"
	case StatusAbsent:
		if attemptsLeft {
			t.to, t.reason = StatePending, "status check: absent; dispatch again"
		} else {
			t.to, t.reason = StateFailed, fmt.Sprintf("status check: absent, and all %d attempts are spent", row.MaxAttempts)
		}
	case StatusDuplicate:
		duplicates = max(status.Count-1, 1)
		t.to, t.result = StateConfirmed, status.Result
		t.reason = fmt.Sprintf("status check: performed %d times; compensating %d", max(status.Count, 2), duplicates)
	default:
		return 0, &status // counted by reconcile: STUCK at the limit, else asked again
	}
	return duplicates, nil
}

// countInconclusiveTx adds an inconclusive answer to the count of the effect, still handed to
// jobID, and returns the count, this answer included.
func countInconclusiveTx(ctx context.Context, tx pgx.Tx, effectID uuid.UUID, jobID int64) (int, error) {
	n, err := dbsqlc.New(tx).EffectAddInconclusiveCheck(ctx, dbsqlc.EffectAddInconclusiveCheckParams{ID: effectID, JobID: jobID})
	if postgres.NoRows(err) {
		return 0, errFencedOut
	}
	if err != nil {
		return 0, fmt.Errorf("effects: count inconclusive status check of effect %s: %w", effectID, err)
	}
	return int(n), nil
}

// compensateDuplicatesTx enqueues a compensation of settled for each of the duplicates a status
// check found, and returns them.
func (c *Client) compensateDuplicatesTx(ctx context.Context, tx pgx.Tx, settled dbsqlc.ReckonEffect, duplicates int, actor string) ([]*Effect, error) {
	var compensations []*Effect
	for i := range duplicates {
		comp, err := c.compensateTx(ctx, tx, settled, CompensateOpts{KeySuffix: fmt.Sprintf("duplicate-%d", i+2)}, actor,
			"status check found the effect performed more than once")
		if err != nil {
			return nil, err
		}
		compensations = append(compensations, comp)
	}
	return compensations, nil
}

// checkStatus calls the connector's status check. Errors and panics are inconclusive, and so is
// an answer that cannot be acted on.
func (c *Client) checkStatus(ctx context.Context, row dbsqlc.ReckonEffect, connector *Connector) Status {
	var status Status
	callConnector(ctx, c, spanStatusCheck, row, connector, callOf(row), connector.StatusCheck, func(span trace.Span, answer Status, err error) {
		status = usableStatus(answer, err)
		setOutcome(span, status.Kind.String(), status.Kind == StatusInconclusive, err)
	})
	c.metrics.statusChecks.WithLabelValues(row.Connector, status.Kind.String()).Inc()
	return status
}

// usableStatus is a status check's answer, or Inconclusive when it failed or cannot be acted on:
// a duplicate counted below two, or a result that cannot be stored.
func usableStatus(status Status, err error) Status {
	switch {
	case err != nil:
		return Inconclusive(err.Error())
	case status.Kind == StatusDuplicate && status.Count < 2:
		return Inconclusive(fmt.Sprintf("duplicate with count %d", status.Count))
	case status.Kind == StatusPresent || status.Kind == StatusDuplicate:
		if err := checkResult(status.Result); err != nil {
			return Inconclusive(fmt.Sprintf("%s, but its result cannot be stored: %v", status.Kind, err))
		}
	}
	return status
}
