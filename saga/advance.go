package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/txn"
)

// advance is one move of a saga, inside the transaction that settles one of its effects (or an
// operator's resolution).
type advance struct {
	c     *Client
	tx    pgx.Tx
	q     *dbsqlc.Queries
	def   *Definition
	saga  dbsqlc.ReckonSaga
	steps []dbsqlc.ReckonSagaStep
	actor string
	// failure is why the saga starts compensating, set by the move that fails a step.
	failure string
}

// onSettle is the saga's effects.SettleHook: an effect of a saga — a step or a compensation —
// has become CONFIRMED, FAILED or STUCK in tx. The saga moves on in tx: the next step is enqueued,
// or the saga completes, compensates, or becomes STUCK. An error rolls the effect's transition
// back too, and its writer tries again later.
func (c *Client) onSettle(ctx context.Context, tx pgx.Tx, e *effects.Effect) error {
	q := dbsqlc.New(tx)
	step, err := q.SagaStepGetByEffect(ctx, e.ID)
	if postgres.NoRows(err) {
		return fmt.Errorf("saga: effect %s is owned by %q but belongs to no saga step", e.ID, Owner)
	}
	if err != nil {
		return fmt.Errorf("saga: step of effect %s: %w", e.ID, err)
	}
	a, err := c.begin(ctx, tx, step.SagaID, "saga")
	if err != nil {
		return err
	}
	// Reread the step under the saga's lock.
	step = a.steps[step.Idx]
	name := spanStep
	if step.EffectID != e.ID {
		name = spanCompensation
	}
	// A child of the settling effect's span: in the saga's trace (see tracing.go).
	ctx, span := a.startMove(ctx, name, int(step.Idx))
	if span.IsRecording() {
		span.SetAttributes(attrEffectID.String(e.ID.String()), attrOutcome.String(string(e.State)))
	}
	if step.EffectID == e.ID {
		err = a.stepSettled(ctx, step, e)
	} else {
		err = a.compensationSettled(ctx, step, e)
	}
	a.endMove(span, err)
	return err
}

// begin locks the saga and reads its steps and definition.
func (c *Client) begin(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor string) (*advance, error) {
	q := dbsqlc.New(tx)
	row, err := q.SagaGetByIDForUpdate(ctx, id)
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("saga: lock %s: %w", id, err)
	}
	def, err := c.lookup(ctx, tx, row.Name)
	if err != nil {
		return nil, fmt.Errorf("saga %s: %w", row.ID, err)
	}
	steps, err := q.SagaStepList(ctx, row.ID)
	if err != nil {
		return nil, fmt.Errorf("saga %s: steps: %w", row.ID, err)
	}
	if int(row.StepCount) != len(def.Steps) {
		return nil, fmt.Errorf("saga %s: started with %d steps, definition %q now has %d", row.ID, row.StepCount, row.Name, len(def.Steps))
	}
	return &advance{c: c, tx: tx, q: q, def: def, saga: row, steps: steps, actor: actor}, nil
}

// stepSettled moves the saga on after a step's effect settled.
func (a *advance) stepSettled(ctx context.Context, step dbsqlc.ReckonSagaStep, e *effects.Effect) error {
	idx := int(step.Idx)
	name := a.def.Steps[idx].Name
	if s := State(a.saga.State); s != StateRunning && s != StateStuck {
		// Cannot happen while steps run one at a time; keep the record and leave the saga alone.
		a.warnSettledWhile(ctx, "step", s, idx, e)
		return a.setStep(ctx, idx, StepState(e.State), e.Result, nil, e.Error)
	}
	switch e.State {
	case effects.StateConfirmed:
		if err := a.setStep(ctx, idx, StepConfirmed, e.Result, nil, ""); err != nil {
			return err
		}
		a.steps[idx].Result = e.Result
		if idx == len(a.def.Steps)-1 {
			return a.setState(ctx, StateCompleted, idx, fmt.Sprintf("step %d (%s) confirmed: all steps confirmed", idx, name))
		}
		return a.startStep(ctx, idx+1)
	case effects.StateFailed:
		if err := a.setStep(ctx, idx, StepFailed, nil, nil, e.Error); err != nil {
			return err
		}
		a.failure = fmt.Sprintf("step %d (%s) failed: %s", idx, name, e.Error)
		return a.compensateFrom(ctx, idx-1, a.failure)
	case effects.StateStuck:
		if err := a.setStep(ctx, idx, StepStuck, nil, nil, e.Error); err != nil {
			return err
		}
		return a.setState(ctx, StateStuck, idx, fmt.Sprintf("step %d (%s): effect %s is STUCK; resolve it to continue", idx, name, e.ID))
	}
	return nil
}

