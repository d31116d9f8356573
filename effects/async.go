package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Pending events (docs/design.md, async effects): a connector's upstream may accept an effect and finish it
// later, calling back. The effect stays PENDING, awaiting its callback, until a River job
// scheduled at its deadline (the durable timer) moves it on.

// DefaultAsyncTimeout is how long an accepted effect awaits its callback when neither its spec
// nor its connector says (Config.AsyncTimeout changes it).
const DefaultAsyncTimeout = 10 * time.Minute

// MaxAsyncTimeout bounds every async timeout — Config.AsyncTimeout, Connector.AsyncTimeout and
// Spec.AsyncTimeout (stored in milliseconds in an integer): 7 days.
const MaxAsyncTimeout = 7 * 24 * time.Hour

// maxCorrelationIDLen bounds the correlation ids a connector may return.
const maxCorrelationIDLen = 512

// AcceptedError is the outcome Accepted builds; see Accepted.
type AcceptedError struct {
	// CorrelationID names the operation to its callback; empty means Call.CorrelationID.
	CorrelationID string
}

// Error names the correlation id the callback is awaited under.
func (e *AcceptedError) Error() string {
	return "accepted upstream, awaiting callback " + e.CorrelationID
}

// Accepted is what Dispatch returns when the upstream accepted the effect and will report its
// outcome later, by callback, under correlationID — normally the call's own CorrelationID, which
// the connector passed upstream (empty means that one). The effect stays PENDING, awaiting its
// callback (Client.Callback), until its deadline: Spec.AsyncTimeout, else the connector's
// AsyncTimeout, else Config.AsyncTimeout. A callback with a result makes it CONFIRMED, one with
// an error FAILED. If the deadline passes first the outcome is unknown: the effect becomes
// UNKNOWN and is reconciled (soft timeout; a late callback still resolves it), or with a hard
// timeout the connector's Cancel is called first (FAILED when the upstream confirms).
//
// Unlike Retryable (the call provably did not take effect: try again) and Permanent (it
// definitely did not and will not: FAILED), Accepted says the call did reach the upstream and
// will take effect or not later: it is neither retried nor failed. A connector must not return
// Accepted for an upstream that never calls back: the effect would only ever time out.
func Accepted(correlationID string) error { return &AcceptedError{CorrelationID: correlationID} }

// IsAccepted reports whether err was built by Accepted.
func IsAccepted(err error) bool {
	var a *AcceptedError
	return errors.As(err, &a)
}

func isAccepted(err error) bool { return IsAccepted(err) }

// classifyAccepted turns an Accepted answer into an outcome. A correlation id that cannot be
// stored leaves the outcome unknown: the upstream did accept something.
func classifyAccepted(err error) outcome {
	var a *AcceptedError
	errors.As(err, &a)
	id := a.CorrelationID
	if len(id) > maxCorrelationIDLen || strings.ContainsAny(id, "\r\n") || jsonx.CheckText(id) != nil {
		return outcome{kind: outcomeUnknown, err: fmt.Errorf("connector accepted with an unusable correlation id (%d bytes)", len(id))}
	}
	return outcome{kind: outcomeAccepted, correlationID: id}
}

// correlationIDOf is the self-routing correlation id of an effect: "{run}:{effect id}", or
// "{effect id}" without a run.
func correlationIDOf(row dbsqlc.ReckonEffect) string {
	if run := deref(row.RunID); run != "" {
		return run + ":" + row.ID.String()
	}
	return row.ID.String()
}

// ParseCorrelationID splits a self-routing correlation id "{run}:{effect id}" (or "{effect id}")
// into the run and the effect it names. Run ids may contain ':'; the effect id follows the last
// one.
func ParseCorrelationID(correlationID string) (run string, effectID uuid.UUID, err error) {
	tail := correlationID
	if i := strings.LastIndexByte(correlationID, ':'); i >= 0 {
		run, tail = correlationID[:i], correlationID[i+1:]
	}
	effectID, err = uuid.Parse(tail)
	if err != nil || len(tail) != 36 {
		return "", uuid.Nil, fmt.Errorf("%w: %q is not {run}:{uuid}", ErrUnknownCorrelation, correlationID)
	}
	return run, effectID, nil
}

