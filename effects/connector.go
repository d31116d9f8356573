package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Connector performs effects of one kind, such as "bank.wire". Dispatch is required; the other
// functions are the ways an ambiguous (UNKNOWN) outcome can be resolved and a confirmed one undone.
//
// Outcome of Dispatch and Compensate: a nil error confirms the effect with the returned result;
// an error wrapped with Permanent fails it; one wrapped with Retryable (the call provably did not
// take effect) retries it with backoff; any other error — a timeout, a dropped connection, a 500 —
// makes it UNKNOWN, to be reconciled. Calls carry the effect's idempotency key: send it upstream.
type Connector struct {
	// Name identifies the connector, e.g. "bank.wire". Required.
	Name string
	// Tags say what the calls do. They decide the policy: see PolicyOf. An empty set is
	// treated as the most dangerous: not retry safe, not parallel safe.
	Tags []Tag
	// Dispatch performs the effect. Required.
	Dispatch func(ctx context.Context, call Call) (json.RawMessage, error)
	// StatusCheck asks the upstream whether the effect happened (by idempotency or business
	// key). Optional; the best way to resolve UNKNOWN. Errors count as inconclusive.
	StatusCheck func(ctx context.Context, call Call) (Status, error)
	// Compensate undoes a confirmed effect. Optional. It must be idempotent on call's
	// IdempotencyKey (the compensation's own key): compensations are retried until confirmed.
	Compensate func(ctx context.Context, call Call, original Original) (json.RawMessage, error)
	// BusinessKey derives the effect's business key from its args when the spec gives none, e.g.
	// "account:amount:date". Optional.
	BusinessKey func(args json.RawMessage) (string, error)
	// DedupByBusinessKey makes the business key (Spec.BusinessKey, else BusinessKey's) deduplicate
	// like an idempotency key: while an effect of the tenant with this connector and business key
	// is not FAILED, enqueueing another with the key returns that effect (Deduplicated set) when
	// the args and owner agree, and fails with ErrBusinessKeyConflict when they do not. The
	// database decides (a unique index), so it holds under concurrent enqueues. An effect without
	// a business key, and a compensation, are not deduplicated. Default false.
	DedupByBusinessKey bool
	// OrderingKey derives the effect's ordering key (Spec.OrderingKey) from its args when the spec
	// gives none, e.g. the order id: the connector's effects for one key are then dispatched one
	// at a time, in enqueue order. Returning "" leaves the effect unordered. Optional.
	OrderingKey func(args json.RawMessage) (string, error)
	// Timeout bounds each call (dispatch, status check, compensation). Default 30s; at most 5m.
	Timeout time.Duration
	// MaxAttempts bounds the dispatch attempts of one effect. Default 5.
	MaxAttempts int
	// Backoff gives the delay before retry number attempt (1, 2, …) after a retryable failure or
	// an inconclusive status check. Default: 1s doubling per attempt, at most 5m. The delay used
	// varies by up to ±10% around it (jitter, as River's retry policy), so that effects that
	// failed together — an upstream outage — are not all tried again at the same instant.
	Backoff func(attempt int) time.Duration
	// StatusCheckLimit is how many inconclusive status checks an UNKNOWN effect gets: it becomes
	// STUCK at the last one. Answers are counted as they are recorded, so a check whose answer
	// was lost (its reactor died before recording it) does not count. Default 5.
	StatusCheckLimit int
	// Unsafe allows registering a connector that is not retry safe and has no status check,
	// business key or compensation: its UNKNOWN outcomes can only be resolved by a person.
	Unsafe bool
	// AsyncTimeout is how long an effect whose Dispatch answered Accepted awaits its callback
	// before its deadline passes. Spec.AsyncTimeout overrides it per call; default
	// Config.AsyncTimeout. See docs/async.md.
	AsyncTimeout time.Duration
	// HardTimeout makes a passed deadline cancel the operation (see Cancel) instead of only
	// marking its outcome unknown (the soft timeout). Spec.AsyncHardTimeout sets it per call.
	HardTimeout bool
	// Cancel asks the upstream to abandon an accepted operation (call.CorrelationID names it).
	// Optional. nil error means the upstream confirmed the operation will not take effect: the
	// effect becomes FAILED. Any error leaves its outcome unknown. Used by hard timeouts and
	// CancelRun.
	Cancel func(ctx context.Context, call Call) error
	// RequiresConfirmation holds every effect of the connector until a person confirms it
	// (ConfirmTx): recorded PENDING as usual, but never dispatched before. Spec.RequireConfirmation
	// asks it per effect; Config.RequireIrreversibleConfirmation for every irreversible connector.
	// See docs/design.md, "Confirmation holds".
	RequiresConfirmation bool
	// ConfirmationPrompt is the question shown to whoever confirms, over the effect's args:
	// {name} stands for the top-level arg name (a string as it is, anything else as JSON), e.g.
	// "Refund ${amount} for order {order_id}?". The rendered prompt is stored with the effect.
	// Default: "Confirm {connector}?" with the connector's name.
	ConfirmationPrompt string
	// Limit bounds the connector's calls across every reactor: a rate, a cap on calls in flight, a
	// circuit breaker (see Limit). Default: none. An operator's limit (Client.SetLimit) replaces
	// it at run time.
	Limit Limit
	// Description says what the connector does, for people and agents (the MCP gateway shows it
	// as the tool's description). Optional; at most MaxDescriptionBytes of UTF-8 without NUL.
	Description string
	// ArgsSchema is a JSON Schema (draft 2020-12 unless its "$schema" says otherwise) of the
	// effects' args: an object schema ("type": "object"), at most MaxArgsSchemaBytes, with no
	// reference outside itself. Registering compiles it (a schema that does not compile is
	// refused); enqueueing args it refuses fails with ErrInvalidArgs, before anything is written.
	// Optional: without it any JSON object is accepted. The MCP gateway shows it as the tool's
	// input schema.
	ArgsSchema json.RawMessage
	// Tenants, if set, are the only tenants that may enqueue the connector's effects (and see it
	// as an MCP tool); enqueueing for another tenant fails with ErrUnknownConnector. Default:
	// every tenant. At most MaxConnectorTenants valid tenant ids.
	Tenants []string

	// argsSchema is ArgsSchema compiled (withDefaults); nil without one.
	argsSchema *jsonschema.Schema
}