// startStep builds and enqueues step idx. A step that cannot be built or is refused by effects
// fails: the saga compensates the steps before it.
func (a *advance) startStep(ctx context.Context, idx int) error {
	step := a.def.Steps[idx]
	in := a.input(idx, idx)
	spec, err := build(step.Effect, in)
	if err == nil {
		spec, err = checkSpec(spec, a.saga.TenantID, StepKey(a.saga.ID, idx))
	}
	var effect *effects.Effect
	if err == nil {
		effect, err = a.c.effects.EnqueueTx(ctx, a.tx, spec, &effects.EnqueueOpts{
			Actor: "saga:" + a.saga.ID.String(), Reason: fmt.Sprintf("saga %s step %d (%s)", a.saga.Name, idx, step.Name),
		})
	}
	if err != nil {
		if isDBError(ctx, err) {
			return fmt.Errorf("saga %s: enqueue step %d: %w", a.saga.ID, idx, err)
		}
		a.failure = fmt.Sprintf("step %d (%s) could not start: %s", idx, step.Name, err)
		return a.compensateFrom(ctx, idx-1, a.failure)
	}
	if err := a.q.SagaStepInsert(ctx, dbsqlc.SagaStepInsertParams{SagaID: a.saga.ID, Idx: int32(idx), Name: step.Name, EffectID: effect.ID}); err != nil {
		return fmt.Errorf("saga %s: record step %d: %w", a.saga.ID, idx, err)
	}
	return a.setState(ctx, StateRunning, idx, fmt.Sprintf("step %d (%s) started", idx, step.Name))
}

// compensateFrom compensates the confirmed steps from idx down, one at a time: it enqueues the
// compensation of the highest confirmed step with an undo, or finishes the saga COMPENSATED.
func (a *advance) compensateFrom(ctx context.Context, idx int, why string) error {
	for k := idx; k >= 0; k-- {
		if StepState(a.steps[k].State) != StepConfirmed || a.def.Steps[k].Undo.kind == undoNone {
			continue
		}
		return a.compensate(ctx, k, time.Time{}, why)
	}
	return a.setState(ctx, StateCompensated, max(idx, 0), "all confirmed steps compensated: "+why)
}

// compensate enqueues the next compensation of step k, to run at scheduledAt.
func (a *advance) compensate(ctx context.Context, k int, scheduledAt time.Time, why string) error {
	step := a.def.Steps[k]
	n := int(a.steps[k].CompensationAttempts) + 1
	actor := "saga:" + a.saga.ID.String()
	reason := fmt.Sprintf("saga %s compensates step %d (%s), attempt %d", a.saga.Name, k, step.Name, n)
	var (
		effect *effects.Effect
		err    error
	)
	switch step.Undo.kind {
	case undoConnector:
		effect, err = a.c.effects.CompensateTx(ctx, a.tx, a.steps[k].EffectID, actor, reason, &effects.CompensateOpts{
			KeySuffix: connectorSuffix(n), Owner: Owner, ScheduledAt: scheduledAt,
		})
	case undoSpec:
		var spec effects.Spec
		spec, err = build(step.Undo.build, a.input(k, k+1))
		if err == nil {
			spec, err = checkSpec(spec, a.saga.TenantID, CompensationKey(a.saga.ID, k, n, false))
		}
		if err == nil {
			// An undo never joins a run: a run's guardrails and its cancellation stop what the
			// run does, never what undoes it (compensations are retried until CONFIRMED).
			spec.RunID = ""
			effect, err = a.c.effects.EnqueueTx(ctx, a.tx, spec, &effects.EnqueueOpts{Actor: actor, Reason: reason, ScheduledAt: scheduledAt})
		}
	}
	if err != nil {
		if isDBError(ctx, err) {
			return fmt.Errorf("saga %s: compensate step %d: %w", a.saga.ID, k, err)
		}
		msg := fmt.Sprintf("compensation of step %d (%s) could not be enqueued: %s", k, step.Name, err)
		if err := a.setStep(ctx, k, StepCompensationStuck, nil, nil, msg); err != nil {
			return err
		}
		return a.setState(ctx, StateStuck, k, msg)
	}
	if err := a.q.SagaStepCompensating(ctx, dbsqlc.SagaStepCompensatingParams{
		CompensationEffectID: &effect.ID, SagaID: a.saga.ID, Idx: int32(k),
	}); err != nil {
		return fmt.Errorf("saga %s: record compensation of step %d: %w", a.saga.ID, k, err)
	}
	a.steps[k].State = dbsqlc.ReckonSagaStepStateCOMPENSATING
	a.steps[k].CompensationEffectID = &effect.ID
	a.steps[k].CompensationAttempts++
	return a.setState(ctx, StateCompensating, k, fmt.Sprintf("compensating step %d (%s): %s", k, step.Name, why))
}

