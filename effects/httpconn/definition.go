package httpconn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/ident"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// Definition describes an HTTP connector: what effects.Connector holds for a Go connector, with
// URLs in place of functions. Its JSON form (used by the API and the CLI) has snake_case fields
// and durations in milliseconds: see MarshalJSON.
type Definition struct {
	// Name identifies the connector, e.g. "bank.wire": letters, digits, '.', '_', '-' and ':',
	// at most 200 characters, starting with a letter or digit. Required.
	Name string
	// Tags say what the calls do and decide the policy (effects.PolicyOf). Default none, which is
	// the most cautious: not retry safe. At most MaxTags.
	Tags []effects.Tag
	// DispatchURL receives the dispatch calls: an absolute http or https URL. Required.
	DispatchURL string
	// StatusURL answers status checks. Optional; the best way to resolve UNKNOWN outcomes.
	StatusURL string
	// CompensateURL undoes a confirmed effect. Optional.
	CompensateURL string
	// BusinessKeyFields makes an effect's business key, when the enqueuer gives none, from these
	// top-level fields of its args joined with ':' (strings as they are, numbers and booleans as
	// JSON). Optional; at most MaxBusinessKeyFields, distinct, each 1 to 200 bytes.
	BusinessKeyFields []string
	// DedupByBusinessKey makes the business key deduplicate (effects.Connector.DedupByBusinessKey):
	// while an effect of the tenant with this connector and business key is not FAILED, another
	// enqueue with the key gets that effect back, or a conflict when its args differ. Default false.
	DedupByBusinessKey bool
	// OrderingKeyFields makes an effect's ordering key (effects.Spec.OrderingKey), when the
	// enqueuer gives none, from these top-level fields of its args, joined as BusinessKeyFields
	// are: the connector's effects with the same key are dispatched one at a time, in enqueue
	// order. Optional; at most MaxBusinessKeyFields, distinct, each 1 to 200 bytes.
	OrderingKeyFields []string
	// Timeout bounds each call. Default 30s; 1ms to 5m.
	Timeout time.Duration
	// MaxAttempts bounds the dispatch attempts of one effect. Default 5; at most 1000.
	MaxAttempts int
	// StatusCheckLimit is how many inconclusive status checks an UNKNOWN effect gets before it
	// becomes STUCK. Default 5; at most 1000.
	StatusCheckLimit int
	// BackoffInitial and BackoffMax shape the delay before a retry: BackoffInitial, doubling per
	// attempt, at most BackoffMax. Defaults 1s and 5m; BackoffMax at most 24h.
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// Unsafe allows a connector that is not retry safe and has no status check, business key or
	// compensation: its UNKNOWN outcomes can only be resolved by a person.
	Unsafe bool
	// AsyncTimeout is how long an effect whose dispatch answered 202 Accepted awaits its callback
	// (effects.Connector.AsyncTimeout); an effect's own async timeout overrides it. Default 0:
	// the reactor's (effects.Config.AsyncTimeout, `reactor -async-timeout`, 10m); 1ms to 7 days.
	AsyncTimeout time.Duration
	// HardTimeout makes a passed deadline ask CancelURL to abandon the operation (FAILED when it
	// confirms) instead of only making the outcome UNKNOWN (effects.Connector.HardTimeout).
	// Default false: the soft timeout.
	HardTimeout bool
	// CancelURL asks the upstream to abandon an accepted operation, on a hard timeout and when the
	// effect's run is cancelled (effects.Connector.Cancel): 200, 201 or 204 means abandoned.
	// Optional; without it a hard timeout leaves the outcome UNKNOWN.
	CancelURL string
	// RequiresConfirmation holds every effect of the connector until a person confirms it
	// (effects.Connector.RequiresConfirmation; docs/design.md, "Confirmation holds"). Default false.
	RequiresConfirmation bool
	// ConfirmationPrompt is the question shown to whoever confirms, {name} standing for the
	// top-level arg name (effects.Connector.ConfirmationPrompt; checked by
	// effects.ValidateConfirmationPrompt). Optional; default "Confirm {connector name}?".
	ConfirmationPrompt string
	// Limit bounds the connector's calls across every reactor (effects.Connector.Limit; a rate, a
	// cap on calls in flight, a circuit breaker). Default: none. An operator's limit replaces it
	// at run time (effects.Client.SetLimit).
	Limit effects.Limit
	// Description says what the connector does (effects.Connector.Description; the MCP gateway's
	// tool description). Optional; at most effects.MaxDescriptionBytes.
	Description string
	// ArgsSchema is a JSON Schema of the effects' args (effects.Connector.ArgsSchema: an object
	// schema, self-contained, at most effects.MaxArgsSchemaBytes); enqueued args it refuses are
	// refused with effects.ErrInvalidArgs. Optional: without it any JSON object is accepted.
	ArgsSchema json.RawMessage
	// Tenants, if set, are the only tenants that may use the connector (effects.Connector.Tenants).
	// Default: every tenant.
	Tenants []string
	// CreatedAt and UpdatedAt are set by the store (Put, Get, List) and ignored by Put.
	CreatedAt time.Time
	UpdatedAt time.Time
}

