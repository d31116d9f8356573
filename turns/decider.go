package turns

import (
	"context"
	"fmt"
)

// Action is what a turn does about messages that arrived while it runs.
type Action string

const (
	// ActionSupersede stops the turn: nothing it staged is committed, and the next turn of the
	// session processes its messages and the new ones in the same turn group.
	ActionSupersede Action = "SUPERSEDE"
	// ActionAbsorb adds the new messages to the running turn (Turn.Messages includes them); the
	// handler continues or restarts its work with them.
	ActionAbsorb Action = "ABSORB"
	// ActionQueue finishes the turn; the new messages form the next turn, in a new turn group.
	ActionQueue Action = "QUEUE"
	// ActionForceComplete finishes the turn without asking again; the new messages form the next
	// turn.
	ActionForceComplete Action = "FORCE_COMPLETE"
)

// Decision is what a decider chose and why. The zero Decision (empty Action) means there was
// nothing to decide: no new message.
type Decision struct {
	Action Action
	Reason string
	// Messages are the new messages the decision was about.
	Messages []Message
}

// Proceed reports whether the turn goes on (every action but SUPERSEDE).
func (d Decision) Proceed() bool { return d.Action != ActionSupersede }

// DecisionInput is what a decider sees.
type DecisionInput struct {
	// Turn is the running turn, as recorded now (commit point, side effects executed).
	Turn Record
	// New are the messages that arrived since the turn started and were not decided on yet.
	New []Message
	// PendingIrreversible counts the turn's recorded effects that cannot be undone and are not
	// settled: irreversible ones PENDING or UNKNOWN, and any effect awaiting a person's
	// confirmation (docs/design.md, "Confirmation holds"), whatever its policy — it may be
	// confirmed, and so performed, at any moment, superseded turn or not.
	PendingIrreversible int
	// InterruptPoint says where the turn asks: "before_irreversible".
	InterruptPoint string
}

// Decider chooses what a turn does about new messages. An
// error fails the turn's handler call that asked.
type Decider interface {
	Decide(ctx context.Context, in DecisionInput) (Decision, error)
}

// DeciderFunc adapts a function to Decider.
type DeciderFunc func(ctx context.Context, in DecisionInput) (Decision, error)

// Decide calls f.
func (f DeciderFunc) Decide(ctx context.Context, in DecisionInput) (Decision, error) {
	return f(ctx, in)
}

// DefaultDecision is the conservative default: QUEUE once the turn reached a commit point,
// executed a side effect or has an effect pending that cannot be undone (one awaiting its
// confirmation included), otherwise SUPERSEDE.
func DefaultDecision(in DecisionInput) Decision {
	switch {
	case in.Turn.CommitPointReached:
		return Decision{Action: ActionQueue, Reason: "commit_point_reached"}
	case in.Turn.SideEffectsExecuted > 0:
		return Decision{Action: ActionQueue, Reason: "side_effects_executed"}
	case in.PendingIrreversible > 0:
		return Decision{Action: ActionQueue, Reason: "irreversible_effects_pending"}
	}
	return Decision{Action: ActionSupersede, Reason: "new_messages_before_commit_point"}
}

// DefaultDecider decides with DefaultDecision.
var DefaultDecider Decider = DeciderFunc(func(_ context.Context, in DecisionInput) (Decision, error) {
	return DefaultDecision(in), nil
})

func (a Action) valid() error {
	switch a {
	case ActionSupersede, ActionAbsorb, ActionQueue, ActionForceComplete:
		return nil
	}
	return fmt.Errorf("turns: decider returned unknown action %q", a)
}
