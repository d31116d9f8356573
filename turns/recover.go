package turns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/riverqueue/river"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// recoverBatch bounds the sessions one Recover call takes over.
const recoverBatch = 100

// Recover takes over the turns whose holder is gone — its process died (Postgres freed its lock)
// or its handler or commit failed — and runs them again now (see RunTurn), session by session, at
// most 100 sessions per call. It returns how many turns it ran; sessions that are busy meanwhile
// are skipped. The errors of failing turns are joined into the returned error. An attached client
// calls it every Config.RecoverInterval through a River periodic job (on the leader), so that an
// abandoned turn does not wait for the session's next message.
func (c *Client) Recover(ctx context.Context) (int, error) {
	sessions, err := c.queries.TurnListAbandonedSessions(ctx, dbsqlc.TurnListAbandonedSessionsParams{Namespace: LockNamespace, MaxSessions: recoverBatch})
	if err != nil {
		return 0, fmt.Errorf("turns: list abandoned turns: %w", err)
	}
	ran := 0
	var errs []error
	for _, session := range sessions {
		_, err := c.process(ctx, session, true)
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

// schedulePeriodicRecover adds the periodic Recover job to the effects client's River client.
func (c *Client) schedulePeriodicRecover(ec *effects.Client) error {
	if c.config.RecoverInterval < 0 {
		return nil
	}
	queue := ec.Queue()
	_, err := ec.River().PeriodicJobs().AddSafely(river.NewPeriodicJob(
		river.PeriodicInterval(c.config.RecoverInterval),
		func() (river.JobArgs, *river.InsertOpts) {
			return recoverArgs{}, &river.InsertOpts{Queue: queue, MaxAttempts: 1}
		},
		nil,
	))
	if err != nil {
		return fmt.Errorf("turns: schedule recovery: %w", err)
	}
	return nil
}
