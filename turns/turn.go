package turns

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/txn"
)

// Turn is a logical turn as its handler sees it, valid until the handler returns. Its methods
// run on the session mutex's connection; they are safe for concurrent use.
type Turn struct {
	// ID, Seq, SessionKey, Group and Channel identify the turn (see Record).
	ID         uuid.UUID
	Seq        int64
	SessionKey string
	Group      uuid.UUID
	Channel    string
	// Tenant is the session key's tenant; effects the turn enqueues belong to it unless their
	// spec names another.
	Tenant string
	// Attempt is 1 on a turn's first attempt at its messages and counts on after failures.
	Attempt int

	client *Client
	lock   *Lock
	ec     *effects.Client

	mu            sync.Mutex
	messages      []Message
	staged        []stagedOp
	decided       map[uuid.UUID]bool
	forceComplete bool
	superseded    bool
	ended         bool
	// reportedInvalid names the artifacts whose lookup in this turn reported them invalidated:
	// saving them again does not report it twice.
	reportedInvalid map[string]bool
}

// stagedOp is one staged piece of the commit: a mutation or an effect.
type stagedOp struct {
	mutate func(ctx context.Context, tx pgx.Tx) error
	effect *effects.Spec
}

// Messages returns the turn's messages in the order received (including absorbed ones).
func (t *Turn) Messages() []Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.messages)
}

// Position returns the journal position (decision, call) in the turn's group: the idempotency key
// of an effect enqueued at it is "{group}/d-{decision}/{connector}/{call}", the same in every
// turn of the group, so a superseding turn that enqueues the same position gets the same effect.
func (t *Turn) Position(decision, call int) *effects.Position {
	return &effects.Position{TurnGroup: t.Group.String(), Decision: decision, CallIndex: call}
}

// Stage adds a mutation to the turn's commit: fn runs in the commit transaction, in staging
// order with the staged effects. If it returns an error, nothing of the turn is committed.
func (t *Turn) Stage(fn func(ctx context.Context, tx pgx.Tx) error) error {
	if fn == nil {
		return errors.New("turns: Stage: nil function")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return ErrTurnEnded
	}
	t.staged = append(t.staged, stagedOp{mutate: fn})
	return nil
}

// Enqueue adds an effect to the turn's commit: it is recorded with effects.EnqueueTx in the commit
// transaction (and dispatched after it commits), or not at all. The spec needs an IdempotencyKey
// or a Position (see Turn.Position); TurnID, TurnGroup and TenantID default to the turn's. An
// unknown connector or a spec without a key is refused here and stages nothing.
func (t *Turn) Enqueue(spec effects.Spec) error {
	spec = t.fill(spec)
	if spec.IdempotencyKey == "" && spec.Position == nil {
		return fmt.Errorf("turns: Enqueue %s: the spec needs an IdempotencyKey or a Position (Turn.Position)", spec.Connector)
	}
	if _, ok := t.ec.Registry().Get(spec.Connector); !ok {
		return fmt.Errorf("turns: Enqueue: %w: %q", effects.ErrUnknownConnector, spec.Connector)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return ErrTurnEnded
	}
	t.staged = append(t.staged, stagedOp{effect: &spec})
	return nil
}

func (t *Turn) fill(spec effects.Spec) effects.Spec {
	if spec.TenantID == "" {
		spec.TenantID = t.Tenant
	}
	if spec.TurnID == nil {
		id := t.ID
		spec.TurnID = &id
	}
	if spec.TurnGroup == "" {
		spec.TurnGroup = t.Group.String()
	}
	return spec
}

// HasPendingMessages reports whether messages arrived for the session since the turn started
// (they wait in the session's next, accumulating turn).
func (t *Turn) HasPendingMessages(ctx context.Context) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false, ErrTurnEnded
	}
	pending, err := dbsqlc.New(t.lock.Conn()).MessageListPending(ctx, t.SessionKey)
	if err != nil {
		return false, fmt.Errorf("turns: pending messages of %q: %w", t.SessionKey, err)
	}
	return len(pending) > 0, nil
}

// BeforeIrreversible is the supersede check: call it before anything that cannot be
// undone. Without new messages it returns the zero Decision. With messages it has not decided on
// yet, it asks the decider (Config.Decider, else DefaultDecider), records the decision in
// reckon_turn_decisions, counts it, and acts:
//
//   - SUPERSEDE: the turn ends; its messages move to the session's next turn, which inherits the
//     turn group. Returns ErrSuperseded: return it from the handler.
//   - ABSORB: the messages the decider was shown join this turn (Messages includes them); go on
//     with them. Messages that arrived while it deliberated stay in the next turn, still pending:
//     the next BeforeIrreversible asks about them.
//   - QUEUE: go on; the new messages form the next turn.
//   - FORCE_COMPLETE: go on without asking again in this turn.
func (t *Turn) BeforeIrreversible(ctx context.Context) (Decision, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.decideLocked(ctx, "before_irreversible")
}

