package turns

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/postgres"
)

// turnArgs schedules the processing of one accumulating turn when its aggregation window closes.
// Unique by args while available, scheduled, pending or running: one job per accumulating turn,
// and a session has at most one accumulating turn.
type turnArgs struct {
	SessionKey string    `json:"session_key"`
	TurnID     uuid.UUID `json:"turn_id"`
}

func (turnArgs) Kind() string { return "reckon_turn" }

// busySnooze is how long a job waits before trying a busy session again.
const busySnooze = time.Second

// precisionLimit is River's scheduler interval: a job inserted as scheduled becomes available only
// when the leader's scheduler next runs (every 5s), while a snoozed job due sooner stays available
// and is fetched as soon as it is due.
const precisionLimit = 5 * time.Second

func (c *Client) jobOpts(ec *effects.Client, due time.Time) *river.InsertOpts {
	scheduledAt := due
	if time.Until(due) < precisionLimit {
		// Available now: the job snoozes itself until the window closes, which is precise.
		scheduledAt = time.Time{}
	}
	return &river.InsertOpts{
		Queue:       c.queue(),
		ScheduledAt: scheduledAt,
		MaxAttempts: c.config.MaxAttempts + 5,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
		}},
	}
}

type turnWorker struct {
	river.WorkerDefaults[turnArgs]
	client *Client
}

func (w *turnWorker) Timeout(*river.Job[turnArgs]) time.Duration { return w.client.config.TurnTimeout }

// Work processes the job's turn once its window closed: the session's accumulating turn, after
// taking over abandoned ones. A turn that is already past (absorbed, complete, failed, or
// superseded by a turn that is itself past or accumulating with a job of its own) leaves nothing
// to do; a turn superseded by an in-flight turn (the retry of a failed attempt) runs the session
// again until that turn is done.
func (w *turnWorker) Work(ctx context.Context, job *river.Job[turnArgs]) error {
	c := w.client
	row, err := c.queries.TurnGet(ctx, job.Args.TurnID)
	if err == nil {
		switch Status(row.Status) {
		case StatusComplete, StatusFailed:
			return nil
		case StatusSuperseded:
			unfinished, err := c.retryUnfinished(ctx, row.SupersededBy)
			if err != nil {
				return err
			}
			if !unfinished {
				return nil
			}
			// Its messages moved to a turn that is in flight without a job of its own (a retry
			// turn whose attempt failed): run the session again rather than leave that turn to a
			// recovery that may not come.
		case StatusAccumulating:
			due, err := c.queries.TurnDueAt(ctx, row.ID)
			if err != nil {
				return err
			}
			if due.DueAt.After(due.Now) {
				return river.JobSnooze(due.DueAt.Sub(due.Now))
			}
		}
	} else if postgres.NoRows(err) {
		return nil // absorbed into another turn
	} else {
		return err
	}
	_, err = c.process(ctx, job.Args.SessionKey, true, c.config.AcquireTimeout)
	var notDue *notDueError
	switch {
	case err == nil, errors.Is(err, ErrNoTurn):
		return nil
	case errors.As(err, &notDue):
		return river.JobSnooze(max(time.Until(notDue.due), 10*time.Millisecond))
	case errors.Is(err, ErrSessionBusy):
		return river.JobSnooze(busySnooze)
	case errors.Is(err, ErrNotReady):
		c.logger.WarnContext(ctx, "turn handler not ready for the session: the turn waits with its messages",
			slog.String("session_key", job.Args.SessionKey), slog.String("turn_id", job.Args.TurnID.String()),
			slog.Duration("retry_in", c.config.NotReadyDelay), slog.String("error", err.Error()))
		return river.JobSnooze(c.config.NotReadyDelay)
	case errors.Is(err, ErrTurnFailed):
		return nil // recorded FAILED; attempting again cannot help
	}
	return err
}

// retryUnfinished follows a superseded turn's successors and reports whether the last one is in
// flight (PROCESSING or COMMITTING): a retry turn opened by a failed attempt has no job of its own.
// An accumulating successor has its own job; a complete or failed one is done.
func (c *Client) retryUnfinished(ctx context.Context, next *uuid.UUID) (bool, error) {
	for hops := 0; next != nil && hops < 1000; hops++ {
		row, err := c.queries.TurnGet(ctx, *next)
		if postgres.NoRows(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		switch Status(row.Status) {
		case StatusProcessing, StatusCommitting:
			return true, nil
		case StatusSuperseded:
			next = row.SupersededBy
		default:
			return false, nil
		}
	}
	return false, nil
}
