package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// databaseUnavailable is given the errors pgx really returns: a refused connection, a backend
// ended by an administrator and the connection it leaves closed are unavailability; a missing
// database, a violated constraint, a syntax error, a cancelled request and any other error are not.
func TestDatabaseUnavailableClassifiesRealErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	config := pool.Config().ConnConfig

	// A port nothing listens on.
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedPort := listener.Addr().(*net.TCPAddr).Port
	require.NoError(t, listener.Close())
	_, refused := pgconn.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", closedPort))
	require.Error(t, refused)

	// A backend terminated by pg_terminate_backend in the middle of a query (57P01), then used again.
	victim, err := pgx.ConnectConfig(ctx, config.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = victim.Close(ctx) })
	pid := victim.PgConn().PID()
	sleeping := make(chan error, 1)
	go func() {
		_, err := victim.Exec(ctx, `SELECT pg_sleep(30)`)
		sleeping <- err
	}()
	require.Eventually(t, func() bool {
		var active bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'`, pid).Scan(&active))
		return active
	}, 10*time.Second, 5*time.Millisecond)
	_, err = pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
	var terminated error
	select {
	case terminated = <-sleeping:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminated backend's query did not end")
	}
	var pgErr *pgconn.PgError
	require.ErrorAs(t, terminated, &pgErr)
	require.Equal(t, "57P01", pgErr.Code)
	_, closedConn := victim.Exec(ctx, `SELECT 1`)
	require.Error(t, closedConn)

	// A database that does not exist: the connection attempt fails with the server's 3D000.
	missing := config.Copy()
	missing.Database = "reckon_no_such_database"
	_, noDatabase := pgx.ConnectConfig(ctx, missing)
	require.ErrorAs(t, noDatabase, &pgErr)
	require.Equal(t, "3D000", pgErr.Code)

	_, violation := pool.Exec(ctx, `DO $$ BEGIN RAISE unique_violation; END $$`)
	require.Error(t, violation)
	_, syntax := pool.Exec(ctx, `SELEC 1`)
	require.Error(t, syntax)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, canceledErr := pool.Exec(cancelled, `SELECT 1`)
	require.Error(t, canceledErr)

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"refused, wrapped by a handler", fmt.Errorf("begin: %w", refused), true},
		{"backend terminated (57P01)", terminated, true},
		{"connection closed after termination", closedConn, true},
		{"crash shutdown (57P02)", &pgconn.PgError{Code: "57P02"}, true},
		{"starting up or shutting down (57P03)", &pgconn.PgError{Code: "57P03"}, true},
		{"too many connections (53300)", &pgconn.PgError{Code: "53300"}, true},
		{"connection failure (08006)", &pgconn.PgError{Code: "08006"}, true},
		{"database does not exist (3D000)", noDatabase, false},
		{"protocol violation (08P01)", &pgconn.PgError{Code: "08P01"}, false},
		{"unique violation", violation, false},
		{"syntax error", syntax, false},
		{"request cancelled", canceledErr, false},
		{"no rows", pgx.ErrNoRows, false},
		{"other", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, databaseUnavailable(tc.err), "%v", tc.err)
		})
	}
}

// A transaction that Postgres aborted for concurrent work every time txn.Run ran it — a deadlock,
// a migration's lock past lock_timeout, a serialization failure — is answered 503 unavailable with
// Retry-After (nothing was written: the client retries), never 500.
func TestTransientAbortIsUnavailable(t *testing.T) {
	t.Parallel()
	s := &Server{logger: slog.New(slog.DiscardHandler)}
	for _, code := range []string{"40P01", "55P03", "40001"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/effects", nil)
		s.writeError(rec, req, fmt.Errorf("enqueue: %w", &pgconn.PgError{Code: code, Message: "aborted"}))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code, code)
		require.Equal(t, "1", rec.Header().Get("Retry-After"), code)
		require.Contains(t, rec.Body.String(), `"code":"unavailable"`, code)
	}
	rec := httptest.NewRecorder()
	s.writeError(rec, httptest.NewRequest(http.MethodPost, "/v1/effects", nil), &pgconn.PgError{Code: "XX000"})
	require.Equal(t, http.StatusInternalServerError, rec.Code, "an internal error stays one")
}
