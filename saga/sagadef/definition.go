package sagadef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/ident"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/saga"
)

// Limits of definitions.
const (
	MaxSteps                = 100
	MaxNameLength           = 200
	MaxCompensationAttempts = 100
)

// Definition is a saga definition as data.
type Definition struct {
	// Name identifies the definition; POST /v1/sagas names it. Required.
	Name string `json:"name"`
	// Steps run in order. At least one, at most MaxSteps, with unique names.
	Steps []Step `json:"steps"`
	// CompensationAttempts: saga.Definition.CompensationAttempts; 0 means its default.
	CompensationAttempts int `json:"compensation_attempts,omitempty"`
	// CreatedAt is set by the store.
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// Step is one step: an effect of Connector, undone as Undo says.
type Step struct {
	Name      string `json:"name"`
	Connector string `json:"connector"`
	Undo      Undo   `json:"undo"`
}

// UndoKind is how a step is undone.
type UndoKind string

// The kinds of Undo.
const (
	// UndoConnector: the step connector's compensation (saga.UndoByConnector).
	UndoConnector UndoKind = "connector"
	// UndoEffect: an effect of another connector, Undo.Connector (saga.UndoWith).
	UndoEffect UndoKind = "effect"
	// UndoNone: nothing to undo (saga.NoUndo).
	UndoNone UndoKind = "none"
)

// Undo is a step's compensation. In JSON: "connector", "none" or {"connector": name}.
type Undo struct {
	Kind UndoKind
	// Connector names the compensating effect's connector, for UndoEffect.
	Connector string
}

// MarshalJSON writes the JSON form.
func (u Undo) MarshalJSON() ([]byte, error) {
	if u.Kind == UndoEffect {
		return json.Marshal(map[string]string{"connector": u.Connector})
	}
	return json.Marshal(string(u.Kind))
}

// UnmarshalJSON reads the JSON form.
func (u *Undo) UnmarshalJSON(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var obj struct {
			Connector string `json:"connector"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&obj); err != nil {
			return fmt.Errorf(`undo: want "connector", "none" or {"connector": name}: %w`, err)
		}
		*u = Undo{Kind: UndoEffect, Connector: obj.Connector}
		return nil
	}
	var kind string
	if err := json.Unmarshal(raw, &kind); err != nil || (kind != string(UndoConnector) && kind != string(UndoNone)) {
		return fmt.Errorf(`undo: want "connector", "none" or {"connector": name}, got %s`, raw)
	}
	*u = Undo{Kind: UndoKind(kind)}
	return nil
}

// Parse decodes a definition from its JSON form strictly (unknown fields and trailing data are
// errors, wrapping ErrInvalid) and validates it without a registry.
func Parse(raw []byte) (Definition, error) {
	var def Definition
	if err := jsonx.CheckFields(raw, &def); err != nil {
		return Definition{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def); err != nil {
		return Definition{}, fmt.Errorf("%w: %v", ErrInvalid, strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return Definition{}, fmt.Errorf("%w: trailing data after the definition", ErrInvalid)
	}
	def.CreatedAt = time.Time{}
	return def, def.Validate(nil)
}

// Validate reports everything wrong with d, wrapping ErrInvalid. With a registry it also checks
// that every connector is registered there and that each "connector" undo names a connector that
// can compensate.
func (d Definition) Validate(registry *effects.Registry) error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	checkName := func(what, name string) bool {
		switch {
		case name == "":
			add("%s is required", what)
		case len(name) > MaxNameLength:
			add("%s is longer than %d bytes", what, MaxNameLength)
		case !ident.IsName(name):
			add("%s %q: use %s", what, name, ident.NameRule)
		default:
			return true
		}
		return false
	}
	checkName("name", d.Name)
	switch {
	case len(d.Steps) == 0:
		add("steps: at least one is required")
	case len(d.Steps) > MaxSteps:
		add("steps: %d, at most %d", len(d.Steps), MaxSteps)
	}
	if d.CompensationAttempts < 0 || d.CompensationAttempts > MaxCompensationAttempts {
		add("compensation_attempts %d: want 0 (the default) to %d", d.CompensationAttempts, MaxCompensationAttempts)
	}
	steps := d.Steps
	if len(steps) > MaxSteps {
		steps = nil // refused by their number, not checked (nor reported) one by one
	}
	seen := make(map[string]bool, len(steps)) // unique names in one pass
	for i, step := range steps {
		where := fmt.Sprintf("steps[%d]", i)
		if checkName(where+".name", step.Name) {
			if seen[step.Name] {
				add("%s.name %q: step names must be unique", where, step.Name)
			}
			seen[step.Name] = true
		}
		var conn *effects.Connector
		if checkName(where+".connector", step.Connector) && registry != nil {
			var ok bool
			if conn, ok = registry.Get(step.Connector); !ok {
				add("%s.connector %q is not registered (define the HTTP connector first)", where, step.Connector)
			}
		}
		switch step.Undo.Kind {
		case UndoNone:
		case UndoConnector:
			if conn != nil && conn.Compensate == nil {
				add("%s.undo \"connector\": connector %q cannot compensate (give it a compensate_url, or undo with {\"connector\": name} or \"none\")", where, step.Connector)
			}
		case UndoEffect:
			if checkName(where+".undo.connector", step.Undo.Connector) && registry != nil {
				if _, ok := registry.Get(step.Undo.Connector); !ok {
					add("%s.undo.connector %q is not registered", where, step.Undo.Connector)
				}
			}
		default:
			add(`%s.undo is required: "connector", "none" or {"connector": name}`, where)
		}
	}
	if len(problems) > 0 {
		name := d.Name
		if name == "" {
			name = "(unnamed)"
		}
		return fmt.Errorf("%w %s: %s", ErrInvalid, name, strings.Join(problems, "; "))
	}
	return nil
}

// Args are what a step's effect receives.
type Args struct {
	// Input is the saga's input.
	Input json.RawMessage `json:"input"`
	// Results are the results of the earlier steps (for a compensation: up to and including the
	// undone step), by step name.
	Results map[string]json.RawMessage `json:"results"`
	// Compensates names the undone step, for a compensating effect ({"connector": name}).
	Compensates string `json:"compensates,omitempty"`
}

// Saga returns the saga.Definition that runs d: each step an effect of its connector with Args.
func (d Definition) Saga() saga.Definition {
	names := make([]string, len(d.Steps))
	for i, step := range d.Steps {
		names[i] = step.Name
	}
	args := func(in saga.Input, compensates string) Args {
		a := Args{Input: in.Data, Results: make(map[string]json.RawMessage, len(in.Results)), Compensates: compensates}
		for i, r := range in.Results {
			if i < len(names) {
				a.Results[names[i]] = r
			}
		}
		if len(a.Input) == 0 {
			a.Input = json.RawMessage(`{}`)
		}
		return a
	}
	def := saga.Definition{Name: d.Name, CompensationAttempts: d.CompensationAttempts, Steps: make([]saga.Step, len(d.Steps))}
	for i, step := range d.Steps {
		s := saga.Step{Name: step.Name}
		connector := step.Connector
		s.Effect = func(in saga.Input) (effects.Spec, error) {
			return effects.Spec{Connector: connector, Args: args(in, "")}, nil
		}
		switch step.Undo.Kind {
		case UndoConnector:
			s.Undo = saga.UndoByConnector()
		case UndoEffect:
			undoConnector, name := step.Undo.Connector, step.Name
			s.Undo = saga.UndoWith(func(in saga.Input) (effects.Spec, error) {
				return effects.Spec{Connector: undoConnector, Args: args(in, name)}, nil
			})
		default:
			s.Undo = saga.NoUndo()
		}
		def.Steps[i] = s
	}
	return def
}

// same compares what matters to sagas, not the timestamp.
func same(a, b Definition) bool {
	a.CreatedAt, b.CreatedAt = time.Time{}, time.Time{}
	ra, _ := json.Marshal(a)
	rb, _ := json.Marshal(b)
	return bytes.Equal(ra, rb)
}
