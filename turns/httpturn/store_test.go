package httpturn_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/turns"
	"github.com/reckonhq/reckon/turns/httpturn"
)

// The store keeps one handler per existing tenant; bad input stores nothing.
func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	_, err := pool.Exec(ctx, `INSERT INTO reckon_tenants (id) VALUES ('acme')`)
	require.NoError(t, err)

	_, err = httpturn.Get(ctx, pool, "acme")
	require.ErrorIs(t, err, httpturn.ErrNotFound)
	stored, created, err := httpturn.Put(ctx, pool, "acme", httpturn.Target{URL: "http://127.0.0.1:9/turns"})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, httpturn.DefaultTimeout, stored.Target.Timeout)
	stored, created, err = httpturn.Put(ctx, pool, "acme", httpturn.Target{URL: "https://bot.example/turns", Timeout: 5 * time.Second})
	require.NoError(t, err)
	require.False(t, created)
	got, err := httpturn.Get(ctx, pool, "acme")
	require.NoError(t, err)
	require.Equal(t, "https://bot.example/turns", got.Target.URL)
	require.Equal(t, 5*time.Second, got.Target.Timeout)
	require.Equal(t, stored.UpdatedAt, got.UpdatedAt)

	for _, bad := range []httpturn.Target{{URL: "ftp://x"}, {URL: "bot.example"}, {URL: "http://"}, {URL: "http://x", Timeout: time.Hour},
		{URL: "http://x/" + strings.Repeat("a", 2048)}} {
		_, _, err := httpturn.Put(ctx, pool, "acme", bad)
		require.ErrorIs(t, err, httpturn.ErrInvalid, "%+v", bad)
	}
	_, _, err = httpturn.Put(ctx, pool, "nobody", httpturn.Target{URL: "http://x"})
	require.ErrorIs(t, err, httpturn.ErrUnknownTenant)
	got, err = httpturn.Get(ctx, pool, "acme")
	require.NoError(t, err)
	require.Equal(t, "https://bot.example/turns", got.Target.URL, "unchanged by refused puts")

	require.NoError(t, httpturn.Delete(ctx, pool, "acme"))
	require.ErrorIs(t, httpturn.Delete(ctx, pool, "acme"), httpturn.ErrNotFound)
}

// With StoreLookup, a tenant's turns go to its stored handler, others' to Config.URL; without
// either the tenant's turns wait.
func TestLookupRoutesTurnsPerTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own, shared := newEndpoint(t), newEndpoint(t)
	own.set(reply(200, `{"effects":[]}`))
	shared.set(reply(200, `{"effects":[]}`))
	pool := pgtest.NewDB(t)
	_, err := pool.Exec(ctx, `INSERT INTO reckon_tenants (id) VALUES ('acme'), ('globex')`)
	require.NoError(t, err)
	_, _, err = httpturn.Put(ctx, pool, "acme", httpturn.Target{URL: own.srv.URL})
	require.NoError(t, err)

	run := func(defaultURL, session string) error {
		registry := effects.NewRegistry()
		handler, err := httpturn.New(httpturn.Config{URL: defaultURL, Registry: registry, Lookup: httpturn.StoreLookup(pool)})
		require.NoError(t, err)
		tc, err := turns.NewClient(pool, &turns.Config{Handler: handler, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		ec, err := effects.NewClient(pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler), Plugins: []effects.Plugin{tc}})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, ec.Stop(context.Background())) })
		_, err = tc.Submit(ctx, turns.Inbound{SessionKey: session, MessageID: "m1"})
		require.NoError(t, err)
		_, err = tc.RunTurn(ctx, session)
		return err
	}
	require.NoError(t, run(shared.srv.URL, "acme:bot:u1:web"))
	require.Len(t, own.requests, 1, "acme's own handler")
	require.NoError(t, run(shared.srv.URL, "globex:bot:u1:web"))
	require.Len(t, shared.requests, 1, "globex has none: the default")
	err = run("", "globex:bot:u2:web")
	require.ErrorIs(t, err, turns.ErrNotReady)
	require.ErrorContains(t, err, "PUT /v1/turn-handlers/globex")
	require.NoError(t, run("", "acme:bot:u2:web"))
	require.Len(t, own.requests, 2)
}
