package sagadef

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Put validates def (Validate with registry; nil checks the form only) and stores it. It returns
// what is stored and whether it is new: storing a definition identical to the stored one is a
// no-op (false), a different one of the same name is ErrExists, an invalid one ErrInvalid; neither
// stores anything.
func Put(ctx context.Context, db effects.DBTX, def Definition, registry *effects.Registry) (Definition, bool, error) {
	def.CreatedAt = def.CreatedAt.UTC()
	if err := def.Validate(registry); err != nil {
		return Definition{}, false, err
	}
	steps, err := json.Marshal(def.Steps)
	if err != nil {
		return Definition{}, false, fmt.Errorf("sagadef: encode steps of %q: %w", def.Name, err)
	}
	q := dbsqlc.New(db)
	row, err := q.SagaDefinitionInsert(ctx, dbsqlc.SagaDefinitionInsertParams{
		Name: def.Name, Steps: steps, CompensationAttempts: int32(def.CompensationAttempts),
	})
	if err == nil {
		stored, err := fromRow(row)
		return stored, true, err
	}
	if !postgres.NoRows(err) {
		return Definition{}, false, fmt.Errorf("sagadef: store %q: %w", def.Name, err)
	}
	stored, err := Get(ctx, db, def.Name)
	if err != nil {
		return Definition{}, false, err
	}
	if !same(stored, def) {
		return stored, false, fmt.Errorf("%w: %q (definitions never change: store the new version under a new name)", ErrExists, def.Name)
	}
	return stored, false, nil
}

// Get returns the stored definition of that name, or ErrNotFound.
func Get(ctx context.Context, db effects.DBTX, name string) (Definition, error) {
	row, err := dbsqlc.New(db).SagaDefinitionGet(ctx, name)
	if postgres.NoRows(err) {
		return Definition{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return Definition{}, fmt.Errorf("sagadef: get %q: %w", name, err)
	}
	return fromRow(row)
}

// List returns every stored definition, by name.
func List(ctx context.Context, db effects.DBTX) ([]Definition, error) {
	rows, err := dbsqlc.New(db).SagaDefinitionList(ctx)
	if err != nil {
		return nil, fmt.Errorf("sagadef: list: %w", err)
	}
	out := make([]Definition, 0, len(rows))
	for _, row := range rows {
		def, err := fromRow(row)
		if err != nil {
			return nil, err
		}
		out = append(out, def)
	}
	return out, nil
}

func fromRow(row dbsqlc.ReckonSagaDefinition) (Definition, error) {
	def := Definition{Name: row.Name, CompensationAttempts: int(row.CompensationAttempts), CreatedAt: row.CreatedAt.UTC()}
	if err := json.Unmarshal(row.Steps, &def.Steps); err != nil {
		return Definition{}, fmt.Errorf("sagadef: stored steps of %q: %w", row.Name, err)
	}
	return def, nil
}
