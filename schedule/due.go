package schedule

import "time"

// round is what one round does with a locked schedule whose next tick is due at now.
type round struct {
	// ticks are the ticks to enqueue, oldest first.
	ticks []time.Time
	// dropped says whether due ticks were left out for good (the policy's doing).
	dropped bool
	// more says whether due ticks remain after ticks (CatchUp, beyond CatchUpBatch).
	more bool
}

// following is the schedule's next tick once r's ticks are enqueued: the tick after the last.
func (r round) following(t ticker) time.Time { return t.Next(r.ticks[len(r.ticks)-1]) }

// dueRound works out which of the ticks from next (due: next ≤ now) up to now a round enqueues,
// by the policy missed.
func dueRound(t ticker, missed Missed, next, now time.Time) round {
	if missed == CatchUp {
		return catchUpRound(t, next, now)
	}
	latest := latestDue(t, next, now)
	return round{ticks: []time.Time{latest}, dropped: !latest.Equal(next)}
}

// catchUpRound: the due ticks of the last CatchUpWindow, the latest CatchUpMax of them, the
// oldest CatchUpBatch of those.
func catchUpRound(t ticker, next, now time.Time) round {
	r := round{}
	first := next
	if cutoff := now.Add(-CatchUpWindow); first.Before(cutoff) {
		first = t.Next(cutoff.Add(-time.Nanosecond)) // the first tick at or after the cutoff
		r.dropped = true
	}
	var due []time.Time
	for tick := first; !tick.IsZero() && !tick.After(now); tick = t.Next(tick) {
		due = append(due, tick)
		if len(due) > CatchUpMax {
			due = due[1:]
			r.dropped = true
		}
	}
	if len(due) == 0 { // cannot happen for a next that is due; keep the schedule moving anyway
		return round{ticks: []time.Time{next}}
	}
	if len(due) > CatchUpBatch {
		due, r.more = due[:CatchUpBatch], true
	}
	r.ticks = due
	return r
}

// lookBack are the windows before now in which latestDue looks for the latest due tick first, so
// that a long outage of a frequent schedule is not walked tick by tick.
var lookBack = []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour}

// latestDue is the latest tick at or before now, from next on (next ≤ now).
func latestDue(t ticker, next, now time.Time) time.Time {
	for _, window := range lookBack {
		from := now.Add(-window)
		if !from.After(next) {
			break
		}
		if tick := lastUpTo(t, t.Next(from), now); !tick.IsZero() {
			return tick
		}
	}
	if tick := lastUpTo(t, next, now); !tick.IsZero() {
		return tick
	}
	return next
}

// lastUpTo is the last tick from first on that is not after now; zero if first is.
func lastUpTo(t ticker, first, now time.Time) time.Time {
	var last time.Time
	for tick := first; !tick.IsZero() && !tick.After(now); tick = t.Next(tick) {
		last = tick
	}
	return last
}
