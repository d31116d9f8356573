package effects

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// Confirmation holds (docs/design.md, "Confirmation holds"). An effect that needs a person's
// confirmation is recorded PENDING, in the caller's transaction and deduplicated as any other,
// with confirmation AWAITING and its rendered prompt. The database refuses it a job, a lease or an
// attempt while it awaits (reckon_effects_hold_check), and the claimers pass it over, so no reactor
// can call it, whatever crashes. ConfirmTx makes it claimable; DeclineTx fails it.

// Confirmation is where an effect's confirmation hold stands.
type Confirmation string

const (
	ConfirmationNone      Confirmation = ""          // the effect was never held
	ConfirmationAwaiting  Confirmation = "AWAITING"  // held: not dispatched before a decision
	ConfirmationConfirmed Confirmation = "CONFIRMED" // confirmed: dispatched as any other effect
	ConfirmationDeclined  Confirmation = "DECLINED"  // declined: the effect is FAILED
	ConfirmationExpired   Confirmation = "EXPIRED"   // its ConfirmationTTL passed: the effect is FAILED
)

// MaxConfirmationTTL bounds Spec.ConfirmationTTL and Config.ConfirmationTTL.
const MaxConfirmationTTL = 30 * 24 * time.Hour

// maxPromptLen bounds a rendered prompt.
const maxPromptLen = 2000

var promptFieldRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ValidateConfirmationPrompt checks a ConfirmationPrompt template: at most 2000 bytes of valid
// UTF-8 without NUL, and every brace part of a {name} placeholder (a top-level arg name: a letter
// or '_', then letters, digits or '_'), so that a misspelt placeholder ("{order id}", "{amount")
// is refused rather than shown as it is. Whether the args have the names is known only per effect:
// enqueueing an effect whose args lack one fails.
func ValidateConfirmationPrompt(template string) error {
	if len(template) > maxPromptLen {
		return fmt.Errorf("effects: confirmation prompt: %d bytes, at most %d", len(template), maxPromptLen)
	}
	if err := jsonx.CheckText(template); err != nil {
		return fmt.Errorf("effects: confirmation prompt: %w", err)
	}
	if rest := promptFieldRE.ReplaceAllString(template, ""); strings.ContainsAny(rest, "{}") {
		return fmt.Errorf("effects: confirmation prompt %q: a brace that is not part of a {name} placeholder", template)
	}
	return nil
}

// hold is what enqueueing records of an effect's confirmation hold.
type hold struct {
	prompt   string
	ttlMS    int64 // 0: no expiry
	fourEyes bool
}

// holdOf returns r's hold, or nil when r is not held.
func (c *Client) holdOf(r *resolvedSpec) (*hold, error) {
	if !r.spec.RequireConfirmation && !r.connector.RequiresConfirmation &&
		!(c.config.RequireIrreversibleConfirmation && PolicyOf(r.connector) == PolicyIrreversible) {
		return nil, nil
	}
	ttl := r.spec.ConfirmationTTL
	if ttl == 0 {
		ttl = c.config.ConfirmationTTL
	}
	if ttl < 0 || (ttl > 0 && (ttl < time.Second || ttl > MaxConfirmationTTL)) {
		return nil, fmt.Errorf("effects: %s: ConfirmationTTL %v: want at least 1s and at most %v, or 0 for none", r.connector.Name, ttl, MaxConfirmationTTL)
	}
	prompt, err := renderPrompt(r.connector, r.args)
	if err != nil {
		return nil, err
	}
	return &hold{prompt: prompt, ttlMS: ttl.Milliseconds(), fourEyes: c.config.FourEyes}, nil
}