// asyncTimeout is the await of an accepted effect: per call, else per connector, else default.
func (c *Client) asyncTimeout(row dbsqlc.ReckonEffect, connector *Connector) time.Duration {
	switch {
	case row.AsyncTimeoutMs != nil:
		return time.Duration(*row.AsyncTimeoutMs) * time.Millisecond
	case connector.AsyncTimeout > 0:
		return connector.AsyncTimeout
	default:
		return c.config.AsyncTimeout
	}
}

type deadlineArgs struct {
	EffectID  uuid.UUID `json:"effect_id"`
	TimeoutMS int32     `json:"timeout_ms"`
}

func (deadlineArgs) Kind() string       { return "reckon_deadline" }
func (a deadlineArgs) timeoutMS() int32 { return a.TimeoutMS }

// recordAccepted records, in tx and fenced by f, that the upstream accepted the effect: it stays
// PENDING, handed to a deadline job scheduled at its deadline, with an observation in the audit
// trail. A correlation id already taken by another effect leaves the outcome unknown.
func (c *Client) recordAccepted(ctx context.Context, tx pgx.Tx, a attempt, correlationID string) (dbsqlc.ReckonEffect, error) {
	row, connector, f, actor := a.row, a.connector, a.fence, a.actor
	own := correlationIDOf(row)
	if correlationID == "" {
		correlationID = own
	}
	q := dbsqlc.New(tx)
	if correlationID != own {
		others, err := q.EffectListByCorrelationIDForUpdate(ctx, dbsqlc.EffectListByCorrelationIDForUpdateParams{
			CorrelationID: &correlationID, TenantID: row.TenantID,
		})
		switch {
		case err != nil:
			return row, fmt.Errorf("effects: look up correlation id: %w", err)
		case len(others) > 0 && others[0].ID != row.ID:
			other := others[0]
			reconcileJob, err := c.insertReconcileJob(ctx, tx, row.ID, row.TimeoutMs, row.Connector)
			if err != nil {
				return row, err
			}
			return c.settle(ctx, tx, row.ID, transition{
				from: StatePending, to: StateUnknown, fence: f, attempted: 1, newJobID: reconcileJob, actor: actor,
				errMsg: fmt.Sprintf("accepted upstream under correlation id %q, which effect %s already holds", correlationID, other.ID),
				reason: "accepted under a correlation id already in use: outcome unknown",
			})
		}
	}
	hard := row.AsyncHardTimeout || connector.HardTimeout
	deadline := time.Now().Add(c.asyncTimeout(row, connector)).Truncate(time.Microsecond)
	res, err := c.river.InsertTx(ctx, tx, deadlineArgs{EffectID: row.ID, TimeoutMS: row.TimeoutMs},
		&river.InsertOpts{Queue: c.config.Queue, MaxAttempts: dispatchJobMaxAttempts, ScheduledAt: deadline})
	if err != nil {
		return row, fmt.Errorf("effects: insert deadline job: %w", err)
	}
	settled, err := q.EffectAccept(ctx, dbsqlc.EffectAcceptParams{
		ID: row.ID, CorrelationID: correlationID, DeadlineAt: deadline, NewJobID: res.Job.ID,
		LeaseToken: f.leaseToken, JobID: f.jobID,
	})
	if postgres.NoRows(err) {
		return row, errFencedOut
	}
	if err != nil {
		return row, fmt.Errorf("effects: record acceptance of %s: %w", row.ID, err)
	}
	detail, err := marshalDetail(map[string]any{
		"correlation_id": correlationID, "deadline_at": deadline, "hard_timeout": hard,
		"attempt": settled.Attempts, "deadline_job_id": res.Job.ID,
	})
	if err != nil {
		return row, err
	}
	if err := q.EffectObservationInsert(ctx, dbsqlc.EffectObservationInsertParams{
		EffectID: row.ID, Actor: actor, Reason: "accepted upstream: awaiting callback", Detail: detail,
	}); err != nil {
		return row, fmt.Errorf("effects: record acceptance of %s: %w", row.ID, err)
	}
	c.metrics.accepted.WithLabelValues(row.Connector).Inc()
	return settled, nil
}