// Do performs an effect inline now (effects.Client.Do), outside the turn's commit: it is recorded
// and called even if the turn later fails, and counts as a side effect executed (an irreversible
// one also as the turn's commit point), which makes the default decider QUEUE rather than
// SUPERSEDE. For an irreversible connector Do first runs BeforeIrreversible and returns
// ErrSuperseded, calling nothing, when the turn is superseded. Use a Position so that a retry or a
// superseding turn of the group finds the effect instead of calling again.
func (t *Turn) Do(ctx context.Context, spec effects.Spec) (*effects.Effect, error) {
	spec = t.fill(spec)
	connector, ok := t.ec.Registry().Get(spec.Connector)
	if !ok {
		return nil, fmt.Errorf("turns: Do: %w: %q", effects.ErrUnknownConnector, spec.Connector)
	}
	irreversible := effects.PolicyOf(connector) == effects.PolicyIrreversible
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return nil, ErrTurnEnded
	}
	if irreversible {
		if _, err := t.decideLocked(ctx, "before_irreversible"); err != nil {
			return nil, err
		}
	}
	effect, err := t.ec.Do(ctx, spec)
	if err != nil {
		return nil, err
	}
	if _, err := dbsqlc.New(t.lock.Conn()).TurnRecordSideEffect(ctx, dbsqlc.TurnRecordSideEffectParams{ID: t.ID, CommitPoint: irreversible}); err != nil {
		return effect, fmt.Errorf("turns: record side effect of turn %s: %w", t.ID, err)
	}
	return effect, nil
}

// ReachCommitPoint records that the turn passed a point after which it must not be silently
// restarted (the turn's commit point): from now on the default decider QUEUEs new messages.
func (t *Turn) ReachCommitPoint(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return ErrTurnEnded
	}
	if _, err := dbsqlc.New(t.lock.Conn()).TurnReachCommitPoint(ctx, t.ID); err != nil {
		return fmt.Errorf("turns: commit point of turn %s: %w", t.ID, err)
	}
	return nil
}

func (t *Turn) decideLocked(ctx context.Context, point string) (Decision, error) {
	if t.ended {
		if t.superseded {
			return Decision{}, ErrSuperseded
		}
		return Decision{}, ErrTurnEnded
	}
	if t.forceComplete {
		return Decision{Action: ActionForceComplete, Reason: "force_complete decided earlier in the turn"}, nil
	}
	conn := t.lock.Conn()
	q := dbsqlc.New(conn)
	pending, err := q.MessageListPending(ctx, t.SessionKey)
	if err != nil {
		return Decision{}, fmt.Errorf("turns: pending messages of %q: %w", t.SessionKey, err)
	}
	var fresh []Message
	for _, row := range pending {
		if !t.decided[row.ID] {
			fresh = append(fresh, messageFromRow(row))
		}
	}
	if len(fresh) == 0 {
		return Decision{}, nil
	}
	row, err := q.TurnGet(ctx, t.ID)
	if err != nil {
		return Decision{}, fmt.Errorf("turns: read turn %s: %w", t.ID, err)
	}
	pendingIrreversible, err := q.EffectCountPendingIrreversibleByTurn(ctx, &t.ID)
	if err != nil {
		return Decision{}, fmt.Errorf("turns: pending irreversible effects of turn %s: %w", t.ID, err)
	}
	in := DecisionInput{Turn: *recordFromRow(row), New: fresh, InterruptPoint: point, PendingIrreversible: int(pendingIrreversible)}
	decider, name := t.client.config.Decider, "application"
	if t.client.config.defaultDecider {
		name = "default"
	}
	decision, err := decider.Decide(ctx, in)
	if err != nil {
		return Decision{}, fmt.Errorf("turns: supersede decider: %w", err)
	}
	if err := decision.Action.valid(); err != nil {
		return Decision{}, err
	}
	decision.Messages = fresh
	ids := make([]uuid.UUID, len(fresh))
	for i, m := range fresh {
		ids[i] = m.ID
	}
	err = txn.Once(ctx, conn, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if _, err := q.TurnDecisionInsert(ctx, dbsqlc.TurnDecisionInsertParams{
			TurnID: t.ID, SessionKey: t.SessionKey, Action: string(decision.Action), Reason: decision.Reason, Decider: name, MessageIds: ids,
		}); err != nil {
			return fmt.Errorf("record decision: %w", err)
		}
		switch decision.Action {
		case ActionSupersede:
			return t.client.supersedeTx(ctx, tx, t.ID, t.SessionKey, "superseded: "+decision.Reason)
		case ActionAbsorb:
			return t.absorbTx(ctx, tx, fresh)
		}
		return nil
	})
	if err != nil {
		return Decision{}, fmt.Errorf("turns: apply %s decision of turn %s: %w", decision.Action, t.ID, err)
	}
	t.client.metrics.decisions.WithLabelValues(string(decision.Action), name).Inc()
	t.client.logger.InfoContext(ctx, "supersede decision", "turn_id", t.ID.String(), "session_key", t.SessionKey,
		"action", string(decision.Action), "reason", decision.Reason, "decider", name, "messages", len(fresh))
	for _, id := range ids {
		t.decided[id] = true
	}
	switch decision.Action {
	case ActionSupersede:
		t.ended, t.superseded = true, true
		t.client.metrics.ended.WithLabelValues(string(StatusSuperseded)).Inc()
		return decision, ErrSuperseded
	case ActionAbsorb:
		rows, err := dbsqlc.New(conn).MessageListByTurn(ctx, &t.ID)
		if err != nil {
			return Decision{}, fmt.Errorf("turns: read messages of turn %s: %w", t.ID, err)
		}
		t.messages = messagesFromRows(rows)
	case ActionForceComplete:
		t.forceComplete = true
	}
	return decision, nil
}

