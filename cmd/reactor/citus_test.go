//go:build citus

// The reactor binary on a Citus cell: `make test-citus` (scripts/test-citus), after
// `eval "$(../shared/ci/citus-env)"`, which starts a coordinator and two workers on this machine
// and names them in RECKON_CITUS_URL and RECKON_CITUS_WORKERS. Without them these tests fail.

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

var citusCells atomic.Int32

// setupCitus is setup on a Citus cell of its own: `server migrate up -schema NAME -citus` on the
// coordinator RECKON_CITUS_URL names (the binary's own migration), dropped at the end.
func setupCitus(t *testing.T) (f *fixture, schema string) {
	t.Helper()
	coordinator := os.Getenv("RECKON_CITUS_URL")
	require.NotEmpty(t, coordinator, "RECKON_CITUS_URL is not set: eval \"$(../shared/ci/citus-env)\" starts a Citus cluster")
	schema = fmt.Sprintf("citus_reactor_%d_%d", os.Getpid(), citusCells.Add(1))
	env := []string{"DATABASE_URL=" + coordinator, "RECKON_SCHEMA=" + schema}
	res := proctest.Run(t, env, proctest.Binary(t, "server"), "migrate", "up", "-citus")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	ctx := context.Background()
	config, err := pgxpool.ParseConfig(coordinator)
	require.NoError(t, err)
	require.NoError(t, db.ConfigureSchema(config, schema))
	pool, err := pgxpool.NewWithConfig(ctx, config)
	require.NoError(t, err)
	t.Cleanup(func() {
		pool.Close()
		conn, err := pgx.Connect(context.Background(), coordinator)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+", "+
			pgx.Identifier{db.RiverSchema(schema)}.Sanitize()+" CASCADE")
		require.NoError(t, err)
	})
	f = &fixture{t: t, pool: pool, bank: fakebank.New(t), registry: effects.NewRegistry(), env: env}
	client, err := effects.NewClient(pool, &effects.Config{Registry: f.registry, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	f.client = client
	t.Cleanup(func() { _ = client.Stop(context.Background()) })
	return f, schema
}

// cellNode returns the worker (its URL, from RECKON_CITUS_WORKERS) that holds every shard of the
// cell, and the shard of table there: a cell's tables live together on one node.
func cellNode(t *testing.T, pool *pgxpool.Pool, schema, table string) (worker, shard string) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT DISTINCT s.nodeport FROM citus_shards s JOIN pg_class c ON c.oid = s.table_name
		WHERE c.relnamespace = to_regnamespace($1)`, schema)
	require.NoError(t, err)
	ports, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Len(t, ports, 1, "the cell's shards are on one node")
	for _, w := range strings.Fields(os.Getenv("RECKON_CITUS_WORKERS")) {
		u, err := url.Parse(w)
		require.NoError(t, err)
		if u.Port() == strconv.Itoa(ports[0]) {
			worker = w
		}
	}
	require.NotEmpty(t, worker, "the cell's node (port %d) is one of RECKON_CITUS_WORKERS", ports[0])
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT shard_name FROM citus_shards WHERE table_name = $1::regclass`,
		schema+"."+table).Scan(&shard))
	return worker, schema + "." + strings.TrimPrefix(shard, schema+".")
}

