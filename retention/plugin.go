package retention

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/reckonhq/reckon/effects"
)

// Install makes r a plugin of the effects.Client being built (effects.Plugin): a periodic River job
// that runs retention every Config.Interval, and once when the client starts, on the elected
// leader only. Its runs are recorded with the actor "retention:{client id}". A run that finds
// another in progress (ErrBusy) ends quietly. The job has no timeout: a run ends when it is done or
// when the client stops (Stop waits for it, then cancels it; what its committed batches removed
// stays removed).
func (r *Retention) Install(host *effects.PluginHost) error {
	w := &worker{retention: r, actor: "retention:" + host.Client().ID()}
	if err := effects.AddWorker(host, w); err != nil {
		return err
	}
	queue := host.Queue()
	host.AddPeriodicJob(river.NewPeriodicJob(
		river.PeriodicInterval(r.cfg.Interval),
		func() (river.JobArgs, *river.InsertOpts) {
			return jobArgs{}, &river.InsertOpts{Queue: queue, MaxAttempts: 1}
		},
		&river.PeriodicJobOpts{RunOnStart: true},
	))
	return nil
}

// jobArgs are the arguments of the periodic retention job: none.
type jobArgs struct{}

func (jobArgs) Kind() string { return "reckon_retention" }

type worker struct {
	river.WorkerDefaults[jobArgs]
	retention *Retention
	actor     string
}

// Timeout: none (-1); see Install.
func (w *worker) Timeout(*river.Job[jobArgs]) time.Duration { return -1 }

func (w *worker) Work(ctx context.Context, _ *river.Job[jobArgs]) error {
	_, err := w.retention.Run(ctx, &RunOpts{Actor: w.actor})
	if errors.Is(err, ErrBusy) {
		w.retention.logger.InfoContext(ctx, "retention: another run is in progress; this one is skipped", slog.String("actor", w.actor))
		return nil
	}
	return err // logged by Run; the next period runs again
}
