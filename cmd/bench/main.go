// Command bench measures Reckon against raw River and a hand-rolled River outbox on one fresh
// database of the local Postgres, and prints the results side by side (and as JSON).
//
//	bench [-n 20000] [-w 100] [-c 16] [-dispatch-batch 16] [-claim-interval 10ms] [-scenarios all] [-tracing off] [-events on] [-json bench.json]
//
// Scenarios (comma-separated in -scenarios, or "all"):
//
//	river     N no-op River jobs inserted in batches, worked by W workers
//	peer      the hand-rolled outbox: a River job per row; the worker calls the no-op upstream and
//	          updates the row with river.JobCompleteTx in one transaction
//	reckon    N effects of an idempotent no-op connector, then N of a non-idempotent connector
//	          with a status check (the full protocol), dispatched by an in-process reactor
//	enqueue   single-effect transactions from C goroutines: Reckon EnqueueTx vs River InsertTx
//	latency   single-effect transactions end to end, closed loop: River InsertTx of one no-op job
//	          per transaction while a River client works them (e2e-river), then Reckon EnqueueTx
//	          of one effect per transaction while the reactor dispatches (e2e-reckon, the maximum
//	          rate); then Reckon open-loop at 1%, 25% and 50% of that maximum, with enqueue → CONFIRMED
//	          percentiles from the database's timestamps
//	scale     1, 2 and 4 reactor processes on the same queue
//	memory    one reactor process's peak RSS and Go heap while 100,000 effects wait
//	storage   bytes (tables + indexes) and WAL per effect of each kind — simple, compensated,
//	          async, saga step — against River's per no-op job, storage-n of each
//	retention N effects dispatched beside a backlog of retention-backlog settled effects aged past
//	          the effect retention, without and then with a retention run pruning it, and that run
//	          alone: dispatch and prune rates
//	limits    a rate-limited connector (50/s, burst 5), then a capped one (4 in flight, calls of
//	          50 ms), each with duration's worth of work waiting beside as many effects of an
//	          unlimited connector, on a reactor with River's own fetch timings: the calls a second
//	          let through once warm (between the 10th and 90th percentile calls) against the
//	          limit's
//	ordered   effects of the idempotent no-op connector spread over 1, 100 and 10,000 ordering
//	          keys (at most 1,000 effects for one key, 20,000 for 100), beside as many unordered:
//	          the throughput of each and its ratio to the unordered one
//
// Throughput runs time from the first insert to the last completion (the database's timestamp).
//
// -tracing memory runs the scenarios with OpenTelemetry tracing on — every Reckon client, in this
// process and in the reactor processes, with an SDK tracer provider (the SDK's default sampling and
// batching) exporting to an in-memory exporter — and names their results "…+tracing"; -tracing
// both runs each scenario twice in the same run, off then on, and reports the ratios.
//
// -statements K prints, after each scenario, its K most expensive statements on the bench database
// by total execution time, from pg_stat_statements (which the server must preload), with calls,
// mean time, rows and WAL bytes per call.
//
// -setup-sql runs SQL on the bench database after its migrations: an experiment (an index
// dropped, a trigger disabled) to measure what a part of the schema costs.
//
// -events both runs each scenario without the event stream (its triggers disabled, effect
// transitions without a transaction id or position index, as before it) and with it, in the order
// off, on, on, off; it names the results without it "…-events_off", reports each setting's mean of
// its two runs, and their ratios: what writing events costs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/postgres"
)

// scenarios in the order they run; allScenarios names them.
var scenarios = []struct {
	name string
	run  func(*bench, context.Context) error
}{
	{"river", (*bench).river},
	{"peer", (*bench).peer},
	{"reckon", (*bench).reckon},
	{"enqueue", (*bench).enqueue},
	{"latency", (*bench).latency},
	{"scale", (*bench).scale},
	{"memory", (*bench).memory},
	{"storage", (*bench).storage},
	{"retention", (*bench).retention},
	{"limits", (*bench).limits},
	{"ordered", (*bench).ordered},
}

var allScenarios = func() []string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return names
}()

