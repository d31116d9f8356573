package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Put validates def (Definition.Validate with registry; nil: the connector is not looked up)
// and stores it by actor, creating the schedule or replacing the tenant's schedule of that name:
// it reports whether it created it. A new schedule's first tick, or that of a schedule whose
// timing changed or which was disabled, is the first after now; a schedule replaced with the same
// timing keeps its next tick. Errors: an *Error (ErrInvalid) for a bad field, nothing stored;
// otherwise a database error.
func Put(ctx context.Context, db effects.DBTX, registry *effects.Registry, def Definition, actor string) (*Schedule, bool, error) {
	if err := def.Validate(registry); err != nil {
		return nil, false, err
	}
	if actor == "" {
		actor = "unknown"
	}
	t, _ := def.ticker() // checked by Validate
	params := dbsqlc.SchedulePutParams{
		TenantID: def.Tenant, Name: def.Name, Connector: def.Connector, Args: def.Args,
		Missed: string(def.missed()), Enabled: !def.Disabled, NextTick: t.Next(time.Now()), Actor: actor,
	}
	if len(params.Args) == 0 {
		params.Args = json.RawMessage(`{}`)
	}
	if def.Cron != "" {
		params.Cron = &def.Cron
	} else {
		seconds := int32(def.Interval / time.Second)
		params.IntervalSeconds = &seconds
	}
	row, err := dbsqlc.New(db).SchedulePut(ctx, params)
	if err != nil {
		return nil, false, fmt.Errorf("schedule: put %s/%s: %w", def.Tenant, def.Name, err)
	}
	return fromRow(dbsqlc.ReckonSchedule{
		TenantID: row.TenantID, Name: row.Name, Connector: row.Connector, Args: row.Args, Cron: row.Cron,
		IntervalSeconds: row.IntervalSeconds, Missed: row.Missed, Enabled: row.Enabled, NextTick: row.NextTick,
		LastTick: row.LastTick, LastEffectID: row.LastEffectID, LastError: row.LastError,
		CreatedAt: row.CreatedAt, CreatedBy: row.CreatedBy, UpdatedAt: row.UpdatedAt, UpdatedBy: row.UpdatedBy,
	}), row.Inserted, nil
}

func (d *Definition) missed() Missed {
	if d.Missed == "" {
		return Skip
	}
	return d.Missed
}

// Get returns tenant's schedule name. Errors: ErrNotFound.
func Get(ctx context.Context, db effects.DBTX, tenant, name string) (*Schedule, error) {
	row, err := dbsqlc.New(db).ScheduleGet(ctx, dbsqlc.ScheduleGetParams{TenantID: tenant, Name: name})
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, tenant, name)
	} else if err != nil {
		return nil, fmt.Errorf("schedule: get %s/%s: %w", tenant, name, err)
	}
	return fromRow(row), nil
}

// ListOpts selects the schedules List returns. Nil means the defaults.
type ListOpts struct {
	// Tenant: only this tenant's schedules. Default: every tenant's.
	Tenant string
	// AfterTenant and AfterName: only the schedules after this one, in (tenant, name) order.
	// Default: from the first.
	AfterTenant, AfterName string
	// Limit is the most schedules returned. Default 100, at most 1000.
	Limit int
}

// List returns schedules in (tenant, name) order, as opts selects. The list is never nil.
func List(ctx context.Context, db effects.DBTX, opts *ListOpts) ([]*Schedule, error) {
	if opts == nil {
		opts = &ListOpts{}
	}
	params := dbsqlc.ScheduleListParams{AfterTenant: opts.AfterTenant, AfterName: opts.AfterName, MaxRows: 100}
	if opts.Tenant != "" {
		params.TenantID = &opts.Tenant
	}
	if opts.Limit > 0 {
		params.MaxRows = int32(min(opts.Limit, 1000))
	}
	rows, err := dbsqlc.New(db).ScheduleList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("schedule: list: %w", err)
	}
	out := make([]*Schedule, len(rows))
	for i, row := range rows {
		out[i] = fromRow(row)
	}
	return out, nil
}

// Delete deletes tenant's schedule name: no tick of it is enqueued after the commit (a round in
// progress holds its row; the delete waits for it). Errors: ErrNotFound.
func Delete(ctx context.Context, db effects.DBTX, tenant, name string) error {
	n, err := dbsqlc.New(db).ScheduleDelete(ctx, dbsqlc.ScheduleDeleteParams{TenantID: tenant, Name: name})
	if err != nil {
		return fmt.Errorf("schedule: delete %s/%s: %w", tenant, name, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s/%s", ErrNotFound, tenant, name)
	}
	return nil
}

func fromRow(row dbsqlc.ReckonSchedule) *Schedule {
	s := &Schedule{
		Definition: Definition{
			Tenant: row.TenantID, Name: row.Name, Connector: row.Connector, Args: row.Args,
			Missed: Missed(row.Missed), Disabled: !row.Enabled,
		},
		NextTick: row.NextTick.UTC(), LastEffectID: row.LastEffectID,
		CreatedAt: row.CreatedAt, CreatedBy: row.CreatedBy, UpdatedAt: row.UpdatedAt, UpdatedBy: row.UpdatedBy,
	}
	if row.LastTick != nil {
		last := row.LastTick.UTC()
		s.LastTick = &last
	}
	if row.Cron != nil {
		s.Cron = *row.Cron
	}
	if row.IntervalSeconds != nil {
		s.Interval = time.Duration(*row.IntervalSeconds) * time.Second
	}
	if row.LastError != nil {
		s.LastError = *row.LastError
	}
	return s
}
