package httpconn_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestStore: Put inserts then replaces, with defaults applied; Get, List and Delete; missing
// connectors are ErrNotFound; an invalid definition stores nothing.
func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)

	def := definition("http://127.0.0.1:1")
	stored, created, err := httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 5, stored.MaxAttempts, "defaults are stored")
	require.Equal(t, time.Second, stored.BackoffInitial)
	require.False(t, stored.CreatedAt.IsZero())

	def.MaxAttempts, def.StatusURL = 9, ""
	def.BusinessKeyFields = []string{"account"}
	updated, created, err := httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, 9, updated.MaxAttempts)
	require.Empty(t, updated.StatusURL)
	require.Equal(t, stored.CreatedAt, updated.CreatedAt)
	require.False(t, updated.UpdatedAt.Before(stored.UpdatedAt))

	got, err := httpconn.Get(ctx, pool, "bank.wire")
	require.NoError(t, err)
	require.Equal(t, updated, got)
	require.Zero(t, got.AsyncTimeout, "no async timeout of its own: stored as NULL, the reactor's applies")

	// The async settings are stored, replaced and cleared like the others.
	def.AsyncTimeout, def.HardTimeout, def.CancelURL = 90*time.Second, true, "http://127.0.0.1:1/cancel"
	updated, _, err = httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, updated.AsyncTimeout)
	require.True(t, updated.HardTimeout)
	require.Equal(t, "http://127.0.0.1:1/cancel", updated.CancelURL)
	got, err = httpconn.Get(ctx, pool, "bank.wire")
	require.NoError(t, err)
	require.Equal(t, updated, got)
	def.AsyncTimeout, def.HardTimeout, def.CancelURL = 0, false, ""
	updated, _, err = httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	got, err = httpconn.Get(ctx, pool, "bank.wire")
	require.NoError(t, err)
	require.Equal(t, updated, got)
	require.Zero(t, got.AsyncTimeout)
	require.False(t, got.HardTimeout)
	require.Empty(t, got.CancelURL)
	var storedTimeout *int32
	require.NoError(t, pool.QueryRow(ctx, `SELECT async_timeout_ms FROM reckon_connectors WHERE name = 'bank.wire'`).Scan(&storedTimeout))
	require.Nil(t, storedTimeout)

	_, _, err = httpconn.Put(ctx, pool, httpconn.Definition{Name: "aaa.first", Tags: []effects.Tag{effects.TagRead}, DispatchURL: "http://127.0.0.1:1/r"})
	require.NoError(t, err)
	list, err := httpconn.List(ctx, pool)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "aaa.first", list[0].Name)
	require.Equal(t, got, list[1])

	_, _, err = httpconn.Put(ctx, pool, httpconn.Definition{Name: "bad", Tags: []effects.Tag{effects.TagWrite}, DispatchURL: "http://127.0.0.1:1/r"})
	require.ErrorIs(t, err, httpconn.ErrInvalid)
	_, err = httpconn.Get(ctx, pool, "bad")
	require.ErrorIs(t, err, httpconn.ErrNotFound)

	require.NoError(t, httpconn.Delete(ctx, pool, "aaa.first"))
	require.ErrorIs(t, httpconn.Delete(ctx, pool, "aaa.first"), httpconn.ErrNotFound)
	list, err = httpconn.List(ctx, pool)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

// TestPutInCallersTransaction: Put in a transaction that rolls back stores nothing.
func TestPutInCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	errRollback := errors.New("roll back")
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, _, err := httpconn.Put(ctx, tx, definition("http://127.0.0.1:1")); err != nil {
			return err
		}
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	_, err = httpconn.Get(ctx, pool, "bank.wire")
	require.ErrorIs(t, err, httpconn.ErrNotFound)
}

// TestDeleteInUse: a connector with PENDING effects cannot be deleted; once they settle it can.
func TestDeleteInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	_, _, err := httpconn.Put(ctx, pool, definition("http://127.0.0.1:1"))
	require.NoError(t, err)
	registry := effects.NewRegistry()
	var syncer httpconn.Syncer // the registry's, for its lifetime
	_, err = syncer.Sync(ctx, pool, registry)
	require.NoError(t, err)
	client, err := effects.NewClient(pool, &effects.Config{Registry: registry})
	require.NoError(t, err)
	effect, err := client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "k1", Args: map[string]any{"amount": 1}}, nil)
	require.NoError(t, err)

	err = httpconn.Delete(ctx, pool, "bank.wire")
	require.ErrorIs(t, err, httpconn.ErrInUse)
	require.ErrorContains(t, err, "1 PENDING or UNKNOWN")
	_, err = httpconn.Get(ctx, pool, "bank.wire")
	require.NoError(t, err, "still stored")

	_, err = client.Cancel(ctx, effect.ID, "test", "no longer wanted", nil)
	require.NoError(t, err)
	require.NoError(t, httpconn.Delete(ctx, pool, "bank.wire"))
}