type options struct {
	databaseURL      string
	n                int
	workers          int
	dispatchBatch    int
	claimInterval    time.Duration
	concurrency      int
	batch            int
	duration         time.Duration
	memoryN          int
	storageN         int
	retentionBacklog int
	scenarios        []string
	jsonPath         string
	keep             bool
	tracing          string
	events           string
	statements       int
	setupSQL         string
	citus            bool
}

func main() {
	cli.Main(func(ctx context.Context) int {
		if len(os.Args) > 1 && os.Args[1] == "reactor" {
			return runReactorProcess(ctx, os.Args[2:])
		}
		if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		return 0
	})
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	var scenarios string
	fs.StringVar(&o.databaseURL, "database-url", cli.Env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "server to create the bench database on (env DATABASE_URL)")
	fs.IntVar(&o.n, "n", 20000, "jobs or effects per throughput run")
	fs.IntVar(&o.workers, "w", 100, "workers per River client or reactor")
	fs.DurationVar(&o.claimInterval, "claim-interval", 10*time.Millisecond, "how often a woken claimer claims effects enqueued one at a time (effects.Config.ClaimInterval)")
	fs.IntVar(&o.dispatchBatch, "dispatch-batch", 16, "effects per dispatch job when enqueued together (effects.Config.DispatchBatch; 1: a job per effect)")
	fs.IntVar(&o.concurrency, "c", 16, "concurrent goroutines for the enqueue and latency scenarios")
	fs.IntVar(&o.batch, "batch", 1000, "insert batch size")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each enqueue and latency run")
	fs.IntVar(&o.memoryN, "memory-n", 100000, "effects waiting in the memory scenario")
	fs.IntVar(&o.storageN, "storage-n", 2000, "effects (and River jobs) of each kind in the storage scenario")
	fs.IntVar(&o.retentionBacklog, "retention-backlog", 100000, "settled effects past the effect retention for the retention scenario to prune")
	fs.StringVar(&scenarios, "scenarios", "all", "comma-separated scenarios: "+strings.Join(allScenarios, ","))
	fs.StringVar(&o.jsonPath, "json", "bench.json", "where to write the results as JSON (empty: nowhere)")
	fs.BoolVar(&o.keep, "keep", false, "keep the bench database afterwards")
	fs.StringVar(&o.events, "events", eventsOn, "the event stream: on (as shipped), off (no events written: its triggers disabled) or both (each scenario off, then on, and their ratio)")
	fs.StringVar(&o.tracing, "tracing", tracingOff, "OpenTelemetry tracing of the Reckon clients: off, memory (on, against an in-memory exporter) or both (each scenario off, then on, and their ratio)")
	fs.IntVar(&o.statements, "statements", 0, "print each scenario's this many most expensive statements from pg_stat_statements (0: none; the server must preload it)")
	fs.BoolVar(&o.citus, "citus", false, "run in a Citus cell (docs/deploy.md) made in the database of -database-url, a Citus coordinator, instead of in a database of its own")
	fs.StringVar(&o.setupSQL, "setup-sql", "", "SQL run on the bench database after its migrations, for experiments (drop an index, disable a trigger); its results are not Reckon's as shipped")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile of the run (allocations since the start: go tool pprof -sample_index=alloc_space) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if scenarios == "all" {
		o.scenarios = allScenarios
	} else {
		for _, s := range strings.Split(scenarios, ",") {
			if !slices.Contains(allScenarios, s) {
				return fmt.Errorf("unknown scenario %q: want %s or all", s, strings.Join(allScenarios, ","))
			}
			o.scenarios = append(o.scenarios, s)
		}
	}
	if !slices.Contains([]string{eventsOn, eventsOff, eventsBoth}, o.events) {
		return fmt.Errorf("-events %q: want on, off or both", o.events)
	}
	if o.citus && o.events != "on" {
		return fmt.Errorf("-citus runs with -events on: Citus refuses to disable triggers of distributed tables")
	}
	if !slices.Contains([]string{tracingOff, tracingMemory, tracingBoth}, o.tracing) {
		return fmt.Errorf("-tracing %q: want off, memory or both", o.tracing)
	}
	if o.statements < 0 {
		return errors.New("-statements must not be negative")
	}
	if o.n < 1 || o.workers < 1 || o.dispatchBatch < 1 || o.claimInterval <= 0 || o.concurrency < 1 || o.batch < 1 || o.memoryN < 1 || o.storageN < 1 || o.retentionBacklog < 1 || o.duration <= 0 {
		return errors.New("-n, -w, -dispatch-batch, -claim-interval, -c, -batch, -memory-n, -storage-n, -retention-backlog and -duration must be positive")
	}

	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10 // a sample per 64 KiB allocated: finer than the default, cheap enough
		defer func() {
			if err := writeHeapProfile(*memProfile); err != nil {
				fmt.Fprintln(os.Stderr, "bench: -memprofile:", err)
			}
		}()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	b, err := newBench(ctx, o, out)
	if err != nil {
		return err
	}
	defer b.close()
	for _, scenario := range o.scenarios {
		if o.statements > 0 {
			if err := b.resetStatements(ctx); err != nil {
				return err
			}
		}
		if err := b.runScenarioEvents(ctx, scenario); err != nil {
			return fmt.Errorf("scenario %s: %w", scenario, err)
		}
		if o.statements > 0 {
			if err := b.reportStatements(ctx, scenario); err != nil {
				return err
			}
		}
	}
	b.report()
	if o.jsonPath != "" {
		raw, _ := json.MarshalIndent(b.results, "", "  ")
		if err := os.WriteFile(o.jsonPath, raw, 0o644); err != nil {
			return err
		}
		b.progress("results written to %s", o.jsonPath)
	}
	return nil
}

