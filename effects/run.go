package effects

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Runs group the effects one unit of work — an agent run, a workflow execution — enqueues, by
// Spec.RunID. A run comes into being with its first effect (or StartRun, which also sets its
// guardrails). The completion gate WaitRun waits until none of its effects is unresolved;
// CancelRun stops it; GetRun shows its status.
//
// Run ids are scoped per tenant, like idempotency keys: a run is a tenant's run of that id. Two
// tenants naming the same run id have two runs, each with its own effects, guardrails and
// cancellation, and neither can tell that the other's exists.

// RunSpec creates a run with guardrails, or changes the guardrails of an existing one.
type RunSpec struct {
	// ID is the run id effects name in Spec.RunID. Required.
	ID string
	// TenantID owns the run. Default DefaultTenant. The run holds the effects of this tenant that
	// name ID; another tenant's effects naming ID form that tenant's own run.
	TenantID string
	// MaxSteps bounds the effects enqueued into the run (compensations and replays of existing
	// idempotency keys do not count). 0: no limit.
	MaxSteps int
	// MaxConsecutiveFailures refuses further effects once this many effects of the run in a row
	// became FAILED (a CONFIRMED one resets the count). 0: no limit.
	MaxConsecutiveFailures int
}

// RunOpts names the tenant whose run a call acts on (GetRun, WaitRun, CancelRun). Nil means the
// defaults.
type RunOpts struct {
	// TenantID is the tenant whose run of that id is meant: run ids are scoped per tenant, and
	// another tenant's run of the same id is never seen nor touched. Default DefaultTenant.
	TenantID string
}

func (o *RunOpts) tenantID() string {
	if o == nil || o.TenantID == "" {
		return DefaultTenant
	}
	return o.TenantID
}

