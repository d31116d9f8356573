package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Overview is the state of the effects in a scope at a glance.
type Overview struct {
	// Counts are per tenant, connector and state, sorted so: the unresolved effects (PENDING,
	// UNKNOWN, STUCK) all of them, CONFIRMED and FAILED those settled in the last 24 hours.
	Counts []StateCount
	// OldestPending is the creation of the oldest PENDING effect not awaiting its confirmation
	// (the queue's lag), nil if none; OldestUnknown likewise for UNKNOWN.
	OldestPending *time.Time
	OldestUnknown *time.Time
	// Stuck counts the STUCK effects.
	Stuck int
	// Awaiting counts the effects awaiting their confirmation (PENDING, counted in Counts too),
	// and OldestAwaiting is the creation of the oldest, nil if none.
	Awaiting       int
	OldestAwaiting *time.Time
	// SettledPerMinute is the effects settled (CONFIRMED or FAILED) in each of the last 60
	// minutes, oldest first, every minute present (the current one last, so far).
	SettledPerMinute []MinuteCount
	// At is when the overview was computed.
	At time.Time
}

// StateCount is how many effects of a tenant and connector are in a state.
type StateCount struct {
	Tenant, Connector string
	State             effects.State
	Count             int64
}

// MinuteCount is how many effects were CONFIRMED and FAILED within a minute.
type MinuteCount struct {
	Minute            time.Time
	Confirmed, Failed int64
}

// settledWindow is how far back the overview counts CONFIRMED and FAILED effects.
const settledWindow = 24 * time.Hour

// Overview computes the overview of scope: three reads of partial indexes (the unresolved effects,
// and those settled in the last 24 hours and hour), none of the whole table.
func (o *Ops) Overview(ctx context.Context, scope Scope) (*Overview, error) {
	now := o.now().UTC()
	all, tenants := scopeParams(scope)
	q := dbsqlc.New(o.pool)
	ov := &Overview{At: now}
	unresolved, err := q.OpsOverviewUnresolved(ctx, dbsqlc.OpsOverviewUnresolvedParams{AllTenants: all, TenantIds: tenants})
	if err != nil {
		return nil, fmt.Errorf("ops: overview: %w", err)
	}
	index := map[StateCount]int{} // a count's tenant, connector and state → where it is in Counts
	for _, row := range unresolved {
		state := effects.State(row.State)
		key := StateCount{Tenant: row.TenantID, Connector: row.Connector, State: state}
		i, ok := index[key]
		if !ok {
			i, index[key] = len(ov.Counts), len(ov.Counts)
			ov.Counts = append(ov.Counts, key)
		}
		ov.Counts[i].Count += row.Count
		oldest := row.Oldest
		switch {
		case row.Awaiting:
			ov.Awaiting += int(row.Count)
			ov.OldestAwaiting = earlier(ov.OldestAwaiting, oldest)
		case state == effects.StatePending:
			ov.OldestPending = earlier(ov.OldestPending, oldest)
		case state == effects.StateUnknown:
			ov.OldestUnknown = earlier(ov.OldestUnknown, oldest)
		case state == effects.StateStuck:
			ov.Stuck += int(row.Count)
		}
	}
	settled, err := q.OpsOverviewSettled(ctx, dbsqlc.OpsOverviewSettledParams{AllTenants: all, TenantIds: tenants, Since: now.Add(-settledWindow)})
	if err != nil {
		return nil, fmt.Errorf("ops: overview: %w", err)
	}
	for _, row := range settled {
		ov.Counts = append(ov.Counts, StateCount{Tenant: row.TenantID, Connector: row.Connector, State: effects.State(row.State), Count: row.Count})
	}
	slices.SortFunc(ov.Counts, func(a, b StateCount) int {
		return strings.Compare(a.Tenant+"\x00"+a.Connector+"\x00"+string(a.State), b.Tenant+"\x00"+b.Connector+"\x00"+string(b.State))
	})
	first := now.Truncate(time.Minute).Add(-59 * time.Minute)
	minutes, err := q.OpsSettledPerMinute(ctx, dbsqlc.OpsSettledPerMinuteParams{AllTenants: all, TenantIds: tenants, Since: first})
	if err != nil {
		return nil, fmt.Errorf("ops: overview: %w", err)
	}
	ov.SettledPerMinute = make([]MinuteCount, 60)
	for i := range ov.SettledPerMinute {
		ov.SettledPerMinute[i].Minute = first.Add(time.Duration(i) * time.Minute)
	}
	for _, row := range minutes {
		if i := int(row.Minute.Sub(first) / time.Minute); i >= 0 && i < 60 {
			ov.SettledPerMinute[i].Confirmed, ov.SettledPerMinute[i].Failed = row.Confirmed, row.Failed
		}
	}
	return ov, nil
}

func earlier(current *time.Time, t time.Time) *time.Time {
	if current == nil || t.Before(*current) {
		return &t
	}
	return current
}