// bench holds the run: its database, options and results.
type bench struct {
	o       options
	out     io.Writer
	url     string // of the bench database
	name    string
	admin   string // of the server's maintenance database
	pool    *pgxpool.Pool
	results results
	logger  *slog.Logger
	// tracing is the tracer provider of the pass running with tracing on, nil with it off; spans
	// counts what it (and the reactor processes) exported.
	tracing *sdktrace.TracerProvider
	spans   *spanCounter
	// coordinatorPort and cellPort are, with -citus, the ports of the coordinator and of the
	// worker that holds the cell: the scale scenario's Postgres CPU is counted per node.
	coordinatorPort, cellPort int
}

func newBench(ctx context.Context, o options, out io.Writer) (*bench, error) {
	b := &bench{o: o, out: out, admin: o.databaseURL, logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	b.name = fmt.Sprintf("reckon_bench_%d", time.Now().Unix())
	if o.citus {
		b.url = o.databaseURL // the cell is the schema b.name in it
		b.progress("making the Citus cell %s", b.name)
	} else {
		b.url = postgres.WithDatabase(o.databaseURL, b.name)
		b.progress("creating database %s", b.name)
		if _, err := db.EnsureDatabase(ctx, b.url); err != nil {
			return nil, err
		}
	}
	config, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		return nil, err
	}
	if o.citus {
		if err := db.ConfigureSchema(config, b.name); err != nil {
			return nil, err
		}
	}
	config.MaxConns = int32(max(32, o.concurrency+8))
	db.ConfigurePool(config)
	if b.pool, err = pgxpool.NewWithConfig(ctx, config); err != nil {
		return nil, err
	}
	if o.citus {
		migrator, err := db.NewMigrator(b.pool, &db.MigratorConfig{Logger: b.logger, Schema: b.name, Citus: true})
		if err != nil {
			return nil, err
		}
		if _, err := migrator.Up(ctx); err != nil {
			return nil, err
		}
		b.coordinatorPort = int(config.ConnConfig.Port)
		if err := b.pool.QueryRow(ctx, `
			SELECT DISTINCT s.nodeport FROM citus_shards s JOIN pg_class c ON c.oid = s.table_name
			WHERE c.relnamespace = to_regnamespace($1)`, b.name).Scan(&b.cellPort); err != nil {
			return nil, fmt.Errorf("the cell's worker: %w", err)
		}
		b.progress("the cell %s is on the worker at port %d", b.name, b.cellPort)
	} else if err := db.Migrate(ctx, b.pool, b.logger); err != nil {
		return nil, err
	}
	if o.setupSQL != "" {
		b.progress("experiment: %s", o.setupSQL)
		if _, err := b.pool.Exec(ctx, o.setupSQL); err != nil {
			return nil, fmt.Errorf("-setup-sql: %w", err)
		}
	}
	var version string
	_ = b.pool.QueryRow(ctx, `SHOW server_version`).Scan(&version)
	b.results.Setup = map[string]any{"n": o.n, "workers": o.workers, "concurrency": o.concurrency, "batch": o.batch,
		"duration_seconds": o.duration.Seconds(), "tracing": o.tracing, "events": o.events, "storage_n": o.storageN, "retention_backlog": o.retentionBacklog, "setup_sql": o.setupSQL, "citus": o.citus, "postgres": version, "started_at": time.Now().UTC()}
	return b, nil
}

