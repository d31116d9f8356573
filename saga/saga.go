package saga

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// State is a saga's state (Postgres enum reckon_saga_state).
type State string

// The states of a saga. COMPLETED and COMPENSATED are final; STUCK waits for an operator.
const (
	// StateRunning: a step's effect is in flight (including UNKNOWN, being reconciled).
	StateRunning State = "RUNNING"
	// StateCompleted: every step is CONFIRMED.
	StateCompleted State = "COMPLETED"
	// StateCompensating: a step FAILED; the confirmed steps before it are being compensated, in
	// reverse order.
	StateCompensating State = "COMPENSATING"
	// StateCompensated: a step FAILED and every confirmed step before it is compensated.
	StateCompensated State = "COMPENSATED"
	// StateStuck: a step or a compensation could not be resolved by automation; a person must
	// decide (Client.Resolve, or effects.Client.Resolve on the STUCK effect).
	StateStuck State = "STUCK"
)

// Settled reports whether the saga waits for nothing automatic: COMPLETED, COMPENSATED or STUCK.
func (s State) Settled() bool {
	return s == StateCompleted || s == StateCompensated || s == StateStuck
}

// StepState is the state of one step of a saga (Postgres enum reckon_saga_step_state).
type StepState string

// The states of a step.
const (
	// StepRunning: the step's effect is not settled yet.
	StepRunning StepState = "RUNNING"
	// StepConfirmed: the step's effect is CONFIRMED.
	StepConfirmed StepState = "CONFIRMED"
	// StepFailed: the step's effect FAILED (or could not be built or enqueued).
	StepFailed StepState = "FAILED"
	// StepStuck: the step's effect is STUCK.
	StepStuck StepState = "STUCK"
	// StepCompensating: a compensation of the step is in flight.
	StepCompensating StepState = "COMPENSATING"
	// StepCompensated: a compensation of the step is CONFIRMED (or an operator declared it undone).
	StepCompensated StepState = "COMPENSATED"
	// StepCompensationStuck: the step's compensation could not be confirmed; the saga is STUCK.
	StepCompensationStuck StepState = "COMPENSATION_STUCK"
)

// Saga is a started saga: a row of reckon_sagas with its steps.
type Saga struct {
	ID       uuid.UUID
	TenantID string
	// Name is the definition's.
	Name string
	// StartKey is the idempotency key the saga was started with, or "".
	StartKey string
	Input    json.RawMessage
	State    State
	// CurrentStep is the step running (RUNNING), being compensated (COMPENSATING), holding the
	// saga (STUCK), or the last one (COMPLETED).
	CurrentStep int
	// StepCount is how many steps the definition had when the saga started.
	StepCount int
	// Error says why the saga compensates: the failure of a step.
	Error string
	// StuckReason says why the saga is STUCK, while it is.
	StuckReason string
	// Steps are the steps started so far, in order.
	Steps     []StepRecord
	CreatedAt time.Time
	UpdatedAt time.Time
	// Deduplicated is set by StartTx when the start key existed: this is the existing saga.
	Deduplicated bool
}

// StepRecord is one started step of a saga: its effect, result and compensation.
type StepRecord struct {
	Index    int
	Name     string
	State    StepState
	EffectID uuid.UUID
	// Result is the effect's result once CONFIRMED.
	Result json.RawMessage
	// CompensationEffectID is the latest compensation effect, if any; CompensationAttempts counts
	// the compensation effects enqueued.
	CompensationEffectID *uuid.UUID
	CompensationAttempts int
	CompensationResult   json.RawMessage
	Error                string
}

// Transition is one change of a saga's state, from its append-only history. From is empty for
// the start.
type Transition struct {
	From   State
	To     State
	Step   int
	Actor  string
	Reason string
	At     time.Time
}

func sagaFromRow(row dbsqlc.ReckonSaga, steps []dbsqlc.ReckonSagaStep) *Saga {
	s := &Saga{
		ID: row.ID, TenantID: row.TenantID, Name: row.Name, Input: row.Input, State: State(row.State),
		CurrentStep: int(row.CurrentStep), StepCount: int(row.StepCount), CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt,
	}
	if row.StartKey != nil {
		s.StartKey = *row.StartKey
	}
	if row.Error != nil {
		s.Error = *row.Error
	}
	if row.StuckReason != nil {
		s.StuckReason = *row.StuckReason
	}
	for _, st := range steps {
		rec := StepRecord{
			Index: int(st.Idx), Name: st.Name, State: StepState(st.State), EffectID: st.EffectID, Result: st.Result,
			CompensationEffectID: st.CompensationEffectID, CompensationAttempts: int(st.CompensationAttempts),
			CompensationResult: st.CompensationResult,
		}
		if st.Error != nil {
			rec.Error = *st.Error
		}
		s.Steps = append(s.Steps, rec)
	}
	return s
}