// deadlineWorker is the durable timer of an accepted effect. When it runs and the effect still
// awaits its callback (PENDING and still handed to this job), the deadline has passed: the
// outcome is unknown (UNKNOWN, reconciled; a late callback still resolves it), unless the timeout
// is hard and the connector's Cancel gets the upstream to abandon the operation (FAILED). A
// callback, a cancelled run or anything else that moved the effect on makes it a no-op.
type deadlineWorker struct{ effectWorker[deadlineArgs] }

func (w *deadlineWorker) Work(ctx context.Context, job *river.Job[deadlineArgs]) error {
	c := w.client
	row, err := c.queries.EffectGetByID(ctx, job.Args.EffectID)
	if postgres.NoRows(err) {
		return nil
	}
	if err != nil {
		return river.JobSnooze(time.Second)
	}
	if State(row.State) != StatePending || row.JobID == nil || *row.JobID != job.ID {
		return nil // resolved by its callback, cancelled, or handed on: the timer is a no-op
	}
	return workInEffectSpan(ctx, c, spanDeadline, job, row, w.deadline)
}

// deadline moves row, an accepted effect whose deadline passed, on; span is the deadline's.
func (w *deadlineWorker) deadline(ctx context.Context, span trace.Span, job *river.Job[deadlineArgs], row dbsqlc.ReckonEffect) error {
	c := w.client
	connector, ok := c.registry.Get(row.Connector)
	if !ok {
		setOutcome(span, "waiting: connector not registered", false, nil)
		return river.JobSnooze(unknownConnectorSnooze)
	}
	actor := "reactor:" + c.config.ID
	t := transition{from: StatePending, fence: fence{jobID: &job.ID}, actor: actor, detail: map[string]any{
		"correlation_id": deref(row.CorrelationID), "deadline_at": row.DeadlineAt, "job_id": job.ID,
	}}
	hard := row.AsyncHardTimeout || connector.HardTimeout
	switch {
	case hard && connector.Cancel != nil:
		if err := c.cancelUpstream(ctx, row, connector); err != nil {
			t.to, t.errMsg = StateUnknown, "hard timeout: the upstream could not be cancelled: "+err.Error()
			t.reason = "async deadline passed (hard timeout); cancelling upstream failed: outcome unknown"
		} else {
			t.to, t.errMsg = StateFailed, "hard timeout: cancelled upstream"
			t.reason = "async deadline passed (hard timeout): cancelled upstream"
		}
	case hard:
		t.to, t.errMsg = StateUnknown, "hard timeout: the connector cannot cancel upstream"
		t.reason = "async deadline passed (hard timeout) and the connector cannot cancel: outcome unknown"
	default:
		t.to, t.errMsg = StateUnknown, "async deadline passed without a callback"
		t.reason = "async deadline passed (soft timeout): outcome unknown; a late callback still resolves it"
	}
	setOutcome(span, string(t.to), true, errors.New(t.errMsg))
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	var settled dbsqlc.ReckonEffect
	err := c.withTx(recordCtx, func(tx pgx.Tx) (err error) {
		if t.to == StateUnknown {
			if t.newJobID, err = c.insertReconcileJob(recordCtx, tx, row.ID, row.TimeoutMs, row.Connector); err != nil {
				return err
			}
		}
		if settled, err = c.settle(recordCtx, tx, row.ID, t); err != nil {
			return err
		}
		return completeJobTx(recordCtx, tx, job)
	})
	if errors.Is(err, errFencedOut) {
		if span.IsRecording() {
			span.SetAttributes(attrFencedOut.Bool(true))
		}
		c.observeFencedOut(recordCtx, row.ID, row.Connector, actor, "deadline to "+string(t.to), t.detail)
		return nil
	}
	if err != nil {
		return err
	}
	c.metrics.deadlines.WithLabelValues(row.Connector, string(t.to)).Inc()
	c.countSettlement(row.Connector, row.Policy, StatePending, t.to, settled.CreatedAt, settled.UpdatedAt)
	return nil
}