// writeHeapProfile writes the heap profile, with every allocation since the start, to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func (b *bench) close() {
	if b.pool != nil {
		b.pool.Close()
	}
	if b.o.keep {
		b.progress("kept database %s", b.name)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, b.admin)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	if b.o.citus {
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{b.name}.Sanitize()+", "+pgx.Identifier{db.RiverSchema(b.name)}.Sanitize()+" CASCADE")
		return
	}
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{b.name}.Sanitize()+" WITH (FORCE)")
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.out, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (b *bench) runScenario(ctx context.Context, name string) error {
	for _, s := range scenarios {
		if s.name == name {
			return s.run(b, ctx)
		}
	}
	return fmt.Errorf("unknown scenario %q", name)
}

// reset empties the queues and effect tables between scenarios. The bench database is thrown
// away afterwards, so the audit table's guard against TRUNCATE is bypassed for this session; CASCADE
// empties the tables that point at effects (saga steps, turns).
func (b *bench) reset(ctx context.Context) error {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET session_replication_role = replica;
		TRUNCATE river_job, reckon_effects, reckon_effect_transitions, reckon_sagas CASCADE;
		DO $$ BEGIN IF to_regclass('reckon_events') IS NOT NULL THEN TRUNCATE reckon_events; END IF; END $$;
		DROP TABLE IF EXISTS bench_peer;
		SET session_replication_role = DEFAULT`)
	// No ANALYZE here: statistics of empty tables would tell the planner they stay empty while a
	// scenario fills them. Freshly truncated tables are estimated from their actual size instead.
	if err == nil && b.o.citus {
		err = b.resetCell(ctx)
	}
	return err
}

// resetCell truncates the -citus cell's shards of the tables reset truncates, on the cell's
// worker: on the coordinator TRUNCATE reaches a distributed table's shards through a trigger,
// which session_replication_role = replica (there to pass the audit trail's append-only
// triggers) turns off.
func (b *bench) resetCell(ctx context.Context) error {
	rows, err := b.pool.Query(ctx, `
		SELECT s.shard_name::text, s.nodename, s.nodeport FROM citus_shards s JOIN pg_class c ON c.oid = s.table_name
		WHERE c.relnamespace = to_regnamespace($1)
		  AND c.relname IN ('reckon_effects', 'reckon_effect_transitions', 'reckon_sagas', 'reckon_events')`, b.name)
	if err != nil {
		return fmt.Errorf("the cell's shards: %w", err)
	}
	var shards []string
	config := b.pool.Config().ConnConfig.Copy()
	for rows.Next() {
		var shard string
		if err := rows.Scan(&shard, &config.Host, &config.Port); err != nil {
			return err
		}
		shards = append(shards, pgx.Identifier{b.name, strings.TrimPrefix(shard, b.name+".")}.Sanitize())
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(shards) == 0 {
		return fmt.Errorf("the cell %s has no shards", b.name)
	}
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		return fmt.Errorf("the cell's worker: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `SET session_replication_role = replica; SET citus.enable_manual_changes_to_shards = on;
		TRUNCATE `+strings.Join(shards, ", ")+` CASCADE`)
	if err != nil {
		return fmt.Errorf("truncate the cell's shards: %w", err)
	}
	return nil
}

// analyze gives the planner the statistics a live database has (autovacuum keeps them), once a
// throughput scenario has filled its queue and before its workers start. Every scenario gets it,
// inside its timed span: without it, plans on a freshly filled table are a matter of luck (a
// nested loop over every PENDING effect per batch was seen).
func (b *bench) analyze(ctx context.Context) error {
	_, err := b.pool.Exec(ctx, `ANALYZE river_job, reckon_effects, reckon_effect_transitions`)
	if err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}
