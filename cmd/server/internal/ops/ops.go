// Package ops is what operators read and do, the one layer under the console (package console),
// the HTTP API (package api) and the server's CLI: listings with filters and keyset pagination
// across tenants, the evidence behind an effect, the STUCK queue and the effects awaiting
// confirmation, the overview, the operator actions (resolve, cancel, confirm, decline, bulk
// resolve with a preview), the operators' limits of connectors (limits.go), and the changes of
// HTTP connectors and saga definitions with their record in the audit trail (definitions.go).
// Every read and action is limited to a Scope: an effect, saga, run or session outside it is
// ErrNotFound, exactly like a missing one. Tenants and their API tokens are package tenants'.
//
// Actions go through the effects and saga clients (Resolve, Cancel, Confirm, Decline, CancelRun,
// saga Resolve), so that the state machine, settle hooks and audit trail are the same as for the
// Go and HTTP APIs.
package ops

import (
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/turns"
)

// ErrNotFound is what a read or action on something missing or outside the scope returns.
var ErrNotFound = errors.New("not found")

// Scope is the tenants a reader sees and acts on: Tenants, or every tenant when Tenants is nil.
type Scope struct {
	Tenants []string
}

// Sees reports whether the scope covers tenant.
func (s Scope) Sees(tenant string) bool {
	return s.Tenants == nil || slices.Contains(s.Tenants, tenant)
}

// Ops reads and acts for operators. It is safe for concurrent use.
type Ops struct {
	pool    *pgxpool.Pool
	effects *effects.Client
	sagas   *saga.Client
	turns   *turns.Client
	now     func() time.Time
}

// New returns the operators' reads and actions over pool, acting through the clients given.
func New(pool *pgxpool.Pool, effectsClient *effects.Client, sagas *saga.Client, turnsClient *turns.Client) *Ops {
	return &Ops{pool: pool, effects: effectsClient, sagas: sagas, turns: turnsClient, now: time.Now}
}