// cancelUpstream calls the connector's Cancel.
func (c *Client) cancelUpstream(ctx context.Context, row dbsqlc.ReckonEffect, connector *Connector) error {
	call, err := c.signedCallOf(ctx, row)
	if err != nil {
		return err
	}
	_, _, err = callConnector(ctx, c, spanConnectorCancel, row, connector, call,
		func(ctx context.Context, call Call) (struct{}, error) { return struct{}{}, connector.Cancel(ctx, call) },
		func(span trace.Span, _ struct{}, err error) { recordError(span, err) })
	return err
}

// CallbackOpts adjusts a Callback. Nil means the defaults.
type CallbackOpts struct {
	// TenantID, when set, restricts the callback to that tenant's effects, for callbacks arriving
	// over a multi-tenant API: a correlation id naming another tenant's effect is
	// ErrUnknownCorrelation, exactly like one that names no effect, and nothing is recorded.
	// Default: any tenant.
	TenantID string
	// EffectID, when set, restricts the callback to that effect, for callbacks that prove they come
	// from its upstream (signed with its CallbackSecret): a correlation id that is neither the one
	// the effect was accepted under nor its self-routing id is ErrUnknownCorrelation, and nothing
	// is recorded. Default: the effect the correlation id names.
	EffectID uuid.UUID
}