// warnSettledWhile logs that the effect e of step idx (what: its step or its compensation) settled
// while the saga was in state s, where it waits for no effect of that kind.
func (a *advance) warnSettledWhile(ctx context.Context, what string, s State, idx int, e *effects.Effect) {
	a.c.logger.WarnContext(ctx, "saga: "+what+" settled while the saga is "+string(s),
		"saga_id", a.saga.ID.String(), "step", idx, "effect_id", e.ID.String())
}

// compensationSettled moves the saga on after a compensation of step settled.
func (a *advance) compensationSettled(ctx context.Context, step dbsqlc.ReckonSagaStep, e *effects.Effect) error {
	k := int(step.Idx)
	name := a.def.Steps[k].Name
	if s := State(a.saga.State); s != StateCompensating && s != StateStuck {
		a.warnSettledWhile(ctx, "compensation", s, k, e)
		return nil
	}
	switch e.State {
	case effects.StateConfirmed:
		if err := a.setStep(ctx, k, StepCompensated, nil, e.Result, ""); err != nil {
			return err
		}
		a.steps[k].State = dbsqlc.ReckonSagaStepStateCOMPENSATED
		return a.compensateFrom(ctx, k-1, fmt.Sprintf("step %d (%s) compensated", k, name))
	case effects.StateFailed:
		if int(step.CompensationAttempts-step.CompensationBudgetBase) < a.def.CompensationAttempts {
			delay := a.def.CompensationBackoff(int(step.CompensationAttempts))
			return a.compensate(ctx, k, time.Now().Add(delay),
				fmt.Sprintf("compensation %d of step %d (%s) failed: %s; trying again in %s", step.CompensationAttempts, k, name, e.Error, delay))
		}
		msg := fmt.Sprintf("compensation of step %d (%s) failed %d times (last: %s); a person must decide",
			k, name, step.CompensationAttempts-step.CompensationBudgetBase, e.Error)
		if err := a.setStep(ctx, k, StepCompensationStuck, nil, nil, e.Error); err != nil {
			return err
		}
		return a.setState(ctx, StateStuck, k, msg)
	case effects.StateStuck:
		msg := fmt.Sprintf("compensation of step %d (%s): effect %s is STUCK; resolve it to continue", k, name, e.ID)
		if err := a.setStep(ctx, k, StepCompensationStuck, nil, nil, e.Error); err != nil {
			return err
		}
		return a.setState(ctx, StateStuck, k, msg)
	}
	return nil
}

// input is what step idx builds from: the saga's input and the results of the first n steps.
func (a *advance) input(idx, n int) Input {
	in := Input{SagaID: a.saga.ID, TenantID: a.saga.TenantID, Name: a.saga.Name, Step: idx, Data: a.saga.Input}
	for i := 0; i < n && i < len(a.steps); i++ {
		in.Results = append(in.Results, a.steps[i].Result)
	}
	return in
}

func (a *advance) setStep(ctx context.Context, idx int, state StepState, result, compensationResult json.RawMessage, errMsg string) error {
	var e *string
	if errMsg != "" {
		e = &errMsg
	}
	if err := a.q.SagaStepSettle(ctx, dbsqlc.SagaStepSettleParams{
		State: dbsqlc.ReckonSagaStepState(state), Result: result, CompensationResult: compensationResult, Error: e,
		SagaID: a.saga.ID, Idx: int32(idx),
	}); err != nil {
		return fmt.Errorf("saga %s: step %d: %w", a.saga.ID, idx, err)
	}
	a.steps[idx].State = dbsqlc.ReckonSagaStepState(state)
	return nil
}

// setState writes the saga's state and step — with the failure, if this move failed a step, and
// reason as the stuck reason when the saga becomes STUCK — and records a change of state, with
// reason, in its history.
func (a *advance) setState(ctx context.Context, to State, step int, reason string) error {
	var failure, stuck *string
	if a.failure != "" {
		failure = &a.failure
	}
	if to == StateStuck {
		stuck = &reason
	}
	from := a.saga.State
	row, err := a.q.SagaUpdate(ctx, dbsqlc.SagaUpdateParams{
		ID: a.saga.ID, State: dbsqlc.ReckonSagaState(to), CurrentStep: int32(step), Error: failure, StuckReason: stuck,
	})
	if err != nil {
		return fmt.Errorf("saga %s: %s -> %s: %w", a.saga.ID, from, to, err)
	}
	a.saga = row
	if State(from) == to {
		return nil
	}
	if err := a.q.SagaTransitionInsert(ctx, dbsqlc.SagaTransitionInsertParams{
		SagaID: a.saga.ID, FromState: &from, ToState: dbsqlc.ReckonSagaState(to), Step: int32(step), Actor: a.actor, Reason: reason,
	}); err != nil {
		return fmt.Errorf("saga %s: record %s -> %s: %w", a.saga.ID, from, to, err)
	}
	a.c.metrics.transitions.WithLabelValues(a.saga.Name, string(to)).Inc()
	return nil
}

