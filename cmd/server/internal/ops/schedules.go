package ops

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"

	"github.com/reckonhq/reckon/schedule"
)

// Schedules (package schedule): a tenant's periodic effects. The reads and changes of the HTTP
// API, the console and the server's CLI are these; a schedule of a tenant outside the scope is
// ErrNotFound, exactly like a missing one. Put checks the connector against this server's
// registry (the connectors it knows: the stored HTTP connectors and the built-in ones).

// ScheduleError is a definition's bad field as a *FieldError named as on the wire; other errors
// pass through (schedule.ErrNotFound as ErrNotFound).
func scheduleError(err error) error {
	var bad *schedule.Error
	switch {
	case errors.As(err, &bad):
		return &FieldError{Field: bad.Field, Message: bad.Problem}
	case errors.Is(err, schedule.ErrNotFound):
		return ErrNotFound
	}
	return err
}

// Schedules lists the schedules in scope, of tenant ("" for every tenant in scope), by tenant and
// name, at most limit (0: DefaultLimit) after the cursor after ("tenant/name" of the last one of
// the previous page, package pagecursor; "" from the first). next is the cursor of the next page ("" when this one is
// the last). Errors: a *FieldError for a bad tenant, limit or cursor.
func (o *Ops) Schedules(ctx context.Context, scope Scope, tenant string, limit int, after string) (page []*schedule.Schedule, next string, err error) {
	if err := checkTenant(tenant); err != nil {
		return nil, "", err
	}
	if limit, err = checkLimit(limit); err != nil {
		return nil, "", err
	}
	afterTenant, afterName, err := scheduleCursor(after)
	if err != nil {
		return nil, "", err
	}
	tenants, err := scope.tenantIDs(ctx, tenant, func(context.Context) ([]string, error) { return []string{""}, nil })
	if err != nil {
		return nil, "", err
	}
	tenants = slices.Sorted(slices.Values(tenants)) // the cursor's order
	for _, t := range tenants {
		list, err := schedule.List(ctx, o.pool, &schedule.ListOpts{Tenant: t, AfterTenant: afterTenant, AfterName: afterName, Limit: limit + 1 - len(page)})
		if err != nil {
			return nil, "", err
		}
		page = append(page, list...)
		if len(page) > limit {
			break
		}
	}
	if len(page) > limit {
		page = page[:limit]
		last := page[limit-1]
		next = pagecursor.Cursor{At: time.Unix(0, 0), ID: last.Tenant + "/" + last.Name}.String()
	}
	if page == nil {
		page = []*schedule.Schedule{}
	}
	return page, next, nil
}

// scheduleCursor reads a Schedules cursor (package pagecursor), whose id is "tenant/name".
func scheduleCursor(after string) (tenant, name string, err error) {
	if after == "" {
		return "", "", nil
	}
	c, err := parseCursor(after)
	if err != nil {
		return "", "", err
	}
	tenant, name, ok := strings.Cut(c.ID, "/")
	if !ok {
		return "", "", badCursor
	}
	return tenant, name, nil
}

// Schedule returns tenant's schedule name. Errors: ErrNotFound for one missing or outside scope.
func (o *Ops) Schedule(ctx context.Context, scope Scope, tenant, name string) (*schedule.Schedule, error) {
	if !scope.Sees(tenant) {
		return nil, ErrNotFound
	}
	if err := checkTenant(tenant); err != nil {
		return nil, ErrNotFound
	}
	if err := checkText(name); err != nil {
		return nil, ErrNotFound
	}
	s, err := schedule.Get(ctx, o.pool, tenant, name)
	return s, scheduleError(err)
}

// PutSchedule creates or replaces a schedule (schedule.Put) of a tenant in scope, by actor: it
// reports whether it created it. Errors: ErrNotFound for a tenant outside scope; a *FieldError
// naming the bad field (a connector this server does not know or that is not available to the
// tenant, a bad cron expression, an interval out of range, an unknown policy, a bad name or
// actor); nothing is stored then.
func (o *Ops) PutSchedule(ctx context.Context, scope Scope, def schedule.Definition, actor string) (*schedule.Schedule, bool, error) {
	if !scope.Sees(def.Tenant) {
		return nil, false, ErrNotFound
	}
	if err := checkField("actor", actor, maxNameLen); err != nil {
		return nil, false, err
	}
	s, created, err := schedule.Put(ctx, o.pool, o.effects.Registry(), def, actor)
	return s, created, scheduleError(err)
}

// DeleteSchedule deletes tenant's schedule name. Errors: ErrNotFound for one missing or outside
// scope.
func (o *Ops) DeleteSchedule(ctx context.Context, scope Scope, tenant, name string) error {
	if _, err := o.Schedule(ctx, scope, tenant, name); err != nil {
		return err
	}
	return scheduleError(schedule.Delete(ctx, o.pool, tenant, name))
}
