package saga

import (
	"errors"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrNotFound: no saga with that id.
	ErrNotFound = errors.New("saga: not found")
	// ErrUnknownDefinition: no definition of that name is registered in this process.
	ErrUnknownDefinition = errors.New("saga: unknown definition")
	// ErrNotInstalled: the client was used before an effects client installed it (pass it in
	// effects.Config.Plugins).
	ErrNotInstalled = errors.New("saga: client not installed in an effects client (effects.Config.Plugins)")
	// ErrStartKeyConflict: the start key is taken by a saga of another definition or input (or
	// was taken concurrently; roll back and try again).
	ErrStartKeyConflict = errors.New("saga: start key already used")
	// ErrNotStuck: Resolve needs a STUCK saga.
	ErrNotStuck = errors.New("saga: not STUCK")
	// ErrResolveEffect: the saga is held by a STUCK effect, which an operator resolves with
	// effects.Client.Resolve (the saga then moves on by itself).
	ErrResolveEffect = errors.New("saga: held by a STUCK effect: resolve the effect")
)