// Run is the status of a run.
type Run struct {
	ID       string
	TenantID string
	// MaxSteps and MaxConsecutiveFailures are the guardrails (0: none).
	MaxSteps               int
	MaxConsecutiveFailures int
	// Steps counts the effects enqueued into the run; ConsecutiveFailures the FAILED ones since
	// the last CONFIRMED one; Failures all FAILED ones.
	Steps               int
	ConsecutiveFailures int
	Failures            int
	// CancelledAt, CancelledBy and CancelReason are set once the run is cancelled.
	CancelledAt  *time.Time
	CancelledBy  string
	CancelReason string
	// Halted says why the run refuses further effects — ErrRunCancelled, ErrRunMaxFailures or
	// ErrRunMaxSteps, with the numbers — and is nil while it accepts them.
	Halted error
	// Effects counts the run's effects in each state.
	Effects   map[State]int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Unresolved is how many of the run's effects are PENDING or UNKNOWN.
func (r *Run) Unresolved() int { return r.Effects[StatePending] + r.Effects[StateUnknown] }

func runFromRow(row dbsqlc.ReckonRun, stats dbsqlc.RunStatsRow) *Run {
	r := &Run{
		ID: row.ID, TenantID: row.TenantID,
		MaxSteps: int(deref(row.MaxSteps)), MaxConsecutiveFailures: int(deref(row.MaxConsecutiveFailures)),
		Steps: int(stats.Steps), ConsecutiveFailures: int(stats.ConsecutiveFailures), Failures: int(stats.Failures),
		CancelledAt: row.CancelledAt, CancelledBy: deref(row.CancelledBy), CancelReason: deref(row.CancelReason),
		Effects: map[State]int{}, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt,
	}
	r.Halted = r.refusal(0)
	return r
}

// loadRun reads the status of a run whose row is row.
func loadRun(ctx context.Context, q *dbsqlc.Queries, row dbsqlc.ReckonRun) (*Run, error) {
	stats, err := q.RunStats(ctx, dbsqlc.RunStatsParams{TenantID: row.TenantID, RunID: row.ID})
	if err != nil {
		return nil, fmt.Errorf("effects: count effects of run %q: %w", row.ID, err)
	}
	return runFromRow(row, stats), nil
}

// refusal says why n more effects cannot join the run (nil: they can). With n = 0 it says whether
// the next one would be refused.
func (r *Run) refusal(n int) error {
	switch {
	case r.CancelledAt != nil:
		return fmt.Errorf("%w: run %q was cancelled by %s: %s", ErrRunCancelled, r.ID, r.CancelledBy, r.CancelReason)
	case r.MaxConsecutiveFailures > 0 && r.ConsecutiveFailures >= r.MaxConsecutiveFailures:
		return fmt.Errorf("%w: run %q has %d consecutive failures (limit %d)", ErrRunMaxFailures, r.ID, r.ConsecutiveFailures, r.MaxConsecutiveFailures)
	case r.MaxSteps > 0 && r.Steps+max(n, 1) > r.MaxSteps:
		return fmt.Errorf("%w: run %q has %d steps of %d; %d more refused", ErrRunMaxSteps, r.ID, r.Steps, r.MaxSteps, max(n, 1))
	}
	return nil
}

// StartRun creates the run spec describes, with its guardrails, or sets the guardrails of the
// tenant's existing run of that id (its counts are kept). Another tenant's run of the same id is
// a different run, left as it is.
func (c *Client) StartRun(ctx context.Context, spec RunSpec) (*Run, error) {
	return inTx(ctx, c, func(tx pgx.Tx) (*Run, error) { return c.StartRunTx(ctx, tx, spec) })
}

// StartRunTx is StartRun in the caller's transaction.
func (c *Client) StartRunTx(ctx context.Context, tx pgx.Tx, spec RunSpec) (*Run, error) {
	switch {
	case spec.ID == "":
		return nil, errors.New("effects: run needs an ID")
	case spec.MaxSteps < 0 || spec.MaxConsecutiveFailures < 0:
		return nil, fmt.Errorf("effects: run %q: MaxSteps and MaxConsecutiveFailures must not be negative", spec.ID)
	}
	if err := jsonx.CheckTexts("ID", spec.ID, "TenantID", spec.TenantID); err != nil {
		return nil, fmt.Errorf("effects: run: %w", err)
	}
	tenant := spec.TenantID
	if tenant == "" {
		tenant = DefaultTenant
	}
	limit := func(n int) *int32 {
		if n == 0 {
			return nil
		}
		v := int32(n)
		return &v
	}
	row, err := dbsqlc.New(tx).RunStart(ctx, dbsqlc.RunStartParams{
		ID: spec.ID, TenantID: tenant, MaxSteps: limit(spec.MaxSteps), MaxConsecutiveFailures: limit(spec.MaxConsecutiveFailures),
	})
	if err != nil {
		return nil, fmt.Errorf("effects: start run %q: %w", spec.ID, err)
	}
	return loadRun(ctx, dbsqlc.New(tx), row)
}

// GetRun returns the status of the run id of opts.TenantID, or ErrRunNotFound (also when only
// another tenant has a run of that id).
func (c *Client) GetRun(ctx context.Context, id string, opts *RunOpts) (*Run, error) {
	tenant := opts.tenantID()
	row, err := c.queries.RunGet(ctx, dbsqlc.RunGetParams{TenantID: tenant, ID: id})
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %q", ErrRunNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("effects: get run %q: %w", id, err)
	}
	run, err := loadRun(ctx, c.queries, row)
	if err != nil {
		return nil, err
	}
	counts, err := c.queries.RunCountEffects(ctx, dbsqlc.RunCountEffectsParams{TenantID: tenant, RunID: id})
	if err != nil {
		return nil, fmt.Errorf("effects: count effects of run %q: %w", id, err)
	}
	for _, n := range counts {
		run.Effects[State(n.State)] = int(n.Count)
	}
	return run, nil
}

// checkRunsTx applies the guardrails of the runs the new effects join, before they are inserted
// in tx: each run's row is created if need be and locked until tx ends, so that enqueues into one
// run are checked one after the other, against counts read from the run's effects. Effects whose
// idempotency key exists are replays: they do not count, and a batch of replays only is never
// refused. A run is a tenant's: effects of two tenants naming one run id join two runs.
func (c *Client) checkRunsTx(ctx context.Context, tx pgx.Tx, specs []*resolvedSpec) error {
	type runKey struct{ tenant, id string }
	runs := map[runKey][]string{}  // the idempotency keys joining each run
	joined := map[[3]string]bool{} // (tenant, run, key) already in runs
	var order []runKey
	for _, r := range specs {
		if r.spec.RunID == "" {
			continue
		}
		k := runKey{r.tenantID, r.spec.RunID}
		keys, seen := runs[k]
		if !seen {
			order = append(order, k)
		}
		if j := [3]string{k.tenant, k.id, r.idempotencyKey}; !joined[j] {
			joined[j] = true
			runs[k] = append(keys, r.idempotencyKey)
		}
	}
	// One lock order for every enqueue.
	slices.SortFunc(order, func(a, b runKey) int {
		return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.id, b.id))
	})
	q := dbsqlc.New(tx)
	for _, k := range order {
		id, keys := k.id, runs[k]
		row, err := q.RunLockForEnqueue(ctx, dbsqlc.RunLockForEnqueueParams{ID: id, TenantID: k.tenant})
		if err != nil {
			return fmt.Errorf("effects: lock run %q: %w", id, err)
		}
		if row.CancelledAt == nil && row.MaxSteps == nil && row.MaxConsecutiveFailures == nil {
			continue // no guardrail: nothing to count
		}
		run, err := loadRun(ctx, q, row)
		if err != nil {
			return err
		}
		if run.refusal(len(keys)) == nil {
			continue
		}
		existing, err := q.EffectListByIdempotencyKeys(ctx, dbsqlc.EffectListByIdempotencyKeysParams{TenantID: k.tenant, IdempotencyKeys: keys})
		if err != nil {
			return fmt.Errorf("effects: check run %q: %w", id, err)
		}
		if n := len(keys) - len(existing); n > 0 {
			return run.refusal(n)
		}
	}
	return nil
}