// absorbTx moves exactly the decided messages (fresh) from the session's accumulating turn into
// t. The accumulating turn keeps the messages that arrived while the decider deliberated, or
// earlier ones a QUEUE decision left there; it is dropped when nothing is left in it.
func (t *Turn) absorbTx(ctx context.Context, tx pgx.Tx, fresh []Message) error {
	q := dbsqlc.New(tx)
	if err := scheduleLock(t.SessionKey).LockTx(ctx, tx); err != nil {
		return err
	}
	acc, err := q.TurnGetAccumulating(ctx, t.SessionKey)
	if err != nil {
		return fmt.Errorf("read accumulating turn: %w", err)
	}
	ids := make([]uuid.UUID, len(fresh))
	firstAt, lastAt := fresh[0].ReceivedAt, fresh[0].ReceivedAt
	for i, m := range fresh {
		ids[i] = m.ID
		firstAt, lastAt = minTime(firstAt, m.ReceivedAt), maxTime(lastAt, m.ReceivedAt)
	}
	moved, err := q.MessageMoveByID(ctx, dbsqlc.MessageMoveByIDParams{FromTurnID: &acc.ID, ToTurnID: &t.ID, Ids: ids})
	if err != nil {
		return fmt.Errorf("move absorbed messages: %w", err)
	}
	if len(moved) != len(ids) {
		// Only a turn holding the session mutex moves messages out of the accumulating turn, and
		// this one holds it: the decided messages cannot have gone elsewhere.
		return fmt.Errorf("absorb: %d of the %d decided messages are no longer pending", len(ids)-len(moved), len(ids))
	}
	current, err := q.TurnGet(ctx, t.ID)
	if err != nil {
		return err
	}
	merged, err := q.TurnAddMessages(ctx, dbsqlc.TurnAddMessagesParams{
		ID: t.ID, MessageIds: ids, FirstAt: firstAt, LastAt: lastAt, WindowMs: current.WindowMs,
	})
	if err != nil {
		return err
	}
	if err := q.TurnSetBeatKey(ctx, dbsqlc.TurnSetBeatKeyParams{ID: t.ID, BeatKey: ptrTo(beatKey(merged.MessageIds))}); err != nil {
		return err
	}
	rest, err := q.TurnRemoveMessages(ctx, dbsqlc.TurnRemoveMessagesParams{ID: acc.ID, MessageIds: ids})
	if err != nil {
		return fmt.Errorf("remove absorbed messages from turn %s: %w", acc.ID, err)
	}
	if len(rest.MessageIds) > 0 {
		return nil // the rest waits for its own job, as scheduled
	}
	return q.TurnDelete(ctx, acc.ID)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// end marks the turn over for its handler and returns what it staged.
func (t *Turn) end() (staged []stagedOp, superseded bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	return t.staged, t.superseded
}

func ptrTo[T any](v T) *T { return &v }
