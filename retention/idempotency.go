package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// PruneIdempotencyKeys deletes the API's stored Idempotency-Key responses created before cutoff,
// batch rows per statement (skipping rows another transaction holds) until fewer than batch are
// left or ctx ends, and returns how many it deleted. A request repeating a deleted key runs again
// (the API already treats a key past its TTL as free). Several processes may prune at once; a
// retention run calls it with Config.IdempotencyTTL.
func PruneIdempotencyKeys(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, batch int) (int64, error) {
	if batch < 1 || batch > 10_000 {
		return 0, fmt.Errorf("retention: PruneIdempotencyKeys batch must be between 1 and 10000, got %d", batch)
	}
	q := dbsqlc.New(pool)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := q.RetentionIdempotencyKeyPrune(ctx, dbsqlc.RetentionIdempotencyKeyPruneParams{Cutoff: cutoff, MaxRows: int32(batch)})
		if err != nil {
			return total, fmt.Errorf("retention: prune idempotency keys: %w", err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}