// RunResult is what the completion gate returns: the run and its effects once none is PENDING or
// UNKNOWN.
type RunResult struct {
	Run *Run
	// Effects are all the run's effects, oldest first.
	Effects []*Effect
	// Async are those of Effects the upstream accepted to finish by callback, with their results
	// (or errors).
	Async []*Effect
}

// WaitRun is the completion gate: it returns when no effect of the run is PENDING or UNKNOWN —
// each is CONFIRMED, FAILED or STUCK — with the results of its effects, or ctx's error. Effects
// enqueued into the run while it waits are waited for too. It listens for the database's
// notifications (the listener Wait uses), not polling; ErrRunNotFound for an unknown run. The run
// is opts.TenantID's.
func (c *Client) WaitRun(ctx context.Context, id string, opts *RunOpts) (*RunResult, error) {
	if _, err := c.GetRun(ctx, id, opts); err != nil {
		return nil, err
	}
	wake := make(chan struct{}, 1)
	subscribed := map[uuid.UUID]func(){}
	defer func() {
		for _, unsubscribe := range subscribed {
			unsubscribe()
		}
	}()
	recheck := time.NewTicker(waitRecheckEvery)
	defer recheck.Stop()
	run := dbsqlc.EffectListUnresolvedByRunParams{TenantID: opts.tenantID(), RunID: id}
	for {
		unresolved, err := c.queries.EffectListUnresolvedByRun(ctx, run)
		if err != nil {
			return nil, fmt.Errorf("effects: wait for run %q: %w", id, err)
		}
		if len(unresolved) == 0 {
			return c.runResult(ctx, id, opts)
		}
		added := false
		for _, effectID := range unresolved {
			if _, ok := subscribed[effectID]; ok {
				continue
			}
			unsubscribe, err := c.notifier.subscribeTo(ctx, effectID, wake)
			if err != nil {
				return nil, err
			}
			subscribed[effectID] = unsubscribe
			added = true
		}
		if added {
			continue // one may have settled before its subscription: look again first
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		case <-recheck.C:
		}
	}
}

func (c *Client) runResult(ctx context.Context, id string, opts *RunOpts) (*RunResult, error) {
	run, err := c.GetRun(ctx, id, opts)
	if err != nil {
		return nil, err
	}
	rows, err := c.queries.EffectListByRun(ctx, dbsqlc.EffectListByRunParams{TenantID: run.TenantID, RunID: id})
	if err != nil {
		return nil, fmt.Errorf("effects: effects of run %q: %w", id, err)
	}
	res := &RunResult{Run: run, Effects: make([]*Effect, len(rows))}
	for i, row := range rows {
		res.Effects[i] = effectFromRow(row)
		if res.Effects[i].CorrelationID != "" {
			res.Async = append(res.Async, res.Effects[i])
		}
	}
	return res, nil
}

// RunCancellation reports what CancelRun did to the run's PENDING effects.
type RunCancellation struct {
	Run *Run
	// Failed had not taken effect — never attempted, or only attempts that provably did not take
	// effect — and no attempt was running: FAILED (cancelled), their dispatch jobs cancelled.
	Failed []uuid.UUID
	// Awaiting were awaiting their callback: their deadline timers are cancelled and each is
	// recorded as cancelled by the caller — FAILED when the connector's Cancel got the upstream
	// to abandon it, else UNKNOWN (the upstream may still perform it; a callback or
	// reconciliation resolves it).
	Awaiting []uuid.UUID
	// Left were in flight (an attempt running, or its job being retried by River after an
	// error): they finish on their own, except that a cancelled run's effect is never tried
	// again after a retryable failure nor dispatched again by reconciliation.
	Left []uuid.UUID
}