// isDBError tells a failure of the database or the context (the transaction cannot go on: the
// move must be tried again) from a refusal of the step's spec (the step fails).
func isDBError(ctx context.Context, err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) || ctx.Err() != nil || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, pgx.ErrTxClosed)
}

// Decision is an operator's answer to a saga STUCK on a compensation.
type Decision string

const (
	// RetryCompensation enqueues a fresh compensation of the stuck step, with a fresh budget of
	// CompensationAttempts (e.g. once the upstream is fixed).
	RetryCompensation Decision = "retry_compensation"
	// MarkCompensated records that the stuck step was undone by other means (by hand, at the
	// upstream); the saga goes on compensating the steps before it.
	MarkCompensated Decision = "mark_compensated"
)

// Resolve records an operator's decision on a saga STUCK because a compensation could not be
// confirmed — its compensations kept FAILING, or could not be enqueued — and lets the saga finish.
// actor and reason are required and go to the saga's history.
//
// A saga held by a STUCK effect (a step's or a compensation's) is resolved on that effect, with
// effects.Client.Resolve; the saga moves on by itself in the same transaction (Resolve here
// answers ErrResolveEffect with the effect's id). Errors: ErrNotFound, ErrNotStuck,
// ErrResolveEffect, or a usage error; nothing changes then.
func (c *Client) Resolve(ctx context.Context, id uuid.UUID, decision Decision, actor, reason string) (*Saga, error) {
	if decision != RetryCompensation && decision != MarkCompensated {
		return nil, fmt.Errorf("saga: resolve with %q: want %q or %q", decision, RetryCompensation, MarkCompensated)
	}
	if actor == "" || reason == "" {
		return nil, errors.New("saga: resolve needs an actor and a reason")
	}
	var out *Saga
	err := txn.Run(ctx, c.pool, c.logger, func(tx pgx.Tx) (err error) {
		a, err := c.begin(ctx, tx, id, "operator:"+actor)
		if err != nil {
			return err
		}
		ctx, span := a.startMove(ctx, spanResolve, int(a.saga.CurrentStep))
		defer func() { a.endMove(span, err) }()
		if span.IsRecording() {
			span.SetAttributes(attrOutcome.String(string(decision)))
		}
		if State(a.saga.State) != StateStuck {
			return fmt.Errorf("%w: saga %s is %s", ErrNotStuck, id, a.saga.State)
		}
		k := int(a.saga.CurrentStep)
		step := a.steps[k]
		switch StepState(step.State) {
		case StepStuck:
			return fmt.Errorf("%w: step %d effect %s", ErrResolveEffect, k, step.EffectID)
		case StepCompensationStuck:
		default:
			return fmt.Errorf("saga: step %d of saga %s is %s, not COMPENSATION_STUCK", k, id, step.State)
		}
		if step.CompensationEffectID != nil {
			ec, err := c.effectsClient()
			if err != nil {
				return err
			}
			comp, err := ec.Get(ctx, *step.CompensationEffectID)
			if err != nil {
				return err
			}
			if comp.State == effects.StateStuck {
				return fmt.Errorf("%w: compensation of step %d, effect %s", ErrResolveEffect, k, comp.ID)
			}
			if !comp.State.Terminal() {
				return fmt.Errorf("saga: compensation %s of step %d is %s: wait for it", comp.ID, k, comp.State)
			}
		}
		why := fmt.Sprintf("operator %s: %s", actor, reason)
		switch decision {
		case RetryCompensation:
			if err := a.q.SagaStepResetCompensationBudget(ctx, dbsqlc.SagaStepResetCompensationBudgetParams{SagaID: id, Idx: int32(k)}); err != nil {
				return fmt.Errorf("saga %s: reset compensation budget: %w", id, err)
			}
			a.steps[k].CompensationBudgetBase = a.steps[k].CompensationAttempts
			if err := a.compensate(ctx, k, time.Time{}, why); err != nil {
				return err
			}
		case MarkCompensated:
			note, _ := json.Marshal(map[string]string{"resolved_by": actor, "reason": reason})
			if err := a.setStep(ctx, k, StepCompensated, nil, note, "compensated by operator: "+reason); err != nil {
				return err
			}
			if err := a.compensateFrom(ctx, k-1, why); err != nil {
				return err
			}
		}
		out, err = c.load(ctx, a.q, a.saga)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