const (
	defaultTimeout          = 30 * time.Second
	defaultMaxAttempts      = 5
	defaultStatusCheckLimit = 5
	defaultBackoffInitial   = time.Second
	defaultBackoffMax       = 5 * time.Minute
	maxBackoff              = 24 * time.Hour
	maxNameLength           = 200
	maxURLLength            = 2048
	maxCount                = 1000 // bound of max_attempts and status_check_limit
)

// Bounds of a definition's lists. Validate refuses a longer list by its length, before looking at
// its entries, so that what a client sends costs little to check however long it is.
const (
	// MaxTags bounds Tags. There are seven tags; repeating one changes nothing.
	MaxTags = 16
	// MaxBusinessKeyFields bounds BusinessKeyFields; each field is at most 200 bytes.
	MaxBusinessKeyFields = 64
)

// WithDefaults returns a copy of d with every unset setting at its default.
func (d Definition) WithDefaults() Definition {
	if d.Timeout == 0 {
		d.Timeout = defaultTimeout
	}
	if d.MaxAttempts == 0 {
		d.MaxAttempts = defaultMaxAttempts
	}
	if d.StatusCheckLimit == 0 {
		d.StatusCheckLimit = defaultStatusCheckLimit
	}
	if d.BackoffInitial == 0 {
		d.BackoffInitial = defaultBackoffInitial
	}
	if d.BackoffMax == 0 {
		d.BackoffMax = max(defaultBackoffMax, d.BackoffInitial)
	}
	d.Tags = slices.Clone(d.Tags)
	d.BusinessKeyFields = slices.Clone(d.BusinessKeyFields)
	d.OrderingKeyFields = slices.Clone(d.OrderingKeyFields)
	d.Tenants = slices.Clone(d.Tenants)
	if trimmed := bytes.TrimSpace(d.ArgsSchema); len(trimmed) == 0 || string(trimmed) == "null" {
		d.ArgsSchema = nil
	} else {
		d.ArgsSchema = slices.Clone(d.ArgsSchema)
	}
	return d
}