// renderPrompt renders connector's ConfirmationPrompt over args: {name} is the top-level arg name,
// a string as it is and any other value as its JSON. A name the args lack is an error.
func renderPrompt(connector *Connector, args json.RawMessage) (string, error) {
	template := connector.ConfirmationPrompt
	if template == "" {
		return "Confirm " + connector.Name + "?", nil
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(args, &fields) // args that are not an object have no fields to name
	var missing []string
	out := promptFieldRE.ReplaceAllStringFunc(template, func(m string) string {
		name := m[1 : len(m)-1]
		raw, ok := fields[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return string(raw)
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("effects: %s: the confirmation prompt names %s, which the args lack", connector.Name, strings.Join(missing, ", "))
	}
	if len(out) > maxPromptLen {
		out = out[:maxPromptLen]
	}
	return jsonx.SafeText(out), nil
}

// ConfirmTx confirms an effect awaiting its confirmation, in tx: actor and reason go to its audit
// trail, and the reactors of its queue claim and dispatch it once tx commits. An effect that does
// not await one is ErrNotAwaitingConfirmation; if its enqueuing client had Config.FourEyes, a
// confirmation by the actor that enqueued it is ErrFourEyes.
func (c *Client) ConfirmTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, reason string, opts *OperatorOpts) (*Effect, error) {
	row, err := c.lockHeld(ctx, tx, id, actor, reason, opts)
	if err != nil {
		return nil, err
	}
	if row.ConfirmationFourEyes {
		enqueuer, err := dbsqlc.New(tx).EffectTransitionFirstActor(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("effects: confirm %s: read who enqueued it: %w", id, err)
		}
		if enqueuer == actor {
			return nil, fmt.Errorf("%w (effect %s, actor %s)", ErrFourEyes, id, actor)
		}
	}
	decided, err := decideHoldTx(ctx, tx, row.ID, ConfirmationConfirmed, actor, reason)
	if err != nil {
		return nil, err
	}
	if err := dbsqlc.New(tx).EffectObservationInsert(ctx, dbsqlc.EffectObservationInsertParams{
		EffectID: id, Actor: actor, Reason: "confirmed: " + reason,
	}); err != nil {
		return nil, fmt.Errorf("effects: confirm %s: audit: %w", id, err)
	}
	if err := notifyClaimersTx(ctx, tx, deref(decided.Queue)); err != nil {
		return nil, err
	}
	return effectFromRow(decided), nil
}

// Confirm is ConfirmTx in a transaction of its own.
func (c *Client) Confirm(ctx context.Context, id uuid.UUID, actor, reason string, opts *OperatorOpts) (*Effect, error) {
	return inTx(ctx, c, func(tx pgx.Tx) (*Effect, error) { return c.ConfirmTx(ctx, tx, id, actor, reason, opts) })
}

// DeclineTx declines an effect awaiting its confirmation, in tx: it becomes FAILED with
// "declined: {reason}", by actor, and is never dispatched; its owner's settle hook runs (a saga
// compensates the steps before it). An effect that does not await one is ErrNotAwaitingConfirmation.
func (c *Client) DeclineTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, reason string, opts *OperatorOpts) (*Effect, error) {
	if _, err := c.lockHeld(ctx, tx, id, actor, reason, opts); err != nil {
		return nil, err
	}
	settled, err := c.failHeldTx(ctx, tx, id, ConfirmationDeclined, actor, reason, "declined: "+reason)
	if err != nil {
		return nil, err
	}
	return effectFromRow(settled), nil
}

// Decline is DeclineTx in a transaction of its own.
func (c *Client) Decline(ctx context.Context, id uuid.UUID, actor, reason string, opts *OperatorOpts) (*Effect, error) {
	return inTx(ctx, c, func(tx pgx.Tx) (*Effect, error) { return c.DeclineTx(ctx, tx, id, actor, reason, opts) })
}

// endHoldTx records, for an effect another decision fails while it awaits its confirmation (an
// operator's Cancel, CancelRun), that its hold ended DECLINED with that decision's actor and
// reason, so that it is not listed as awaiting. Nothing for an effect not awaiting one.
func endHoldTx(ctx context.Context, tx pgx.Tx, row dbsqlc.ReckonEffect, actor, reason string) error {
	if Confirmation(deref(row.Confirmation)) != ConfirmationAwaiting {
		return nil
	}
	_, err := decideHoldTx(ctx, tx, row.ID, ConfirmationDeclined, actor, reason)
	return err
}

// decideHoldTx records the decision on the hold of effect id, which awaits its confirmation and
// which tx holds locked, and returns the effect.
func decideHoldTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, decision Confirmation, actor, reason string) (dbsqlc.ReckonEffect, error) {
	row, err := dbsqlc.New(tx).EffectConfirmationDecide(ctx, dbsqlc.EffectConfirmationDecideParams{
		ID: id, Decision: string(decision), Actor: actor, Reason: reason,
	})
	if err != nil {
		return row, fmt.Errorf("effects: record the confirmation decision %s on %s: %w", decision, id, err)
	}
	return row, nil
}

// failHeldTx ends the hold of effect id (awaiting its confirmation, locked by tx) with decision and
// settles the effect FAILED with why, running its owner's settle hook.
func (c *Client) failHeldTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, decision Confirmation, actor, reason, why string) (dbsqlc.ReckonEffect, error) {
	if _, err := decideHoldTx(ctx, tx, id, decision, actor, reason); err != nil {
		return dbsqlc.ReckonEffect{}, err
	}
	settled, err := c.settle(ctx, tx, id, transition{
		from: StatePending, to: StateFailed, fence: fence{}, errMsg: why, actor: actor, reason: why,
	})
	if err != nil {
		return dbsqlc.ReckonEffect{}, fmt.Errorf("effects: fail %s (confirmation %s): %w", id, decision, err)
	}
	return settled, nil
}

// lockHeld checks a decision's actor and reason and locks the effect, which must await its
// confirmation.
func (c *Client) lockHeld(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, reason string, opts *OperatorOpts) (dbsqlc.ReckonEffect, error) {
	row, err := c.lockForOperator(ctx, tx, id, "confirmation decision", actor, reason, opts)
	if err != nil {
		return dbsqlc.ReckonEffect{}, err
	}
	if State(row.State) != StatePending || Confirmation(deref(row.Confirmation)) != ConfirmationAwaiting {
		return dbsqlc.ReckonEffect{}, fmt.Errorf("%w: effect %s is %s (confirmation %q)", ErrNotAwaitingConfirmation, id, row.State, deref(row.Confirmation))
	}
	return row, nil
}

// expireConfirmations fails, in one transaction, up to sweepBatch effects whose confirmation did
// not come before their expiry: FAILED, "confirmation expired", by the sweeper. The sweeper of
// every started client runs it.
func (c *Client) expireConfirmations(ctx context.Context) (int, error) {
	actor := "sweeper:" + c.config.ID
	var failed []dbsqlc.ReckonEffect
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		failed = failed[:0]
		q := dbsqlc.New(tx)
		ids, err := q.EffectConfirmationExpired(ctx, sweepBatch)
		if err != nil {
			return fmt.Errorf("effects: read expired confirmation holds: %w", err)
		}
		for _, id := range ids {
			settled, err := c.failHeldTx(ctx, tx, id, ConfirmationExpired, actor, confirmationExpired, confirmationExpired)
			if err != nil {
				return err
			}
			failed = append(failed, settled)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, row := range failed {
		c.countSettlement(row.Connector, row.Policy, StatePending, StateFailed, row.CreatedAt, row.UpdatedAt)
	}
	return len(failed), nil
}

// confirmationExpired is the error and reason of an effect whose confirmation hold expired.
const confirmationExpired = "confirmation expired"
