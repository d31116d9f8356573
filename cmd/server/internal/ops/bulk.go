package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
)

// MaxBulk bounds how many effects one bulk resolve names.
const MaxBulk = 10000

// PreviewResolve is the first half of a bulk resolve: the STUCK effects f matches (f.State must
// be STUCK or empty, meaning STUCK), newest first, at most max of them (1 to MaxBulk; 0: MaxBulk),
// and how many match in all. Each effect is whole, so that an operator sees what it is before
// resolving it: tenant, connector, idempotency key, since when it is STUCK (UpdatedAt) and why
// (Error). f.Limit and f.After are ignored. Nothing changes.
func (o *Ops) PreviewResolve(ctx context.Context, f EffectFilter, max int) (matched []*effects.Effect, total int, err error) {
	switch {
	case f.State != "" && f.State != effects.StateStuck:
		return nil, 0, &FieldError{Field: "state", Message: fmt.Sprintf("%s: only STUCK effects are resolved", f.State)}
	case max == 0:
		max = MaxBulk
	case max < 0 || max > MaxBulk:
		return nil, 0, &FieldError{Field: "max", Message: fmt.Sprintf("%d: want 1 to %d", max, MaxBulk)}
	}
	f.State, f.Limit, f.After = effects.StateStuck, MaxLimit, ""
	filter, err := o.listFilter(ctx, f)
	if err != nil || filter == nil {
		return nil, 0, err
	}
	// STUCK effects are few (each awaits a person), and the listing reads them from
	// reckon_effects_unresolved_idx: counting them all by pages is cheap.
	for {
		page, next, err := o.effects.List(ctx, *filter)
		if err != nil {
			return nil, 0, fmt.Errorf("ops: preview resolve: %w", err)
		}
		matched = append(matched, page[:min(len(page), max-len(matched))]...)
		total += len(page)
		if next == nil {
			return matched, total, nil
		}
		filter.After = next
	}
}

// BulkResult is what ResolveMany did: the effects it resolved, and why it skipped the others.
type BulkResult struct {
	Resolved []uuid.UUID
	// Skipped says why an id was not resolved: "not found" (also outside the scope) or "not
	// STUCK: …" (someone resolved it since the preview).
	Skipped map[uuid.UUID]string
}

// ResolveMany is the confirmation of a bulk resolve: it resolves to each of ids (a preview's)
// that is still STUCK and in scope, each in its own transaction (Resolve), and skips the others.
// A bad to, actor or reason, or more than MaxBulk ids, is a *FieldError before anything changes.
// A database error stops it: the result says what was done until then.
func (o *Ops) ResolveMany(ctx context.Context, scope Scope, ids []uuid.UUID, to effects.State, actor, reason string) (*BulkResult, error) {
	to, err := ParseResolveTarget(string(to))
	if err != nil {
		return nil, err
	}
	if err := CheckAction(actor, reason); err != nil {
		return nil, err
	}
	if len(ids) > MaxBulk {
		return nil, &FieldError{Field: "ids", Message: fmt.Sprintf("%d effects: at most %d at once", len(ids), MaxBulk)}
	}
	result := &BulkResult{Skipped: map[uuid.UUID]string{}}
	for _, id := range ids {
		if _, done := result.Skipped[id]; done || slices.Contains(result.Resolved, id) {
			continue
		}
		_, err := o.Resolve(ctx, scope, id, to, actor, reason)
		switch {
		case err == nil:
			result.Resolved = append(result.Resolved, id)
		case errors.Is(err, ErrNotFound):
			result.Skipped[id] = "not found"
		case errors.Is(err, effects.ErrNotStuck):
			result.Skipped[id] = "not STUCK any more"
		default:
			return result, err
		}
	}
	return result, nil
}
