package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type fixture struct {
	t      *testing.T
	pool   *pgxpool.Pool
	client *effects.Client
	log    *events.Log
}

// setup gives a test its database and an effects client that records effects (it dispatches
// nothing: no reactor runs) and wakes subscribers.
func setup(t *testing.T) *fixture {
	t.Helper()
	pool := pgtest.NewDB(t)
	registry := effects.NewRegistry()
	registry.MustRegister(effects.Connector{
		Name: "mail.send", Tags: []effects.Tag{effects.TagIdempotent},
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			return json.RawMessage(`{}`), nil
		},
	})
	client, err := effects.NewClient(pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Stop(context.Background()) })
	return &fixture{t: t, pool: pool, client: client, log: events.New(pool, client)}
}

func (f *fixture) enqueueTx(tx pgx.Tx, tenant, key string) *effects.Effect {
	f.t.Helper()
	e, err := f.client.EnqueueTx(context.Background(), tx, effects.Spec{
		TenantID: tenant, Connector: "mail.send", IdempotencyKey: key, Args: map[string]any{"to": key},
	}, nil)
	require.NoError(f.t, err)
	return e
}

func (f *fixture) readAll(filter events.Filter, after events.ID) []events.Event {
	f.t.Helper()
	var all []events.Event
	for {
		evs, next, held, err := f.log.Read(context.Background(), filter, after, 100)
		require.NoError(f.t, err)
		all = append(all, evs...)
		if len(evs) == 0 && !held {
			return all
		}
		after = next
		if held {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// A transaction that took its position first but commits last holds readers back: they see
// neither its event nor the later ones until it commits, then both in position order. A rolled
// back transaction's event never appears.
func TestLateCommitHoldsReaders(t *testing.T) {
	f := setup(t)
	ctx := context.Background()

	early, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = early.Rollback(ctx) }()
	first := f.enqueueTx(early, "acme", "early") // takes the smaller transaction id

	late, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	second := f.enqueueTx(late, "acme", "late")
	require.NoError(t, late.Commit(ctx))

	doomed, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	f.enqueueTx(doomed, "acme", "doomed")
	require.NoError(t, doomed.Rollback(ctx))

	evs, next, held, err := f.log.Read(ctx, events.Filter{}, events.ID{}, 100)
	require.NoError(t, err)
	require.Empty(t, evs, "the committed event sits behind a transaction still running")
	require.True(t, held, "the reader is told a committed event waits")
	require.True(t, next.IsZero())

	require.NoError(t, early.Commit(ctx))
	evs = f.readAll(events.Filter{}, events.ID{})
	require.Len(t, evs, 2, "the rolled back enqueue left no event")
	require.Equal(t, first.ID, *evs[0].EffectID)
	require.Equal(t, second.ID, *evs[1].EffectID)
	require.True(t, evs[0].ID.Less(evs[1].ID))
	for _, ev := range evs {
		require.Equal(t, "tool.authorized", ev.Type)
		require.Equal(t, "acme", ev.Tenant)
	}
}

// Patterns and tenants select events; the position moves past events that did not match, so a
// selective reader does not scan them again.
func TestFilter(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	for _, tenant := range []string{"acme", "globex"} {
		_, err := f.client.StartRun(ctx, effects.RunSpec{TenantID: tenant, ID: "run-" + tenant})
		require.NoError(t, err)
		_, err = f.client.Enqueue(ctx, effects.Spec{TenantID: tenant, Connector: "mail.send", IdempotencyKey: "k", RunID: "run-" + tenant}, nil)
		require.NoError(t, err)
	}
	types := func(evs []events.Event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev.Tenant+":"+ev.Type)
		}
		return out
	}
	require.Equal(t, []string{"acme:run.created", "acme:tool.authorized", "globex:run.created", "globex:tool.authorized"},
		types(f.readAll(events.Filter{Patterns: []string{"*"}}, events.ID{})))
	require.Equal(t, []string{"acme:run.created", "globex:run.created"},
		types(f.readAll(events.Filter{Patterns: []string{"run.*"}}, events.ID{})))
	require.Equal(t, []string{"globex:tool.authorized"},
		types(f.readAll(events.Filter{Patterns: []string{"tool.authorized", "effect.stuck"}, Tenant: "globex"}, events.ID{})))

	evs, next, _, err := f.log.Read(ctx, events.Filter{Patterns: []string{"saga.*"}}, events.ID{}, 100)
	require.NoError(t, err)
	require.Empty(t, evs)
	head, err := f.log.Head(ctx)
	require.NoError(t, err)
	require.Equal(t, head, next, "nothing matched: the position moves to the last event read past")

	for _, bad := range []string{"", "turn", "Turn.started", "turn.*.x", "turn.sta rted", "*.started", "turn.\x00", "\xff.x"} {
		_, _, _, err := f.log.Read(ctx, events.Filter{Patterns: []string{bad}}, events.ID{}, 10)
		var pe *events.PatternError
		require.ErrorAs(t, err, &pe, "pattern %q", bad)
	}
	for pattern, typ := range map[string]string{"*": "turn.started", "turn.*": "turn.started", "turn.started": "turn.started"} {
		require.True(t, events.Match(pattern, typ))
	}
	require.False(t, events.Match("turn.*", "tool.executed"))
	require.False(t, events.Match("turn.started", "turn.completed"))
}

