package turns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// recoverBatch bounds the sessions one Recover call takes over.
const recoverBatch = 100

// recoverAcquireTimeout is how long Recover waits for a session's mutex: a session someone holds
// is being run (or recovered) by them, so Recover moves on at once. That is what makes Recover
// safe to run concurrently in every process.
const recoverAcquireTimeout = 100 * time.Millisecond

// Recover takes over the turns whose holder is gone — its process died (Postgres freed its lock)
// or its handler or commit failed — and runs them again now (see RunTurn), session by session, at
// most 100 sessions per call, each bounded by Config.TurnTimeout. It returns how many turns it
// ran; sessions whose mutex is held meanwhile are skipped at once, so concurrent Recover calls (in
// one process or many) share the work instead of queueing on it. The errors of failing turns are
// joined into the returned error.
//
// A started client runs it every Config.RecoverInterval in each process whose started effects
// client it is installed in (a service of that client, from its Start to its Stop), and also
// through a River periodic job on the elected leader: an abandoned turn does not wait for the
// session's next message, whichever River client on the database leads.
func (c *Client) Recover(ctx context.Context) (int, error) {
	sessions, err := c.queries.TurnListAbandonedSessions(ctx, dbsqlc.TurnListAbandonedSessionsParams{Namespace: LockNamespace, MaxSessions: recoverBatch})
	if err != nil {
		return 0, fmt.Errorf("turns: list abandoned turns: %w", err)
	}
	ran := 0
	var errs []error
	for _, session := range sessions {
		turnCtx, cancel := context.WithTimeout(ctx, c.config.TurnTimeout)
		_, err := c.process(turnCtx, session, true, recoverAcquireTimeout)
		cancel()
		switch {
		case errors.Is(err, ErrNoTurn), errors.Is(err, ErrSessionBusy), errors.Is(err, ErrNotReady):
			continue
		case ctx.Err() != nil:
			return ran, ctx.Err()
		}
		var notDue *notDueError
		if errors.As(err, &notDue) {
			continue // taken over into an accumulating turn whose own job runs it
		}
		ran++
		if err != nil {
			errs = append(errs, err)
		}
	}
	if ran > 0 {
		c.logger.InfoContext(ctx, "recovered abandoned turns", slog.Int("turns", ran), slog.Int("failed", len(errs)))
	}
	return ran, errors.Join(errs...)
}

// recoverLoop runs Recover every Config.RecoverInterval until ctx ends: the turns client's service
// in its effects client (Install), which runs it while started. A turn recovery in flight when the
// client stops is cancelled; its turn is recovered later.
func (c *Client) recoverLoop(ctx context.Context) {
	ticker := time.NewTicker(c.config.RecoverInterval)
	defer ticker.Stop()
	c.logger.DebugContext(ctx, "turn recovery ticker started", slog.Duration("interval", c.config.RecoverInterval))
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if _, err := c.Recover(ctx); err != nil && ctx.Err() == nil {
			// The failed turns stay abandoned for the next round.
			c.logger.WarnContext(ctx, "recover abandoned turns", slog.String("error", err.Error()))
		}
	}
}

// recoverArgs is the periodic job that runs Recover.
type recoverArgs struct{}

func (recoverArgs) Kind() string { return "reckon_turn_recover" }

type recoverWorker struct {
	river.WorkerDefaults[recoverArgs]
	client *Client
}

func (w *recoverWorker) Work(ctx context.Context, _ *river.Job[recoverArgs]) error {
	_, err := w.client.Recover(ctx)
	if err != nil {
		// The failed turns stay abandoned for the next round; the job itself is done.
		w.client.logger.WarnContext(ctx, "recover abandoned turns", slog.String("error", err.Error()))
	}
	return nil
}
