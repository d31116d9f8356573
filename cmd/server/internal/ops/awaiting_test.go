package ops_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
)

func held(s *effects.Spec) { s.RequireConfirmation = true }

// The effects awaiting their confirmation, in scope, longest waiting first, page by page; the
// decided ones leave the listing; the overview counts them apart from the queue's lag.
func TestAwaiting(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	var acme []uuid.UUID // acme's held effects, oldest first
	for i := range 5 {
		tenant := []string{"acme", "globex"}[i%2]
		e := h.insertEffect(t, tenant, connWire, fmt.Sprintf("refund-%d", i), effects.StatePending, held)
		// Created 5-i hours ago: the first inserted waits longest.
		h.exec(t, `UPDATE reckon_effects SET created_at = now() - make_interval(hours => $2) WHERE id = $1`, e.ID, 5-i)
		if tenant == "acme" {
			acme = append(acme, e.ID)
		}
	}
	plain := h.insertEffect(t, "acme", connWire, "plain", effects.StatePending)
	h.exec(t, `UPDATE reckon_effects SET created_at = now() - interval '1 hour' WHERE id = $1`, plain.ID)
	h.insertEffect(t, "acme", connWire, "stuck", effects.StateStuck)

	var got []uuid.UUID
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 3)
		page, total, next, err := h.ops.Awaiting(ctx, acmeOnly, 2, after)
		require.NoError(t, err)
		require.Equal(t, 3, total)
		for _, e := range page {
			require.Equal(t, effects.ConfirmationAwaiting, e.Confirmation)
			require.Equal(t, "Confirm bank.wire?", e.ConfirmationPrompt)
			got = append(got, e.ID)
		}
		if next == "" {
			break
		}
		after = next
	}
	require.Equal(t, acme, got)

	all, total, next, err := h.ops.Awaiting(ctx, allTenants, 0, "")
	require.NoError(t, err)
	require.Equal(t, 5, total)
	require.Len(t, all, 5)
	require.Empty(t, next)
	for i := 1; i < len(all); i++ {
		require.True(t, all[i-1].CreatedAt.Before(all[i].CreatedAt), "oldest first")
	}
	none, total, _, err := h.ops.Awaiting(ctx, noTenant, 0, "")
	require.NoError(t, err)
	require.Zero(t, total)
	require.Empty(t, none)

	// The overview: 5 awaiting, the oldest 5 hours; the queue's lag is the plain effect's hour.
	ov, err := h.ops.Overview(ctx, allTenants)
	require.NoError(t, err)
	require.Equal(t, 5, ov.Awaiting)
	require.WithinDuration(t, time.Now().Add(-5*time.Hour), *ov.OldestAwaiting, time.Minute)
	require.WithinDuration(t, time.Now().Add(-time.Hour), *ov.OldestPending, time.Minute)
	require.Contains(t, ov.Counts, ops.StateCount{Tenant: "acme", Connector: connWire, State: effects.StatePending, Count: 4},
		"one count per tenant, connector and state, awaiting or not")
	scoped, err := h.ops.Overview(ctx, ops.Scope{Tenants: []string{"globex"}})
	require.NoError(t, err)
	require.Equal(t, 2, scoped.Awaiting)
	require.Nil(t, scoped.OldestPending, "globex's PENDING effects all await a person")

	// Decided: no longer listed.
	_, err = h.ops.Confirm(ctx, acmeOnly, acme[0], "cli:ann", "checked")
	require.NoError(t, err)
	_, err = h.ops.Decline(ctx, acmeOnly, acme[1], "cli:ann", "no")
	require.NoError(t, err)
	page, total, _, err := h.ops.Awaiting(ctx, acmeOnly, 0, "")
	require.NoError(t, err)
	require.Equal(t, 1, total)
	require.Equal(t, []uuid.UUID{acme[2]}, ids(page))

	// A bad limit or cursor names its field.
	var fe *ops.FieldError
	_, _, _, err = h.ops.Awaiting(ctx, acmeOnly, ops.MaxLimit+1, "")
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "limit", fe.Field)
	_, _, _, err = h.ops.Awaiting(ctx, acmeOnly, 0, "not-a-cursor")
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "after", fe.Field)
}