// Validate reports what is wrong with d (with defaults applied), wrapping ErrInvalid. The rules
// are those of a Go connector — effects.ValidateConnector on the connector d makes — plus the
// checks of the URLs, the name and the backoff.
func (d Definition) Validate() error {
	d = d.WithDefaults()
	var problems []string
	switch {
	case d.Name == "":
		problems = append(problems, "name is required")
	case len(d.Name) > maxNameLength:
		problems = append(problems, fmt.Sprintf("name is longer than %d characters", maxNameLength))
	case !ident.IsName(d.Name):
		problems = append(problems, fmt.Sprintf("name %q: use %s", d.Name, ident.NameRule))
	}
	if d.DispatchURL == "" {
		problems = append(problems, "dispatch_url is required")
	}
	for _, u := range []struct{ field, value string }{
		{"dispatch_url", d.DispatchURL}, {"status_url", d.StatusURL}, {"compensate_url", d.CompensateURL},
		{"cancel_url", d.CancelURL},
	} {
		if u.value != "" {
			if err := checkURL(u.value); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", u.field, err))
			}
		}
	}
	if len(d.Tags) > MaxTags {
		problems = append(problems, fmt.Sprintf("tags: %d given, at most %d", len(d.Tags), MaxTags))
	}
	problems = append(problems, keyFieldProblems("business_key_fields", d.BusinessKeyFields)...)
	problems = append(problems, keyFieldProblems("ordering_key_fields", d.OrderingKeyFields)...)
	if d.BackoffInitial < time.Millisecond || d.BackoffMax < d.BackoffInitial || d.BackoffMax > maxBackoff {
		problems = append(problems, fmt.Sprintf("backoff %v to %v: want 1ms ≤ initial ≤ max ≤ %v", d.BackoffInitial, d.BackoffMax, maxBackoff))
	}
	if d.MaxAttempts > maxCount {
		problems = append(problems, fmt.Sprintf("max_attempts %d: at most %d", d.MaxAttempts, maxCount))
	}
	if d.StatusCheckLimit > maxCount {
		problems = append(problems, fmt.Sprintf("status_check_limit %d: at most %d", d.StatusCheckLimit, maxCount))
	}
	if d.AsyncTimeout != 0 && (d.AsyncTimeout < time.Millisecond || d.AsyncTimeout > effects.MaxAsyncTimeout) {
		problems = append(problems, fmt.Sprintf("async_timeout_ms: %v out of range (1ms to %v, or absent for the reactor's)", d.AsyncTimeout, effects.MaxAsyncTimeout))
	}
	if d.ConfirmationPrompt != "" {
		if err := effects.ValidateConfirmationPrompt(d.ConfirmationPrompt); err != nil {
			problems = append(problems, "confirmation_prompt: "+strings.TrimPrefix(err.Error(), "effects: confirmation prompt: "))
		}
	}
	if _, err := d.Limit.WithDefaults(); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		// The registration rules of Go connectors: tags, ranges, a way to resolve UNKNOWN.
		if err := effects.ValidateConnector(d.Connector(nil)); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w %q: %s", ErrInvalid, d.Name, joinProblems(problems))
	}
	return nil
}

// keyFieldProblems checks BusinessKeyFields or OrderingKeyFields (name, as on the wire): at most
// MaxBusinessKeyFields (a longer list is one problem, its entries unchecked), each non-empty, at
// most maxNameLength bytes and given once. Repeats are found with a set: one pass, whatever the
// list.
func keyFieldProblems(name string, fields []string) []string {
	if len(fields) > MaxBusinessKeyFields {
		return []string{fmt.Sprintf("%s: %d given, at most %d", name, len(fields), MaxBusinessKeyFields)}
	}
	var problems []string
	seen := make(map[string]bool, len(fields))
	for i, field := range fields {
		switch {
		case field == "":
			problems = append(problems, fmt.Sprintf("%s[%d] is empty", name, i))
		case len(field) > maxNameLength:
			problems = append(problems, fmt.Sprintf("%s[%d] is longer than %d bytes", name, i, maxNameLength))
		case seen[field]:
			problems = append(problems, fmt.Sprintf("%s: %q appears twice", name, field))
		}
		seen[field] = true
	}
	return problems
}

func joinProblems(problems []string) string {
	var b bytes.Buffer
	for i, p := range problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p)
	}
	return b.String()
}

func checkURL(raw string) error {
	if len(raw) > maxURLLength {
		return fmt.Errorf("longer than %d characters", maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: want an absolute http or https URL", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", raw)
	}
	if u.Fragment != "" {
		return fmt.Errorf("%q: a fragment is never sent; remove it", raw)
	}
	return nil
}

// backoff returns the delay before retry number attempt.
func (d Definition) backoff(attempt int) time.Duration {
	delay := d.BackoffInitial
	for i := 1; i < attempt && delay < d.BackoffMax; i++ {
		delay *= 2
	}
	return min(delay, d.BackoffMax)
}

