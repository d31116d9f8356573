package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/txn"
)

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
