package sagadef

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/saga"
)

// SyncResult says what a Sync registered.
type SyncResult struct {
	// Added names the definitions registered.
	Added []string
	// Skipped gives, by name, why a stored definition was not registered: a definition of that
	// name registered by other code (Go definitions take precedence) or one that does not form a
	// valid saga.
	Skipped map[string]error
}

// Syncer registers the stored saga definitions with one saga client. It remembers which
// definitions it registered, so that it registers each once and tells them from the ones other code
// registered. Use one Syncer per client, for as long as the client lives; its Load is the client's
// saga.Config.OnUnknownDefinition. The zero value is ready to use; a Syncer must not be copied after
// its first Sync.
type Syncer struct {
	mu     sync.Mutex
	synced map[string]bool // the names of the definitions this Syncer registered
}

// Sync registers with client every stored definition it does not have yet. Definitions never
// change and are never deleted, so a registered one stays as it is. A name already registered by
// other code is skipped and reported. Concurrent calls are serialized. If the stored definitions
// cannot be read, nothing is registered and the error returned.
func (s *Syncer) Sync(ctx context.Context, db effects.DBTX, client *saga.Client) (SyncResult, error) {
	// Read before taking the lock: a caller holding a connection (a settle hook's transaction)
	// never waits for the lock while the holder waits for a connection.
	defs, err := List(ctx, db)
	if err != nil {
		return SyncResult{}, fmt.Errorf("sagadef: sync: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced == nil {
		s.synced = map[string]bool{}
	}
	var result SyncResult
	for _, def := range defs {
		if s.synced[def.Name] {
			continue
		}
		if client.Registered(def.Name) {
			skip(&result, def.Name, fmt.Errorf("sagadef: a saga definition named %q is already registered by the process (Go definitions take precedence)", def.Name))
			continue
		}
		if err := def.Validate(nil); err != nil {
			skip(&result, def.Name, err)
			continue
		}
		if err := client.Register(def.Saga()); err != nil {
			skip(&result, def.Name, err)
			continue
		}
		s.synced[def.Name] = true
		result.Added = append(result.Added, def.Name)
	}
	return result, nil
}

// skip records in result that the stored definition name was not registered, and why.
func skip(result *SyncResult, name string, err error) {
	if result.Skipped == nil {
		result.Skipped = map[string]error{}
	}
	result.Skipped[name] = err
}

// Load is a saga.DefinitionLoader (saga.Config.OnUnknownDefinition) that loads the stored
// definitions whenever a saga names one the client has not registered: a Sync in the transaction
// at hand. Call Sync at start and periodically too.
func (s *Syncer) Load(ctx context.Context, tx pgx.Tx, client *saga.Client, _ string) error {
	_, err := s.Sync(ctx, tx, client)
	return err
}

var _ saga.DefinitionLoader = (*Syncer)(nil).Load