// Callback resolves the effect awaiting correlationID with the upstream's report: errMsg empty
// means success (CONFIRMED with result, which may be empty), otherwise FAILED with errMsg. The
// effect's deadline timer becomes a no-op.
//
// Only an effect that awaits a callback is resolved by one (docs/async.md): an effect accepted
// upstream (Accepted; its correlation id is recorded) that is PENDING until its deadline, or
// UNKNOWN after it (a late callback); and a PENDING effect with an attempt in flight, since a fast
// upstream may call back before the dispatch has recorded the acceptance (that dispatch is then
// fenced out). Any other effect — never dispatched, waiting for a retry, UNKNOWN or settled
// without ever being accepted — is ErrNotAwaitingCallback.
//
// A callback repeating the recorded outcome (same result, or same error) succeeds and changes
// nothing, so an upstream may retry a callback whose answer it did not get. Errors:
// ErrUnknownCorrelation when no effect (of opts.TenantID's) has that correlation id;
// ErrNotAwaitingCallback as above; ErrCallbackConflict when the effect is CONFIRMED or FAILED with
// another outcome; ErrCallbackStuck when it is STUCK. The last three record the callback in the
// effect's audit trail and return the effect; nothing else changes. Bad input (a result that is
// not JSON, or both a result and an error) changes nothing; a database error rolls everything
// back.
func (c *Client) Callback(ctx context.Context, correlationID string, result json.RawMessage, errMsg string, opts *CallbackOpts) (*Effect, error) {
	var (
		effect  *Effect
		from    State // the state the callback resolved the effect from; "" when it changed nothing
		refused error
	)
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		effect, from, err = c.callbackTx(ctx, tx, correlationID, result, errMsg, opts)
		refused = nil
		if err != nil && effect != nil {
			refused = err
			return nil // committed: the refused callback stays in the effect's audit trail
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if refused != nil {
		return effect, refused
	}
	if from != "" {
		c.metrics.callbacks.WithLabelValues(effect.Connector, string(effect.State)).Inc()
		c.countSettlement(effect.Connector, dbsqlc.ReckonEffectPolicy(effect.Policy), from, effect.State, effect.CreatedAt, effect.UpdatedAt)
	}
	return effect, nil
}

// CallbackTx is Callback in tx, the caller's transaction: the resolution exists once tx commits,
// and not at all if it rolls back; the effect stays locked until then. A refused callback
// (ErrNotAwaitingCallback, ErrCallbackConflict, ErrCallbackStuck) has been recorded in the effect's
// audit trail in tx, and the effect is returned with the error exactly then: commit tx to keep the
// record. tx is still usable after a refusal, ErrUnknownCorrelation or bad input (which write
// nothing); a database error aborts it. CallbackTx does not count the callback in the metrics,
// since it cannot know whether tx commits.
func (c *Client) CallbackTx(ctx context.Context, tx pgx.Tx, correlationID string, result json.RawMessage, errMsg string, opts *CallbackOpts) (*Effect, error) {
	effect, _, err := c.callbackTx(ctx, tx, correlationID, result, errMsg, opts)
	return effect, err
}

// callbackTx is CallbackTx; from is the state the callback resolved the effect from, "" when it
// changed nothing.
func (c *Client) callbackTx(ctx context.Context, tx pgx.Tx, correlationID string, result json.RawMessage, errMsg string, opts *CallbackOpts) (effect *Effect, from State, err error) {
	var o CallbackOpts
	if opts != nil {
		o = *opts
	}
	if err := checkCallback(correlationID, result, errMsg, o.TenantID); err != nil {
		return nil, "", err
	}
	to, reason := StateConfirmed, "callback: succeeded"
	if errMsg != "" {
		to, reason = StateFailed, "callback: failed"
	}
	row, err := c.lockByCorrelation(ctx, tx, o.EffectID, o.TenantID, correlationID)
	if err != nil {
		return nil, "", err
	}
	if o.TenantID != "" && row.TenantID != o.TenantID {
		// Indistinguishable from an unknown id: another tenant's effects are invisible.
		return nil, "", fmt.Errorf("%w: %q", ErrUnknownCorrelation, correlationID)
	}
	// In the effect's trace, linked to the caller's (the callback's request): an owner's next move
	// continues the effect's trace.
	ctx, span := c.startEffectSpan(ctx, spanCallback, row)
	defer func() {
		if span.IsRecording() && from != "" {
			span.SetAttributes(attrOutcome.String(string(to)))
		}
		endSpan(span, err)
	}()
	job, err := lockJobOf(ctx, tx, row)
	if err != nil {
		return nil, "", err
	}
	detail := map[string]any{"correlation_id": correlationID}
	var refused error
	switch why, state := notAwaitingCallback(row, job), State(row.State); {
	case why != "":
		refused = fmt.Errorf("%w: effect %s %s", ErrNotAwaitingCallback, row.ID, why)
	case state == StatePending || state == StateUnknown:
		effect, err := c.settleByCallbackTx(ctx, tx, row, job, correlationID, transition{
			from: state, to: to, fence: fence{jobID: row.JobID, leaseToken: row.LeaseToken},
			result: result, errMsg: errMsg, actor: "callback", reason: reason, detail: detail,
		})
		if err != nil {
			return nil, "", err
		}
		return effect, state, nil
	case state == StateConfirmed || state == StateFailed:
		if state == to && ((to == StateConfirmed && sameResult(row.Result, result)) || (to == StateFailed && deref(row.Error) == errMsg)) {
			return effectFromRow(row), "", nil // a repeated callback
		}
		refused = fmt.Errorf("%w: effect %s is %s", ErrCallbackConflict, row.ID, state)
	default:
		refused = fmt.Errorf("%w: effect %s needs an operator", ErrCallbackStuck, row.ID)
	}
	if err := recordRefusedCallbackTx(ctx, tx, row.ID, to, result, errMsg, detail, refused); err != nil {
		return nil, "", err
	}
	return effectFromRow(row), "", refused
}

// checkCallback refuses a callback's bad input before anything is read: no correlation id, both a
// result and an error, a result that cannot be stored, or text Postgres cannot store.
func checkCallback(correlationID string, result json.RawMessage, errMsg, tenantID string) error {
	switch {
	case correlationID == "":
		return fmt.Errorf("%w: empty", ErrUnknownCorrelation)
	case errMsg != "" && len(result) > 0:
		return errors.New("effects: a callback reports a result or an error, not both")
	}
	if err := checkResult(result); err != nil {
		return fmt.Errorf("effects: callback result: %w", err)
	}
	if err := jsonx.CheckTexts("correlation id", correlationID, "error", errMsg, "CallbackOpts.TenantID", tenantID); err != nil {
		return fmt.Errorf("effects: callback: %w", err)
	}
	return nil
}

// lockJobOf locks the job of row when the effect is PENDING or UNKNOWN and has one; nil when it
// has none, or its job is gone.
func lockJobOf(ctx context.Context, tx pgx.Tx, row dbsqlc.ReckonEffect) (*dbsqlc.RiverJobGetForUpdateRow, error) {
	if state := State(row.State); (state != StatePending && state != StateUnknown) || row.JobID == nil {
		return nil, nil
	}
	job, err := dbsqlc.New(tx).RiverJobGetForUpdate(ctx, *row.JobID)
	if postgres.NoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("effects: lock job of %s: %w", row.ID, err)
	}
	return &job, nil
}

