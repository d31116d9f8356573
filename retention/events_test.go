package retention_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/retention"
)

// The event log's partitions are dropped past the event retention — a reader behind a dropped one
// gets events.ErrExpired — except one holding an event an active webhook subscription has not
// delivered yet, which is held until the subscription has moved past it.
func TestEventPartitionsDroppedUnlessASubscriptionNeedsThem(t *testing.T) {
	t.Parallel()
	h := setup(t)
	// Two past months of events, each partition written by a transaction of its own.
	old := func(from, to int) (partition string, first, last events.ID) {
		h.exec(`SELECT reckon_audit_add_partition('reckon_events', $1, $2)`, h.t0.Add(-days(from)), h.t0.Add(-days(to)))
		tx, err := h.pool.Begin(h.ctx)
		require.NoError(t, err)
		defer tx.Rollback(h.ctx) //nolint:errcheck
		for range 3 {
			_, err := tx.Exec(h.ctx, `INSERT INTO reckon_events (type, tenant_id, session_key, at) VALUES ('turn.completed', 'acme', 'acme:a:u:chat', $1)`,
				h.t0.Add(-days(from-1)))
			require.NoError(t, err)
		}
		var firstXID uint64
		require.NoError(t, tx.QueryRow(h.ctx, `SELECT min(seq), max(seq), pg_current_xact_id()::text::bigint, min(tableoid::regclass::text) FROM reckon_events
			WHERE xid = pg_current_xact_id()`).Scan(&first.Seq, &last.Seq, &firstXID, &partition))
		first.XID, last.XID = firstXID, firstXID
		require.NoError(t, tx.Commit(h.ctx))
		return partition, first, last
	}
	older, olderFirst, olderLast := old(120, 90)
	newer, _, newerLast := old(90, 60)
	require.NotEqual(t, older, newer)

	// The head passes newerLast once every transaction older than it has ended; other tests'
	// transactions on the same Postgres may hold it back a moment.
	require.Eventually(t, func() bool {
		head, err := events.New(h.pool, nil).Head(h.ctx)
		require.NoError(t, err)
		return !head.Less(newerLast)
	}, 20*time.Second, 10*time.Millisecond)
	subs := events.NewSubscriptions(h.pool)
	sub, err := subs.Create(h.ctx, events.NewSubscription{URL: "http://127.0.0.1:1/hook", CreatedBy: "test"})
	require.NoError(t, err)
	require.False(t, sub.Position.Less(newerLast), "a new subscription starts at the head")
	// The subscription has delivered the older month, not the newer one.
	h.exec(`UPDATE reckon_event_subscriptions SET position_xid = $1::bigint::text::xid8, position_seq = $2 WHERE id = $3`,
		int64(olderLast.XID), olderLast.Seq, sub.ID)

	report := h.run(h.retention(0, func(c *retention.Config) { c.EventRetention = 30 * day }))
	require.Contains(t, report.PartitionsHeld, newer, "the subscription still needs it")
	require.Contains(t, dropped(report), older)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_audit_drops WHERE partition = $1 AND parent = 'reckon_events' AND row_count = 3
		AND reason LIKE 'event retention%'`, older))

	log := events.New(h.pool, nil)
	_, _, _, err = log.Read(h.ctx, events.Filter{}, olderFirst, 10)
	require.ErrorIs(t, err, events.ErrExpired, "a reader behind the dropped partition is told")
	evs, _, _, err := log.Read(h.ctx, events.Filter{}, olderLast, 10)
	require.NoError(t, err, "the subscription's position is still readable")
	require.Len(t, evs, 3)

	// Once the subscription has moved past them, its events go too.
	h.exec(`UPDATE reckon_event_subscriptions SET position_xid = $1::bigint::text::xid8, position_seq = $2 WHERE id = $3`,
		int64(newerLast.XID), newerLast.Seq, sub.ID)
	report = h.run(h.retention(0, func(c *retention.Config) { c.EventRetention = 30 * day }))
	require.Contains(t, dropped(report), newer)
	require.NotContains(t, report.PartitionsHeld, newer)
}

func dropped(report *retention.Report) []string {
	var names []string
	for _, p := range report.PartitionsDropped {
		names = append(names, p.Partition)
	}
	return names
}

func days(n int) time.Duration { return time.Duration(n) * day }
