package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
)

// TestReactorAsyncTimeout: RECKON_ASYNC_TIMEOUT (the env of -async-timeout) is how long an
// accepted effect awaits its callback when neither it nor its connector says: 400ms here, not the
// default 10 minutes, after which the effect is UNKNOWN. A connector's own async_timeout_ms still
// wins over it.
func TestReactorAsyncTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/status" {
			_, _ = io.WriteString(w, `{"status":"inconclusive"}`) // the job still runs
			return
		}
		w.WriteHeader(http.StatusAccepted) // the outcome comes later, by callback
	}))
	t.Cleanup(upstream.Close)
	def := httpconn.Definition{
		Name: "jobs.run", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		DispatchURL: upstream.URL + "/dispatch", StatusURL: upstream.URL + "/status", Timeout: 2 * time.Second,
	}
	f.put(def)
	def.Name, def.AsyncTimeout = "jobs.own", time.Hour
	f.put(def)
	reactorTimeout := f.enqueue("jobs.run", "reactor-timeout", 1)
	connectorTimeout := f.enqueue("jobs.own", "connector-timeout", 1)

	f.env = append(f.env, "RECKON_ASYNC_TIMEOUT=400ms")
	reactor := f.startReactor()
	require.InDelta(t, 0.4, f.awaitSeconds(reactorTimeout.ID), 0.5, "the reactor's -async-timeout")
	require.InDelta(t, time.Hour.Seconds(), f.awaitSeconds(connectorTimeout.ID), 1, "the connector's async_timeout_ms")
	require.Eventually(t, func() bool {
		e, err := f.client.Get(context.Background(), reactorTimeout.ID)
		require.NoError(t, err)
		return e.State == effects.StateUnknown
	}, 20*time.Second, 20*time.Millisecond, "the deadline passed: outcome unknown")
	e, err := f.client.Get(context.Background(), connectorTimeout.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, e.State, "still awaiting its callback")

	reactor.Stop(t)
}

// awaitSeconds waits until the effect was accepted upstream and returns how long it awaits its
// callback, in seconds: the deadline recorded with the acceptance minus the acceptance's time.
func (f *fixture) awaitSeconds(id uuid.UUID) float64 {
	f.t.Helper()
	var seconds float64
	require.Eventually(f.t, func() bool {
		err := f.pool.QueryRow(context.Background(), `
			SELECT extract(epoch FROM (detail->>'deadline_at')::timestamptz - at)::float8
			FROM reckon_effect_transitions
			WHERE effect_id = $1 AND reason = 'accepted upstream: awaiting callback'
			ORDER BY id LIMIT 1`, id).Scan(&seconds)
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "effect %s never accepted", id)
	return seconds
}