// settleByCallbackTx settles row, an effect awaiting the callback, by t. The job that owned the
// effect — its deadline timer, a queued reconcile — has nothing left to do and is cancelled; one
// that is running is fenced out when it records. A callback that overtook the record of the
// acceptance records its correlation id.
func (c *Client) settleByCallbackTx(ctx context.Context, tx pgx.Tx, row dbsqlc.ReckonEffect, job *dbsqlc.RiverJobGetForUpdateRow, correlationID string, t transition) (*Effect, error) {
	settled, err := c.settle(ctx, tx, row.ID, t)
	if errors.Is(err, errFencedOut) {
		return nil, fmt.Errorf("effects: callback for %s: the effect changed under its lock", row.ID)
	}
	if err != nil {
		return nil, err
	}
	if job != nil && waitingJob(job.State) {
		if _, err := c.river.JobCancelTx(ctx, tx, job.ID); err != nil {
			return nil, fmt.Errorf("effects: cancel job %d of %s: %w", job.ID, row.ID, err)
		}
	}
	if settled.CorrelationID == nil {
		settled, err = dbsqlc.New(tx).EffectSetCorrelationID(ctx, dbsqlc.EffectSetCorrelationIDParams{ID: row.ID, CorrelationID: correlationID})
		if err != nil {
			return nil, fmt.Errorf("effects: record correlation id of %s: %w", row.ID, err)
		}
	}
	return effectFromRow(settled), nil
}

// recordRefusedCallbackTx writes a refused callback, with what it reported, to the effect's audit
// trail.
func recordRefusedCallbackTx(ctx context.Context, tx pgx.Tx, effectID uuid.UUID, reported State, result json.RawMessage, errMsg string, detail map[string]any, refused error) error {
	detail["reported"] = string(reported)
	if errMsg != "" {
		detail["error"] = errMsg
	} else if len(result) > 0 {
		detail["result"] = result
	}
	raw, err := marshalDetail(detail)
	if err != nil {
		return err
	}
	if err := dbsqlc.New(tx).EffectObservationInsert(ctx, dbsqlc.EffectObservationInsertParams{
		EffectID: effectID, Actor: "callback", Reason: "callback not applied: " + refused.Error(), Detail: raw,
	}); err != nil {
		return fmt.Errorf("effects: record refused callback of %s: %w", effectID, err)
	}
	return nil
}