func TestParseID(t *testing.T) {
	for _, id := range []events.ID{{}, {XID: 1, Seq: 2}, {XID: 1 << 40, Seq: 1 << 50}} {
		parsed, err := events.ParseID(id.String())
		require.NoError(t, err)
		require.Equal(t, id, parsed)
	}
	zero, err := events.ParseID("0")
	require.NoError(t, err)
	require.True(t, zero.IsZero())
	for _, bad := range []string{"", "1", "1-", "-1", "a-b", "1--2", "18446744073709551615-1", "1-2-3", "1-\x00"} {
		_, err := events.ParseID(bad)
		require.Error(t, err, bad)
	}
}

// A position older than what retention dropped fails with ErrExpired instead of skipping events.
func TestReadAfterDroppedPosition(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `INSERT INTO reckon_events_dropped (xid, seq) VALUES ('1000'::xid8, 5)`)
	require.NoError(t, err)
	_, _, _, err = f.log.Read(ctx, events.Filter{}, events.ID{XID: 999, Seq: 9}, 10)
	require.ErrorIs(t, err, events.ErrExpired)
	_, _, _, err = f.log.Read(ctx, events.Filter{}, events.ID{XID: 1000, Seq: 5}, 10)
	require.NoError(t, err)
	_, _, _, err = f.log.Read(ctx, events.Filter{}, events.ID{}, 10)
	require.NoError(t, err, "the zero position reads from the oldest event kept")
}

// Four writers commit concurrently — overlapping transactions, a quarter rolled back — while a
// subscriber is killed (its context cancelled) at random points and resumed after the last event
// it handled. It sees every committed effect's event exactly once, in increasing positions, and
// no event of a rolled back transaction; what it saw matches the audit trail.
func TestSubscriberKilledAndResumedMissesNothing(t *testing.T) {
	f := setup(t)
	ctx := context.Background()

	const writers, perWriter = 4, 60
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed, rolledBack := map[uuid.UUID]bool{}, map[uuid.UUID]bool{}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range perWriter {
				tx, err := f.pool.Begin(ctx)
				if !assertNoError(t, err) {
					return
				}
				var ids []uuid.UUID
				for j := range 1 + rng.IntN(3) {
					e, err := f.client.EnqueueTx(ctx, tx, effects.Spec{
						TenantID: "acme", Connector: "mail.send", IdempotencyKey: fmt.Sprintf("w%d-%d-%d", w, i, j),
					}, nil)
					if !assertNoError(t, err) {
						_ = tx.Rollback(ctx)
						return
					}
					ids = append(ids, e.ID)
					time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond) // transactions overlap
				}
				rollback := rng.IntN(4) == 0
				if rollback {
					err = tx.Rollback(ctx)
				} else {
					err = tx.Commit(ctx)
				}
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				for _, id := range ids {
					if rollback {
						rolledBack[id] = true
					} else {
						committed[id] = true
					}
				}
				mu.Unlock()
			}
		}()
	}
	writing := make(chan struct{})
	go func() { wg.Wait(); close(writing) }()

	var (
		seen    []events.Event
		last    events.ID
		kills   int
		rng     = rand.New(rand.NewPCG(42, 42))
		drained = false
	)
	for !drained {
		done := false
		select {
		case <-writing:
			done = true
		default:
		}
		// One life of the subscriber: it handles a random number of events, then is killed.
		life, kill := context.WithTimeout(ctx, 3*time.Second)
		budget := 1 + rng.IntN(15)
		for ev, err := range f.log.Subscribe(life, events.Filter{Patterns: []string{"tool.*"}}, last) {
			require.NoError(t, err)
			require.True(t, last.Less(ev.ID), "positions increase across resumes: %v after %v", ev.ID, last)
			seen, last = append(seen, ev), ev.ID
			// Killed mid-stream at least four times, however soon the writers finish (a loaded
			// machine's subscriber can spend its first life waiting for them).
			if budget--; budget == 0 && (!done || kills < 4) {
				break
			}
		}
		kill()
		kills++
		if done {
			// The writers have finished: read to the end once more, then stop.
			head, err := f.log.Head(ctx)
			require.NoError(t, err)
			drained = !last.Less(head)
		}
	}
	t.Logf("%d events seen over %d lives of the subscriber; %d effects committed, %d rolled back",
		len(seen), kills, len(committed), len(rolledBack))
	require.Greater(t, kills, 3, "the subscriber was killed and resumed several times")
	require.NotEmpty(t, rolledBack)

	got := map[uuid.UUID]int{}
	for _, ev := range seen {
		require.Equal(t, "tool.authorized", ev.Type)
		got[*ev.EffectID]++
		require.False(t, rolledBack[*ev.EffectID], "an event of a rolled back transaction")
	}
	require.Len(t, got, len(committed))
	for id := range committed {
		require.Equal(t, 1, got[id], "effect %s", id)
	}
	// The audit trail agrees: one insert transition per effect the subscriber saw, none else.
	var audited int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM reckon_effect_transitions WHERE from_state IS NULL`).Scan(&audited))
	require.Equal(t, len(seen), audited)
}

// The event a state change writes is in the same transaction as the change: each transition of an
// effect's history has its event, in the same order.
func TestEffectLifecycleEvents(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	require.NoError(t, f.client.Start(ctx))
	e, err := f.client.Enqueue(ctx, effects.Spec{TenantID: "acme", Connector: "mail.send", IdempotencyKey: "one"}, nil)
	require.NoError(t, err)
	settled, err := f.client.Wait(ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, settled.State)

	var types []string
	for _, ev := range f.readAll(events.Filter{}, events.ID{}) {
		if ev.EffectID != nil && *ev.EffectID == e.ID {
			types = append(types, ev.Type)
		}
	}
	require.Equal(t, []string{"tool.authorized", "effect.dispatched", "tool.executed"}, types)
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Error(err)
		return false
	}
	return true
}
