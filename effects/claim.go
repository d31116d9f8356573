package effects

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Claiming (docs/design.md, "Claiming"). An effect enqueued on its own (EnqueueTx, no
// ScheduledAt) is written without a dispatch job: PENDING, no job, no lease, and the queue whose
// reactors dispatch it. Every started client runs a claimer that, in one transaction, locks the
// oldest such effects of its queue (SKIP LOCKED), inserts their dispatch jobs — a job per
// Config.DispatchBatch effects, a lone effect a job of its own — and stamps each effect with its
// job. From then on everything is as for an effect enqueued with its job: River's fetch claims the
// attempt and the job fences the outcome. A service that commits one effect per transaction so
// pays River's insert, fetch and completion once per claimed batch instead of once per effect.

// unclaimed reports whether row is an effect waiting to be claimed: PENDING, with a queue (or, for
// an ordered effect waiting for its turn, the queue it will get: ordering.go), and neither job nor
// lease. It was never attempted.
func unclaimed(row dbsqlc.ReckonEffect) bool {
	return State(row.State) == StatePending && row.JobID == nil && row.LeaseToken == nil && (row.Queue != nil || row.OrderQueue != nil)
}

// claimChannel is the channel an enqueue that leaves an effect to be claimed notifies, with the
// queue as payload, so that the claimers of the queue wake at once instead of at their next poll.
const claimChannel = "reckon_claim"

// claimJobsPerTx bounds a claim transaction: at most this many dispatch jobs' worth of effects
// (claimJobsPerTx × Config.DispatchBatch). A claimer that found that many claims again at once.
const claimJobsPerTx = 8

// claimIdleAfter is how many claims in a row must find nothing before a claimer stops looking
// every ClaimInterval and waits for a notification (or FetchPollInterval): the enqueues a
// notification limit kept quiet (see claimNotifier) commit within a ClaimInterval of the one that
// notified, so the claim after them comes first.
const claimIdleAfter = 2

// defaultClaimPoll is how often an idle claimer looks without a notification when
// Config.FetchPollInterval is 0: River's default fetch poll interval.
const defaultClaimPoll = time.Second

// claimNotifier limits an enqueuing client's notifications of claimChannel to one per interval:
// a NOTIFY serializes the commits of every transaction that sends one, and a claimer that was
// woken keeps claiming every interval until it finds nothing twice.
type claimNotifier struct {
	every time.Duration
	last  atomic.Int64 // unix nanoseconds of the last notification
}

// due reports whether this enqueue should notify, and if so counts it as the last notification.
func (n *claimNotifier) due() bool {
	now := time.Now().UnixNano()
	last := n.last.Load()
	return now-last >= int64(n.every) && n.last.CompareAndSwap(last, now)
}

// notifyEnqueuedTx wakes the claimers of the client's queue once tx commits, unless another
// enqueue of this client did less than ClaimInterval ago.
func (c *Client) notifyEnqueuedTx(ctx context.Context, tx pgx.Tx) error {
	if !c.claimNotifier.due() {
		return nil
	}
	return notifyClaimersTx(ctx, tx, c.config.Queue)
}

// notifyClaimersTx wakes the claimers of queue once tx commits.
func notifyClaimersTx(ctx context.Context, tx pgx.Tx, queue string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", claimChannel, queue); err != nil {
		return fmt.Errorf("effects: notify the claimers: %w", err)
	}
	return nil
}

// runClaimer claims the unclaimed effects of the client's queue until ctx ends: every
// ClaimInterval while it finds some, at once again after a full claim, and otherwise on a
// notification of claimChannel (sub) or every FetchPollInterval.
func (c *Client) runClaimer(ctx context.Context, sub *Subscription) {
	defer sub.Close()
	poll := c.config.FetchPollInterval
	if poll <= 0 {
		poll = defaultClaimPoll
	}
	limit := claimJobsPerTx * c.config.DispatchBatch
	timer := time.NewTimer(0)
	defer timer.Stop()
	idle := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-sub.C:
			if idle < claimIdleAfter {
				continue // claiming every ClaimInterval already: the timer runs
			}
		}
		n, err := c.claimOnce(ctx, limit)
		wait := c.config.ClaimInterval
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			c.logger.WarnContext(ctx, "claim failed", slog.String("error", err.Error()))
			idle, wait = claimIdleAfter, poll
		case n == limit:
			idle, wait = 0, 0
		case n > 0:
			idle = 0
		default:
			if idle++; idle >= claimIdleAfter {
				wait = poll
			}
		}
		timer.Stop()
		select { // drain a tick that fired meanwhile
		case <-timer.C:
		default:
		}
		timer.Reset(wait)
	}
}

// claimOnce claims up to limit unclaimed effects of the client's queue in one transaction and
// returns how many it claimed.
func (c *Client) claimOnce(ctx context.Context, limit int) (int, error) {
	var n int
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		rows, err := q.EffectClaimable(ctx, dbsqlc.EffectClaimableParams{Queue: c.config.Queue, MaxRows: int32(limit)})
		if err != nil {
			return fmt.Errorf("effects: read unclaimed effects: %w", err)
		}
		n = len(rows)
		if rows, err = c.claimScheduledTx(ctx, tx, rows); err != nil { // ordering.go
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]uuid.UUID, len(rows))
		timeouts := make([]int32, len(rows))
		traces := make([]json.RawMessage, len(rows))
		for i, row := range rows {
			ids[i], timeouts[i], traces[i] = row.ID, row.TimeoutMs, row.TraceContext
		}
		jobOf, jobs, err := c.insertDispatchJobs(ctx, tx, ids, timeouts, traces, time.Time{})
		if err != nil {
			return err
		}
		jobIDs := make([]int64, len(ids))
		for i := range ids {
			jobIDs[i] = jobs[jobOf[i]]
		}
		return stampJobsTx(ctx, tx, ids, jobIDs)
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		c.metrics.claimBatch.Observe(float64(n))
		c.logger.DebugContext(ctx, "claimed effects", slog.Int("effects", n))
	}
	return n, nil
}

// stampJobsTx hands claimed effects (locked by EffectClaimable in tx) to their dispatch jobs.
func stampJobsTx(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, jobIDs []int64) error {
	if err := dbsqlc.New(tx).EffectStampJobs(ctx, dbsqlc.EffectStampJobsParams{Ids: ids, JobIds: jobIDs}); err != nil {
		return fmt.Errorf("effects: stamp claimed effects with their jobs: %w", err)
	}
	return nil
}
