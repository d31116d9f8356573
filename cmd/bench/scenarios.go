package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/reckonhq/reckon/effects"
)

// The no-op upstream all scenarios call.
func noopUpstream(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`{"ok":true}`), nil
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct{ river.WorkerDefaults[noopArgs] }

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

type peerArgs struct {
	ID int64 `json:"id"`
}

func (peerArgs) Kind() string { return "bench_peer" }

// peerWorker is what a team writes with River alone: call the upstream, update the row and
// complete the job in one transaction.
type peerWorker struct {
	river.WorkerDefaults[peerArgs]
	b *bench
}

func (w *peerWorker) Work(ctx context.Context, job *river.Job[peerArgs]) error {
	result, err := noopUpstream(ctx)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, w.b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE bench_peer SET state = 'CONFIRMED', result = $2, updated_at = now() WHERE id = $1`, job.Args.ID, result); err != nil {
			return err
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// riverConfig is the configuration of a River client working queue with the given workers, n at
// a time: the same for every River client of the run, in this process or a reactor process.
func riverConfig(logger *slog.Logger, workers *river.Workers, queue string, n int) *river.Config {
	return &river.Config{
		Logger:            logger,
		Queues:            map[string]river.QueueConfig{queue: {MaxWorkers: n}},
		Workers:           workers,
		FetchCooldown:     fetchCooldown,
		FetchPollInterval: fetchPollInterval,
	}
}

// riverClient returns a started River client working queue with the given workers.
func (b *bench) riverClient(ctx context.Context, workers *river.Workers, queue string) (*river.Client[pgx.Tx], error) {
	client, err := river.NewClient(riverpgxv5.New(b.pool), riverConfig(b.logger, workers, queue, b.o.workers))
	if err != nil {
		return nil, err
	}
	return client, client.Start(ctx)
}

// workUntilDone starts a River client of workers on queue, waits until nothing of the scenario
// name remains (waitDone) and stops the client; it returns the end waitDone read.
func (b *bench) workUntilDone(ctx context.Context, workers *river.Workers, queue, name, remaining, endSQL string) (time.Time, error) {
	client, err := b.riverClient(ctx, workers, queue)
	if err != nil {
		return time.Time{}, err
	}
	defer client.Stop(context.WithoutCancel(ctx))
	return b.waitDone(ctx, name, remaining, endSQL)
}

// noopWorkers are the workers of the River scenarios' no-op jobs.
func noopWorkers() *river.Workers {
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	return workers
}

// riverQueue is the queue of the River no-op jobs.
const riverQueue = "bench_river"

// River settings shared by every client of the run, River's and Reckon's alike.
const (
	fetchCooldown     = 1 * time.Millisecond
	fetchPollInterval = 100 * time.Millisecond
)

func (b *bench) river(ctx context.Context) error {
	if err := b.reset(ctx); err != nil {
		return err
	}
	start := time.Now()
	if err := b.insertRiverJobs(ctx, "river"); err != nil {
		return err
	}
	end, err := b.workUntilDone(ctx, noopWorkers(), riverQueue, "river", riverRemaining, riverEnd)
	if err != nil {
		return err
	}
	b.results.add(throughput("river", "River no-op jobs", b.o.n, end.Sub(start)))
	return nil
}

// insertRiverJobs inserts n no-op jobs into River's queue in batches, as River's users insert
// many, and analyzes the tables.
func (b *bench) insertRiverJobs(ctx context.Context, name string) error {
	inserter, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{Logger: b.logger})
	if err != nil {
		return err
	}
	start := time.Now()
	for done := 0; done < b.o.n; done += b.o.batch {
		params := make([]river.InsertManyParams, min(b.o.batch, b.o.n-done))
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{}, InsertOpts: &river.InsertOpts{Queue: riverQueue}}
		}
		if _, err := inserter.InsertManyFast(ctx, params); err != nil {
			return err
		}
	}
	b.progress("%s: %d jobs inserted in %v", name, b.o.n, time.Since(start).Round(time.Millisecond))
	return b.analyze(ctx)
}

// The no-op jobs River has yet to work (for waitDone), and when it finished the last.
const (
	riverRemaining = `FROM river_job WHERE queue = '` + riverQueue + `' AND state IN ('available', 'running', 'retryable', 'scheduled', 'pending')`
	riverEnd       = `SELECT max(finalized_at) FROM river_job WHERE queue = '` + riverQueue + `'`
)

func (b *bench) peer(ctx context.Context) error {
	if err := b.reset(ctx); err != nil {
		return err
	}
	if _, err := b.pool.Exec(ctx, `CREATE TABLE bench_peer (id bigint PRIMARY KEY, state text NOT NULL, args jsonb NOT NULL,
		result jsonb, created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &peerWorker{b: b})
	client, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{Logger: b.logger})
	if err != nil {
		return err
	}
	start := time.Now()
	for done := 0; done < b.o.n; done += b.o.batch {
		size := min(b.o.batch, b.o.n-done)
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO bench_peer (id, state, args)
				SELECT g, 'PENDING', '{"amount":1}' FROM generate_series($1::bigint, $2::bigint) g`, done, done+size-1); err != nil {
				return err
			}
			params := make([]river.InsertManyParams, size)
			for i := range params {
				params[i] = river.InsertManyParams{Args: peerArgs{ID: int64(done + i)}, InsertOpts: &river.InsertOpts{Queue: "bench_peer"}}
			}
			_, err := client.InsertManyFastTx(ctx, tx, params)
			return err
		})
		if err != nil {
			return err
		}
	}
	b.progress("peer: %d rows and jobs inserted in %v", b.o.n, time.Since(start).Round(time.Millisecond))
	if _, err := b.pool.Exec(ctx, `ANALYZE bench_peer`); err != nil {
		return err
	}
	if err := b.analyze(ctx); err != nil {
		return err
	}
	end, err := b.workUntilDone(ctx, workers, "bench_peer", "peer", `FROM bench_peer WHERE state <> 'CONFIRMED'`, `SELECT max(updated_at) FROM bench_peer`)
	if err != nil {
		return err
	}
	b.results.add(throughput("peer", "hand-rolled River outbox", b.o.n, end.Sub(start)))
	return nil
}

// benchRegistry has the two connectors of the Reckon scenarios.
func benchRegistry() *effects.Registry {
	registry := effects.NewRegistry()
	dispatch := func(ctx context.Context, _ effects.Call) (json.RawMessage, error) { return noopUpstream(ctx) }
	registry.MustRegister(effects.Connector{
		Name: "bench.idempotent", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, Dispatch: dispatch,
	})
	registry.MustRegister(effects.Connector{
		Name: "bench.full", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal}, Dispatch: dispatch,
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) {
			return effects.Present(json.RawMessage(`{"ok":true}`)), nil
		},
	})
	return registry
}

// resetClient resets the database (reset) and returns a Reckon client of workers on it, not
// started.
func (b *bench) resetClient(ctx context.Context, workers int) (*effects.Client, error) {
	if err := b.reset(ctx); err != nil {
		return nil, err
	}
	return b.reckonClient(workers)
}

func (b *bench) reckonClient(workers int) (*effects.Client, error) {
	return effects.NewClient(b.pool, &effects.Config{
		Registry: benchRegistry(), Logger: b.logger, Workers: workers, DispatchBatch: b.o.dispatchBatch, ClaimInterval: b.o.claimInterval,
		FetchCooldown: fetchCooldown, FetchPollInterval: fetchPollInterval, TracerProvider: b.tracerProvider(),
	})
}

// benchSpec is the effect every Reckon scenario records: connector with key and a small args object.
func benchSpec(connector, key string) effects.Spec {
	return effects.Spec{Connector: connector, IdempotencyKey: key, Args: json.RawMessage(`{"amount":1}`)}
}

// enqueueEffects records n effects of connector in batches and returns when they are committed.
func (b *bench) enqueueEffects(ctx context.Context, client *effects.Client, connector, prefix string, n int) error {
	return b.enqueueSpecs(ctx, client, n, func(i int) effects.Spec { return benchSpec(connector, fmt.Sprintf("%s-%d", prefix, i)) })
}

// enqueueSpecs records the n effects spec(0) … spec(n-1) in batches (EnqueueManyTx) and returns
// when they are committed.
func (b *bench) enqueueSpecs(ctx context.Context, client *effects.Client, n int, spec func(i int) effects.Spec) error {
	for done := 0; done < n; done += b.o.batch {
		specs := make([]effects.Spec, min(b.o.batch, n-done))
		for i := range specs {
			specs[i] = spec(done + i)
		}
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := client.EnqueueManyTx(ctx, tx, specs, nil)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) reckon(ctx context.Context) error {
	for _, run := range []struct{ connector, name, label string }{
		{"bench.idempotent", "reckon", "Reckon, idempotent no-op connector"},
		{"bench.full", "reckon-full", "Reckon, full protocol (non-idempotent + status check)"},
	} {
		client, err := b.resetClient(ctx, b.o.workers)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := b.enqueueEffects(ctx, client, run.connector, run.name, b.o.n); err != nil {
			return err
		}
		b.progress("%s: %d effects enqueued in %v", run.name, b.o.n, time.Since(start).Round(time.Millisecond))
		if err := b.analyze(ctx); err != nil {
			return err
		}
		if err := client.Start(ctx); err != nil {
			return err
		}
		end, err := b.waitEffectsDone(ctx, run.name)
		stopErr := client.Stop(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		if stopErr != nil {
			return stopErr
		}
		b.results.add(throughput(run.name, run.label, b.o.n, end.Sub(start)))
	}
	return nil
}

// waitEffectsDone waits until no effect is unresolved and returns the time of the last
// transition; an effect that ends anywhere but CONFIRMED is an error.
func (b *bench) waitEffectsDone(ctx context.Context, name string) (time.Time, error) {
	end, err := b.waitDone(ctx, name, `FROM reckon_effects WHERE state IN ('PENDING', 'UNKNOWN')`,
		`SELECT max(updated_at) FROM reckon_effects`)
	if err != nil {
		return end, err
	}
	var notConfirmed int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM reckon_effects WHERE state <> 'CONFIRMED'`).Scan(&notConfirmed); err != nil {
		return end, err
	}
	if notConfirmed > 0 {
		return end, fmt.Errorf("%d effects did not end CONFIRMED", notConfirmed)
	}
	return end, nil
}

