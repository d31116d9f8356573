package httpconn

import (
	"context"
	"fmt"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Put validates def (Definition.Validate) and stores it with its defaults applied, replacing the
// stored connector of the same name. It returns what was stored, with CreatedAt and UpdatedAt, and
// whether the connector is new. An invalid definition (ErrInvalid) stores nothing. Reactors pick
// the change up at their next Sync.
func Put(ctx context.Context, db effects.DBTX, def Definition) (Definition, bool, error) {
	if err := def.Validate(); err != nil {
		return Definition{}, false, err
	}
	def = def.WithDefaults()
	limit, _ := def.Limit.WithDefaults() // checked by Validate; stored with its defaults
	row, err := dbsqlc.New(db).ConnectorUpsert(ctx, dbsqlc.ConnectorUpsertParams{
		Name:               def.Name,
		Tags:               tagStrings(def.Tags),
		DispatchUrl:        def.DispatchURL,
		StatusUrl:          nullable(def.StatusURL),
		CompensateUrl:      nullable(def.CompensateURL),
		BusinessKeyFields:  nonNil(def.BusinessKeyFields),
		OrderingKeyFields:  nonNil(def.OrderingKeyFields),
		DedupByBusinessKey: def.DedupByBusinessKey,
		TimeoutMs:          int32(def.Timeout.Milliseconds()),
		MaxAttempts:        int32(def.MaxAttempts),
		StatusCheckLimit:   int32(def.StatusCheckLimit),
		BackoffInitialMs:   int32(def.BackoffInitial.Milliseconds()),
		BackoffMaxMs:       int32(def.BackoffMax.Milliseconds()),
		Unsafe:             def.Unsafe,
		AsyncTimeoutMs:     asyncTimeoutMS(def.AsyncTimeout),
		HardTimeout:        def.HardTimeout,
		CancelUrl:          nullable(def.CancelURL),

		RequiresConfirmation: def.RequiresConfirmation,
		ConfirmationPrompt:   nullable(def.ConfirmationPrompt),
		LimitRate:            int32(limit.Rate),
		LimitPerMs:           int32(limit.Per.Milliseconds()),
		LimitBurst:           int32(limit.Burst),
		LimitMaxInFlight:     int32(limit.MaxInFlight),
		LimitPerTenant:       limit.PerTenant,
		LimitBreakAfter:      int32(limit.BreakAfter),
		LimitBreakForMs:      int32(limit.BreakFor.Milliseconds()),
		Description:          def.Description,
		ArgsSchema:           def.ArgsSchema,
		Tenants:              nonNil(def.Tenants),
	})
	if err != nil {
		return Definition{}, false, fmt.Errorf("httpconn: store connector %q: %w", def.Name, err)
	}
	return definitionOf(row.ReckonConnector), row.Inserted, nil
}

// Get returns the stored connector name, or ErrNotFound.
func Get(ctx context.Context, db effects.DBTX, name string) (Definition, error) {
	row, err := dbsqlc.New(db).ConnectorGet(ctx, name)
	if postgres.NoRows(err) {
		return Definition{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return Definition{}, fmt.Errorf("httpconn: get connector %q: %w", name, err)
	}
	return definitionOf(row), nil
}

// List returns every stored connector, by name.
func List(ctx context.Context, db effects.DBTX) ([]Definition, error) {
	rows, err := dbsqlc.New(db).ConnectorList(ctx)
	if err != nil {
		return nil, fmt.Errorf("httpconn: list connectors: %w", err)
	}
	defs := make([]Definition, len(rows))
	for i, row := range rows {
		defs[i] = definitionOf(row)
	}
	return defs, nil
}

// Delete removes the stored connector name. It refuses (ErrInUse) while effects of the connector
// are PENDING or UNKNOWN, and returns ErrNotFound when there is no such connector; either way
// nothing changes. Reactors drop the connector at their next Sync. Run it in a transaction (db a
// pgx.Tx) to make the check and the delete atomic with respect to your own writes; an effect
// enqueued concurrently by another process waits until the connector is stored again.
func Delete(ctx context.Context, db effects.DBTX, name string) error {
	queries := dbsqlc.New(db)
	unresolved, err := queries.ConnectorUnresolvedCount(ctx, name)
	if err != nil {
		return fmt.Errorf("httpconn: delete connector %q: %w", name, err)
	}
	if unresolved > 0 {
		return fmt.Errorf("%w: %q has %d PENDING or UNKNOWN effects; let them settle (or resolve them) first", ErrInUse, name, unresolved)
	}
	if _, err := queries.ConnectorDelete(ctx, name); postgres.NoRows(err) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	} else if err != nil {
		return fmt.Errorf("httpconn: delete connector %q: %w", name, err)
	}
	return nil
}

func definitionOf(row dbsqlc.ReckonConnector) Definition {
	def := Definition{
		Name:               row.Name,
		DispatchURL:        row.DispatchUrl,
		StatusURL:          deref(row.StatusUrl),
		CompensateURL:      deref(row.CompensateUrl),
		Timeout:            time.Duration(row.TimeoutMs) * time.Millisecond,
		MaxAttempts:        int(row.MaxAttempts),
		StatusCheckLimit:   int(row.StatusCheckLimit),
		BackoffInitial:     time.Duration(row.BackoffInitialMs) * time.Millisecond,
		BackoffMax:         time.Duration(row.BackoffMaxMs) * time.Millisecond,
		Unsafe:             row.Unsafe,
		DedupByBusinessKey: row.DedupByBusinessKey,
		HardTimeout:        row.HardTimeout,
		CancelURL:          deref(row.CancelUrl),

		RequiresConfirmation: row.RequiresConfirmation,
		ConfirmationPrompt:   deref(row.ConfirmationPrompt),
		Description:          row.Description,
		ArgsSchema:           row.ArgsSchema,
		CreatedAt:            row.CreatedAt,
		UpdatedAt:            row.UpdatedAt,
	}
	for _, tag := range row.Tags {
		def.Tags = append(def.Tags, effects.Tag(tag))
	}
	if len(row.BusinessKeyFields) > 0 {
		def.BusinessKeyFields = row.BusinessKeyFields
	}
	if len(row.OrderingKeyFields) > 0 {
		def.OrderingKeyFields = row.OrderingKeyFields
	}
	if len(row.Tenants) > 0 {
		def.Tenants = row.Tenants
	}
	if row.AsyncTimeoutMs != nil {
		def.AsyncTimeout = time.Duration(*row.AsyncTimeoutMs) * time.Millisecond
	}
	if row.LimitRate > 0 || row.LimitMaxInFlight > 0 || row.LimitBreakAfter > 0 {
		def.Limit = effects.Limit{
			Rate: int(row.LimitRate), Per: time.Duration(row.LimitPerMs) * time.Millisecond, Burst: int(row.LimitBurst),
			MaxInFlight: int(row.LimitMaxInFlight), PerTenant: row.LimitPerTenant, BreakAfter: int(row.LimitBreakAfter),
			BreakFor: time.Duration(row.LimitBreakForMs) * time.Millisecond,
		}
	}
	return def
}

// asyncTimeoutMS is the stored form of an async timeout: NULL for the reactor's default.
func asyncTimeoutMS(d time.Duration) *int32 {
	if d == 0 {
		return nil
	}
	ms := int32(d.Milliseconds())
	return &ms
}

func tagStrings(tags []effects.Tag) []string {
	out := make([]string, len(tags))
	for i, tag := range tags {
		out[i] = string(tag)
	}
	return out
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
