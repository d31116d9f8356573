package effects_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
)

// Listen shares the client's one listening connection: subscriptions on a channel the listener
// does not yet LISTEN on, made while it waits on another, are in place when Listen returns, wake
// on a notification naming their key (alone or in a comma-separated list) within 200ms, and take
// no connection of their own.
func TestListenSharesOneConnectionAcrossChannels(t *testing.T) {
	h := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	listen := func(channel, key string) *effects.Subscription {
		t.Helper()
		sub, err := h.client.Listen(ctx, channel, key)
		require.NoError(t, err)
		t.Cleanup(sub.Close)
		return sub
	}
	first := listen("app_orders", "o-1")
	// The listener now waits on app_orders; these make it LISTEN on two more channels.
	second := listen("app_invoices", "i-2")
	quoted := listen("App Events", "e-3")
	other := listen("app_invoices", "i-9")
	require.Equal(t, int32(1), h.pool.Stat().AcquiredConns(), "one connection listens for every subscription")

	notify := func(channel, payload string) time.Time {
		t.Helper()
		_, err := h.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
		require.NoError(t, err)
		return time.Now()
	}
	woken := func(sub <-chan struct{}, sent time.Time) {
		t.Helper()
		select {
		case <-sub:
			require.Less(t, time.Since(sent), 200*time.Millisecond)
		case <-time.After(time.Second):
			t.Fatal("not woken by its notification")
		}
	}
	quiet := func(sub <-chan struct{}) {
		t.Helper()
		select {
		case <-sub:
			t.Fatal("woken by a notification for another key")
		case <-time.After(100 * time.Millisecond):
		}
	}

	woken(second.C, notify("app_invoices", "i-1,i-2,i-3"))
	quiet(other.C)
	quiet(first.C)
	woken(first.C, notify("app_orders", "o-1"))
	woken(quoted.C, notify("App Events", "e-3"))
	quiet(second.C)

	// A closed subscription is not woken; Close twice is harmless.
	second.Close()
	second.Close()
	notify("app_invoices", "i-2")
	quiet(second.C)
}

// Listen gives up with ctx's error when the listener cannot be put in place.
func TestListenGivesUpWithContext(t *testing.T) {
	h := setup(t)
	h.pool.Close() // no connection can be taken
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := h.client.Listen(ctx, "app_orders", "o-1")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
