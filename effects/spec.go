package effects

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/internal/jsonx"
)

// Spec describes an effect to enqueue.
type Spec struct {
	// TenantID scopes the effect and its idempotency key. Default "default".
	TenantID string
	// Connector names a registered connector. Required.
	Connector string
	// Args are the call's arguments: a json.RawMessage, []byte of JSON, or any value that
	// encoding/json marshals. Default {}.
	Args any
	// IdempotencyKey identifies the effect; enqueueing the same key again returns the existing
	// effect. Give it, or a Position to derive it from. Never a hash of the args.
	IdempotencyKey string
	// Position derives the idempotency key from the journal position when IdempotencyKey is empty.
	Position *Position
	// BusinessKey identifies the effect to the upstream by business identity. Default: the
	// connector's BusinessKey function, if any.
	BusinessKey string
	// RunID, TurnID and TurnGroup link the effect to the agent run and turn that decided it.
	// TurnGroup defaults to Position.TurnGroup.
	RunID     string
	TurnID    *uuid.UUID
	TurnGroup string
	// MaxAttempts overrides the connector's MaxAttempts.
	MaxAttempts int
	// Owner names the component whose SettleHook (registered by a plugin: Config.Plugins, OnSettle) runs in the transaction that
	// makes the effect CONFIRMED, FAILED or STUCK, e.g. "saga". Default: none. Enqueueing an owned
	// effect whose owner has no hook in this process fails with ErrNoSettleHook.
	Owner string
	// AsyncTimeout overrides the connector's AsyncTimeout for this call: how long the effect
	// awaits its callback once the upstream accepted it.
	AsyncTimeout time.Duration
	// AsyncHardTimeout makes this call's deadline a hard timeout even if the connector's is soft.
	AsyncHardTimeout bool
	// RequireConfirmation holds this effect until a person confirms it, as
	// Connector.RequiresConfirmation does for all of a connector's.
	RequireConfirmation bool
	// ConfirmationTTL, for a held effect, is how long it may await its confirmation: after it the
	// effect is FAILED ("confirmation expired"). Default Config.ConfirmationTTL; 0 there: no expiry.
	ConfirmationTTL time.Duration
	// OrderingKey orders the effect among the tenant's other effects with the same key: they are
	// dispatched one at a time, in enqueue order, each once the one before it is CONFIRMED or
	// FAILED (docs/design.md, "Ordering keys"). At most MaxOrderingKeyLen bytes. Default: the
	// connector's OrderingKey function, if any; "": unordered.
	OrderingKey string
}

// MaxOrderingKeyLen bounds Spec.OrderingKey, in bytes.
const MaxOrderingKeyLen = 512

// Position is where an effect was decided in an agent's journal: the decision number within the
// turn group and the index of the call within that decision.
type Position struct {
	TurnGroup string
	Decision  int
	CallIndex int
}

// Key returns the idempotency key of the call to connector at p:
// "{turn_group}/d-{decision}/{connector}/{call_idx}".
func (p Position) Key(connector string) string {
	return p.TurnGroup + "/d-" + strconv.Itoa(p.Decision) + "/" + connector + "/" + strconv.Itoa(p.CallIndex)
}

// checkText refuses a spec whose text Postgres cannot store (NUL, invalid UTF-8) before anything
// is written: a refused statement would abort the caller's transaction.
func (s *Spec) checkText() error {
	turnGroup := ""
	if s.Position != nil {
		turnGroup = s.Position.TurnGroup
	}
	err := jsonx.CheckTexts("TenantID", s.TenantID, "Connector", s.Connector, "IdempotencyKey", s.IdempotencyKey,
		"Position.TurnGroup", turnGroup, "BusinessKey", s.BusinessKey, "OrderingKey", s.OrderingKey, "RunID", s.RunID, "TurnGroup", s.TurnGroup, "Owner", s.Owner)
	if err != nil {
		return fmt.Errorf("effects: spec %w", err)
	}
	return nil
}

// DefaultTenant is the tenant of specs that name none.
const DefaultTenant = "default"

// resolvedSpec is a Spec checked against its connector, ready to insert.
type resolvedSpec struct {
	connector      *Connector
	tenantID       string
	args           json.RawMessage
	idempotencyKey string
	businessKey    string
	orderingKey    string // "": unordered
	maxAttempts    int
	spec           Spec
}

