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

type syncState struct {
	mu     sync.Mutex
	synced map[string]bool
}

var syncStates sync.Map // *saga.Client → *syncState

// Sync registers with client every stored definition it does not have yet. Definitions never
// change and are never deleted, so a registered one stays as it is. A name already registered by
// other code is skipped and reported. Concurrent calls on one client are serialized.
func Sync(ctx context.Context, db effects.DBTX, client *saga.Client) (SyncResult, error) {
	// Read before taking the lock: a caller holding a connection (a settle hook's transaction)
	// never waits for the lock while the holder waits for a connection.
	defs, err := List(ctx, db)
	if err != nil {
		return SyncResult{}, fmt.Errorf("sagadef: sync: %w", err)
	}
	value, _ := syncStates.LoadOrStore(client, &syncState{synced: map[string]bool{}})
	state := value.(*syncState)
	state.mu.Lock()
	defer state.mu.Unlock()
	var result SyncResult
	for _, def := range defs {
		if state.synced[def.Name] {
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
		state.synced[def.Name] = true
		result.Added = append(result.Added, def.Name)
	}
	return result, nil
}

func skip(result *SyncResult, name string, err error) {
	if result.Skipped == nil {
		result.Skipped = map[string]error{}
	}
	result.Skipped[name] = err
}

// Load is a saga.DefinitionLoader (saga.Config.OnUnknownDefinition) that loads the stored
// definitions whenever a saga names one the client has not registered: a Sync in the transaction
// at hand. Call Sync at start and periodically too.
func Load(ctx context.Context, tx pgx.Tx, client *saga.Client, _ string) error {
	_, err := Sync(ctx, tx, client)
	return err
}

var _ saga.DefinitionLoader = Load
