package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
)

// outcome is a classified connector answer.
type outcome struct {
	kind          outcomeKind
	correlationID string // of an accepted outcome
	result        json.RawMessage
	err           error
	retryAfter    time.Duration
}

type outcomeKind string

const (
	outcomeConfirmed outcomeKind = "confirmed"
	outcomeFailed    outcomeKind = "failed"
	outcomeRetry     outcomeKind = "retryable"
	outcomeUnknown   outcomeKind = "unknown"
	outcomeAccepted  outcomeKind = "accepted" // awaiting a callback (async.go)
)

// classify sorts a connector's answer conservatively: only a nil error confirms, only Permanent
// fails, only Retryable retries; everything else — timeouts included — is UNKNOWN.
func classify(result json.RawMessage, err error) outcome {
	var retryable *RetryableError
	switch {
	case err == nil:
		if err := checkResult(result); err != nil {
			// The call may well have taken effect: an answer that cannot be recorded is as good
			// as none, and the status check decides.
			return outcome{kind: outcomeUnknown, err: fmt.Errorf("connector returned a result that cannot be stored: %w", err)}
		}
		return outcome{kind: outcomeConfirmed, result: result}
	case IsPermanent(err):
		return outcome{kind: outcomeFailed, err: err}
	case errors.As(err, &retryable):
		return outcome{kind: outcomeRetry, err: err, retryAfter: retryable.After}
	case isAccepted(err):
		return classifyAccepted(err)
	default:
		return outcome{kind: outcomeUnknown, err: err}
	}
}

// checkResult reports why Postgres cannot store a connector's result (absent is fine):
// classify, the status check and callbacks ask it before a result reaches settle.
func checkResult(result json.RawMessage) error {
	if len(result) == 0 {
		return nil
	}
	return jsonx.Check(result)
}

// recordAttempt writes the outcome of a dispatch attempt in tx, fenced by f, with the follow-up
// job it needs. It returns the delay after which a retryable effect is tried again (zero
// otherwise). When fenced is true the caller must roll tx back: a follow-up job may have been
// inserted for nothing.
// attempt is one attempt to record: the effect as read before the call, its connector, the owner
// of the attempt and who records it.
type attempt struct {
	row       dbsqlc.ReckonEffect
	connector *Connector
	fence     fence
	actor     string
}

func (c *Client) recordAttempt(ctx context.Context, tx pgx.Tx, a attempt, out outcome) (settled dbsqlc.ReckonEffect, retryIn time.Duration, err error) {
	row, connector, f, actor := a.row, a.connector, a.fence, a.actor
	t := transition{from: StatePending, fence: f, attempted: 1, actor: actor}
	if out.err != nil {
		t.errMsg = out.err.Error()
	}
	attempt := int(row.Attempts) + 1
	switch out.kind {
	case outcomeConfirmed:
		t.to, t.result, t.reason = StateConfirmed, out.result, "dispatch succeeded"
	case outcomeFailed:
		t.to, t.reason = StateFailed, "permanent failure"
	case outcomeRetry:
		if attempt >= int(row.MaxAttempts) {
			t.to, t.reason = StateFailed, fmt.Sprintf("retry budget spent: %d attempts, none applied", attempt)
			break
		}
		// A cancelled run is not tried again — but a compensation is: it undoes what the run did.
		if cancelled, err := c.runCancelledTx(ctx, tx, row); err != nil {
			return settled, 0, err
		} else if cancelled && row.CompensatesID == nil { // run.go
			t.to, t.reason = StateFailed, "retryable failure, none applied, and the run was cancelled: not tried again"
			break
		}
		retryIn = out.retryAfter // the upstream's own Retry-After is kept as given
		if retryIn <= 0 {
			retryIn = connector.retryDelay(attempt)
		}
		// A dispatch job of its own tries again itself, after a snooze; an inline attempt or a
		// batch job hands the effect to a dispatch job scheduled after the backoff.
		retryJob := f.jobID
		if retryJob == nil || f.sharedJob {
			if retryJob, err = c.insertDispatchJob(ctx, tx, row.ID, row.TimeoutMs, time.Now().Add(retryIn)); err != nil {
				return settled, 0, err
			}
		}
		settled, err = dbsqlc.New(tx).EffectRetryLater(ctx, dbsqlc.EffectRetryLaterParams{
			ID: row.ID, Error: jsonx.SafeText(t.errMsg), NewJobID: *retryJob, LeaseToken: f.leaseToken, JobID: f.jobID,
		})
		if postgres.NoRows(err) {
			return settled, 0, errFencedOut
		}
		return settled, retryIn, err
	case outcomeAccepted:
		settled, err = c.recordAccepted(ctx, tx, a, out.correlationID)
		return settled, 0, err
	default:
		t.to, t.reason = StateUnknown, "outcome unknown: "+t.errMsg
		if t.newJobID, err = c.insertReconcileJob(ctx, tx, row.ID, row.TimeoutMs, row.Connector); err != nil {
			return settled, 0, err
		}
	}
	t.detail = map[string]any{"attempt": attempt}
	if f.jobID != nil {
		t.detail["job_id"] = *f.jobID
	}
	settled, err = c.settle(ctx, tx, row.ID, t)
	return settled, 0, err
}