// TestCitusCellCrash runs 120 wires through reactor binaries on a Citus cell while they are
// SIGKILLed at random, and then the worker that holds the cell is restarted at once
// (pg_ctl restart -m immediate) while 40 more go through: every effect ends CONFIRMED, every wire
// is in the bank's ledger once (a duplicate reversed), the rows are in the cell's shards on that
// worker, and there the database still refuses an illegal transition.
func TestCitusCellCrash(t *testing.T) {
	f, schema := setupCitus(t)
	f.put(f.bankWire("bank.wire", 2*time.Second))
	for i := range 160 {
		switch key := fmt.Sprintf("w-%d", i); i % 5 {
		case 1:
			f.bank.Script(key, fakebank.PerformThenDrop)
		case 2:
			f.bank.Script(key, fakebank.PerformThenHang)
		case 3:
			f.bank.Script(key, fakebank.Unavailable)
		}
	}
	start := func() *proctest.Process { return f.startReactor("-in-flight-margin", "3s") }
	reactors := []*proctest.Process{start(), start()}
	var sent []*effects.Effect
	for i := range 120 {
		sent = append(sent, f.enqueue("bank.wire", fmt.Sprintf("w-%d", i), 10+i))
	}
	kills := proctest.KillRandomly(t, reactors, 15*time.Second, 500*time.Millisecond, 1500*time.Millisecond, start)

	worker, shard := cellNode(t, f.pool, schema, "reckon_effects")
	for i := 120; i < 160; i++ {
		sent = append(sent, f.enqueue("bank.wire", fmt.Sprintf("w-%d", i), 10+i))
	}
	restartWorker(t, worker)

	require.Eventually(t, func() bool {
		return testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE state NOT IN ('CONFIRMED', 'FAILED', 'STUCK')`) == 0
	}, 2*time.Minute, 200*time.Millisecond, "every effect settles: %v", unsettled(t, f.pool))
	for _, effect := range sent {
		settled := f.wait(effect)
		require.Equal(t, effects.StateConfirmed, settled.State, "%s: %s", effect.IdempotencyKey, f.path(effect))
		require.Equal(t, int64(10+keyNumber(t, effect.IdempotencyKey)), f.bank.Net(effect.IdempotencyKey),
			"%s: the ledger holds the wire once, net of reversals", effect.IdempotencyKey)
	}
	t.Logf("%d effects confirmed through %d SIGKILLs of reactors and a restart of worker %s", len(sent), kills, worker)

	conn, err := pgx.Connect(context.Background(), worker)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.Equal(t, len(sent), testkit.Count(t, conn, "SELECT count(*) FROM "+shard+" WHERE tenant_id = 'default' AND state = 'CONFIRMED'"),
		"the effects are rows of the cell's shard on its node")
	_, err = conn.Exec(context.Background(), "UPDATE "+shard+" SET state = 'PENDING', transition_actor = 'test', transition_reason = 'test' WHERE id = $1", sent[0].ID)
	require.ErrorContains(t, err, "illegal effect transition CONFIRMED -> PENDING", "the state machine holds on the shard")
	testkit.RequireNoRunningJobs(t, f.pool)
}

// TestCitusCellOrderedBatches enqueues wires in batches on a Citus cell — on each of four ordering
// keys one wire per batch, beside as many unordered — while reactor binaries dispatch them and are
// SIGKILLed at random: every wire ends CONFIRMED and in the bank's ledger once, net of reversals,
// and each key's wires reached the bank in the order they were enqueued. A batch with a key kept
// by a live tombstone is refused whole, as on one Postgres.
func TestCitusCellOrderedBatches(t *testing.T) {
	f, _ := setupCitus(t)
	f.put(f.bankWire("bank.wire", 2*time.Second))
	const keys, rounds = 4, 12
	wire := func(key, orderingKey string) effects.Spec {
		return effects.Spec{Connector: "bank.wire", IdempotencyKey: key, OrderingKey: orderingKey,
			Args: map[string]any{"account": "acc-1", "amount": 10}}
	}
	for r := range rounds {
		switch key := fmt.Sprintf("o-%d-%d", r%keys, r); r % 3 {
		case 0:
			f.bank.Script(key, fakebank.PerformThenDrop)
		case 1:
			f.bank.Script(key, fakebank.Unavailable)
		}
	}
	ctx := context.Background()
	enqueueRound := func(r int) error {
		specs := make([]effects.Spec, 0, 2*keys)
		for k := range keys {
			specs = append(specs, wire(fmt.Sprintf("o-%d-%d", k, r), fmt.Sprintf("key-%d", k)), wire(fmt.Sprintf("u-%d-%d", k, r), ""))
		}
		if r == 0 { // the single-row insert, one effect per transaction
			for _, spec := range specs {
				if _, err := f.client.Enqueue(ctx, spec, nil); err != nil {
					return err
				}
			}
			return nil
		}
		_, err := f.client.EnqueueMany(ctx, specs, nil)
		return err
	}
	for r := range rounds / 2 {
		require.NoError(t, enqueueRound(r))
	}
	start := func() *proctest.Process { return f.startReactor("-in-flight-margin", "3s") }
	reactors := []*proctest.Process{start(), start()}
	enqueued := make(chan error, 1)
	go func() {
		for r := rounds / 2; r < rounds; r++ {
			if err := enqueueRound(r); err != nil {
				enqueued <- fmt.Errorf("round %d: %w", r, err)
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		enqueued <- nil
	}()
	kills := proctest.KillRandomly(t, reactors, 10*time.Second, 500*time.Millisecond, 1500*time.Millisecond, start)
	require.NoError(t, <-enqueued)

	_, err := f.pool.Exec(ctx, `INSERT INTO reckon_effect_tombstones (tenant_id, idempotency_key, effect_id, state, settled_at, expires_at)
		VALUES ('default', 'gone', gen_random_uuid(), 'CONFIRMED', now(), now() + interval '1 hour')`)
	require.NoError(t, err)
	_, err = f.client.EnqueueMany(ctx, []effects.Spec{wire("fresh", ""), wire("gone", "key-0")}, nil)
	require.ErrorIs(t, err, effects.ErrPruned, "a batch with a tombstoned key")
	require.Zero(t, testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key IN ('fresh', 'gone')`),
		"nothing of the refused batch is recorded")

	require.Eventually(t, func() bool {
		return testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE state NOT IN ('CONFIRMED', 'FAILED', 'STUCK')`) == 0
	}, 2*time.Minute, 200*time.Millisecond, "every effect settles: %v", unsettled(t, f.pool))
	require.Equal(t, 2*keys*rounds, testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE state = 'CONFIRMED' AND compensates_id IS NULL`))
	performed := map[string][]string{} // ordering key: its wires, in the order the bank first performed them
	seen := map[string]bool{}
	for _, entry := range f.bank.Ledger() {
		var k, r int
		if _, err := fmt.Sscanf(entry.Key, "o-%d-%d", &k, &r); err == nil && entry.Of == "" && !seen[entry.Key] {
			seen[entry.Key] = true
			performed[fmt.Sprintf("key-%d", k)] = append(performed[fmt.Sprintf("key-%d", k)], entry.Key)
		}
	}
	for k := range keys {
		var want []string
		for r := range rounds {
			key := fmt.Sprintf("o-%d-%d", k, r)
			want = append(want, key)
			require.Equal(t, int64(10), f.bank.Net(key), "%s: the ledger holds the wire once, net of reversals", key)
			require.Equal(t, int64(10), f.bank.Net(fmt.Sprintf("u-%d-%d", k, r)))
		}
		require.Equal(t, want, performed[fmt.Sprintf("key-%d", k)], "key-%d's wires reached the bank in enqueue order", k)
	}
	t.Logf("%d ordered and unordered wires confirmed in order through %d SIGKILLs of reactors", 2*keys*rounds, kills)
	testkit.RequireNoRunningJobs(t, f.pool)
}