// Call is what a connector receives for one call.
type Call struct {
	EffectID       uuid.UUID
	TenantID       string
	Connector      string
	IdempotencyKey string
	BusinessKey    string
	Args           json.RawMessage
	// Attempt numbers the dispatch attempts of the effect from 1.
	Attempt int
	// CorrelationID is the self-routing id "{run}:{effect id}" ("{effect id}" for an effect
	// without a run), the same for every attempt. A connector whose upstream finishes the work
	// later passes it upstream (e.g. in a webhook URL) and returns Accepted(call.CorrelationID);
	// the upstream's callback then names it to Client.Callback.
	CorrelationID string
	// CallbackSecret is the effect's callback secret (Client.CallbackSecret), set on the calls
	// that may start an operation reported later by callback: Dispatch, Compensate and Cancel
	// (empty on status checks). A connector whose upstream calls back passes it upstream, which
	// signs its callback with it (the Reckon-Signature header, docs/async.md) instead of holding
	// an API token. It lets its holder settle this one effect: never log it or store it in the
	// clear.
	CallbackSecret string
}

// Original describes, to Compensate, the confirmed effect being undone.
type Original struct {
	EffectID       uuid.UUID
	IdempotencyKey string
	BusinessKey    string
	Args           json.RawMessage
	Result         json.RawMessage
}

// StatusKind is what a status check observed.
type StatusKind int

const (
	// StatusInconclusive: the upstream could not tell (yet).
	StatusInconclusive StatusKind = iota
	// StatusPresent: the effect happened once.
	StatusPresent
	// StatusAbsent: the effect did not happen.
	StatusAbsent
	// StatusDuplicate: the effect happened more than once.
	StatusDuplicate
)

// String is the kind's name in lower case: "present", "absent", "duplicate" or "inconclusive"
// (what an unknown value prints too).
func (k StatusKind) String() string {
	switch k {
	case StatusPresent:
		return "present"
	case StatusAbsent:
		return "absent"
	case StatusDuplicate:
		return "duplicate"
	default:
		return "inconclusive"
	}
}

// Status is the answer of a status check. Build it with Present, Absent, Duplicate or
// Inconclusive.
type Status struct {
	Kind StatusKind
	// Result is the effect's result as the upstream reports it (present, duplicate).
	Result json.RawMessage
	// Count is how many times it happened (duplicate).
	Count int
	// Reason says why a check was inconclusive.
	Reason string
}

