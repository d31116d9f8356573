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

// Syncer keeps the HTTP connectors of one registry in step with the ones stored in the database.
// It remembers which connectors it registered and their definitions, so that it replaces or
// unregisters only those. Use one Syncer per registry, for as long as the registry lives: a second
// Syncer of the same registry would take the first one's connectors for the process's own. The zero
// value is ready to use; a Syncer must not be copied after its first Sync.
type Syncer struct {
	mu     sync.Mutex
	synced map[string]Definition // by name, the connectors this Syncer registered
}

// Refresher returns a function that syncs registry with the connectors stored in db through a
// Syncer of its own: the default refresh of a server that answers about connectors it may not have
// loaded yet. Make one per registry (see Syncer).
func Refresher(db effects.DBTX, registry *effects.Registry) func(context.Context) error {
	syncer := new(Syncer)
	return func(ctx context.Context) error {
		_, err := syncer.Sync(ctx, db, registry)
		return err
	}
}

// Sync makes the HTTP connectors of registry match the ones stored in db: it registers new ones,
// replaces changed ones (effects already enqueued keep their policy; their next call uses the new
// definition) and unregisters deleted ones. It never touches a connector it did not register
// itself: a stored connector whose name is taken by a Go connector is skipped and reported in
// SyncResult.Skipped. Call it before starting a reactor and then periodically (cmd/reactor does);
// concurrent calls are serialized. If the stored connectors cannot be read, the registry is left
// as it was and the error returned. Calls use a shared HTTP client that follows no redirects.
func (s *Syncer) Sync(ctx context.Context, db effects.DBTX, registry *effects.Registry) (SyncResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced == nil {
		s.synced = map[string]Definition{}
	}

	defs, err := List(ctx, db)
	if err != nil {
		return SyncResult{}, fmt.Errorf("httpconn: sync: %w", err)
	}
	var result SyncResult
	stored := make(map[string]bool, len(defs))
	for _, def := range defs {
		stored[def.Name] = true
		previous, ours := s.synced[def.Name]
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
		s.synced[def.Name] = def
		if ours {
			result.Updated = append(result.Updated, def.Name)
		} else {
			result.Added = append(result.Added, def.Name)
		}
	}
	for name := range s.synced {
		if !stored[name] {
			registry.Unregister(name)
			delete(s.synced, name)
			result.Removed = append(result.Removed, name)
		}
	}
	return result, nil
}

// skip records in result that the stored connector name was not registered, and why.
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
