package saga

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/recovery"
)

// Definition is a named saga: ordered steps, each an effect with a way to undo it. Register it
// with Client.Register in every process that starts sagas of that name or runs their reactor.
type Definition struct {
	// Name identifies the definition; StartTx names it. Required.
	Name string
	// Steps run in order, each after the one before is CONFIRMED. At least one is required.
	Steps []Step
	// CompensationAttempts is how many compensation effects the saga enqueues for one step whose
	// compensations keep ending FAILED before the saga becomes STUCK. Each compensation effect has
	// its own retries within effects (its connector's MaxAttempts). Default 5.
	CompensationAttempts int
	// CompensationBackoff is the delay before compensation n+1 of a step after compensation n
	// FAILED. Default: 1s, doubling, at most 1 minute.
	CompensationBackoff func(n int) time.Duration
}

// Step is one step of a Definition.
type Step struct {
	// Name of the step, unique within the definition. Required.
	Name string
	// Effect builds the step's effect from the saga's input and the results of the earlier steps.
	// The saga fills in the spec's TenantID (the saga's), IdempotencyKey ("saga/{saga id}/step-{i}")
	// and Owner; a spec that sets a different TenantID, or any IdempotencyKey, Position or Owner, is
	// refused. An error (or a refused spec) fails the step: the saga compensates the steps before
	// it. Required.
	Effect func(in Input) (effects.Spec, error)
	// Undo names the step's compensation: UndoByConnector, UndoWith or NoUndo. Required.
	Undo Undo
}

// Undo is how a CONFIRMED step is compensated. Make one with UndoByConnector, UndoWith or NoUndo.
type Undo struct {
	kind  undoKind
	build func(in Input) (effects.Spec, error)
}

type undoKind int

const (
	undoUnset undoKind = iota
	undoConnector
	undoSpec
	undoNone
)

// UndoByConnector compensates the step with its connector's Compensate, through effects'
// compensation mechanism (effects.Client.CompensateTx): an effect of the same connector whose
// dispatch calls Compensate with the original effect, under the key "{step key}/compensate-saga-{n}".
func UndoByConnector() Undo { return Undo{kind: undoConnector} }

// UndoWith compensates the step with an effect of its own, built by build; in.Step is the index
// of the step being undone and in.Results includes its result. The saga fills in TenantID,
// IdempotencyKey ("saga/{saga id}/step-{i}/undo-{n}") and Owner as for Step.Effect.
func UndoWith(build func(in Input) (effects.Spec, error)) Undo {
	return Undo{kind: undoSpec, build: build}
}

// NoUndo declares that the step needs no compensation (a read, or an effect nothing can undo and
// that is acceptable to keep). Compensation skips it.
func NoUndo() Undo { return Undo{kind: undoNone} }

// Input is what Step.Effect and UndoWith build from.
type Input struct {
	// SagaID, TenantID and Name identify the saga.
	SagaID   uuid.UUID
	TenantID string
	Name     string
	// Step is the index of the step being built (or undone).
	Step int
	// Data is the saga's input, as given to StartTx.
	Data json.RawMessage
	// Results are the results of the steps before Step, in order (for an undo: up to and
	// including Step).
	Results []json.RawMessage
}

// Decode unmarshals the saga's input into v.
func (in Input) Decode(v any) error {
	if err := json.Unmarshal(in.Data, v); err != nil {
		return fmt.Errorf("saga %s: decode input: %w", in.Name, err)
	}
	return nil
}

// DecodeResult unmarshals the result of step i into v.
func (in Input) DecodeResult(i int, v any) error {
	if i < 0 || i >= len(in.Results) {
		return fmt.Errorf("saga %s: no result of step %d (have %d)", in.Name, i, len(in.Results))
	}
	if err := json.Unmarshal(in.Results[i], v); err != nil {
		return fmt.Errorf("saga %s: decode result of step %d: %w", in.Name, i, err)
	}
	return nil
}