// TestPutKeepsHoldAndLimit: a definition's confirmation hold and limit are stored and read back
// (the limit with its defaults filled in), survive a JSON round trip, and a definition without
// them reads back without; a limit out of range is refused before anything is stored.
func TestPutKeepsHoldAndLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	def := definition("http://127.0.0.1:1")
	def.RequiresConfirmation = true
	def.ConfirmationPrompt = "Wire {amount} to {account}?"
	def.Limit = effects.Limit{Rate: 20, MaxInFlight: 5, BreakAfter: 3}
	stored, _, err := httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	want := effects.Limit{Rate: 20, Per: time.Second, Burst: 20, MaxInFlight: 5, BreakAfter: 3, BreakFor: 30 * time.Second}
	require.Equal(t, want, stored.Limit)
	got, err := httpconn.Get(ctx, pool, def.Name)
	require.NoError(t, err)
	require.True(t, got.RequiresConfirmation)
	require.Equal(t, "Wire {amount} to {account}?", got.ConfirmationPrompt)
	require.Equal(t, want, got.Limit)
	connector := got.Connector(nil)
	require.True(t, connector.RequiresConfirmation)
	require.Equal(t, want, connector.Limit)

	doc, err := json.Marshal(got)
	require.NoError(t, err)
	require.Contains(t, string(doc), `"limit":{"rate":20,"per_ms":1000,"burst":20,"max_in_flight":5,"break_after":3,"break_for_ms":30000}`)
	var back httpconn.Definition
	require.NoError(t, json.Unmarshal(doc, &back))
	require.Equal(t, want, back.Limit)

	def.RequiresConfirmation, def.ConfirmationPrompt, def.Limit = false, "", effects.Limit{}
	_, _, err = httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	got, err = httpconn.Get(ctx, pool, def.Name)
	require.NoError(t, err)
	require.False(t, got.RequiresConfirmation)
	require.Empty(t, got.ConfirmationPrompt)
	require.Equal(t, effects.Limit{}, got.Limit)

	def.Limit = effects.Limit{Rate: -1}
	_, _, err = httpconn.Put(ctx, pool, def)
	require.ErrorIs(t, err, httpconn.ErrInvalid)
	require.ErrorContains(t, err, "Rate -1 out of range")
	for doc, field := range map[string]string{
		`{"name":"x","dispatch_url":"http://127.0.0.1:1","limit":{"rate":-1}}`:        "rate -1",
		`{"name":"x","dispatch_url":"http://127.0.0.1:1","limit":{"rat":1}}`:          "rat: unknown field",
		`{"name":"x","dispatch_url":"http://127.0.0.1:1","limit":{"per_ms":3600001}}`: "per_ms 3600001",
		`{"name":"x","dispatch_url":"http://127.0.0.1:1","limit":{"rate":"20"}}`:      "rate",
	} {
		var d httpconn.Definition
		err := json.Unmarshal([]byte(doc), &d)
		require.ErrorIs(t, err, httpconn.ErrInvalid, doc)
		require.ErrorContains(t, err, field, doc)
	}
}

// TestStoreDescribed: a description, an args schema and tenants are stored, read back, replaced
// and cleared; a schema that does not compile and a malformed tenant are refused, storing
// nothing. A synced registry's connector checks args against the schema and the tenant.
func TestStoreDescribed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)

	def := definition("http://127.0.0.1:1")
	def.Description = "Wire money."
	def.ArgsSchema = json.RawMessage(`{"type": "object", "required": ["account"]}`)
	def.Tenants = []string{"acme"}
	stored, _, err := httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	require.Equal(t, "Wire money.", stored.Description)
	require.JSONEq(t, `{"type":"object","required":["account"]}`, string(stored.ArgsSchema))
	require.Equal(t, []string{"acme"}, stored.Tenants)
	got, err := httpconn.Get(ctx, pool, def.Name)
	require.NoError(t, err)
	require.Equal(t, stored, got)

	registry := effects.NewRegistry()
	_, err = new(httpconn.Syncer).Sync(ctx, pool, registry)
	require.NoError(t, err)
	connector, ok := registry.Get(def.Name)
	require.True(t, ok)
	require.True(t, connector.AvailableTo("acme"))
	require.False(t, connector.AvailableTo("globex"))
	client, err := effects.NewClient(pool, &effects.Config{Registry: registry})
	require.NoError(t, err)
	_, err = client.Enqueue(ctx, effects.Spec{TenantID: "acme", Connector: def.Name, IdempotencyKey: "k", Args: map[string]any{}}, nil)
	require.ErrorIs(t, err, effects.ErrInvalidArgs)

	for _, bad := range []func(d *httpconn.Definition){
		func(d *httpconn.Definition) { d.ArgsSchema = json.RawMessage(`{"type":"object","minLength":"x"}`) },
		func(d *httpconn.Definition) { d.ArgsSchema = json.RawMessage(`{"type":"string"}`) },
		func(d *httpconn.Definition) { d.Tenants = []string{"a tenant"} },
	} {
		invalid := def
		invalid.Name = "bank.invalid"
		bad(&invalid)
		_, _, err := httpconn.Put(ctx, pool, invalid)
		require.ErrorIs(t, err, httpconn.ErrInvalid)
		_, err = httpconn.Get(ctx, pool, "bank.invalid")
		require.ErrorIs(t, err, httpconn.ErrNotFound, "nothing stored")
	}

	def.Description, def.ArgsSchema, def.Tenants = "", nil, nil
	cleared, _, err := httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	require.Empty(t, cleared.Description)
	require.Nil(t, cleared.ArgsSchema)
	require.Nil(t, cleared.Tenants)
}
