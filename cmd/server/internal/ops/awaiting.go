package ops

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Awaiting is the effects in scope awaiting their confirmation (docs/design.md, "Confirmation
// holds"), longest waiting first; total counts them all, and next continues the listing ("" on the
// last page). limit is 1 to MaxLimit (0: DefaultLimit); after is the next of a previous page.
// Confirm and Decline decide on them.
func (o *Ops) Awaiting(ctx context.Context, scope Scope, limit int, after string) (page []*effects.Effect, total int, next string, err error) {
	all, tenants := scopeParams(scope)
	return queue(ctx, o, limit, after, "effects awaiting confirmation", func(q *dbsqlc.Queries) (int64, error) {
		return q.OpsAwaitingCount(ctx, dbsqlc.OpsAwaitingCountParams{AllTenants: all, TenantIds: tenants})
	}, func(q *dbsqlc.Queries, at *time.Time, id *uuid.UUID, limit int32) ([]dbsqlc.OpsAwaitingListRow, error) {
		return q.OpsAwaitingList(ctx, dbsqlc.OpsAwaitingListParams{AllTenants: all, TenantIds: tenants, CursorCreatedAt: at, CursorID: id, MaxRows: limit})
	}, func(row dbsqlc.OpsAwaitingListRow) (uuid.UUID, time.Time) { return row.ID, row.CreatedAt })
}