// unsettled describes the effects not settled: id, key, state, job and the job's state.
func unsettled(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT e.idempotency_key || ' ' || e.state || ' job ' || coalesce(e.job_id::text, '-') || ' queue ' || coalesce(e.queue, '-')
		       || ' lease ' || coalesce(e.lease_expires_at::text, '-') || ' attempts ' || e.attempts
		FROM reckon_effects e WHERE e.state NOT IN ('CONFIRMED', 'FAILED', 'STUCK')`)
	require.NoError(t, err)
	described, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return described
}

func keyNumber(t *testing.T, key string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(key, "w-"))
	require.NoError(t, err)
	return n
}

// restartWorker restarts the Citus worker at workerURL at once (pg_ctl restart -m immediate: no
// checkpoint, every connection cut), as citus-env laid it out: node i of CITUS_DIR
// (/var/tmp/reckon-citus), the coordinator's port plus i, run by the postgres user.
func restartWorker(t *testing.T, workerURL string) {
	t.Helper()
	worker, err := url.Parse(workerURL)
	require.NoError(t, err)
	coordinator, err := url.Parse(os.Getenv("RECKON_CITUS_URL"))
	require.NoError(t, err)
	wp, err := strconv.Atoi(worker.Port())
	require.NoError(t, err)
	cp, err := strconv.Atoi(coordinator.Port())
	require.NoError(t, err)
	dir := os.Getenv("CITUS_DIR")
	if dir == "" {
		dir = "/var/tmp/reckon-citus"
	}
	node := filepath.Join(dir, fmt.Sprintf("n%d", wp-cp))
	args := []string{"/usr/lib/postgresql/15/bin/pg_ctl", "-D", node, "-l", node + ".log", "-m", "immediate", "-w", "restart"}
	if os.Getuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	require.NoError(t, err, "%s", out)
}
