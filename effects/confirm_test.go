package effects_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// wireHeld registers "bank.held": the bank's wire connector, every effect of which awaits a
// confirmation, with a prompt over its args.
func (h *harness) wireHeld() {
	h.t.Helper()
	c := fakebank.ConnectorOptions{Name: "bank.held", BaseURL: h.bank.URL(), StatusCheck: true}.Connector()
	c.RequiresConfirmation = true
	c.ConfirmationPrompt = "Wire ${amount} from {account}?"
	require.NoError(h.t, h.registry.Register(c))
}

// setupHeld is a harness with the bank's wire connector and "bank.held", and a started reactor.
func setupHeld(t *testing.T) *harness {
	t.Helper()
	h := setupWired(t)
	h.wireHeld()
	h.start()
	return h
}

// requireNeverSent checks, once a later effect has been dispatched (so the reactor has had its
// chance), that the held effect is still PENDING awaiting its confirmation, without a job, and
// that the bank never saw it.
func (h *harness) requireNeverSent(held *effects.Effect) {
	h.t.Helper()
	later := h.wait(h.enqueue("bank.wire", "later-"+uuid.NewString(), 1).ID)
	require.Equal(h.t, effects.StateConfirmed, later.State)
	got, err := h.client.Get(context.Background(), held.ID)
	require.NoError(h.t, err)
	require.Equal(h.t, effects.StatePending, got.State)
	require.Equal(h.t, effects.ConfirmationAwaiting, got.Confirmation)
	require.Equal(h.t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE id = $1 AND job_id IS NULL AND attempts = 0`, held.ID))
	require.Equal(h.t, 0, h.bank.Count(held.IdempotencyKey), "never sent")
}

// A held effect is recorded with its prompt and never dispatched — the database refuses it a job —
// until it is confirmed; then it is dispatched as any other, and the confirmation is in its audit
// trail with who and why.
func TestConfirmationHoldThenConfirm(t *testing.T) {
	t.Parallel()
	h := setupHeld(t)
	ctx := context.Background()

	held := h.enqueue("bank.held", "held-1", 250)
	require.Equal(t, effects.ConfirmationAwaiting, held.Confirmation)
	require.Equal(t, "Wire $250 from acct-1?", held.ConfirmationPrompt)
	require.Nil(t, held.ConfirmationExpiresAt)
	h.requireNeverSent(held)

	_, err := h.pool.Exec(ctx, `UPDATE reckon_effects SET job_id = 1 WHERE id = $1`, held.ID)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%v", err)
	require.Equal(t, "reckon_effects_hold_check", pgErr.ConstraintName, "the hold is the database's")

	confirmed, err := h.client.Confirm(ctx, held.ID, "alice", "customer called back", nil)
	require.NoError(t, err)
	require.Equal(t, effects.ConfirmationConfirmed, confirmed.Confirmation)
	require.Equal(t, "alice", confirmed.ConfirmationBy)
	require.Equal(t, effects.StateConfirmed, h.wait(held.ID).State)
	require.Equal(t, 1, h.bank.Count("held-1"))
	history, err := h.client.History(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, "alice", history[1].Actor)
	require.Equal(t, "confirmed: customer called back", history[1].Reason)

	_, err = h.client.Confirm(ctx, held.ID, "alice", "again", nil)
	require.ErrorIs(t, err, effects.ErrNotAwaitingConfirmation)
	_, err = h.client.Decline(ctx, held.ID, "alice", "too late", nil)
	require.ErrorIs(t, err, effects.ErrNotAwaitingConfirmation)
}

// A declined effect is FAILED with the reason, by its decider, and never sent.
func TestConfirmationDecline(t *testing.T) {
	t.Parallel()
	h := setupHeld(t)
	ctx := context.Background()

	held := h.enqueue("bank.held", "held-2", 10)
	declined, err := h.client.Decline(ctx, held.ID, "bob", "not authorised", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, declined.State)
	require.Equal(t, "declined: not authorised", declined.Error)
	require.Equal(t, []string{">PENDING", "PENDING>FAILED"}, h.path(held.ID))
	got, err := h.client.Get(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, effects.ConfirmationDeclined, got.Confirmation)
	require.Equal(t, "bob", got.ConfirmationBy)
	_, err = h.client.Confirm(ctx, held.ID, "carol", "changed my mind", nil)
	require.ErrorIs(t, err, effects.ErrNotAwaitingConfirmation)
	h.wait(h.enqueue("bank.wire", "after", 1).ID)
	require.Equal(t, 0, h.bank.Count("held-2"))
}

// Under FourEyes the actor that enqueued a held effect may not confirm it, through any client (the
// rule is kept with the effect); another actor may.
func TestConfirmationFourEyes(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *effects.Config) { c.FourEyes = true })
	h.wireHeld()
	ctx := context.Background()
	held, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.held", IdempotencyKey: "held-3",
		Args: map[string]any{"account": "acct-1", "amount": 5}}, &effects.EnqueueOpts{Actor: "bob"})
	require.NoError(t, err)
	_, err = h.client.Confirm(ctx, held.ID, "bob", "mine", nil)
	require.ErrorIs(t, err, effects.ErrFourEyes)
	elsewhere := testkit.NewClient(t, h.pool, testkit.FastConfig(h.registry)) // FourEyes off
	_, err = elsewhere.Confirm(ctx, held.ID, "bob", "mine, from elsewhere", nil)
	require.ErrorIs(t, err, effects.ErrFourEyes)
	confirmed, err := h.client.Confirm(ctx, held.ID, "carol", "checked", nil)
	require.NoError(t, err)
	require.Equal(t, effects.ConfirmationConfirmed, confirmed.Confirmation)
}

// Holds asked per spec, and for every irreversible connector by configuration, in a batch: the
// held effects get no job, the others are dispatched; a prompt naming an arg the effect lacks
// refuses the enqueue and records nothing.
func TestConfirmationHoldsInABatch(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *effects.Config) { c.RequireIrreversibleConfirmation = true; c.ConfirmationTTL = time.Hour })
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, Name: "bank.idem"})
	require.NoError(t, h.registry.Register(fakebank.ConnectorOptions{Name: "bank.irreversible", BaseURL: h.bank.URL(), StatusCheck: true}.Connector()))
	h.start()
	spec := func(connector, key string, hold bool) effects.Spec {
		return effects.Spec{Connector: connector, IdempotencyKey: key, RequireConfirmation: hold,
			Args: map[string]any{"account": "acct-1", "amount": 3}}
	}
	batch := h.enqueueSpecs([]effects.Spec{
		spec("bank.idem", "b-free", false), spec("bank.idem", "b-asked", true), spec("bank.irreversible", "b-irreversible", false),
	})
	require.Equal(t, effects.StateConfirmed, h.wait(batch[0].ID).State)
	for _, e := range batch[1:] {
		require.Equal(t, effects.ConfirmationAwaiting, e.Confirmation, e.IdempotencyKey)
		require.NotNil(t, e.ConfirmationExpiresAt)
		require.WithinDuration(t, time.Now().Add(time.Hour), *e.ConfirmationExpiresAt, time.Minute)
	}
	require.Equal(t, "Confirm bank.irreversible?", batch[2].ConfirmationPrompt)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effects WHERE confirmation = 'AWAITING' AND job_id IS NULL`))
	for _, e := range batch[1:] {
		_, err := h.client.Confirm(context.Background(), e.ID, "ops", "ok", nil)
		require.NoError(t, err)
		require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State, e.IdempotencyKey)
	}

	c := fakebank.ConnectorOptions{Name: "bank.prompted", BaseURL: h.bank.URL(), StatusCheck: true}.Connector()
	c.RequiresConfirmation, c.ConfirmationPrompt = true, "Refund {order_id}?"
	require.NoError(t, h.registry.Register(c))
	_, err := h.client.Enqueue(context.Background(), spec("bank.prompted", "no-order", false), nil)
	require.ErrorContains(t, err, "the confirmation prompt names order_id, which the args lack")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects WHERE idempotency_key = 'no-order'`))
	_, err = h.client.Enqueue(context.Background(), spec("bank.prompted", "scheduled", false), &effects.EnqueueOpts{ScheduledAt: time.Now()})
	require.Error(t, err)
}

// An effect whose confirmation does not come before its ConfirmationTTL is FAILED by the sweeper,
// "confirmation expired", and never sent; a confirmation after that is refused.
func TestConfirmationExpiry(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wireHeld()
	ctx := context.Background()
	held, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.held", IdempotencyKey: "held-4", ConfirmationTTL: time.Second,
		Args: map[string]any{"account": "acct-1", "amount": 7}}, nil)
	require.NoError(t, err)
	require.NotNil(t, held.ConfirmationExpiresAt)
	h.start()
	expired := h.wait(held.ID)
	require.Equal(t, effects.StateFailed, expired.State)
	require.Equal(t, "confirmation expired", expired.Error)
	require.Equal(t, effects.ConfirmationExpired, expired.Confirmation)
	require.False(t, expired.UpdatedAt.Before(*held.ConfirmationExpiresAt), "not before its expiry")
	require.Equal(t, []string{">PENDING", "PENDING>FAILED"}, h.path(held.ID))
	_, err = h.client.Confirm(ctx, held.ID, "alice", "too late", nil)
	require.ErrorIs(t, err, effects.ErrNotAwaitingConfirmation)
	require.Equal(t, 0, h.bank.Count("held-4"))

	_, err = h.client.Enqueue(ctx, effects.Spec{Connector: "bank.held", IdempotencyKey: "held-5", ConfirmationTTL: time.Millisecond,
		Args: map[string]any{"account": "acct-1", "amount": 7}}, nil)
	require.ErrorContains(t, err, "ConfirmationTTL 1ms: want at least 1s and at most 720h0m0s")
}

// An operator's cancel of an effect awaiting its confirmation fails it and ends its hold as
// declined, by the operator, so that it is no longer listed as awaiting.
func TestCancelOfAHeldEffect(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wireHeld()
	ctx := context.Background()
	held := h.enqueue("bank.held", "held-6", 1)
	cancelled, err := h.client.Cancel(ctx, held.ID, "carol", "withdrawn", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, cancelled.State)
	got, err := h.client.Get(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, effects.ConfirmationDeclined, got.Confirmation)
	require.Equal(t, "operator:carol", got.ConfirmationBy)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects WHERE confirmation = 'AWAITING'`))
}

