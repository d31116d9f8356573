package httpconn

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/reckonhq/reckon/effects"
)

// SyncResult says what a Sync changed in the registry.
type SyncResult struct {
	// Added, Updated and Removed name the connectors registered, replaced and unregistered.
	Added, Updated, Removed []string
	// Skipped gives, by name, why a stored connector was not registered: a connector of that name
	// registered by other code (a Go connector wins), or a stored row that no longer validates.
	Skipped map[string]error
}

// Changed reports whether the registry changed.
func (r SyncResult) Changed() bool {
	return len(r.Added)+len(r.Updated)+len(r.Removed) > 0
}

// syncState remembers, per registry, the HTTP connectors Sync put there and their definitions.
type syncState struct {
	mu     sync.Mutex
	synced map[string]Definition
}

var syncStates sync.Map // *effects.Registry → *syncState

// Sync makes the HTTP connectors of registry match the ones stored in db: it registers new ones,
// replaces changed ones (effects already enqueued keep their policy; their next call uses the new
// definition) and unregisters deleted ones. It never touches a connector it did not register
// itself: a stored connector whose name is taken by a Go connector is skipped and reported in
// SyncResult.Skipped. Call it before starting a reactor and then periodically (cmd/reactor does);
// concurrent calls on one registry are serialized. If the stored connectors cannot be read, the
// registry is left as it was and the error returned. Calls use a shared HTTP client that follows
// no redirects.
func Sync(ctx context.Context, db effects.DBTX, registry *effects.Registry) (SyncResult, error) {
	value, _ := syncStates.LoadOrStore(registry, &syncState{synced: map[string]Definition{}})
	state := value.(*syncState)
	state.mu.Lock()
	defer state.mu.Unlock()

	defs, err := List(ctx, db)
	if err != nil {
		return SyncResult{}, fmt.Errorf("httpconn: sync: %w", err)
	}
	var result SyncResult
	stored := make(map[string]bool, len(defs))
	for _, def := range defs {
		stored[def.Name] = true
		previous, ours := state.synced[def.Name]
		if ours && sameDefinition(previous, def) {
			continue
		}
		if _, taken := registry.Get(def.Name); taken && !ours {
			skip(&result, def.Name, fmt.Errorf("httpconn: a connector named %q is already registered by the process (Go connectors take precedence)", def.Name))
			continue
		}
		if err := def.Validate(); err != nil {
			skip(&result, def.Name, err)
			continue
		}
		if err := registry.Replace(def.Connector(defaultClient)); err != nil {
			skip(&result, def.Name, err)
			continue
		}
		state.synced[def.Name] = def
		if ours {
			result.Updated = append(result.Updated, def.Name)
		} else {
			result.Added = append(result.Added, def.Name)
		}
	}
	for name := range state.synced {
		if !stored[name] {
			registry.Unregister(name)
			delete(state.synced, name)
			result.Removed = append(result.Removed, name)
		}
	}
	return result, nil
}

func skip(result *SyncResult, name string, err error) {
	if result.Skipped == nil {
		result.Skipped = map[string]error{}
	}
	result.Skipped[name] = err
}

// sameDefinition compares what matters to calls, not the timestamps.
func sameDefinition(a, b Definition) bool {
	a.CreatedAt, a.UpdatedAt = time.Time{}, time.Time{}
	b.CreatedAt, b.UpdatedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}
