package effects

import (
	"fmt"
	"slices"
	"sync"
)

// Registry holds the connectors a Client can enqueue and dispatch. It is safe for concurrent use.
type Registry struct {
	mu         sync.RWMutex
	connectors map[string]*Connector
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{connectors: map[string]*Connector{}} }

// Register adds a connector. It refuses a connector without a name or Dispatch, with unknown tags
// or out-of-range settings, one already registered under the same name, and — unless Unsafe is
// set — one that is not retry safe and has none of StatusCheck, BusinessKey and Compensate, since
// nothing could then resolve its UNKNOWN outcomes.
func (r *Registry) Register(c Connector) error { return r.put(c, false) }

// ValidateConnector reports what Register would refuse in c, without registering it: the same
// rules (name, Dispatch, known tags, ranges, and a way to resolve UNKNOWN outcomes unless Unsafe).
// Connectors defined elsewhere (HTTP connectors stored in the database) are checked with it.
func ValidateConnector(c Connector) error {
	_, err := c.withDefaults()
	return err
}

// Replace registers c like Register, replacing the connector already registered under its name if
// any. Effects already enqueued keep the policy they were enqueued with; their next call uses c.
// It exists for connectors whose definition changes while a process runs (HTTP connectors, see
// package effects/httpconn); connectors declared in code use Register.
func (r *Registry) Replace(c Connector) error { return r.put(c, true) }

// put registers c with its defaults, if valid; a connector already registered under its name is
// replaced when replace is set, and an error otherwise.
func (r *Registry) put(c Connector, replace bool) error {
	connector, err := c.withDefaults()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.connectors[connector.Name]; ok && !replace {
		return fmt.Errorf("effects: connector %q is already registered", connector.Name)
	}
	r.connectors[connector.Name] = connector
	return nil
}

// Unregister removes the connector registered under name and reports whether there was one.
// Effects of a connector that is not registered wait (their jobs are snoozed) until it is
// registered again; enqueueing them fails with ErrUnknownConnector.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.connectors[name]
	delete(r.connectors, name)
	return ok
}

// MustRegister is Register that panics on error, for connectors declared at program start.
func (r *Registry) MustRegister(c Connector) {
	if err := r.Register(c); err != nil {
		panic(err)
	}
}

// Get returns the connector registered under name.
func (r *Registry) Get(name string) (*Connector, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.connectors[name]
	return c, ok
}

// Names returns the names of the connectors registered, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.connectors))
	for name := range r.connectors {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (r *Registry) lookup(name string) (*Connector, error) {
	if c, ok := r.Get(name); ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w %q: register it with the Registry", ErrUnknownConnector, name)
}