// CancelRun cancels a run: further effects are refused (ErrRunCancelled), effects that have not
// taken effect and are not in flight become FAILED, and effects awaiting a callback have their timers cancelled and are recorded as
// cancelled by the caller (see RunCancellation). actor and reason are required and go to the
// audit trail. Cancelling a cancelled run again handles effects that arrived since and keeps the
// first actor and reason. ErrRunNotFound for an unknown run. The run is opts.TenantID's: another
// tenant's run of the same id and its effects are never touched.
func (c *Client) CancelRun(ctx context.Context, id, actor, reason string, opts *RunOpts) (*RunCancellation, error) {
	if actor == "" || reason == "" {
		return nil, errors.New("effects: cancel run needs an actor and a reason")
	}
	if err := jsonx.CheckTexts("run id", id, "actor", actor, "reason", reason, "RunOpts.TenantID", opts.tenantID()); err != nil {
		return nil, fmt.Errorf("effects: cancel run: %w", err)
	}
	rc := &runCancel{
		tenant: opts.tenantID(), id: id,
		who: "caller:" + actor, reason: reason, why: "run cancelled by caller: " + reason,
		res: &RunCancellation{},
	}
	if err := c.withTx(ctx, func(tx pgx.Tx) error { return c.cancelRunTx(ctx, tx, rc) }); err != nil {
		return nil, err
	}
	for _, row := range rc.failed {
		rc.res.Failed = append(rc.res.Failed, row.ID)
		c.countSettlement(row.Connector, row.Policy, StatePending, StateFailed, row.CreatedAt, row.UpdatedAt)
	}
	// Effects awaiting a callback: ask the upstream to abandon them (outside any transaction),
	// then record, fenced by the deadline job, what became of them.
	for _, a := range rc.await {
		done, err := c.cancelAwaiting(ctx, a.row, a.jobID, rc.who, rc.why)
		if err != nil {
			return nil, err
		}
		if done {
			rc.res.Awaiting = append(rc.res.Awaiting, a.row.ID)
		} else {
			rc.res.Left = append(rc.res.Left, a.row.ID)
		}
	}
	var err error
	if rc.res.Run, err = c.GetRun(ctx, id, opts); err != nil {
		return nil, err
	}
	return rc.res, nil
}

// runCancel is one CancelRun: the run, who cancels it and why, and what becomes of its PENDING
// effects.
type runCancel struct {
	tenant, id string
	who        string // the audit trail's actor: "caller:" + the caller's actor
	reason     string // the caller's reason, recorded on the run
	why        string // the reason recorded on the run's effects
	res        *RunCancellation
	failed     []dbsqlc.ReckonEffect // settled FAILED in the transaction, counted once it committed
	await      []awaitingCancel      // awaiting their callback: cancelled after the transaction
}

// awaitingCancel is an effect awaiting its callback that CancelRun cancels, fenced by its deadline
// job.
type awaitingCancel struct {
	row   dbsqlc.ReckonEffect
	jobID int64
}

// cancelRunTx cancels the run and, in the same transaction, fails the effects of it that have not
// started, and sorts the others into those awaiting a callback and those left to finish.
func (c *Client) cancelRunTx(ctx context.Context, tx pgx.Tx, rc *runCancel) error {
	// withTx runs this again after a deadlock or lock timeout: what an aborted try sorted is gone.
	rc.res.Left, rc.failed, rc.await = nil, nil, nil
	q := dbsqlc.New(tx)
	// Lock order: the run's effects before the run, as a settling effect's transaction locks
	// them (the effect, then — enqueueing a saga's next step — its run). The list is read
	// again below, after the run is cancelled, for effects enqueued meanwhile.
	pending := dbsqlc.EffectListPendingByRunForUpdateParams{TenantID: rc.tenant, RunID: rc.id}
	if _, err := q.EffectListPendingByRunForUpdate(ctx, pending); err != nil {
		return fmt.Errorf("effects: effects of run %q: %w", rc.id, err)
	}
	if _, err := q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: rc.tenant, ID: rc.id}); postgres.NoRows(err) {
		return fmt.Errorf("%w: %q", ErrRunNotFound, rc.id)
	} else if err != nil {
		return fmt.Errorf("effects: lock run %q: %w", rc.id, err)
	}
	if _, err := q.RunCancel(ctx, dbsqlc.RunCancelParams{TenantID: rc.tenant, ID: rc.id, Actor: rc.who, Reason: rc.reason}); err != nil {
		return fmt.Errorf("effects: cancel run %q: %w", rc.id, err)
	}
	rows, err := q.EffectListPendingByRunForUpdate(ctx, pending)
	if err != nil {
		return fmt.Errorf("effects: effects of run %q: %w", rc.id, err)
	}
	for _, p := range rows {
		if err := c.cancelPendingTx(ctx, tx, rc, p); err != nil {
			return err
		}
	}
	return nil
}

