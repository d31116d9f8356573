package effects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Do performs an effect inline, in the caller's goroutine, with the same guarantees as a reactor:
// it records the effect with a lease of its own (the durable attempt claim), calls the connector,
// and records the outcome fenced by that lease. A retryable failure hands the effect to the
// reactors with backoff; an unknown outcome hands it to reconciliation. If the caller dies after
// the claim, the lease expires and a reactor's sweeper makes the effect UNKNOWN and reconciles it.
//
// If the idempotency key exists, the existing effect is returned (Deduplicated) and nothing is
// called. The returned effect carries the state after the call: CONFIRMED, FAILED, PENDING
// (retrying in a reactor, or accepted upstream and awaiting its callback: CorrelationID is set)
// or UNKNOWN (being reconciled).
//
// When the connector's limits (Limit) hold the call back, Do calls nothing: it enqueues the effect
// instead, due when the limits should let it through, and returns it PENDING. So too for an
// ordered effect (Spec.OrderingKey) whose key has an unsettled effect: it is recorded to wait for
// its turn, as EnqueueTx records it, and the reactors dispatch it then.
//
// Do is a span, reckon.do, child of ctx's, with the connector's call as its child; its trace
// context is stored on the effect, as EnqueueTx stores its own.
func (c *Client) Do(ctx context.Context, spec Spec) (effect *Effect, err error) {
	ctx, span := c.tracing.tracer.Start(ctx, spanDo)
	defer func() {
		if span.IsRecording() && effect != nil {
			span.SetAttributes(attrEffectID.String(effect.ID.String()), attrConnector.String(effect.Connector),
				attrTenant.String(effect.TenantID), attrOutcome.String(string(effect.State)))
		}
		endSpan(span, err)
	}()
	return c.do(ctx, spec)
}

func (c *Client) do(ctx context.Context, spec Spec) (*Effect, error) {
	r, err := c.registry.resolve(spec)
	if err != nil {
		return nil, err
	}
	if err := c.checkOwner(ptr(spec.Owner)); err != nil {
		return nil, err
	}
	// A held effect waits for a person; an inline call cannot. Nothing is recorded.
	if h, err := c.holdOf(r); err != nil {
		return nil, err
	} else if h != nil {
		return nil, fmt.Errorf("%w: %s needs a person's confirmation first: enqueue it (EnqueueTx) and confirm it (ConfirmTx)", ErrConfirmationRequired, r.connector.Name)
	}
	// The connector's limits (limit.go): a call that must wait is handed to the reactors instead,
	// due when the limits should let it through.
	id := uuid.Must(uuid.NewV7())
	call := limited{effectID: id, tenantID: r.tenantID, queuedAt: time.Now()}
	g, err := c.acquireCall(ctx, call, r.connector, time.Time{})
	if err != nil {
		return nil, err
	}
	if g.wait > 0 {
		return c.enqueueHeldBack(ctx, spec, id)
	}
	actor := "inline:" + c.config.ID
	token := uuid.New()
	leaseFor := r.connector.Timeout + c.config.InFlightMargin
	expires := time.Now().Add(leaseFor)
	var (
		row     dbsqlc.ReckonEffect
		waiting bool // an ordered effect whose key is busy: recorded to wait for its turn, not called
	)
	err = c.withTx(ctx, func(tx pgx.Tx) error {
		if err := c.checkRunsTx(ctx, tx, []*resolvedSpec{r}); err != nil { // run guardrails (run.go)
			return err
		}
		e := effectInsert(id, r, nil)
		e.LeaseOwner, e.LeaseToken, e.LeaseExpiresAt = &actor, &token, &expires
		e.TraceContext, e.Actor, e.Reason = c.tracing.carrierOf(ctx), actor, "inline attempt claimed"
		if waiting, err = c.orderInlineTx(ctx, tx, r, &e); err != nil {
			return err
		}
		row, err = dbsqlc.New(tx).EffectInsert(ctx, e)
		if err == nil && waiting {
			err = (&orderKeys{tenants: []string{r.tenantID}, keys: []string{r.orderingKey}}).handOnTx(ctx, tx)
		}
		return err
	})
	if err != nil || waiting { // nothing will be called: the grant's slot, if any, is free again
		c.releaseCall(context.WithoutCancel(ctx), call, r.connector, g, nil)
	}
	if err == nil && waiting {
		return effectFromRow(row), nil
	}
	if postgres.NoRows(err) {
		var existing *Effect
		err = c.withTx(ctx, func(tx pgx.Tx) error {
			existing, err = c.existingFor(ctx, tx, r)
			return err
		})
		return existing, err
	}
	if err != nil {
		return nil, fmt.Errorf("effects: record inline effect: %w", err)
	}

	out := c.callDispatch(ctx, row, r.connector)

	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	c.releaseCall(recordCtx, call, r.connector, g, &out)
	f := fence{leaseToken: &token}
	var settled dbsqlc.ReckonEffect
	err = c.withTx(recordCtx, func(tx pgx.Tx) error {
		settled, _, err = c.recordAttempt(recordCtx, tx, attempt{row: row, connector: r.connector, fence: f, actor: actor}, out)
		return err
	})
	fenced := errors.Is(err, errFencedOut)
	if err != nil && !fenced {
		return nil, fmt.Errorf("effects: record inline outcome of %s: %w", row.ID, err)
	}
	if fenced {
		c.observeFencedOut(recordCtx, row.ID, row.Connector, actor, string(out.kind), map[string]any{"error": errString(out.err)})
		return c.Get(ctx, row.ID)
	}
	if State(settled.State) != StatePending {
		c.countSettlement(row.Connector, row.Policy, StatePending, State(settled.State), settled.CreatedAt, settled.UpdatedAt)
	}
	return effectFromRow(settled), nil
}

// enqueueHeldBack records an inline effect that its connector's limits hold back as an enqueued
// one: the reactors dispatch it, asking the limits again, and it waits there for its turn (a
// duplicate of an existing effect returns that one). The place its planned id took in the limit's
// queue is given up.
func (c *Client) enqueueHeldBack(ctx context.Context, spec Spec, plannedID uuid.UUID) (*Effect, error) {
	if err := c.queries.LimitForget(ctx, plannedID); err != nil {
		return nil, fmt.Errorf("effects: record held-back inline effect: %w", err)
	}
	return c.Enqueue(ctx, spec, &EnqueueOpts{
		Actor: "inline:" + c.config.ID, Reason: "enqueued: held back by the connector's limits",
	})
}
