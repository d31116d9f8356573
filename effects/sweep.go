package effects

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// sweepBatch is how many effects one sweep transaction takes over.
const sweepBatch = 100

// runSweeper sweeps every SweepInterval until ctx ends. Every reactor sweeps; the candidates are
// locked with SKIP LOCKED and every write is fenced, so sweepers never step on each other or on
// the workers.
func (c *Client) runSweeper(ctx context.Context) {
	ticker := time.NewTicker(c.config.SweepInterval)
	defer ticker.Stop()
	for {
		c.whileFull(ctx, "sweep failed", c.sweepOnce)
		c.whileFull(ctx, "expiring confirmation holds failed", c.expireConfirmations) // confirm.go
		if _, err := c.queries.LimitSweep(ctx); err != nil && ctx.Err() == nil {      // limit.go
			c.logger.Warn("pruning the limits' old waiters and slots failed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// whileFull runs batch until it takes fewer than sweepBatch effects or fails; a failure is logged
// with what (unless ctx ended) and left to the next sweep.
func (c *Client) whileFull(ctx context.Context, what string, batch func(context.Context) (int, error)) {
	for {
		n, err := batch(ctx)
		if err != nil && ctx.Err() == nil {
			c.logger.Warn(what, slog.String("error", err.Error()))
		}
		if err != nil || n < sweepBatch {
			return
		}
	}
}

// Why the sweeper took an effect over: the values of reckon_effect_swept_total's reason, each also
// prefixed "reconcile " for an UNKNOWN effect given a new reconcile job (sweptReasons).
const (
	sweptJobGone      = "job gone without an outcome"
	sweptLeaseExpired = "inline attempt's lease expired"
	sweptPresumedDead = "worker presumed dead: job running past its timeout"
)

// sweptReasons are every value of reckon_effect_swept_total's reason label.
var sweptReasons = []string{
	sweptJobGone, sweptLeaseExpired, sweptPresumedDead,
	"reconcile " + sweptJobGone, "reconcile " + sweptLeaseExpired, "reconcile " + sweptPresumedDead,
}

// sweepOnce takes over, in one transaction, up to sweepBatch effects whose attempt or job is gone:
//   - PENDING with an expired inline lease, or whose dispatch job has run past its timeout plus the
//     margin (the worker is presumed dead), or whose job is gone: UNKNOWN, with a reconcile job. A
//     blind second call is never made: reconciliation decides.
//   - UNKNOWN whose reconcile job is gone or presumed dead: a new reconcile job.
func (c *Client) sweepOnce(ctx context.Context) (int, error) {
	actor := "sweeper:" + c.config.ID
	type swept struct {
		row    dbsqlc.EffectSweepCandidatesRow
		reason string
	}
	var done []swept
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		candidates, err := q.EffectSweepCandidates(ctx, dbsqlc.EffectSweepCandidatesParams{
			MarginMs: int32(c.config.InFlightMargin / time.Millisecond),
			MaxRows:  sweepBatch,
		})
		if err != nil {
			return fmt.Errorf("sweep candidates: %w", err)
		}
		for _, cand := range candidates {
			reason := sweptJobGone
			switch {
			case cand.LeaseExpired:
				reason = sweptLeaseExpired
			case cand.JobRunning:
				reason = sweptPresumedDead
			}
			jobID, err := c.insertReconcileJob(ctx, tx, cand.ID, cand.TimeoutMs, cand.Connector)
			if err != nil {
				return err
			}
			if State(cand.State) == StateUnknown {
				if _, err := q.EffectSetJob(ctx, dbsqlc.EffectSetJobParams{ID: cand.ID, State: cand.State, JobID: cand.JobID, NewJobID: *jobID}); err != nil {
					return fmt.Errorf("sweep effect %s: %w", cand.ID, err)
				}
				done = append(done, swept{cand, "reconcile " + reason})
				continue
			}
			_, err = c.settle(ctx, tx, cand.ID, transition{
				from: StatePending, to: StateUnknown, fence: fence{jobID: cand.JobID, leaseToken: cand.LeaseToken},
				attempted: 1, errMsg: reason, newJobID: jobID, actor: actor,
				reason: reason + ": outcome unknown; reconcile instead of calling again",
			})
			switch {
			case err == nil:
				done = append(done, swept{cand, reason})
			case !errors.Is(err, errFencedOut): // fenced out: its worker recorded it meanwhile
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, s := range done {
		c.metrics.swept.WithLabelValues(s.reason).Inc()
		if State(s.row.State) == StatePending {
			c.countTransition(s.row.Connector, s.row.Policy, StatePending, StateUnknown)
		}
		c.logger.Info("swept effect", slog.String("effect_id", s.row.ID.String()), slog.String("reason", s.reason))
	}
	return len(done), nil
}