// dedupKey is r's deduplicating business key (Connector.DedupByBusinessKey), "" when it has none.
func (r *resolvedSpec) dedupKey() string {
	if !r.connector.DedupByBusinessKey {
		return ""
	}
	return r.businessKey
}

func (r *Registry) resolve(spec Spec) (*resolvedSpec, error) {
	if spec.Connector == "" {
		return nil, errors.New("effects: spec needs a Connector")
	}
	if err := spec.checkText(); err != nil {
		return nil, err
	}
	connector, err := r.lookup(spec.Connector)
	if err != nil {
		return nil, err
	}
	res := &resolvedSpec{connector: connector, tenantID: spec.TenantID, spec: spec}
	if res.tenantID == "" {
		res.tenantID = DefaultTenant
	}
	if !connector.AvailableTo(res.tenantID) {
		// Another tenant's connector is indistinguishable from a missing one.
		return nil, fmt.Errorf("%w %q: not available to tenant %q", ErrUnknownConnector, spec.Connector, res.tenantID)
	}
	res.args, err = jsonx.Marshal(spec.Args)
	if err != nil {
		return nil, fmt.Errorf("effects: %s args: %w", spec.Connector, err)
	}
	if err := connector.checkArgs(res.args); err != nil {
		return nil, err
	}
	switch {
	case spec.IdempotencyKey != "":
		res.idempotencyKey = spec.IdempotencyKey
	case spec.Position != nil:
		if spec.Position.TurnGroup == "" || spec.Position.Decision < 0 || spec.Position.CallIndex < 0 {
			return nil, fmt.Errorf("effects: %s: Position needs a TurnGroup and non-negative Decision and CallIndex", spec.Connector)
		}
		res.idempotencyKey = spec.Position.Key(spec.Connector)
		if res.spec.TurnGroup == "" {
			res.spec.TurnGroup = spec.Position.TurnGroup
		}
	default:
		return nil, fmt.Errorf("effects: %s: spec needs an IdempotencyKey or a Position to derive it from", spec.Connector)
	}
	res.businessKey = spec.BusinessKey
	if res.businessKey == "" && connector.BusinessKey != nil {
		// The business key comes from the caller's args: one that cannot be made of them is the
		// args' fault, like a schema's refusal.
		if res.businessKey, err = connector.BusinessKey(res.args); err != nil {
			return nil, fmt.Errorf("%w for %s: no business key: %w", ErrInvalidArgs, spec.Connector, err)
		}
		if err := jsonx.CheckText(res.businessKey); err != nil {
			return nil, fmt.Errorf("%w for %s: business key: %w", ErrInvalidArgs, spec.Connector, err)
		}
	}
	if res.orderingKey, err = orderingKeyOf(connector, spec, res.args); err != nil {
		return nil, err
	}
	if spec.AsyncTimeout < 0 || (spec.AsyncTimeout > 0 && (spec.AsyncTimeout < time.Millisecond || spec.AsyncTimeout > MaxAsyncTimeout)) {
		return nil, fmt.Errorf("effects: %s: AsyncTimeout %v out of range (1ms to %v)", spec.Connector, spec.AsyncTimeout, MaxAsyncTimeout)
	}
	res.maxAttempts = connector.MaxAttempts
	if spec.MaxAttempts < 0 {
		return nil, fmt.Errorf("effects: %s: MaxAttempts must be positive, got %d", spec.Connector, spec.MaxAttempts)
	} else if spec.MaxAttempts > 0 {
		res.maxAttempts = spec.MaxAttempts
	}
	return res, nil
}

// orderingKeyOf is spec's ordering key: its own, else the one connector makes of args (whose
// failure is the args' fault, as for the business key), else "" (unordered).
func orderingKeyOf(connector *Connector, spec Spec, args json.RawMessage) (string, error) {
	key := spec.OrderingKey
	if key == "" && connector.OrderingKey != nil {
		var err error
		if key, err = connector.OrderingKey(args); err != nil {
			return "", fmt.Errorf("%w for %s: no ordering key: %w", ErrInvalidArgs, spec.Connector, err)
		}
		if err := jsonx.CheckText(key); err != nil {
			return "", fmt.Errorf("%w for %s: ordering key: %w", ErrInvalidArgs, spec.Connector, err)
		}
	}
	if len(key) > MaxOrderingKeyLen {
		return "", fmt.Errorf("effects: %s: ordering key of %d bytes: at most %d", spec.Connector, len(key), MaxOrderingKeyLen)
	}
	return key, nil
}
