package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
)

// MaxBulk bounds how many effects one bulk resolve or redrive names.
const MaxBulk = 10000

// PreviewResolve is the first half of a bulk resolve: the STUCK effects f matches (f.State must
// be STUCK or empty, meaning STUCK), newest first, at most max of them (1 to MaxBulk; 0: MaxBulk),
// and how many match in all. Each effect is whole, so that an operator sees what it is before
// resolving it: tenant, connector, idempotency key, since when it is STUCK (UpdatedAt) and why
// (Error). f.Limit and f.After are ignored. Nothing changes.
func (o *Ops) PreviewResolve(ctx context.Context, f EffectFilter, max int) (matched []*effects.Effect, total int, err error) {
	// STUCK effects are few (each awaits a person), and the listing reads them from
	// reckon_effects_unresolved_idx: counting them all by pages is cheap.
	return o.preview(ctx, f, max, effects.StateStuck, "resolved", nil)
}

// PreviewRedrive is the first half of a bulk redrive, as PreviewResolve is of a bulk resolve: the
// FAILED effects f matches (f.State must be FAILED or empty, meaning FAILED) that a redrive does
// not refuse by their own record — compensations, owned effects (saga steps) and effects whose
// confirmation was declined or expired are left out (effects.Client.Redrive) — newest first, at
// most max of them, and how many match. FAILED effects can be many: the count stops once it
// passes max, so a total above len(matched) means "more than max". Whether an effect's run
// refuses it is known only when it is redriven (RedriveMany skips it then). Nothing changes.
func (o *Ops) PreviewRedrive(ctx context.Context, f EffectFilter, max int) (matched []*effects.Effect, total int, err error) {
	return o.preview(ctx, f, max, effects.StateFailed, "redriven", Redrivable)
}

// Redrivable reports whether a redrive of e is not refused by its own record: it is FAILED, not
// a compensation, not owned (a saga step), and its confirmation, if it was held for one, was not
// declined and did not expire. Its run may still refuse it (effects.Client.Redrive).
func Redrivable(e *effects.Effect) bool {
	return e.State == effects.StateFailed && e.CompensatesID == nil && e.Owner == "" &&
		e.Confirmation != effects.ConfirmationDeclined && e.Confirmation != effects.ConfirmationExpired
}

// preview lists the effects in state that f matches and keep accepts (nil: all), for a bulk
// action that only state allows ("only STUCK effects are resolved"). With keep set, the count
// stops once it passes max.
func (o *Ops) preview(ctx context.Context, f EffectFilter, max int, state effects.State, verb string, keep func(*effects.Effect) bool) (matched []*effects.Effect, total int, err error) {
	switch {
	case f.State != "" && f.State != state:
		return nil, 0, &FieldError{Field: "state", Message: fmt.Sprintf("%s: only %s effects are %s", f.State, state, verb)}
	case max == 0:
		max = MaxBulk
	case max < 0 || max > MaxBulk:
		return nil, 0, &FieldError{Field: "max", Message: fmt.Sprintf("%d: want 1 to %d", max, MaxBulk)}
	}
	f.State, f.Limit, f.After = state, MaxLimit, ""
	filter, err := o.listFilter(ctx, f)
	if err != nil || filter == nil {
		return nil, 0, err
	}
	for {
		page, next, err := o.effects.List(ctx, *filter)
		if err != nil {
			return nil, 0, fmt.Errorf("ops: preview: %w", err)
		}
		if keep != nil {
			page = slices.DeleteFunc(page, func(e *effects.Effect) bool { return !keep(e) })
		}
		matched = append(matched, page[:min(len(page), max-len(matched))]...)
		total += len(page)
		if next == nil || (keep != nil && total > max) {
			return matched, total, nil
		}
		filter.After = next
	}
}

// BulkResult is what ResolveMany or RedriveMany did: the effects it resolved (or redrove), and
// why it skipped the others.
type BulkResult struct {
	Resolved []uuid.UUID
	// Skipped says why an id was not resolved: "not found" (also outside the scope), "not
	// STUCK any more" (someone resolved it since the preview), "not FAILED any more" (redriven
	// since), or "refused: …" (a redrive its record or its run refuses).
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
	return o.many(ids, actor, reason, func(id uuid.UUID) (string, error) {
		_, err := o.Resolve(ctx, scope, id, to, actor, reason)
		if errors.Is(err, effects.ErrNotStuck) {
			return "not STUCK any more", nil
		}
		return "", err
	})
}

// RedriveMany is the confirmation of a bulk redrive: it redrives each of ids (a preview's) that
// is still FAILED, in scope and not refused, each in its own transaction (Redrive), and skips the
// others, saying why. A bad actor or reason, or more than MaxBulk ids, is a *FieldError before
// anything changes. A database error stops it: the result says what was done until then.
func (o *Ops) RedriveMany(ctx context.Context, scope Scope, ids []uuid.UUID, actor, reason string) (*BulkResult, error) {
	return o.many(ids, actor, reason, func(id uuid.UUID) (string, error) {
		_, err := o.Redrive(ctx, scope, id, actor, reason)
		switch {
		case errors.Is(err, effects.ErrNotFailed):
			return "not FAILED any more", nil
		case RedriveRefused(err):
			return "refused: " + err.Error(), nil
		}
		return "", err
	})
}

// many runs act on each of ids once, in order, after checking actor, reason and the count. act
// returns why it skipped an id ("" and nil: done); ErrNotFound skips it as "not found"; another
// error stops the run.
func (o *Ops) many(ids []uuid.UUID, actor, reason string, act func(uuid.UUID) (string, error)) (*BulkResult, error) {
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
		skipped, err := act(id)
		switch {
		case errors.Is(err, ErrNotFound):
			result.Skipped[id] = "not found"
		case err != nil:
			return result, err
		case skipped != "":
			result.Skipped[id] = skipped
		default:
			result.Resolved = append(result.Resolved, id)
		}
	}
	return result, nil
}
