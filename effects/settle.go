package effects

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/txn"
)

// fence identifies the owner of an attempt: the River job the effect belongs to, or, for an
// inline attempt, its lease token. Outcome writes succeed only while the effect still belongs to
// the same owner.
type fence struct {
	jobID      *int64
	leaseToken *uuid.UUID
	// sharedJob: the job carries other effects too (a batch dispatch job), so it is neither
	// snoozed nor completed for this one; an effect that must wait is handed to a job of its own.
	sharedJob bool
}

// transition is one fenced state change, with the follow-up job that takes the effect over.
type transition struct {
	from, to  State
	fence     fence
	attempted int // attempts to add to the effect's count
	result    json.RawMessage
	errMsg    string
	newJobID  *int64
	actor     string
	reason    string
	detail    map[string]any
}

// settle writes t in tx. It returns errFencedOut (and writes nothing; tx stays usable) when the
// effect is no longer in t.from or no longer belongs to t.fence: someone else decided first. It is
// the one place an effect
// changes state: for an owned effect that becomes CONFIRMED, FAILED or STUCK it runs the owner's
// SettleHook in tx, and the hook's error (or a missing hook) fails the write.
func (c *Client) settle(ctx context.Context, tx pgx.Tx, effectID uuid.UUID, t transition) (row dbsqlc.ReckonEffect, err error) {
	detail, err := marshalDetail(t.detail)
	if err != nil {
		return row, err
	}
	row, err = dbsqlc.New(tx).EffectSettle(ctx, dbsqlc.EffectSettleParams{
		ID:         effectID,
		FromState:  dbsqlc.ReckonEffectState(t.from),
		ToState:    dbsqlc.ReckonEffectState(t.to),
		Attempted:  int32(t.attempted),
		Result:     t.result,
		Error:      ptr(jsonx.SafeText(t.errMsg)), // errors quote upstreams: anything may be in them
		NewJobID:   t.newJobID,
		Actor:      t.actor,
		Reason:     jsonx.SafeText(t.reason),
		Detail:     detail,
		LeaseToken: t.fence.leaseToken,
		JobID:      t.fence.jobID,
	})
	if postgres.NoRows(err) {
		return row, errFencedOut
	}
	if err != nil {
		return row, fmt.Errorf("effects: %s -> %s of effect %s: %w", t.from, t.to, effectID, err)
	}
	// The owner learns of the settlement in this same transaction; its error rolls it back.
	if err := c.runHook(ctx, tx, effectFromRow(row)); err != nil {
		return row, err
	}
	return row, nil
}

// observeFencedOut records, outside any transaction that failed, what a fenced-out writer saw.
func (c *Client) observeFencedOut(ctx context.Context, effectID uuid.UUID, connector, actor, what string, detail map[string]any) {
	// Counted once the observation is written (or has failed to be), so that whoever sees the
	// count also finds the audit row.
	defer c.metrics.fenced.WithLabelValues(connector).Inc()
	raw, _ := marshalDetail(detail)
	// One statement, run again (txn.Retry) if a migration's lock or a deadlock aborts it.
	err := txn.Retry(ctx, c.logger, txn.Policy{}, func() error {
		return c.queries.EffectObservationInsert(ctx, dbsqlc.EffectObservationInsertParams{
			EffectID: effectID, Actor: actor, Reason: "fenced out: " + what, Detail: raw,
		})
	})
	if err != nil {
		c.logger.ErrorContext(ctx, "record fenced-out outcome", slog.String("effect_id", effectID.String()), slog.String("error", err.Error()))
		return
	}
	c.logger.InfoContext(ctx, "fenced out: the effect moved on before this outcome was written",
		slog.String("effect_id", effectID.String()), slog.String("outcome", what))
}

func marshalDetail(detail map[string]any) (json.RawMessage, error) {
	if len(detail) == 0 {
		return nil, nil
	}
	safe := make(map[string]any, len(detail))
	for k, v := range detail {
		if text, ok := v.(string); ok {
			v = jsonx.SafeText(text) // a correlation id or an upstream's words: jsonb must take it
		}
		safe[k] = v
	}
	raw, err := json.Marshal(safe)
	if err != nil {
		return nil, fmt.Errorf("effects: transition detail: %w", err)
	}
	return raw, nil
}

// countTransition counts a committed transition in the metrics.
func (c *Client) countTransition(connector string, policy dbsqlc.ReckonEffectPolicy, from, to State) {
	c.metrics.transitions.WithLabelValues(connector, string(policy), string(from), string(to)).Inc()
}

// countSettlement is countTransition for a committed transition that may settle the effect: one to
// CONFIRMED or FAILED is also observed as the effect's settle latency, from createdAt (its enqueue)
// to settledAt (the updated_at its transition wrote), both on the database's clock.
func (c *Client) countSettlement(connector string, policy dbsqlc.ReckonEffectPolicy, from, to State, createdAt, settledAt time.Time) {
	c.countTransition(connector, policy, from, to)
	if to.Terminal() {
		c.metrics.settleSeconds.WithLabelValues(connector, string(to)).Observe(max(settledAt.Sub(createdAt), 0).Seconds())
	}
}
