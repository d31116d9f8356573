package effects

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// loader reads effects for the workers, coalescing the reads of all workers waiting at that
// moment into one query (River hands jobs to many workers at once, so they read together).
// Every read is fresh: a worker's read is sent after it asked.
type loader struct {
	queries *dbsqlc.Queries
	mu      sync.Mutex
	waiting map[uuid.UUID][]chan loadResult
	running bool
}

type loadResult struct {
	row dbsqlc.ReckonEffect
	err error
}

// loadBatchMax bounds the ids one query reads.
const loadBatchMax = 500

func newLoader(queries *dbsqlc.Queries) *loader {
	return &loader{queries: queries, waiting: map[uuid.UUID][]chan loadResult{}}
}

// load returns the effect with id, or ErrNotFound.
func (l *loader) load(ctx context.Context, id uuid.UUID) (dbsqlc.ReckonEffect, error) {
	ch := make(chan loadResult, 1)
	l.mu.Lock()
	l.waiting[id] = append(l.waiting[id], ch)
	if !l.running {
		l.running = true
		go l.run()
	}
	l.mu.Unlock()
	select {
	case res := <-ch:
		return res.row, res.err
	case <-ctx.Done():
		return dbsqlc.ReckonEffect{}, ctx.Err()
	}
}

// loadLinger lets the reads of workers handed jobs together join one query.
const loadLinger = 200 * time.Microsecond

// run reads batches until nobody waits.
func (l *loader) run() {
	for {
		time.Sleep(loadLinger)
		l.mu.Lock()
		if len(l.waiting) == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		batch := make(map[uuid.UUID][]chan loadResult, min(len(l.waiting), loadBatchMax))
		for id, chans := range l.waiting {
			if len(batch) == loadBatchMax {
				break
			}
			batch[id] = chans
			delete(l.waiting, id)
		}
		l.mu.Unlock()

		ids := make([]uuid.UUID, 0, len(batch))
		for id := range batch {
			ids = append(ids, id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		rows, err := l.queries.EffectListByIDs(ctx, ids)
		cancel()
		found := make(map[uuid.UUID]dbsqlc.ReckonEffect, len(rows))
		for _, row := range rows {
			found[row.ID] = row
		}
		for id, chans := range batch {
			res := loadResult{err: err}
			if err != nil {
				res.err = fmt.Errorf("effects: read effect %s: %w", id, err)
			} else if row, ok := found[id]; ok {
				res.row = row
			} else {
				res.err = ErrNotFound
			}
			for _, ch := range chans {
				ch <- res
			}
		}
	}
}