// The shared statistics count the effects awaiting their confirmation per connector, with the age
// of the oldest, and leave them out of the queue lag: they wait for a person, not for a reactor.
func TestConfirmationMetrics(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wireHeld()
	h.enqueue("bank.held", "held-7", 1)
	h.enqueue("bank.held", "held-8", 1)
	_, err := h.pool.Exec(context.Background(), `UPDATE reckon_effects SET created_at = created_at - interval '1 hour'`)
	require.NoError(t, err)
	h.start()
	require.Eventually(t, func() bool {
		return h.metric("reckon_effects_awaiting_confirmation", map[string]string{"connector": "bank.held"}) == 2
	}, 10*time.Second, 20*time.Millisecond)
	require.GreaterOrEqual(t, h.metric("reckon_effects_oldest_awaiting_confirmation_seconds", map[string]string{"connector": "bank.held"}), 3600.0)
	require.Zero(t, h.metric("reckon_effects_oldest_pending_seconds", map[string]string{"connector": "bank.held"}), "not queue lag")
}

// Do refuses an effect that must be confirmed first, and records nothing: an inline call cannot
// wait for a person.
func TestDoRefusesAHeldEffect(t *testing.T) {
	t.Parallel()
	h := setupHeld(t)
	_, err := h.client.Do(context.Background(), effects.Spec{Connector: "bank.held", IdempotencyKey: "inline-held",
		Args: map[string]any{"account": "acct-1", "amount": 1}})
	require.ErrorIs(t, err, effects.ErrConfirmationRequired)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects WHERE idempotency_key = 'inline-held'`))
	require.Equal(t, 0, h.bank.Count("inline-held"))
}

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
