package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// The shared statistics (docs/design.md, "Shared statistics"): the counts behind the gauges read
// from the database — reckon_effects{state}, reckon_effects_oldest_pending_seconds{connector} and
// the parts plugins add (reckon_sagas) — are computed once per Config.StatsInterval by one started
// client of the whole fleet and stored in reckon_stats, one row per part; every client with a
// Registerer reports the stored values at each scrape.
//
// Each started client tries every StatsInterval / statsTries whether a part is due. A part is
// computed in one transaction that first claims its row (StatsClaim): the claim matches only when
// the part was computed at least an interval ago and no transaction holds the row, so one client
// per interval wins and the others go on without waiting. A computation that fails, or whose
// process dies, rolls back, and the row is due for whoever tries next.

// StatsPartEffects is the part of the shared statistics that effects computes itself.
const StatsPartEffects = "effects"

// statsTries is how many times per StatsInterval a started client tries to claim each part: the
// counts are at most StatsInterval × (1 + 1/statsTries) old while a reactor runs.
const statsTries = 4

// statsMinTimeout bounds a computation's transaction from below (see statsTimeout).
const statsMinTimeout = 10 * time.Second

// StatsFunc computes a plugin's part of the shared statistics in tx, the transaction of the one
// reactor that computes it for the whole fleet this interval: it reads what it counts and returns
// the value to store, which encoding/json marshals. An error rolls the computation back; another
// try comes within the interval. It must not commit or roll back tx.
type StatsFunc func(ctx context.Context, tx pgx.Tx) (any, error)

// statsPart is one part of the shared statistics and how to compute it.
type statsPart struct {
	name    string
	compute StatsFunc
}

// AddStats adds part to the shared statistics: a started client computes it with compute once per
// Config.StatsInterval for the whole fleet (the first client to claim it does) and stores it in
// reckon_stats (part, value as JSON). The plugin's own collector reads it back at scrape time
// (reckon_stats_age_seconds covers it too). The names are per deployment: every reactor that adds
// a part must compute it the same way.
func (h *PluginHost) AddStats(part string, compute StatsFunc) error {
	if part == "" || compute == nil {
		return errors.New("effects: AddStats needs a part name and a function")
	}
	for _, p := range h.client.stats {
		if p.name == part {
			return fmt.Errorf("effects: stats part %q is already added", part)
		}
	}
	h.client.stats = append(h.client.stats, statsPart{name: part, compute: compute})
	return nil
}

// statsParts returns the names of the client's parts: effects' own and the plugins'.
func (c *Client) statsParts() []string {
	names := make([]string, len(c.stats))
	for i, p := range c.stats {
		names[i] = p.name
	}
	return names
}

// effectsStats is the stored value of the effects part.
type effectsStats struct {
	// States counts the effects PENDING, UNKNOWN and STUCK.
	States map[State]int64 `json:"states"`
	// OldestPending is, per connector with such effects, the age in seconds of its oldest PENDING
	// effect that is not awaiting a callback, at the computation.
	OldestPending map[string]float64 `json:"oldest_pending_seconds"`
	// AwaitingConfirmation counts, per connector with such effects, the PENDING effects awaiting
	// their confirmation, and OldestAwaitingConfirmation is the age in seconds of the oldest.
	AwaitingConfirmation       map[string]int64   `json:"awaiting_confirmation,omitempty"`
	OldestAwaitingConfirmation map[string]float64 `json:"oldest_awaiting_confirmation_seconds,omitempty"`
}

// computeEffectsStats is the StatsFunc of the effects part: one pass over the unresolved effects.
func computeEffectsStats(ctx context.Context, tx pgx.Tx) (any, error) {
	rows, err := dbsqlc.New(tx).StatsEffectsUnresolved(ctx)
	if err != nil {
		return nil, err
	}
	out := effectsStats{
		States:        map[State]int64{StatePending: 0, StateUnknown: 0, StateStuck: 0},
		OldestPending: map[string]float64{},

		AwaitingConfirmation: map[string]int64{}, OldestAwaitingConfirmation: map[string]float64{},
	}
	for _, row := range rows {
		if row.AwaitingConfirmation > 0 {
			out.AwaitingConfirmation[row.Connector] = row.AwaitingConfirmation
			out.OldestAwaitingConfirmation[row.Connector] = row.OldestAwaitingConfirmationSeconds
		}
		out.States[State(row.State)] += row.Count
		if State(row.State) == StatePending && row.OldestPendingSeconds > 0 {
			out.OldestPending[row.Connector] = row.OldestPendingSeconds
		}
	}
	return out, nil
}

// statsTimeout bounds a computation: its statements, and its transaction left idle (a process that
// hangs, a host that vanished), end after it, which frees the claimed row for another reactor.
func (c *Client) statsTimeout() time.Duration {
	return max(c.config.StatsInterval, statsMinTimeout)
}

// runStats computes the parts that are due every StatsInterval / statsTries until ctx ends (Start
// has computed those due at the start).
func (c *Client) runStats(ctx context.Context) {
	ticker := time.NewTicker(c.config.StatsInterval / statsTries)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		c.computeStats(ctx)
	}
}

// computeStats computes each part that is due and that no other client is computing.
func (c *Client) computeStats(ctx context.Context) {
	for _, part := range c.stats {
		if _, err := c.computeStatsPart(ctx, part); err != nil && ctx.Err() == nil {
			c.logger.WarnContext(ctx, "shared statistics: computation failed; another try within the interval",
				slog.String("part", part.name), slog.String("error", err.Error()))
		}
	}
}

// computeStatsPart claims and computes part if it is due; computed reports whether it did.
func (c *Client) computeStatsPart(ctx context.Context, part statsPart) (computed bool, err error) {
	timeout := c.statsTimeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !c.statsEnsured[part.name] {
		if err := c.queries.StatsEnsure(ctx, part.name); err != nil {
			return false, fmt.Errorf("effects: stats part %q: %w", part.name, err)
		}
		c.statsEnsured[part.name] = true
	}
	err = c.withTx(ctx, func(tx pgx.Tx) error {
		computed = false
		q := dbsqlc.New(tx)
		if err := q.StatsBound(ctx, fmt.Sprintf("%dms", timeout.Milliseconds())); err != nil {
			return err
		}
		_, err := q.StatsClaim(ctx, dbsqlc.StatsClaimParams{
			Part: part.name, IntervalMs: c.config.StatsInterval.Milliseconds(), ComputedBy: c.config.ID,
		})
		if postgres.NoRows(err) {
			return nil // not due, or being computed by another client
		}
		if err != nil {
			return err
		}
		value, err := part.compute(ctx, tx)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(value)
		if err != nil {
			return err
		}
		if err := q.StatsSet(ctx, dbsqlc.StatsSetParams{Part: part.name, Value: raw}); err != nil {
			return err
		}
		computed = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("effects: stats part %q: %w", part.name, err)
	}
	if computed {
		c.metrics.statsComputations.WithLabelValues(part.name).Inc()
	}
	return computed, nil
}