const (
	defaultCompensationAttempts = 5
	maxSteps                    = 1000
)

func defaultCompensationBackoff(n int) time.Duration {
	d := time.Second << min(max(n-1, 0), 6)
	return min(d, time.Minute)
}

// validate checks def and fills in its defaults.
func (def *Definition) validate() error {
	switch {
	case def.Name == "":
		return errors.New("saga: definition needs a Name")
	case len(def.Steps) == 0:
		return fmt.Errorf("saga %s: definition needs at least one step", def.Name)
	case len(def.Steps) > maxSteps:
		return fmt.Errorf("saga %s: %d steps, at most %d", def.Name, len(def.Steps), maxSteps)
	case def.CompensationAttempts < 0:
		return fmt.Errorf("saga %s: CompensationAttempts must not be negative", def.Name)
	}
	names := map[string]bool{}
	for i, step := range def.Steps {
		switch {
		case step.Name == "":
			return fmt.Errorf("saga %s: step %d needs a Name", def.Name, i)
		case names[step.Name]:
			return fmt.Errorf("saga %s: two steps are named %q", def.Name, step.Name)
		case step.Effect == nil:
			return fmt.Errorf("saga %s: step %q needs an Effect", def.Name, step.Name)
		case step.Undo.kind == undoUnset:
			return fmt.Errorf("saga %s: step %q names no compensation: use UndoByConnector, UndoWith or NoUndo", def.Name, step.Name)
		case step.Undo.kind == undoSpec && step.Undo.build == nil:
			return fmt.Errorf("saga %s: step %q: UndoWith needs a function", def.Name, step.Name)
		}
		names[step.Name] = true
	}
	if def.CompensationAttempts == 0 {
		def.CompensationAttempts = defaultCompensationAttempts
	}
	if def.CompensationBackoff == nil {
		def.CompensationBackoff = defaultCompensationBackoff
	}
	return nil
}

// StepKey returns the idempotency key of step i of saga id: "saga/{id}/step-{i}". It is derived
// from the saga and the step only, so a crash and redo can never create a second effect for a step.
func StepKey(id uuid.UUID, i int) string { return fmt.Sprintf("saga/%s/step-%d", id, i) }

// CompensationKey returns the idempotency key of the n-th compensation (from 1) of step i of saga
// id: for UndoWith "{StepKey}/undo-{n}"; for UndoByConnector effects' compensation key
// "{StepKey}/compensate-saga-{n}".
func CompensationKey(id uuid.UUID, i, n int, byConnector bool) string {
	if byConnector {
		return fmt.Sprintf("%s/compensate-%s", StepKey(id, i), connectorSuffix(n))
	}
	return fmt.Sprintf("%s/undo-%d", StepKey(id, i), n)
}

func connectorSuffix(n int) string { return fmt.Sprintf("saga-%d", n) }

// build calls a step's (or an undo's) builder, turning a panic into an error: the step fails
// instead of the reactor's worker.
func build(fn func(Input) (effects.Spec, error), in Input) (effects.Spec, error) {
	return recovery.Call("step builder", func() (effects.Spec, error) { return fn(in) })
}

// checkSpec fills in what the saga owns in a spec built by a step, or refuses it.
func checkSpec(spec effects.Spec, tenant, key string) (effects.Spec, error) {
	switch {
	case spec.IdempotencyKey != "" || spec.Position != nil:
		return spec, errors.New("the saga derives the idempotency key: leave IdempotencyKey and Position empty")
	case spec.Owner != "":
		return spec, errors.New("the saga owns its effects: leave Owner empty")
	case spec.TenantID != "" && spec.TenantID != tenant:
		return spec, fmt.Errorf("tenant %q differs from the saga's %q", spec.TenantID, tenant)
	}
	spec.TenantID, spec.IdempotencyKey, spec.Owner = tenant, key, Owner
	return spec, nil
}
