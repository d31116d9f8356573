package effects

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Ordering keys (docs/design.md, "Ordering keys"). The effects of one tenant with the same
// ordering key are dispatched one at a time, in enqueue order: an ordered effect is recorded
// waiting — PENDING with neither job, lease nor queue; order_queue keeps the queue whose claimers
// will claim it — and gets its queue (its turn) only when every effect of its key enqueued before
// it is settled. The database keeps the order: the settlement of an ordered effect hands its key
// on in the settling transaction (0035_ordering_keys, reckon_order_hand_on_key), whoever settles
// it — a reactor, an inline Do, a callback, an operator, a run's cancellation — and wakes the
// claimers of the next effect's queue at commit. Enqueues and hand-ons of a key serialise on a
// transaction advisory lock of the key, so order_seq follows the order of their commits and no
// hand-on misses an effect enqueued meanwhile. Unordered effects never take the lock: their path
// is today's, with a NULL check.

// orderKeys collects the (tenant, ordering key) pairs of the ordered effects of an enqueue.
type orderKeys struct{ tenants, keys []string }

// add records r's key, if r is ordered.
func (k *orderKeys) add(r *resolvedSpec) {
	if r.orderingKey != "" {
		k.tenants, k.keys = append(k.tenants, r.tenantID), append(k.keys, r.orderingKey)
	}
}

func (k *orderKeys) empty() bool { return len(k.keys) == 0 }

// lockTx takes the advisory locks of the keys for the rest of tx, in a fixed order (so that two
// enqueues of the same keys cannot deadlock each other), then draws seqs values of the keys'
// sequence for the order_seq of the ordered effects inserted after it: drawn under the locks, they
// follow the order of the enqueues of each key.
func (k *orderKeys) lockTx(ctx context.Context, tx pgx.Tx, seqs int) ([]int64, error) {
	if k.empty() {
		return nil, nil
	}
	q := dbsqlc.New(tx)
	if err := q.EffectOrderLock(ctx, dbsqlc.EffectOrderLockParams{TenantIds: k.tenants, OrderingKeys: k.keys}); err != nil {
		return nil, fmt.Errorf("effects: lock ordering keys: %w", err)
	}
	if seqs == 0 {
		return nil, nil
	}
	drawn, err := q.EffectOrderSeqs(ctx, int32(seqs))
	if err != nil {
		return nil, fmt.Errorf("effects: draw order_seq: %w", err)
	}
	return drawn, nil
}

// handOnTx gives each key its turn if none of its unsettled effects has it, after ordered effects
// were inserted waiting: the first of them becomes claimable and its claimers are woken at
// commit.
func (k *orderKeys) handOnTx(ctx context.Context, tx pgx.Tx) error {
	if k.empty() {
		return nil
	}
	if err := dbsqlc.New(tx).EffectOrderHandOn(ctx, dbsqlc.EffectOrderHandOnParams{TenantIds: k.tenants, OrderingKeys: k.keys}); err != nil {
		return fmt.Errorf("effects: hand on ordering keys: %w", err)
	}
	return nil
}

// waitInOrder makes e, the insert of an ordered effect, wait for its key's turn: no queue, its
// claimers' queue kept for the hand-on. An unordered e is left as it is.
func (c *Client) waitInOrder(e *dbsqlc.EffectInsertParams) {
	if e.OrderingKey != nil {
		e.Queue, e.OrderQueue = nil, &c.config.Queue
	}
}

// orderInlineTx readies e, the insert of an inline Do of r, for its ordering key: under the key's
// lock, a key with an unsettled effect makes e wait for its turn (no lease; waiting true), so that
// Do does not jump the key's queue; a free key lets Do call it at once, holding the key with its
// lease until it is settled. An unordered r is left as it is.
func (c *Client) orderInlineTx(ctx context.Context, tx pgx.Tx, r *resolvedSpec, e *dbsqlc.EffectInsertParams) (waiting bool, err error) {
	if r.orderingKey == "" {
		return false, nil
	}
	keys := orderKeys{tenants: []string{r.tenantID}, keys: []string{r.orderingKey}}
	seqs, err := keys.lockTx(ctx, tx, 1)
	if err != nil {
		return false, err
	}
	e.OrderSeq = &seqs[0]
	busy, err := dbsqlc.New(tx).EffectOrderBusy(ctx, dbsqlc.EffectOrderBusyParams{TenantID: r.tenantID, OrderingKey: r.orderingKey})
	if err != nil {
		return false, fmt.Errorf("effects: read ordering key %q: %w", r.orderingKey, err)
	}
	if !busy {
		return false, nil
	}
	e.LeaseOwner, e.LeaseToken, e.LeaseExpiresAt = nil, nil, nil
	e.Reason = "enqueued: waiting for its ordering key"
	e.Queue = &c.config.Queue
	c.waitInOrder(e)
	return true, nil
}

// claimScheduledTx gives each claimed row that is an ordered effect enqueued with ScheduledAt
// still in the future (not_before) a dispatch job of its own, due then, and returns the other
// rows, for the claim's shared jobs. The effect holds its key's turn from now: its successors wait
// for it to be dispatched and settled. Unordered rows cost a NULL check.
func (c *Client) claimScheduledTx(ctx context.Context, tx pgx.Tx, rows []dbsqlc.EffectClaimableRow) ([]dbsqlc.EffectClaimableRow, error) {
	now := time.Now()
	due := func(row dbsqlc.EffectClaimableRow) bool { return row.NotBefore == nil || !row.NotBefore.After(now) }
	if !slices.ContainsFunc(rows, func(row dbsqlc.EffectClaimableRow) bool { return !due(row) }) {
		return rows, nil // the common case
	}
	rest := make([]dbsqlc.EffectClaimableRow, 0, len(rows))
	for _, row := range rows {
		if due(row) {
			rest = append(rest, row)
			continue
		}
		job, err := c.insertDispatchJob(ctx, tx, row.ID, row.TimeoutMs, *row.NotBefore)
		if err != nil {
			return nil, err
		}
		if err := stampJobsTx(ctx, tx, []uuid.UUID{row.ID}, []int64{*job}); err != nil {
			return nil, err
		}
	}
	return rest, nil
}