// waitDone polls until no row is left in remaining (a FROM … WHERE … clause), printing progress,
// and returns endSQL's time. The poll only asks whether a row is left (cheap, as it shares the
// database with the run); the count is read for the progress line every two seconds.
func (b *bench) waitDone(ctx context.Context, name, remaining, endSQL string) (time.Time, error) {
	lastPrint := time.Now()
	for {
		var left bool
		if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 `+remaining+`)`).Scan(&left); err != nil {
			return time.Time{}, err
		}
		if !left {
			break
		}
		if time.Since(lastPrint) > 2*time.Second {
			var n int
			if err := b.pool.QueryRow(ctx, `SELECT count(*) `+remaining).Scan(&n); err != nil {
				return time.Time{}, err
			}
			b.progress("%s: %d to go", name, n)
			lastPrint = time.Now()
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(100 * time.Millisecond): // the end time comes from the database, not from this poll
		}
	}
	var end time.Time
	err := b.pool.QueryRow(ctx, endSQL).Scan(&end)
	return end, err
}

// enqueue compares single-effect transactions: C goroutines, each committing one EnqueueTx (or
// one River InsertTx) per transaction, for the run's duration.
func (b *bench) enqueue(ctx context.Context) error {
	client, err := b.resetClient(ctx, 1)
	if err != nil {
		return err
	}
	inserter, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{Logger: b.logger})
	if err != nil {
		return err
	}
	var seq atomic.Int64
	for _, run := range []struct {
		name, label string
		insert      func(tx pgx.Tx) error
	}{
		{"enqueue-river", "River InsertTx, one job per transaction", func(tx pgx.Tx) error {
			_, err := inserter.InsertTx(ctx, tx, noopArgs{}, &river.InsertOpts{Queue: "bench_insert"})
			return err
		}},
		{"enqueue-reckon", "Reckon EnqueueTx, one effect per transaction", func(tx pgx.Tx) error {
			_, err := client.EnqueueTx(ctx, tx, benchSpec("bench.full", fmt.Sprintf("single-%d", seq.Add(1))), nil)
			return err
		}},
	} {
		count, elapsed, err := b.closedLoop(ctx, run.insert)
		if err != nil {
			return err
		}
		b.results.add(throughput(run.name, run.label, count, elapsed))
		b.progress("%s: %d transactions in %v", run.name, count, elapsed.Round(time.Millisecond))
	}
	return nil
}

// closedLoop runs insert in a transaction of its own, from C goroutines, for the run's duration.
func (b *bench) closedLoop(ctx context.Context, insert func(tx pgx.Tx) error) (int, time.Duration, error) {
	var (
		count    atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(b.o.duration)
	start := time.Now()
	for range b.o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := pgx.BeginFunc(ctx, b.pool, insert); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(count.Load()), time.Since(start), firstErr
}
