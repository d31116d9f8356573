package effects

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Effect is one recorded call to the outside world: a row of reckon_effects.
type Effect struct {
	ID             uuid.UUID
	TenantID       string
	Connector      string
	Args           json.RawMessage
	IdempotencyKey string
	BusinessKey    string
	Policy         Policy
	Tags           []Tag
	State          State
	// Attempts counts dispatch attempts made so far; MaxAttempts bounds them.
	Attempts    int
	MaxAttempts int
	// Result is what the upstream returned, once CONFIRMED.
	Result json.RawMessage
	// Error is the last failure seen, if any.
	Error string
	// Timeout is the connector's call timeout when the effect was enqueued.
	Timeout    time.Duration
	DeadlineAt *time.Time
	RunID      string
	TurnID     *uuid.UUID
	TurnGroup  string
	// CompensatesID is, for a compensation, the effect it undoes.
	CompensatesID *uuid.UUID
	// OrderingKey is the effect's ordering key (Spec.OrderingKey), or "" for an unordered effect.
	OrderingKey string
	// Owner is the component told of the effect's settlement (Spec.Owner), or "".
	Owner string
	// CorrelationID is set once the upstream accepted the effect (Accepted): the id its callback
	// names. DeadlineAt is then when its await ends.
	CorrelationID string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Confirmation is where the effect's confirmation hold stands ("" if it was never held);
	// ConfirmationPrompt is its rendered question, ConfirmationExpiresAt when an unconfirmed one
	// fails, and ConfirmationBy, ConfirmationAt and ConfirmationReason the decision's.
	Confirmation          Confirmation
	ConfirmationPrompt    string
	ConfirmationExpiresAt *time.Time
	ConfirmationBy        string
	ConfirmationAt        *time.Time
	ConfirmationReason    string
	// Deduplicated is set by enqueueing when the idempotency key already existed: this is the
	// existing effect and nothing new was recorded.
	Deduplicated bool
}

// Transition is one row of an effect's audit trail. From is empty for the insert. A row with From
// equal to To records an observation, such as a late outcome of a fenced-out attempt.
type Transition struct {
	ID       int64
	EffectID uuid.UUID
	From     State
	To       State
	Actor    string
	Reason   string
	Attempt  int
	At       time.Time
	Detail   json.RawMessage
}

func effectFromRow(row dbsqlc.ReckonEffect) *Effect {
	e := &Effect{
		ID:             row.ID,
		TenantID:       row.TenantID,
		Connector:      row.Connector,
		Args:           row.Args,
		IdempotencyKey: row.IdempotencyKey,
		BusinessKey:    deref(row.BusinessKey),
		Policy:         Policy(row.Policy),
		State:          State(row.State),
		Attempts:       int(row.Attempts),
		MaxAttempts:    int(row.MaxAttempts),
		Result:         row.Result,
		Error:          deref(row.Error),
		Timeout:        time.Duration(row.TimeoutMs) * time.Millisecond,
		DeadlineAt:     row.DeadlineAt,
		RunID:          deref(row.RunID),
		TurnID:         row.TurnID,
		TurnGroup:      deref(row.TurnGroup),
		CompensatesID:  row.CompensatesID,
		OrderingKey:    deref(row.OrderingKey),
		Owner:          deref(row.Owner),
		CorrelationID:  deref(row.CorrelationID),
		CreatedAt:      row.CreatedAt,
		UpdatedAt:      row.UpdatedAt,

		Confirmation:          Confirmation(deref(row.Confirmation)),
		ConfirmationPrompt:    deref(row.ConfirmationPrompt),
		ConfirmationExpiresAt: row.ConfirmationExpiresAt,
		ConfirmationBy:        deref(row.ConfirmationBy),
		ConfirmationAt:        row.ConfirmationAt,
		ConfirmationReason:    deref(row.ConfirmationReason),
	}
	for _, tag := range row.Tags {
		e.Tags = append(e.Tags, Tag(tag))
	}
	return e
}

func transitionFromRow(row dbsqlc.ReckonEffectTransition) Transition {
	t := Transition{
		ID:       row.ID,
		EffectID: row.EffectID,
		To:       State(row.ToState),
		Actor:    row.Actor,
		Reason:   row.Reason,
		Attempt:  int(row.Attempt),
		At:       row.At,
		Detail:   row.Detail,
	}
	if row.FromState != nil {
		t.From = State(*row.FromState)
	}
	return t
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// nonZero is p, or nil when *p is the zero value: a nullable column that points into storage the
// caller already has, where ptr would copy the value to the heap.
func nonZero[T comparable](p *T) *T {
	var zero T
	if *p == zero {
		return nil
	}
	return p
}

func ptr[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