// Present says the effect happened once, with this result.
func Present(result json.RawMessage) Status {
	return Status{Kind: StatusPresent, Result: result, Count: 1}
}

// Absent says the effect did not happen.
func Absent() Status { return Status{Kind: StatusAbsent} }

// Duplicate says the effect happened count (≥ 2) times; result is the first one's.
func Duplicate(count int, result json.RawMessage) Status {
	return Status{Kind: StatusDuplicate, Count: count, Result: result}
}

// Inconclusive says the upstream could not tell, and why.
func Inconclusive(reason string) Status { return Status{Kind: StatusInconclusive, Reason: reason} }

const (
	defaultTimeout          = 30 * time.Second
	maxTimeout              = 5 * time.Minute
	defaultMaxAttempts      = 5
	defaultStatusCheckLimit = 5
)

// withDefaults returns a copy of c with defaults filled in, or an error saying what is wrong.
func (c Connector) withDefaults() (*Connector, error) {
	if c.Name == "" {
		return nil, errors.New("effects: connector needs a Name")
	}
	if c.Dispatch == nil {
		return nil, fmt.Errorf("effects: connector %q needs a Dispatch function", c.Name)
	}
	if err := validateTags(c.Tags); err != nil {
		return nil, fmt.Errorf("effects: connector %q: %w", c.Name, err)
	}
	switch {
	case c.Timeout == 0:
		c.Timeout = defaultTimeout
	case c.Timeout < time.Millisecond || c.Timeout > maxTimeout:
		return nil, fmt.Errorf("effects: connector %q: Timeout %v out of range (1ms to %v)", c.Name, c.Timeout, maxTimeout)
	}
	switch {
	case c.MaxAttempts == 0:
		c.MaxAttempts = defaultMaxAttempts
	case c.MaxAttempts < 0:
		return nil, fmt.Errorf("effects: connector %q: MaxAttempts must be positive, got %d", c.Name, c.MaxAttempts)
	}
	switch {
	case c.StatusCheckLimit == 0:
		c.StatusCheckLimit = defaultStatusCheckLimit
	case c.StatusCheckLimit < 0:
		return nil, fmt.Errorf("effects: connector %q: StatusCheckLimit must be positive, got %d", c.Name, c.StatusCheckLimit)
	}
	if c.Backoff == nil {
		c.Backoff = defaultBackoff
	}
	if c.AsyncTimeout < 0 || c.AsyncTimeout > MaxAsyncTimeout {
		return nil, fmt.Errorf("effects: connector %q: AsyncTimeout %v out of range (0 for the default, up to %v)", c.Name, c.AsyncTimeout, MaxAsyncTimeout)
	}
	if c.ConfirmationPrompt != "" {
		if err := ValidateConfirmationPrompt(c.ConfirmationPrompt); err != nil {
			return nil, fmt.Errorf("effects: connector %q: %w", c.Name, err)
		}
	}
	limit, err := c.Limit.WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("effects: connector %q: %w", c.Name, err)
	}
	c.Limit = limit
	if err := c.checkDescribed(); err != nil {
		return nil, fmt.Errorf("effects: connector %q: %w", c.Name, err)
	}
	if !RetrySafe(c.Tags) && c.StatusCheck == nil && c.BusinessKey == nil && c.Compensate == nil && !c.Unsafe {
		return nil, fmt.Errorf("effects: connector %q is not retry safe (tags %v) and has no way to resolve an "+
			"UNKNOWN outcome: give it a StatusCheck (best), a BusinessKey or a Compensate; or tag it idempotent if "+
			"the upstream honours the idempotency key; or set Unsafe: true after review", c.Name, c.Tags)
	}
	return &c, nil
}

func defaultBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := time.Duration(math.Pow(2, float64(attempt-1))) * time.Second
	if d <= 0 || d > 5*time.Minute {
		return 5 * time.Minute
	}
	return d
}

// retryDelay is the delay before retry number attempt: Backoff(attempt) with ±10% jitter.
func (c *Connector) retryDelay(attempt int) time.Duration {
	return jitter(c.Backoff(attempt))
}

// retryJitter is the fraction by which a retry delay varies either way.
const retryJitter = 0.1

// jitter returns d varied uniformly by up to ±retryJitter, never below 1ns for a positive d.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return max(d+time.Duration(float64(d)*retryJitter*(2*rand.Float64()-1)), 1)
}
