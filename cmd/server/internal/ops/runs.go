package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// RunFilter selects runs for Runs. Every field but Scope is optional.
type RunFilter struct {
	Scope Scope
	// Tenant is one tenant (a tenant outside Scope lists nothing), or "" for every tenant in scope.
	Tenant string
	// Limit bounds the page: default 50, at most 500.
	Limit int
	// After is the cursor of the previous page (its next).
	After string
}

// maxAwaiting bounds RunDetail.Awaiting.
const maxAwaiting = 500

// Runs lists the runs f selects within its scope, newest first, each with its status
// (effects.Client.GetRun: guardrails, counts, effects per state), and the cursor of the next page
// ("" when this page is the last). A bad filter is a *FieldError.
func (o *Ops) Runs(ctx context.Context, f RunFilter) ([]*effects.Run, string, error) {
	if err := checkTenant(f.Tenant); err != nil {
		return nil, "", err
	}
	limit, err := checkLimit(f.Limit)
	if err != nil {
		return nil, "", err
	}
	params := dbsqlc.OpsRunListParams{MaxRows: int32(limit)}
	if f.After != "" {
		// The cursor's ID is "{tenant}/{run id}": a tenant id has no '/'.
		c, err := parseCursor(f.After)
		if err != nil {
			return nil, "", err
		}
		tenant, id, ok := strings.Cut(c.ID, "/")
		if !ok {
			return nil, "", &FieldError{Field: "after", Message: "not a cursor from a previous page"}
		}
		params.CursorCreatedAt, params.CursorTenantID, params.CursorID = &c.At, &tenant, &id
	}
	var rows []dbsqlc.OpsRunListRow
	err = o.read(ctx, func(q *dbsqlc.Queries) (err error) {
		if params.TenantIds, err = f.Scope.tenantIDs(ctx, f.Tenant, q.OpsRunTenants); err != nil || len(params.TenantIds) == 0 {
			return err
		}
		rows, err = q.OpsRunList(ctx, params)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("ops: list runs: %w", err)
	}
	out := make([]*effects.Run, 0, len(rows))
	for _, row := range rows {
		run, err := o.effects.GetRun(ctx, row.ID, &effects.RunOpts{TenantID: row.TenantID})
		if errors.Is(err, effects.ErrRunNotFound) {
			continue // pruned since the listing
		}
		if err != nil {
			return nil, "", fmt.Errorf("ops: %w", err)
		}
		out = append(out, run)
	}
	next := ""
	if len(rows) == int(params.MaxRows) {
		last := rows[len(rows)-1]
		next = pagecursor.Cursor{At: last.CreatedAt, ID: last.TenantID + "/" + last.ID}.String()
	}
	return out, next, nil
}

// RunDetail is a run's status with the events it awaits.
type RunDetail struct {
	Run *effects.Run
	// Awaiting are the run's effects awaiting their callback (PENDING with a correlation id; each
	// with its DeadlineAt), soonest deadline first; at most 500.
	Awaiting []*effects.Effect
}

// Run returns the tenant's run id with its status and pending events, or ErrNotFound (also for a
// tenant outside scope).
func (o *Ops) Run(ctx context.Context, scope Scope, tenant, id string) (*RunDetail, error) {
	run, err := o.runInScope(ctx, scope, tenant, id)
	if err != nil {
		return nil, err
	}
	ids, err := dbsqlc.New(o.pool).OpsRunAwaiting(ctx, dbsqlc.OpsRunAwaitingParams{TenantID: tenant, RunID: id, MaxRows: maxAwaiting})
	if err != nil {
		return nil, fmt.Errorf("ops: effects awaiting in run %q: %w", id, err)
	}
	detail := &RunDetail{Run: run, Awaiting: make([]*effects.Effect, 0, len(ids))}
	for _, effectID := range ids {
		e, err := o.effects.Get(ctx, effectID)
		if errors.Is(err, effects.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ops: %w", err)
		}
		detail.Awaiting = append(detail.Awaiting, e)
	}
	return detail, nil
}

// CancelRun cancels the tenant's run id (effects.Client.CancelRun, which records the actor as
// "caller:{actor}" and stops what has not taken effect). reason is required (UTF-8, no NUL, at
// most 1000 bytes). Errors: ErrNotFound (missing, or a tenant outside scope), a *FieldError;
// nothing changes then.
func (o *Ops) CancelRun(ctx context.Context, scope Scope, tenant, id, actor, reason string) (*effects.RunCancellation, error) {
	if err := CheckAction(actor, reason); err != nil {
		return nil, err
	}
	if _, err := o.runInScope(ctx, scope, tenant, id); err != nil {
		return nil, err
	}
	res, err := o.effects.CancelRun(ctx, id, actor, reason, &effects.RunOpts{TenantID: tenant})
	if errors.Is(err, effects.ErrRunNotFound) {
		return nil, ErrNotFound
	}
	return res, err
}

// runInScope reads a run's status; ErrNotFound when it is missing or its tenant is outside scope.
func (o *Ops) runInScope(ctx context.Context, scope Scope, tenant, id string) (*effects.Run, error) {
	if tenant == "" {
		return nil, &FieldError{Field: "tenant", Message: "required: run ids are per tenant"}
	}
	if err := checkTenant(tenant); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, &FieldError{Field: "run", Message: "required"}
	}
	if err := checkField("run", id, maxNameLen); err != nil {
		return nil, err
	}
	if !scope.Sees(tenant) {
		return nil, ErrNotFound
	}
	run, err := o.effects.GetRun(ctx, id, &effects.RunOpts{TenantID: tenant})
	if errors.Is(err, effects.ErrRunNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	return run, nil
}
