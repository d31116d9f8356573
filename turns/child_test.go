package turns_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/turns"
)

// childEnv, when set, makes the test binary run as a separate process that uses turns on
// DATABASE_URL instead of running tests:
//
//   - "contend": waits at the start gate (gateKey), then CHILD_N goroutines each submit a message to
//     SESSION and run the session's turn with probeHandler; exits 0 when all are done.
//   - "hold": submits a message to SESSION and runs its turn with a handler that stages a note and
//     a refund and then blocks inside the commit transaction (after logging "in commit"), until
//     killed.
const childEnv = "RECKON_TEST_TURNS_CHILD"

// gateKey is the advisory lock (two-key form) the test holds until every contender may start.
var gateKey = [2]int32{4242, 1}

func runChild(mode string) int {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	fail := func(msg string, err error) int {
		logger.Error(msg, slog.String("error", err.Error()))
		return 1
	}
	ctx := context.Background()
	config, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		return fail("child: parse url", err)
	}
	config.MaxConns = 6
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return fail("child: pool", err)
	}
	defer pool.Close()
	session := os.Getenv("SESSION")
	registry := effects.NewRegistry()
	registry.MustRegister(newBank().refundConnector())

	switch mode {
	case "contend":
		tc, _, err := clients(pool, registry, turns.Config{
			Handler: probeHandler(pool), AcquireTimeout: 2 * time.Minute, Logger: logger, ID: "child-" + os.Getenv("CHILD_PREFIX"),
		}, nil)
		if err != nil {
			return fail("child: clients", err)
		}
		logger.Info("listening", slog.String("addr", "contender"))
		// The start gate: the test holds the lock exclusively until every contender is ready.
		if _, err := pool.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1, $2)`, gateKey[0], gateKey[1]); err != nil {
			return fail("child: gate", err)
		}
		n, _ := strconv.Atoi(os.Getenv("CHILD_N"))
		errs := contend(ctx, tc, session, os.Getenv("CHILD_PREFIX"), n)
		if len(errs) > 0 {
			return fail("child: contend", errors.Join(errs...))
		}
		logger.Info("done", slog.Int("n", n))
		return 0
	case "hold":
		tc, _, err := clients(pool, registry, turns.Config{
			Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
				if err := stageNote(turn, "dead turn"); err != nil {
					return err
				}
				if err := turn.Enqueue(refundSpec(turn, 0, 100)); err != nil {
					return err
				}
				return turn.Stage(func(ctx context.Context, tx pgx.Tx) error {
					logger.Info("in commit", slog.String("turn_id", turn.ID.String()))
					select {} // until SIGKILL
				})
			}),
			AcquireTimeout: 30 * time.Second, Logger: logger, ID: "holder",
		}, nil)
		if err != nil {
			return fail("child: clients", err)
		}
		logger.Info("listening", slog.String("addr", "holder"))
		if _, err := tc.Submit(ctx, turns.Inbound{SessionKey: session, MessageID: "hold-1"}); err != nil {
			return fail("child: submit", err)
		}
		_, err = tc.RunTurn(ctx, session)
		return fail("child: run turn returned", fmt.Errorf("unexpected: %v", err))
	case "reactor":
		// A reactor (River started, turn workers) whose handler holds the session's turn in
		// HOLD_STATE until killed: ACCUMULATING (its Ready blocks, before the mutex), PROCESSING
		// (the handler blocks) or COMMITTING (the commit transaction blocks).
		hold := turns.Status(os.Getenv("HOLD_STATE"))
		holding := func(ctx context.Context) {
			logger.Info("holding", slog.String("state", string(hold)))
			<-ctx.Done() // River cancels at TurnTimeout; the test kills first
			select {}
		}
		_, ec, err := clients(pool, registry, turns.Config{
			Handler: holdingHandler{hold: hold, holding: holding}, Logger: logger, TurnTimeout: 10 * time.Minute,
		}, nil)
		if err != nil {
			return fail("child: clients", err)
		}
		if err := ec.Start(ctx); err != nil {
			return fail("child: start", err)
		}
		logger.Info("listening", slog.String("addr", "reactor"))
		select {} // until SIGKILL
	}
	return fail("child", fmt.Errorf("unknown mode %q", mode))
}

// holdingHandler holds its turn in the hold state (see the "reactor" child mode).
type holdingHandler struct {
	hold    turns.Status
	holding func(ctx context.Context)
}

func (h holdingHandler) Ready(ctx context.Context, _ string) error {
	if h.hold == turns.StatusAccumulating {
		h.holding(ctx)
	}
	return nil
}

func (h holdingHandler) HandleTurn(ctx context.Context, turn *turns.Turn) error {
	if h.hold == turns.StatusProcessing {
		h.holding(ctx)
	}
	return turn.Stage(func(ctx context.Context, tx pgx.Tx) error {
		if h.hold == turns.StatusCommitting {
			h.holding(ctx)
		}
		return nil
	})
}

// contendRounds is how many messages each contender submits, one after the other.
const contendRounds = 3

// contend runs n goroutines that each, contendRounds times, submit a message (id prefix-i-round) to
// session and then run the session's turn. A run that finds nothing to do (another turn took the
// message) is fine. A goroutine's next message is submitted after the turn that took its previous
// one completed, so each goroutine's messages land in different turns.
func contend(ctx context.Context, tc *turns.Client, session, prefix string, n int) []error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				for round := range contendRounds {
					if _, err := tc.Submit(ctx, turns.Inbound{SessionKey: session, MessageID: fmt.Sprintf("%s-%d-%d", prefix, i, round)}); err != nil {
						return err
					}
					if _, err := tc.RunTurn(ctx, session); err != nil && !errors.Is(err, turns.ErrNoTurn) {
						return err
					}
				}
				return nil
			}()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// probeHandler checks, independently of the turns package's own bookkeeping, that no other
// handler of the session runs at the same time in any process: it counts itself in and out of
// the probe row (committed at once, visible to every process) and records the most it saw.
func probeHandler(pool *pgxpool.Pool) turns.HandlerFunc {
	return func(ctx context.Context, turn *turns.Turn) error {
		if _, err := pool.Exec(ctx, `INSERT INTO probe (session_key) VALUES ($1) ON CONFLICT DO NOTHING`, turn.SessionKey); err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, `UPDATE probe SET inflight = inflight + 1, max_seen = greatest(max_seen, inflight + 1), runs = runs + 1,
			max_processing = greatest(max_processing, (SELECT count(*) FROM reckon_turns WHERE session_key = $1 AND status IN ('PROCESSING', 'COMMITTING')))
			WHERE session_key = $1`, turn.SessionKey); err != nil {
			return err
		}
		// Stay inside a little so that an overlapping handler would be seen.
		if _, err := pool.Exec(ctx, `SELECT pg_sleep(0.003)`); err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, `UPDATE probe SET inflight = inflight - 1 WHERE session_key = $1`, turn.SessionKey); err != nil {
			return err
		}
		return stageNote(turn, "processed")
	}
}
