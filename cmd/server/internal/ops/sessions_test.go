package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/turns"
)

// TestSessionsWithinScope: sessions of two tenants listed by latest activity across pages; a scope
// sees its tenants' only; a session's detail has the messages waiting in its accumulating turn and
// its turns; another tenant's session, a missing one and a malformed key are refused.
func TestSessionsWithinScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarness(t)
	acmeKey, globexKey := "acme:bot:alice:chat", "globex:bot:bob:chat"
	for _, m := range []turns.Inbound{
		{SessionKey: acmeKey, MessageID: "m1", Content: map[string]string{"text": "hi"}},
		{SessionKey: acmeKey, MessageID: "m2", Content: map[string]string{"text": "are you there?"}},
		{SessionKey: globexKey, MessageID: "m1", Content: map[string]string{"text": "hello"}},
	} {
		_, err := e.turns.Submit(ctx, m)
		require.NoError(t, err)
	}

	var listed []string
	after := ""
	for page := 0; ; page++ {
		require.Less(t, page, 4)
		sessions, next, err := e.ops.Sessions(ctx, allTenants, 1, after)
		require.NoError(t, err)
		for _, s := range sessions {
			listed = append(listed, s.Key)
		}
		if next == "" {
			break
		}
		after = next
	}
	require.Equal(t, []string{globexKey, acmeKey}, listed, "latest activity first")

	acme, _, err := e.ops.Sessions(ctx, acmeOnly, 0, "")
	require.NoError(t, err)
	require.Len(t, acme, 1)
	require.Equal(t, ops.SessionSummary{Key: acmeKey, Tenant: "acme", Turns: 1, LastAt: acme[0].LastAt}, acme[0])
	none, _, err := e.ops.Sessions(ctx, noTenant, 0, "")
	require.NoError(t, err)
	require.Empty(t, none)
	_, _, err = e.ops.Sessions(ctx, allTenants, 0, "garbage")
	var fe *ops.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "after", fe.Field)

	_, err = e.ops.Session(ctx, acmeOnly, globexKey)
	require.ErrorIs(t, err, ops.ErrNotFound)
	_, err = e.ops.Session(ctx, allTenants, "acme:bot:nobody:chat")
	require.ErrorIs(t, err, ops.ErrNotFound)
	_, err = e.ops.Session(ctx, allTenants, "acme:bot")
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "session", fe.Field)

	detail, err := e.ops.Session(ctx, acmeOnly, acmeKey)
	require.NoError(t, err)
	require.Equal(t, "acme", detail.Tenant)
	require.Nil(t, detail.Holder, "no turn is running")
	require.Len(t, detail.Accumulating, 2)
	require.Equal(t, "m1", detail.Accumulating[0].MessageID)
	require.Equal(t, "m2", detail.Accumulating[1].MessageID)
	require.Len(t, detail.Turns, 1)
	require.Equal(t, turns.StatusAccumulating, detail.Turns[0].Turn.Status)
	require.Empty(t, detail.Turns[0].Decisions)
}

// TestSessionsByLatestTurn: sessions are ordered by the activity of their latest turn — a session
// whose first turn completed and which has received a message since comes first, one idle for
// hours last — on one page and across pages of one, and Turns counts every turn kept.
func TestSessionsByLatestTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarness(t)
	busy, idle, other := "acme:bot:alice:chat", "acme:bot:bob:chat", "globex:bot:carol:chat"
	submit := func(key, id string) *turns.Message {
		m, err := e.turns.Submit(ctx, turns.Inbound{SessionKey: key, MessageID: id, Content: map[string]string{"text": id}})
		require.NoError(t, err)
		return m
	}
	first := submit(busy, "m1")
	e.exec(t, `UPDATE reckon_turns SET status = 'COMPLETE', last_at = now() - interval '2 hours',
		completed_at = now() - interval '1 hour' WHERE id = $1`, first.TurnID)
	old := submit(idle, "m1")
	e.exec(t, `UPDATE reckon_turns SET last_at = now() - interval '3 hours' WHERE id = $1`, old.TurnID)
	submit(other, "m1")
	submit(busy, "m2") // a second turn

	all, next, err := e.ops.Sessions(ctx, allTenants, 0, "")
	require.NoError(t, err)
	require.Empty(t, next)
	var keys []string
	for _, s := range all {
		keys = append(keys, s.Key)
	}
	require.Equal(t, []string{busy, other, idle}, keys)
	require.Equal(t, 2, all[0].Turns)
	require.Equal(t, 1, all[2].Turns)
	require.WithinDuration(t, time.Now().Add(-3*time.Hour), all[2].LastAt, time.Minute)

	var paged []string
	for after := ""; ; {
		page, next, err := e.ops.Sessions(ctx, allTenants, 1, after)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 1)
		for _, s := range page {
			paged = append(paged, s.Key)
		}
		if next == "" {
			break
		}
		after = next
	}
	require.Equal(t, keys, paged)

	acme, _, err := e.ops.Sessions(ctx, acmeOnly, 0, "")
	require.NoError(t, err)
	require.Len(t, acme, 2)
	require.Equal(t, busy, acme[0].Key)
	require.Equal(t, idle, acme[1].Key)
}
