package effects

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/txn"
)

// Group commit. The common outcome of a dispatch — CONFIRMED or FAILED, with no follow-up job — is
// handed by its worker to a committer, which writes the outcomes of all workers waiting at that
// moment in one transaction of one statement: the effects updated, each row fenced by its own job,
// and their jobs completed. A worker returns only after its outcome is committed (or
// fenced out), so the protocol is the one-effect protocol with the commits shared.

const (
	// commitBatchMax bounds the outcomes one statement writes.
	commitBatchMax = 256
	// committers is how many statements may be in flight at once.
	committers = 2
	// commitLinger is how long a committer waits for more outcomes after the first, so that
	// batches grow under load; an idle reactor commits after at most this delay.
	commitLinger = time.Millisecond
)

type outcomeWrite struct {
	effectID    uuid.UUID
	jobID       int64
	completeJob bool // false for a batch job, which carries other effects
	to          State
	result      json.RawMessage
	errMsg      string
	actor       string
	reason      string
	detail      json.RawMessage
	done        chan writeResult
}

// writeResult is what the group commit did with one write: nil, errFencedOut, or its
// transaction's error.
type writeResult struct{ err error }

// committer is a service of the started client (lifecycle.go): built once with the client, its
// queue and goroutines made by each Start, since Stop closes the queue to drain it (a client may
// be started again after Stop).
type committer struct {
	client *Client
	queue  chan *outcomeWrite
	wg     sync.WaitGroup
}

func newCommitter(client *Client) *committer {
	return &committer{client: client}
}

// Start makes the queue and starts the committers. Call it before the workers start.
func (m *committer) Start(context.Context) error {
	queue := make(chan *outcomeWrite, commitBatchMax*committers)
	m.queue = queue
	for range committers {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.loop(queue)
		}()
	}
	return nil
}

// Stop ends the committers once the queue is drained. Call it after the workers have stopped.
func (m *committer) Stop(context.Context) error {
	close(m.queue)
	m.wg.Wait()
	return nil
}

// write submits w and waits for its transaction: nil once written, errFencedOut when the effect
// had moved on (nothing written).
func (m *committer) write(ctx context.Context, w *outcomeWrite) error {
	w.done = make(chan writeResult, 1)
	select {
	case m.queue <- w:
	case <-ctx.Done():
		return ctx.Err()
	}
	res := <-w.done // always answered: the committers drain the queue before they stop
	return res.err
}

func (m *committer) loop(queue chan *outcomeWrite) {
	for first := range queue {
		batch := []*outcomeWrite{first}
		linger := time.NewTimer(commitLinger)
	fill:
		for len(batch) < commitBatchMax {
			select {
			case w, ok := <-queue:
				if !ok {
					break fill
				}
				batch = append(batch, w)
			case <-linger.C:
				break fill
			}
		}
		linger.Stop()
		written, err := m.commit(batch)
		for _, w := range batch {
			res := writeResult{err: err}
			if _, ok := written[w.effectID]; err == nil && !ok {
				res.err = errFencedOut
			}
			w.done <- res
		}
	}
}

// commit writes a batch in one transaction and returns the effects written.
func (m *committer) commit(batch []*outcomeWrite) (map[uuid.UUID]struct{}, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	params := dbsqlc.EffectSettleManyParams{}
	for _, w := range batch {
		params.Ids = append(params.Ids, w.effectID)
		params.JobIds = append(params.JobIds, w.jobID)
		params.CompleteJobs = append(params.CompleteJobs, w.completeJob)
		params.ToStates = append(params.ToStates, string(w.to))
		params.Results = append(params.Results, w.result)
		params.Errors = append(params.Errors, jsonx.SafeText(w.errMsg)) // it may quote the upstream
		params.Actors = append(params.Actors, w.actor)
		params.Reasons = append(params.Reasons, jsonx.SafeText(w.reason))
		params.Details = append(params.Details, w.detail)
	}
	// One statement, so one implicit transaction: the effects and their jobs commit together. A
	// statement that Postgres aborts because of other transactions — a deadlock, a migration's
	// lock (lock_timeout), a serialization failure — wrote nothing and runs again (txn.Retry):
	// these outcomes are known, and a failed write would leave their effects to be found UNKNOWN.
	var rows []dbsqlc.EffectSettleManyRow
	err := txn.Retry(ctx, m.client.logger, txn.Policy{}, func() error {
		var err error
		rows, err = m.client.queries.EffectSettleMany(ctx, params)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("effects: write %d outcomes: %w", len(batch), err)
	}
	written := make(map[uuid.UUID]struct{}, len(rows))
	for _, row := range rows {
		written[row.ID] = struct{}{}
	}
	for _, row := range rows {
		m.client.countSettlement(row.Connector, row.Policy, StatePending, State(row.State), row.CreatedAt, row.UpdatedAt)
	}
	return written, nil
}
