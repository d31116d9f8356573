package reckontest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/effects"
)

// FastConfig returns a copy of config with the timings a test wants where config leaves them
// unset: River fetches every 5ms after work and polls every 50ms (FetchCooldown,
// FetchPollInterval), the sweeper runs every 100ms (SweepInterval), and an attempt is presumed
// dead 2s past its call timeout (InFlightMargin). Every other field is config's, defaults
// included; a nil config is an empty one.
func FastConfig(config *effects.Config) *effects.Config {
	var c effects.Config
	if config != nil {
		c = *config
	}
	c.FetchCooldown = cmp.Or(c.FetchCooldown, 5*time.Millisecond)
	c.FetchPollInterval = cmp.Or(c.FetchPollInterval, 50*time.Millisecond)
	c.SweepInterval = cmp.Or(c.SweepInterval, 100*time.Millisecond)
	c.InFlightMargin = cmp.Or(c.InFlightMargin, 2*time.Second)
	return &c
}

// NewClient returns an effects client on pool built from FastConfig(config), not started, and
// stops it when the test ends. Without a Logger in config, the client logs to the test's log
// (tb.Logf: shown with go test -v, or when the test fails). A config NewClient refuses fails the
// test.
func NewClient(tb testing.TB, pool *pgxpool.Pool, config *effects.Config) *effects.Client {
	tb.Helper()
	config = FastConfig(config)
	if config.Logger == nil {
		w := &testLog{tb: tb}
		tb.Cleanup(w.end) // runs after the client's Stop (cleanups run last first)
		config.Logger = slog.New(slog.NewTextHandler(w, nil))
	}
	client, err := effects.NewClient(pool, config)
	if err != nil {
		tb.Fatalf("reckontest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			tb.Errorf("reckontest: stop the effects client: %v", err)
		}
	})
	return client
}

// testLog writes a logger's lines to a test's log until the test ends; later lines (a goroutine of
// the client's still logging) are dropped, as testing would panic on them.
type testLog struct {
	tb    testing.TB
	mu    sync.Mutex // held while a line is written: end waits for it
	ended bool
}

func (w *testLog) Write(line []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.tb.Logf("%s", bytes.TrimSuffix(line, []byte("\n")))
	}
	return len(line), nil
}

func (w *testLog) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
}

// DrainOpts changes what Drain waits for. The zero value is the default.
type DrainOpts struct {
	// Timeout bounds the wait, and with it the work waited for: work due later is left. Default
	// 30s.
	Timeout time.Duration
}

// Drain runs client as a reactor in the test's process until the work it has to do is done, then
// stops it: every effect dispatched, every retry made, every UNKNOWN outcome reconciled (its
// status check asked until conclusive or STUCK), every compensation and every saga step the
// client's plugins enqueue settled. Then the test can assert on final states.
//
// client must not be running: Drain starts it (client.Start) and stops it before returning, and
// may be called again after more is enqueued. Build it with the plugins the work needs (a
// saga.Client in effects.Config.Plugins for sagas), ideally with NewClient, whose fast timings
// keep Drain quick; a connector's retries still wait for its Backoff.
//
// The work is that of the client's queue (effects.Config.Queue): effects PENDING or UNKNOWN and
// River jobs available, running or due. What is not due before the timeout ends is left: an
// effect held for a person's confirmation, an async effect awaiting its callback with a later
// deadline, a retry or a ScheduledAt later than that. If work that was due is still not done when
// the timeout ends, the test fails, naming the effects and jobs still outstanding. A client that
// cannot start or stop fails the test too.
func Drain(tb testing.TB, pool *pgxpool.Pool, client *effects.Client, opts *DrainOpts) {
	tb.Helper()
	timeout := 30 * time.Second
	if opts != nil && opts.Timeout > 0 {
		timeout = opts.Timeout
	}
	if err := client.Start(context.Background()); err != nil {
		tb.Fatalf("reckontest: Drain: %v", err)
	}
	until := time.Now().Add(timeout)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			tb.Errorf("reckontest: Drain: stop the effects client: %v", err)
		}
	}()

	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	quiet := 0 // consecutive looks that found nothing to do
	for {
		left, err := outstanding(ctx, pool, client.Queue(), until)
		switch {
		case err != nil && ctx.Err() == nil:
			tb.Fatalf("reckontest: Drain: %v", err)
		case err == nil && len(left) == 0:
			// Twice in a row, 20ms apart: work that hands itself on outside one transaction is
			// seen on the second look.
			if quiet++; quiet == 2 {
				return
			}
		case err == nil:
			quiet = 0
		}
		if ctx.Err() != nil { // a last look, which the deadline cannot cut short
			if left, err = outstanding(context.Background(), pool, client.Queue(), until); err != nil {
				tb.Fatalf("reckontest: Drain: %v", err)
			}
			if len(left) == 0 {
				return
			}
			tb.Fatalf("reckontest: Drain: the work due was not done within %v; outstanding:\n  %s", timeout, strings.Join(left, "\n  "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outstanding describes the work of queue due before until that is not done yet, one line each
// (at most 50): effects PENDING (unless held for a confirmation, or waiting for a callback, a
// retry or a schedule past until) or UNKNOWN, and River jobs available or running, or scheduled
// before until.
func outstanding(ctx context.Context, pool *pgxpool.Pool, queue string, until time.Time) ([]string, error) {
	rows, err := pool.Query(ctx, `
SELECT format('effect %s %s %s key=%s attempts=%s%s', e.id, e.state, e.connector, e.idempotency_key, e.attempts,
              coalesce(' error=' || e.error, ''))
FROM reckon_effects e
LEFT JOIN river_job j ON j.id = e.job_id
WHERE coalesce(e.queue, $1) = $1
  AND (e.state = 'UNKNOWN'
       OR (e.state = 'PENDING'
           AND e.confirmation IS DISTINCT FROM 'AWAITING'
           AND NOT coalesce(e.correlation_id IS NOT NULL AND e.deadline_at > $2, false)
           AND NOT coalesce(j.state IN ('scheduled', 'retryable', 'available') AND j.scheduled_at > $2, false)))
UNION ALL
SELECT format('job %s %s %s attempt=%s', id, kind, state, attempt)
FROM river_job
WHERE queue = $1
  AND state IN ('available', 'running', 'scheduled', 'retryable')
  AND scheduled_at <= $2
LIMIT 50`, queue, until)
	if err != nil {
		return nil, fmt.Errorf("read the outstanding work: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
