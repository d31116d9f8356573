package health_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/internal/health"
	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSchemaGate: on an empty database the gate is closed — health, readiness and metrics pass,
// anything else is 503 schema_not_current naming the pending migrations — and it logs that once
// however often it checks; after the migrations it opens and logs that once.
func TestSchemaGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	migrator, err := db.NewMigrator(pool, &db.MigratorConfig{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	var logs bytes.Buffer
	gate := health.NewSchemaGate(migrator, slog.New(slog.NewTextHandler(&logs, nil)))

	mux := http.NewServeMux()
	health.Register(mux, pool, migrator, health.NewRegistry())
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	handler := gate.Guard(mux)
	serve := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}

	for range 3 {
		require.False(t, gate.Check(ctx))
	}
	require.Equal(t, 1, strings.Count(logs.String(), "the database schema is not current"), logs.String())
	select {
	case <-gate.Current():
		t.Fatal("Current is closed before the migrations")
	default:
	}
	require.Equal(t, http.StatusOK, serve("/healthz").Code)
	require.Equal(t, http.StatusOK, serve("/metrics").Code)
	ready := serve("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, ready.Code)
	require.Contains(t, ready.Body.String(), `"0001_effects"`)

	rec := serve("/v1/effects")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "5", rec.Header().Get("Retry-After"))
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Equal(t, health.CodeSchemaNotCurrent, body.Error.Code)
	require.Contains(t, body.Error.Message, "run `server migrate up`")
	require.Contains(t, body.Error.Message, "0001_effects")

	_, err = migrator.Up(ctx)
	require.NoError(t, err)
	require.True(t, gate.Check(ctx))
	require.True(t, gate.Check(ctx))
	<-gate.Current()
	require.Equal(t, http.StatusTeapot, serve("/v1/effects").Code)
	require.Equal(t, http.StatusOK, serve("/readyz").Code)
	require.Equal(t, 1, strings.Count(logs.String(), "the database schema is current"), logs.String())
}

func TestPendingMigrations(t *testing.T) {
	t.Parallel()
	status := &db.Status{RiverPending: 2, Pending: []db.Migration{{Version: 3, Name: "turns"}, {Version: 12, Name: "x"}}}
	require.Equal(t, []string{"river (2 versions)", "0003_turns", "0012_x"}, health.PendingMigrations(status))
	require.Empty(t, health.PendingMigrations(&db.Status{}))
}