// cancelPendingTx handles one PENDING effect of a run being cancelled: one that has not started
// and awaits no callback becomes FAILED; one not started that awaits its callback is cancelled
// after the transaction; any other is left to finish.
func (c *Client) cancelPendingTx(ctx context.Context, tx pgx.Tx, rc *runCancel, p dbsqlc.EffectListPendingByRunForUpdateRow) error {
	row := p.ReckonEffect
	// Not started: no attempt is running and its job has not run (a snoozed job returns
	// to attempt 0). Such an effect was never attempted, or each attempt provably did
	// not take effect (retryable failures; a status check found it absent).
	// An unclaimed effect (no job yet) was never dispatched, whatever correlation id it
	// was given, and no claimer takes it while this transaction holds its lock.
	notStarted := row.JobID != nil && p.JobAttempt == 0 && waitingJob(dbsqlc.RiverJobState(p.JobState)) && row.LeaseToken == nil
	switch {
	case unclaimed(row) || notStarted && row.CorrelationID == nil:
		return c.failUnstartedTx(ctx, tx, rc, row)
	case notStarted && row.CorrelationID != nil:
		rc.await = append(rc.await, awaitingCancel{row: row, jobID: *row.JobID})
	default:
		rc.res.Left = append(rc.res.Left, row.ID)
	}
	return nil
}

// failUnstartedTx cancels the dispatch job of an effect that has not started and settles the
// effect FAILED. If the job started meanwhile, the effect is left to finish; if another settled
// the effect first, nothing is written.
func (c *Client) failUnstartedTx(ctx context.Context, tx pgx.Tx, rc *runCancel, row dbsqlc.ReckonEffect) error {
	if row.JobID != nil { // under the job's lock, it must still not have started
		_, cancelled, err := c.cancelUnstartedJobTx(ctx, tx, *row.JobID)
		if err != nil {
			return fmt.Errorf("effects: cancel dispatch job of %s: %w", row.ID, err)
		}
		if !cancelled {
			rc.res.Left = append(rc.res.Left, row.ID)
			return nil
		}
	}
	if err := endHoldTx(ctx, tx, row, rc.who, "cancelled: "+rc.why); err != nil {
		return err
	}
	settled, err := c.settle(ctx, tx, row.ID, transition{
		from: StatePending, to: StateFailed, fence: fence{jobID: row.JobID},
		errMsg: "cancelled: " + rc.why, actor: rc.who, reason: "cancelled: " + rc.why,
	})
	switch {
	case err == nil:
		rc.failed = append(rc.failed, settled)
	case !errors.Is(err, errFencedOut): // fenced out: someone else decided; nothing written
		return err
	}
	return nil
}

