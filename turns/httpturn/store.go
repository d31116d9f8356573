package httpturn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Per-tenant turn handlers, stored in reckon_turn_handlers (migration 0009) and managed with
// PUT/GET/DELETE /v1/turn-handlers/{tenant}: a reactor whose Handler has Config.Lookup set to
// StoreLookup sends each tenant's turns to its stored URL, and the other tenants' to Config.URL.

// Sentinel errors of the store. Test with errors.Is.
var (
	// ErrNotFound: no turn handler is stored for the tenant.
	ErrNotFound = errors.New("httpturn: no turn handler stored for the tenant")
	// ErrInvalid: a URL or timeout that cannot be stored; nothing was.
	ErrInvalid = errors.New("httpturn: invalid turn handler")
	// ErrUnknownTenant: the tenant does not exist (reckon_tenants); nothing was stored.
	ErrUnknownTenant = errors.New("httpturn: unknown tenant")
)

// MaxTimeout bounds a stored handler's timeout.
const MaxTimeout = 10 * time.Minute

// Target is where a tenant's turns go.
type Target struct {
	URL string
	// Timeout bounds one call; zero: the Handler's Config.Timeout.
	Timeout time.Duration
}

// Stored is a tenant's stored turn handler.
type Stored struct {
	Tenant    string
	Target    Target
	CreatedAt time.Time
	UpdatedAt time.Time
}

func storedFromRow(row dbsqlc.ReckonTurnHandler) Stored {
	return Stored{
		Tenant: row.TenantID, Target: Target{URL: row.Url, Timeout: time.Duration(row.TimeoutMs) * time.Millisecond},
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt,
	}
}

// Put stores the tenant's turn handler, replacing the one stored; a zero Timeout is
// DefaultTimeout. It returns what was stored and whether it is new. Reactors use it from their
// next turn of the tenant on.
func Put(ctx context.Context, db effects.DBTX, tenant string, target Target) (Stored, bool, error) {
	if err := ValidateURL(target.URL); err != nil {
		return Stored{}, false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if target.Timeout == 0 {
		target.Timeout = DefaultTimeout
	}
	if target.Timeout < time.Millisecond || target.Timeout > MaxTimeout {
		return Stored{}, false, fmt.Errorf("%w: timeout %v: want 1ms to %v", ErrInvalid, target.Timeout, MaxTimeout)
	}
	row, err := dbsqlc.New(db).TurnHandlerUpsert(ctx, dbsqlc.TurnHandlerUpsertParams{
		TenantID: tenant, Url: target.URL, TimeoutMs: int32(target.Timeout / time.Millisecond),
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation
		return Stored{}, false, fmt.Errorf("%w: %q", ErrUnknownTenant, tenant)
	}
	if err != nil {
		return Stored{}, false, fmt.Errorf("httpturn: store the turn handler of %q: %w", tenant, err)
	}
	return storedFromRow(row.ReckonTurnHandler), row.Inserted, nil
}

// Get returns the tenant's stored turn handler, or ErrNotFound.
func Get(ctx context.Context, db effects.DBTX, tenant string) (Stored, error) {
	row, err := dbsqlc.New(db).TurnHandlerGet(ctx, tenant)
	if postgres.NoRows(err) {
		return Stored{}, fmt.Errorf("%w: %q", ErrNotFound, tenant)
	}
	if err != nil {
		return Stored{}, fmt.Errorf("httpturn: read the turn handler of %q: %w", tenant, err)
	}
	return storedFromRow(row), nil
}

// Delete removes the tenant's stored turn handler (ErrNotFound when there is none); its turns go
// to the reactors' Config.URL, or wait when they have none.
func Delete(ctx context.Context, db effects.DBTX, tenant string) error {
	n, err := dbsqlc.New(db).TurnHandlerDelete(ctx, tenant)
	if err != nil {
		return fmt.Errorf("httpturn: delete the turn handler of %q: %w", tenant, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", ErrNotFound, tenant)
	}
	return nil
}

// StoreLookup returns a Config.Lookup that reads the tenant's stored turn handler from db at
// every turn (one indexed read).
func StoreLookup(db effects.DBTX) func(ctx context.Context, tenant string) (Target, bool, error) {
	return func(ctx context.Context, tenant string) (Target, bool, error) {
		stored, err := Get(ctx, db, tenant)
		if errors.Is(err, ErrNotFound) {
			return Target{}, false, nil
		}
		if err != nil {
			return Target{}, false, err
		}
		return stored.Target, true, nil
	}
}
