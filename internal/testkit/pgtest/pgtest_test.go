package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

// requireIsolated gives 6 parallel subtests a database each from srv and checks that each sees
// only its own writes, on a migrated schema.
func requireIsolated(t *testing.T, srv *server) {
	var (
		mu    sync.Mutex
		names = map[string]bool{}
	)
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := srv.newDB(t, true)

			var name string
			require.NoError(t, pool.QueryRow(ctx, `SELECT current_database()`).Scan(&name))
			mu.Lock()
			require.False(t, names[name], "database %s handed out twice", name)
			names[name] = true
			mu.Unlock()

			// Migrated: both Reckon's and River's tables exist, and start empty.
			var effects, jobs int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_effects`).Scan(&effects))
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs))
			require.Zero(t, effects)
			require.Zero(t, jobs)

			_, err := pool.Exec(ctx, `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, transition_actor, transition_reason)
				VALUES (gen_random_uuid(), $1, 'c', 'k', 'pure', 'pgtest', 'isolation')`, name)
			require.NoError(t, err)
			time.Sleep(50 * time.Millisecond) // let the siblings write too
			var tenants []string
			rows, err := pool.Query(ctx, `SELECT tenant_id FROM reckon_effects`)
			require.NoError(t, err)
			tenants, err = pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.Equal(t, []string{name}, tenants)
		})
	}
}

func TestIsolationDefaultServer(t *testing.T) {
	srv := mustServer(t)
	t.Logf("mode %s", srv.Mode)
	requireIsolated(t, srv)
}

// TestIsolationURLMode runs URL mode against TEST_DATABASE_URL, or, in container mode, against the
// container's own URL: the URL path is exercised whatever this machine has.
func TestIsolationURLMode(t *testing.T) {
	conn := defaultFinder.url()
	if conn == "" {
		conn = mustServer(t).AdminURL
	}
	srv, err := newURLServer(conn)
	require.NoError(t, err)
	require.Equal(t, ModeURL, srv.Mode)
	requireIsolated(t, srv)
}

// TestIsolationContainerMode uses the binary's container, or starts one when the default server
// is a URL. Without Docker it is skipped unless RECKON_REQUIRE_CONTAINER=1.
func TestIsolationContainerMode(t *testing.T) {
	srv, err := defaultSrv()
	if err != nil || srv.Mode != ModeContainer {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		image := os.Getenv("RECKON_TEST_PG_IMAGE")
		if image == "" {
			image = DefaultImage
		}
		srv, err = startContainer(ctx, image)
		if err != nil {
			if os.Getenv("RECKON_REQUIRE_CONTAINER") == "1" {
				t.Fatalf("container required: %v", err)
			}
			t.Skipf("no container engine: %v", err)
		}
		t.Cleanup(srv.close)
	}
	require.Equal(t, ModeContainer, srv.Mode)
	requireIsolated(t, srv)
}

// TestContainerRequired proves, when CI asks for it, that the default server really is a
// container this binary started: Docker reports it running, and the connection string reaches it
// on the port Docker mapped to its 5432.
func TestContainerRequired(t *testing.T) {
	if os.Getenv("RECKON_REQUIRE_CONTAINER") != "1" {
		t.Skip("RECKON_REQUIRE_CONTAINER is not 1")
	}
	info, err := Server()
	require.NoError(t, err)
	require.Equal(t, ModeContainer, info.Mode, "TEST_DATABASE_URL must be unset when a container is required")
	require.NotNil(t, info.Container)

	ctx := context.Background()
	state, err := info.Container.State(ctx)
	require.NoError(t, err)
	require.True(t, state.Running, "container %s is not running", info.Container.GetContainerID())

	mapped, err := info.Container.MappedPort(ctx, "5432/tcp")
	require.NoError(t, err)
	config, err := pgx.ParseConfig(info.AdminURL)
	require.NoError(t, err)
	require.Equal(t, mapped.Port(), fmt.Sprint(config.Port))

	conn, err := pgx.Connect(ctx, info.AdminURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var serverPort int
	var dataDir string
	require.NoError(t, conn.QueryRow(ctx, `SELECT inet_server_port(), current_setting('data_directory')`).Scan(&serverPort, &dataDir))
	require.Equal(t, 5432, serverPort, "inside the container postgres listens on 5432")
	require.Equal(t, "/var/lib/postgresql/data", dataDir, "the container's data directory")
}

// TestFind: where the databases come from, for each environment. A Docker engine that answers but
// cannot pull the image is a container that does not start: the local Postgres stands in, loudly,
// unless a container is required.
func TestFind(t *testing.T) {
	t.Parallel()
	errPull := errors.New("pull postgres:15-alpine: no route to registry")
	errRefused := errors.New("connection refused")
	container := &server{Info: Info{Mode: ModeContainer, AdminURL: "postgres://ctr"}}
	for _, tc := range []struct {
		name         string
		env          map[string]string
		containerErr error
		localErr     error
		wantMode     Mode
		wantURL      string
		wantErr      []string // substrings of the error
		wantWarning  bool
		wantStarted  bool
	}{
		{name: "TEST_DATABASE_URL", env: map[string]string{"TEST_DATABASE_URL": "postgres://u@h/db"},
			wantMode: ModeURL, wantURL: "postgres://u@h/db"},
		{name: "RECKON_TEST_DATABASE_URL first", env: map[string]string{"RECKON_TEST_DATABASE_URL": "postgres://r@h/db", "TEST_DATABASE_URL": "postgres://u@h/db"},
			wantMode: ModeURL, wantURL: "postgres://r@h/db"},
		{name: "container", wantMode: ModeContainer, wantURL: "postgres://ctr", wantStarted: true},
		{name: "no container: local", containerErr: errPull, wantMode: ModeLocal, wantURL: LocalURL, wantWarning: true, wantStarted: true},
		{name: "no container in CI: local", env: map[string]string{"CI": "true"}, containerErr: errPull,
			wantMode: ModeLocal, wantURL: LocalURL, wantWarning: true, wantStarted: true},
		{name: "container required", env: map[string]string{"CI": "true", "RECKON_REQUIRE_CONTAINER": "1"}, containerErr: errPull,
			wantErr: []string{"RECKON_REQUIRE_CONTAINER=1", "no route to registry"}, wantStarted: true},
		{name: "neither", containerErr: errPull, localErr: errRefused,
			wantErr: []string{"no route to registry", "no local Postgres at " + LocalURL, "connection refused"}, wantStarted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var warn bytes.Buffer
			started, probed := false, false
			f := finder{
				getenv: func(name string) string { return tc.env[name] },
				startContainer: func(_ context.Context, image string) (*server, error) {
					started = true
					require.Equal(t, DefaultImage, image)
					if tc.containerErr != nil {
						return nil, tc.containerErr
					}
					return container, nil
				},
				reachable: func(_ context.Context, conn string) error {
					probed = true
					require.Equal(t, LocalURL, conn)
					return tc.localErr
				},
				warn: &warn,
			}
			srv, err := f.find(context.Background())
			require.Equal(t, tc.wantStarted, started, "container started")
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, want := range tc.wantErr {
					require.Contains(t, err.Error(), want)
				}
				require.Empty(t, warn.String())
				require.Equal(t, tc.env["RECKON_REQUIRE_CONTAINER"] != "1", probed, "the local Postgres is tried only when a container is not required")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantMode, srv.Mode)
			require.Equal(t, tc.wantURL, srv.AdminURL)
			if tc.wantWarning {
				require.Contains(t, warn.String(), "FALLING BACK to the local Postgres at "+LocalURL)
				require.Contains(t, warn.String(), "no route to registry", "the warning says why")
			} else {
				require.Empty(t, warn.String())
			}
		})
	}
}

// TestPrimaryNeverFallsBack: the strict mode's server (CreateDB(true), package reckontest) is a
// URL's or a container; without either it says why and never probes the local Postgres.
func TestPrimaryNeverFallsBack(t *testing.T) {
	t.Parallel()
	f := finder{
		getenv: func(string) string { return "" },
		startContainer: func(context.Context, string) (*server, error) {
			return nil, errors.New("no Docker engine")
		},
		reachable: func(context.Context, string) error {
			t.Error("the local Postgres was probed")
			return nil
		},
		warn: io.Discard,
	}
	_, err := f.primary(context.Background())
	require.ErrorContains(t, err, "no URL in RECKON_TEST_DATABASE_URL or TEST_DATABASE_URL, and no Docker engine")
}

// TestSkipWithoutDatabase: without a server a database test fails, unless RECKON_TEST_SKIP_DB=1
// asks to skip it; in CI it always fails.
func TestSkipWithoutDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		skip bool
	}{
		{nil, false},
		{map[string]string{"RECKON_TEST_SKIP_DB": "1"}, true},
		{map[string]string{"RECKON_TEST_SKIP_DB": "1", "CI": "true"}, false},
		{map[string]string{"CI": "true"}, false},
		{map[string]string{"RECKON_TEST_SKIP_DB": "true"}, false},
	} {
		require.Equal(t, tc.skip, skipWithoutDatabase(func(name string) string { return tc.env[name] }), "%v", tc.env)
	}
}
