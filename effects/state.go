package effects

import (
	"fmt"
	"slices"
)

// State is where an effect stands. docs/design.md gives the machine; the database enforces it.
type State string

const (
	// StatePending: not resolved yet — queued, in flight, or waiting to be retried.
	StatePending State = "PENDING"
	// StateConfirmed: it happened, once. Terminal.
	StateConfirmed State = "CONFIRMED"
	// StateFailed: it definitely did not happen. Terminal.
	StateFailed State = "FAILED"
	// StateUnknown: an attempt may or may not have taken effect; a reactor is reconciling it.
	StateUnknown State = "UNKNOWN"
	// StateStuck: automation could not resolve the ambiguity; an operator must decide.
	StateStuck State = "STUCK"
)

// States lists every state, in the order of docs/design.md.
var States = []State{StatePending, StateConfirmed, StateFailed, StateUnknown, StateStuck}

// ParseState returns the State named s (upper case), or an error naming the valid ones.
func ParseState(s string) (State, error) {
	if slices.Contains(States, State(s)) {
		return State(s), nil
	}
	return "", fmt.Errorf("effects: unknown state %q: want one of PENDING, CONFIRMED, FAILED, UNKNOWN, STUCK", s)
}

// Terminal reports whether s is CONFIRMED or FAILED: the effect will never change again.
func (s State) Terminal() bool { return s == StateConfirmed || s == StateFailed }

// Settled reports whether s is terminal or STUCK: nothing automatic will happen to the effect.
func (s State) Settled() bool { return s.Terminal() || s == StateStuck }

// Tag is a fact about what a connector does.
type Tag string

const (
	// TagRead: observes state and changes none.
	TagRead Tag = "read"
	// TagWrite: changes state.
	TagWrite Tag = "write"
	// TagIdempotent: repeating the call with the same idempotency key has the effect of one call.
	TagIdempotent Tag = "idempotent"
	// TagDestructive: deletes or destroys; never retried automatically, even if idempotent.
	TagDestructive Tag = "destructive"
	// TagExternal: a third party's system (payments, email).
	TagExternal Tag = "external"
	// TagExpensive: costly to call.
	TagExpensive Tag = "expensive"
	// TagNetwork: goes over the network, so transient errors happen.
	TagNetwork Tag = "network"
)

var knownTags = []Tag{TagRead, TagWrite, TagIdempotent, TagDestructive, TagExternal, TagExpensive, TagNetwork}

func validateTags(tags []Tag) error {
	for _, tag := range tags {
		if !slices.Contains(knownTags, tag) {
			return fmt.Errorf("unknown tag %q: want read, write, idempotent, destructive, external, expensive or network", tag)
		}
	}
	return nil
}

// RetrySafe reports whether calling again may be done automatically: the tags say the call is
// idempotent, or a read that writes nothing, and nothing destructive. An empty set is not retry
// safe: what is not known is not retried.
func RetrySafe(tags []Tag) bool {
	has := func(t Tag) bool { return slices.Contains(tags, t) }
	if has(TagDestructive) {
		return false
	}
	return has(TagIdempotent) || (has(TagRead) && !has(TagWrite))
}

// ParallelSafe reports whether calls may run concurrently: a read that writes nothing and destroys
// nothing. An empty set is not parallel safe.
func ParallelSafe(tags []Tag) bool {
	return slices.Contains(tags, TagRead) && !slices.Contains(tags, TagWrite) && !slices.Contains(tags, TagDestructive)
}

// Policy is what may be done with an effect when things go wrong, derived from the
// connector's tags and capabilities by PolicyOf.
type Policy string

const (
	// PolicyPure: a read; retry freely.
	PolicyPure Policy = "pure"
	// PolicyIdempotent: a write that is safe to repeat with the same idempotency key.
	PolicyIdempotent Policy = "idempotent"
	// PolicyCompensatable: a write that is not safe to repeat but can be undone.
	PolicyCompensatable Policy = "compensatable"
	// PolicyIrreversible: a write that is neither safe to repeat nor possible to undo.
	PolicyIrreversible Policy = "irreversible"
)

// RetrySafe reports whether effects of this policy may be called again automatically.
func (p Policy) RetrySafe() bool { return p == PolicyPure || p == PolicyIdempotent }

// PolicyOf derives a connector's policy from its tags and capabilities.
func PolicyOf(c *Connector) Policy {
	switch {
	case ParallelSafe(c.Tags):
		return PolicyPure
	case RetrySafe(c.Tags):
		return PolicyIdempotent
	case c.Compensate != nil:
		return PolicyCompensatable
	default:
		return PolicyIrreversible
	}
}