// notAwaitingCallback says why a callback may not settle the effect, or "" when it may: when the
// effect awaits one (docs/async.md, "Which effects a callback settles"). job is the effect's job,
// locked; nil when it has none.
//
// An effect awaits a callback once it was accepted upstream — its correlation id is recorded
// with the acceptance — and until it is settled: PENDING until its deadline, UNKNOWN after it.
// (A settled or STUCK effect that was accepted is not refused here either: its callback is a
// repeat, a conflict or one for the operator.) The one other case is an attempt in flight: a
// fast upstream may call back before the dispatch has recorded the acceptance. The window is
// exactly the attempt — its dispatch job running, or an inline attempt's lease held — because
// the acceptance is recorded in the same transaction that hands the effect from its dispatch job
// to its deadline job. Once the attempt ended without a recorded acceptance (a timeout, a crash,
// a retryable failure) the effect waits for another attempt or its status check, and the
// callback is refused.
func notAwaitingCallback(row dbsqlc.ReckonEffect, job *dbsqlc.RiverJobGetForUpdateRow) string {
	accepted := row.CorrelationID != nil
	if state := State(row.State); state != StatePending {
		if accepted {
			return ""
		}
		return "is " + string(state) + " and was never accepted upstream"
	}
	dispatching := job != nil && job.Kind == (dispatchArgs{}).Kind()
	switch {
	case row.LeaseToken != nil || (dispatching && job.State == dbsqlc.RiverJobStateRunning):
		return "" // an attempt in flight: its callback may overtake the record of its acceptance
	case (dispatching || unclaimed(row)) && row.Attempts == 0 && !accepted:
		return "was never dispatched"
	case dispatching:
		return fmt.Sprintf("is waiting for dispatch attempt %d", row.Attempts+1)
	case !accepted:
		return "was never accepted upstream"
	}
	return "" // accepted, awaiting its callback until its deadline
}

// lockByCorrelation finds and locks the effect a callback names: by the correlation id recorded
// at acceptance, else by the self-routing id (an acceptance not yet recorded). With effectID set,
// only that effect, under either of its ids. It does not check the tenant: the caller does.
func (c *Client) lockByCorrelation(ctx context.Context, tx pgx.Tx, effectID uuid.UUID, tenant, correlationID string) (dbsqlc.ReckonEffect, error) {
	q := dbsqlc.New(tx)
	if effectID != uuid.Nil {
		row, err := q.EffectGetByIDForUpdate(ctx, effectID)
		switch {
		case postgres.NoRows(err):
			return row, fmt.Errorf("%w: no effect %s", ErrUnknownCorrelation, effectID)
		case err != nil:
			return row, fmt.Errorf("effects: look up effect %s: %w", effectID, err)
		case deref(row.CorrelationID) != correlationID && correlationIDOf(row) != correlationID:
			return row, fmt.Errorf("%w: %q does not name effect %s", ErrUnknownCorrelation, correlationID, effectID)
		}
		return row, nil
	}
	var row dbsqlc.ReckonEffect
	rows, err := q.EffectListByCorrelationIDForUpdate(ctx, dbsqlc.EffectListByCorrelationIDForUpdateParams{
		CorrelationID: &correlationID, TenantID: tenant,
	})
	switch {
	case err != nil:
		return row, fmt.Errorf("effects: look up correlation id: %w", err)
	case len(rows) == 1:
		return rows[0], nil
	case len(rows) > 1:
		return row, fmt.Errorf("%w: %q is held by effects of several tenants: name the tenant (CallbackOpts.TenantID)", ErrUnknownCorrelation, correlationID)
	}
	run, id, err := ParseCorrelationID(correlationID)
	if err != nil {
		return row, err
	}
	row, err = q.EffectGetByIDForUpdate(ctx, id)
	if postgres.NoRows(err) || (err == nil && deref(row.RunID) != run) {
		return row, fmt.Errorf("%w: %q", ErrUnknownCorrelation, correlationID)
	}
	if err != nil {
		return row, fmt.Errorf("effects: look up correlation id: %w", err)
	}
	return row, nil
}

// waitingJob reports whether a job in this state has not started: cancelling it stops it.
func waitingJob(state dbsqlc.RiverJobState) bool {
	return state == dbsqlc.RiverJobStateAvailable || state == dbsqlc.RiverJobStateScheduled ||
		state == dbsqlc.RiverJobStateRetryable || state == dbsqlc.RiverJobStatePending
}

// sameResult compares a recorded result with a reported one; absent and JSON null are equal.
func sameResult(recorded, reported json.RawMessage) bool {
	isNull := func(r json.RawMessage) bool { return len(r) == 0 || string(r) == "null" }
	if isNull(recorded) || isNull(reported) {
		return isNull(recorded) && isNull(reported)
	}
	return jsonx.Equal(recorded, reported)
}