// cancelAwaiting records that the caller cancelled an effect awaiting its callback: its deadline
// timer is cancelled, and it becomes FAILED if the connector's Cancel got the upstream to abandon
// it, else UNKNOWN (reconciled; a callback still resolves it). done is false when the effect had
// moved on meanwhile (a callback came first).
func (c *Client) cancelAwaiting(ctx context.Context, row dbsqlc.ReckonEffect, jobID int64, actor, why string) (done bool, err error) {
	t := transition{from: StatePending, fence: fence{jobID: &jobID}, actor: actor,
		detail: map[string]any{"correlation_id": deref(row.CorrelationID), "cancelled_by_caller": true}}
	connector, ok := c.registry.Get(row.Connector)
	switch {
	case ok && connector.Cancel != nil:
		if err := c.cancelUpstream(ctx, row, connector); err != nil {
			t.to, t.errMsg = StateUnknown, "cancelled by caller; the upstream could not be cancelled: "+err.Error()
			t.reason = why + "; awaiting callback, upstream cancel failed: outcome unknown"
		} else {
			t.to, t.errMsg = StateFailed, "cancelled by caller: cancelled upstream"
			t.reason = why + "; awaiting callback: cancelled upstream"
		}
	default:
		t.to, t.errMsg = StateUnknown, "cancelled by caller while awaiting callback"
		t.reason = why + "; awaiting callback and the connector cannot cancel upstream: outcome unknown, a callback still resolves it"
	}
	var settled dbsqlc.ReckonEffect
	err = c.withTx(ctx, func(tx pgx.Tx) error {
		job, err := dbsqlc.New(tx).RiverJobGetForUpdate(ctx, jobID)
		if err != nil {
			return fmt.Errorf("effects: lock deadline job of %s: %w", row.ID, err)
		}
		if !waitingJob(job.State) {
			return errFencedOut // the deadline is firing or fired: it decides
		}
		if _, err := c.river.JobCancelTx(ctx, tx, jobID); err != nil {
			return fmt.Errorf("effects: cancel deadline job of %s: %w", row.ID, err)
		}
		if t.to == StateUnknown {
			if t.newJobID, err = c.insertReconcileJob(ctx, tx, row.ID, row.TimeoutMs, row.Connector); err != nil {
				return err
			}
		}
		settled, err = c.settle(ctx, tx, row.ID, t)
		return err
	})
	if errors.Is(err, errFencedOut) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.countSettlement(row.Connector, row.Policy, StatePending, t.to, settled.CreatedAt, settled.UpdatedAt)
	return true, nil
}

// holdCancelledRun changes a reconciliation's "dispatch again" into a final decision when the
// effect's run was cancelled: FAILED when the status check found it absent, else STUCK (nothing
// says whether it happened; a person decides).
func (c *Client) holdCancelledRun(ctx context.Context, row dbsqlc.ReckonEffect, t *transition) {
	if row.RunID == nil || row.CompensatesID != nil {
		return // a compensation goes on: it undoes what the run did
	}
	run, err := c.queries.RunGet(ctx, dbsqlc.RunGetParams{TenantID: row.TenantID, ID: *row.RunID})
	if err != nil || run.CancelledAt == nil {
		return // no run row (or unreadable): the normal course
	}
	if t.detail != nil && t.detail["status"] == StatusAbsent.String() {
		t.to, t.reason = StateFailed, "status check: absent, and the run was cancelled: not dispatched again"
		t.errMsg = "run cancelled"
		return
	}
	t.to, t.reason = StateStuck, "outcome unknown and the run was cancelled: not dispatched again; a person must decide"
}

// runCancelledTx reports whether the run of the effect row (none: false) was cancelled.
func (c *Client) runCancelledTx(ctx context.Context, tx pgx.Tx, row dbsqlc.ReckonEffect) (bool, error) {
	if row.RunID == nil {
		return false, nil
	}
	run, err := dbsqlc.New(tx).RunGet(ctx, dbsqlc.RunGetParams{TenantID: row.TenantID, ID: *row.RunID})
	if postgres.NoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("effects: read run %q: %w", *row.RunID, err)
	}
	return run.CancelledAt != nil, nil
}

// stopCancelledRetry fails, instead of dispatching, a retry of an effect whose run was cancelled.
// The caller checked that the job has not run before (a snoozed job returns to attempt 0) while
// the effect has attempts: each earlier attempt provably did not take effect (a retryable
// failure, or a status check found it absent), so FAILED is the truth.
func (c *Client) stopCancelledRetry(ctx context.Context, job *river.Job[dispatchArgs], row dbsqlc.ReckonEffect, f fence, actor string) (bool, error) {
	var (
		stopped bool
		settled dbsqlc.ReckonEffect
	)
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		cancelled, err := c.runCancelledTx(ctx, tx, row)
		if err != nil || !cancelled {
			return err
		}
		settled, err = c.settle(ctx, tx, row.ID, transition{
			from: StatePending, to: StateFailed, fence: f, errMsg: "run cancelled", actor: actor,
			reason: "the run was cancelled: not tried again (no earlier attempt took effect)",
			detail: map[string]any{"job_id": job.ID},
		})
		if err != nil {
			return err
		}
		stopped = true
		return completeDispatchTx(ctx, tx, job)
	})
	if errors.Is(err, errFencedOut) {
		return true, nil // settled or handed on meanwhile: not this job's to dispatch
	}
	if err != nil || !stopped {
		return false, err
	}
	c.countSettlement(row.Connector, row.Policy, StatePending, StateFailed, settled.CreatedAt, settled.UpdatedAt)
	return true, nil
}
