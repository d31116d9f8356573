package effects_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestHeldEffectAcrossKillAndRestart is the done-when test of confirmation holds: a held effect is
// never called — across a SIGKILL of the reactor and a restart of Postgres (its own container,
// stopped and started again; the port may change) — until it is confirmed, and then exactly once.
// Each reactor (a child process) first dispatches an effect that is not held, so it has had its
// chance at the held one; after the restart the new reactor is also given time (sweeps, claim
// polls, the in-flight margin) to do something wrong.
func TestHeldEffectAcrossKillAndRestart(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewRestartable(t)
	bank := fakebank.New(t)
	registry := effects.NewRegistry()
	// As the child reactor registers it (child_test.go), so that the enqueued policy is the same.
	registry.MustRegister(fakebank.ConnectorOptions{BaseURL: bank.URL(), StatusCheck: true, Compensate: true, Checkpoints: true}.Connector())
	ctx := context.Background()
	enqueue := func(client *effects.Client, key string, held bool) *effects.Effect {
		t.Helper()
		effect, err := client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: key, RequireConfirmation: held,
			Args: map[string]any{"account": "acct-1", "amount": 40}}, nil)
		require.NoError(t, err)
		return effect
	}
	startReactor := func() *proctest.Process {
		t.Helper()
		return testkit.StartChild(t, childReactorEnv+"=1", "DATABASE_URL="+pg.URL(), "BANK_URL="+bank.URL())
	}
	requireHeld := func(client *effects.Client, id uuid.UUID) {
		t.Helper()
		got, err := client.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, effects.StatePending, got.State)
		require.Equal(t, effects.ConfirmationAwaiting, got.Confirmation)
		require.Zero(t, got.Attempts)
		require.Zero(t, bank.Count("held"), "the held effect was never called")
	}

	// Before: a reactor, a held effect and one that is not.
	before, err := pgxpool.New(ctx, pg.URL())
	require.NoError(t, err)
	enqueuer, err := effects.NewClient(before, testkit.FastConfig(registry))
	require.NoError(t, err)
	first := startReactor()
	held := enqueue(enqueuer, "held", true)
	require.Equal(t, effects.ConfirmationAwaiting, held.Confirmation)
	require.Equal(t, effects.StateConfirmed, testkit.Wait(t, enqueuer, enqueue(enqueuer, "probe-1", false).ID, 30*time.Second).State)
	requireHeld(enqueuer, held.ID)

	first.Signal(t, syscall.SIGKILL)
	first.Wait(t, 10*time.Second)
	_ = enqueuer.Stop(ctx)
	before.Close()
	oldURL := pg.URL()
	pg.Stop()
	pg.Start()
	t.Logf("Postgres restarted: %s → %s", oldURL, pg.URL())

	// After: a new reactor on the restarted database.
	after, err := pgxpool.New(ctx, pg.URL())
	require.NoError(t, err)
	t.Cleanup(after.Close)
	client := testkit.NewClient(t, after, testkit.FastConfig(registry))
	requireHeld(client, held.ID)
	second := startReactor()
	require.Equal(t, effects.StateConfirmed, testkit.Wait(t, client, enqueue(client, "probe-2", false).ID, 30*time.Second).State)
	// Twice the child's in-flight margin (1s), many sweeps (100ms) and claim polls (50ms).
	require.Never(t, func() bool { return bank.Count("held") > 0 }, 3*time.Second, 50*time.Millisecond, "called before its confirmation")
	requireHeld(client, held.ID)
	require.Equal(t, 1, testkit.Count(t, after, `SELECT count(*) FROM reckon_effects WHERE id = $1 AND job_id IS NULL AND lease_token IS NULL`, held.ID))
	require.Equal(t, 2, bank.Calls("/wires"), "the probes only")
	require.Zero(t, bank.Calls("/wires/status"), "nothing was ever uncertain")

	_, err = client.Confirm(ctx, held.ID, "alice", "the customer called back", nil)
	require.NoError(t, err)
	done := testkit.Wait(t, client, held.ID, 30*time.Second)
	require.Equal(t, effects.StateConfirmed, done.State, second.Stderr())
	require.Equal(t, effects.ConfirmationConfirmed, done.Confirmation)
	require.Equal(t, 1, bank.Count("held"), "called exactly once")
	require.Equal(t, 3, bank.Calls("/wires"))
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, testkit.Path(t, client, held.ID))

	second.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, second.Wait(t, 15*time.Second), second.Stderr())
}