// businessKey makes the business key of args from BusinessKeyFields.
func (d Definition) businessKey(args json.RawMessage) (string, error) {
	return keyOf("business key", d.BusinessKeyFields, args)
}

// orderingKey makes the ordering key of args from OrderingKeyFields.
func (d Definition) orderingKey(args json.RawMessage) (string, error) {
	return keyOf("ordering key", d.OrderingKeyFields, args)
}

// keyOf makes a key (what, for errors) of the top-level fields of args named by names, joined
// with ':': strings as they are, numbers and booleans as JSON.
func keyOf(what string, names []string, args json.RawMessage) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(args, &fields); err != nil {
		return "", fmt.Errorf("%s: args must be a JSON object: %w", what, err)
	}
	var b bytes.Buffer
	for i, name := range names {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			return "", fmt.Errorf("%s: args have no field %q", what, name)
		}
		var s string
		switch raw[0] {
		case '"':
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", fmt.Errorf("%s: field %q: %w", what, name, err)
			}
		case '{', '[':
			return "", fmt.Errorf("%s: field %q must be a string, number or boolean", what, name)
		default:
			s = string(raw)
		}
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// definitionJSON is the JSON form of a Definition.
type definitionJSON struct {
	Name               string        `json:"name"`
	Tags               []effects.Tag `json:"tags"`
	DispatchURL        string        `json:"dispatch_url"`
	StatusURL          string        `json:"status_url,omitempty"`
	CompensateURL      string        `json:"compensate_url,omitempty"`
	BusinessKeyFields  []string      `json:"business_key_fields,omitempty"`
	OrderingKeyFields  []string      `json:"ordering_key_fields,omitempty"`
	DedupByBusinessKey bool          `json:"dedup_by_business_key,omitempty"`
	TimeoutMS          int64         `json:"timeout_ms,omitempty"`
	MaxAttempts        int           `json:"max_attempts,omitempty"`
	StatusCheckLimit   int           `json:"status_check_limit,omitempty"`
	BackoffInitialMS   int64         `json:"backoff_initial_ms,omitempty"`
	BackoffMaxMS       int64         `json:"backoff_max_ms,omitempty"`
	Unsafe             bool          `json:"unsafe,omitempty"`
	AsyncTimeoutMS     *int64        `json:"async_timeout_ms,omitempty"` // nil: the reactor's
	HardTimeout        bool          `json:"hard_timeout,omitempty"`
	CancelURL          string        `json:"cancel_url,omitempty"`
	// RequiresConfirmation and ConfirmationPrompt: the confirmation hold of the connector's effects.
	RequiresConfirmation bool   `json:"requires_confirmation,omitempty"`
	ConfirmationPrompt   string `json:"confirmation_prompt,omitempty"`
	// Limit: the connector's own limits; absent for none.
	Limit *effects.Limit `json:"limit,omitempty"`
	// Description, ArgsSchema and Tenants: what the connector is for, the JSON Schema of its
	// args, the tenants that may use it; absent when unset.
	Description string          `json:"description,omitempty"`
	ArgsSchema  json.RawMessage `json:"args_schema,omitempty"`
	Tenants     []string        `json:"tenants,omitempty"`
	// CreatedAt and UpdatedAt are set by the store.
	CreatedAt *time.Time `json:"created_at,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// MarshalJSON writes d as {"name","tags","dispatch_url","status_url","compensate_url",
// "business_key_fields","dedup_by_business_key","ordering_key_fields","timeout_ms","max_attempts","status_check_limit","backoff_initial_ms",
// "backoff_max_ms","unsafe","async_timeout_ms","hard_timeout","cancel_url",
// "requires_confirmation","confirmation_prompt","limit","description","args_schema","tenants",
// "created_at","updated_at"}; unset optional fields are left out.
func (d Definition) MarshalJSON() ([]byte, error) {
	out := definitionJSON{
		Name: d.Name, Tags: d.Tags, DispatchURL: d.DispatchURL, StatusURL: d.StatusURL,
		CompensateURL: d.CompensateURL, BusinessKeyFields: d.BusinessKeyFields, OrderingKeyFields: d.OrderingKeyFields,
		DedupByBusinessKey: d.DedupByBusinessKey,
		TimeoutMS:          d.Timeout.Milliseconds(), MaxAttempts: d.MaxAttempts, StatusCheckLimit: d.StatusCheckLimit,
		BackoffInitialMS: d.BackoffInitial.Milliseconds(), BackoffMaxMS: d.BackoffMax.Milliseconds(), Unsafe: d.Unsafe,
		HardTimeout: d.HardTimeout, CancelURL: d.CancelURL,
		RequiresConfirmation: d.RequiresConfirmation, ConfirmationPrompt: d.ConfirmationPrompt,
		Description: d.Description, ArgsSchema: d.ArgsSchema, Tenants: d.Tenants,
	}
	if d.AsyncTimeout != 0 {
		ms := d.AsyncTimeout.Milliseconds()
		out.AsyncTimeoutMS = &ms
	}
	if d.Limit != (effects.Limit{}) {
		out.Limit = &d.Limit
	}
	if out.Tags == nil {
		out.Tags = []effects.Tag{}
	}
	if !d.CreatedAt.IsZero() {
		out.CreatedAt = &d.CreatedAt
	}
	if !d.UpdatedAt.IsZero() {
		out.UpdatedAt = &d.UpdatedAt
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the form MarshalJSON writes. Unknown fields are an error (a misspelt
// "status_url" must not silently drop the status check), and so are negative or overlong
// durations; created_at and updated_at are accepted and ignored.
func (d *Definition) UnmarshalJSON(data []byte) error {
	var in definitionJSON
	if err := jsonx.DecodeStrict(data, &in); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	for _, ms := range []struct {
		field string
		value int64
		max   time.Duration
	}{
		{"timeout_ms", in.TimeoutMS, maxBackoff}, {"backoff_initial_ms", in.BackoffInitialMS, maxBackoff},
		{"backoff_max_ms", in.BackoffMaxMS, maxBackoff},
	} {
		if ms.value < 0 || ms.value > ms.max.Milliseconds() {
			return fmt.Errorf("%w: %s %d out of range", ErrInvalid, ms.field, ms.value)
		}
	}
	var asyncTimeout time.Duration
	if in.AsyncTimeoutMS != nil {
		// 0 is refused rather than read as "the default": a caller who sends it may mean "no wait".
		if ms := *in.AsyncTimeoutMS; ms < 1 || ms > effects.MaxAsyncTimeout.Milliseconds() {
			return fmt.Errorf("%w: async_timeout_ms %d out of range (1 to %d, 7 days; leave it out for the reactor's)",
				ErrInvalid, ms, effects.MaxAsyncTimeout.Milliseconds())
		}
		asyncTimeout = time.Duration(*in.AsyncTimeoutMS) * time.Millisecond
	}
	*d = Definition{
		Name: in.Name, Tags: in.Tags, DispatchURL: in.DispatchURL, StatusURL: in.StatusURL,
		CompensateURL: in.CompensateURL, BusinessKeyFields: in.BusinessKeyFields, OrderingKeyFields: in.OrderingKeyFields,
		DedupByBusinessKey: in.DedupByBusinessKey,
		Timeout:            time.Duration(in.TimeoutMS) * time.Millisecond, MaxAttempts: in.MaxAttempts,
		StatusCheckLimit: in.StatusCheckLimit, BackoffInitial: time.Duration(in.BackoffInitialMS) * time.Millisecond,
		BackoffMax: time.Duration(in.BackoffMaxMS) * time.Millisecond, Unsafe: in.Unsafe,
		AsyncTimeout: asyncTimeout, HardTimeout: in.HardTimeout, CancelURL: in.CancelURL,
		RequiresConfirmation: in.RequiresConfirmation, ConfirmationPrompt: in.ConfirmationPrompt,
		Description: in.Description, ArgsSchema: in.ArgsSchema, Tenants: in.Tenants,
	}
	if in.Limit != nil {
		d.Limit = *in.Limit
	}
	return nil
}
