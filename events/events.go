package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Channel is the Postgres channel the database notifies when events other than an effect's
// transitions have been written. It only wakes readers; the log is the truth.
const Channel = "reckon_events"

// settledChannel is the channel on which the database names the effects that have just settled
// (migration 0002): their transitions are events. The other transitions of effects notify
// nothing (a notifying transaction holds a cluster-wide lock through its commit); readers find
// them at their next look.
const settledChannel = "reckon_effect_settled"

// ID is an event's position in the log: the id of the transaction that wrote it, then a sequence
// number. Positions increase in the order readers see events. The zero ID is before every event.
// Its text form, "xid-seq", is what the HTTP API sends as the SSE event id.
type ID struct {
	XID uint64
	Seq int64
}

// String is the text form of id, "xid-seq" ("0-0" for the zero ID).
func (id ID) String() string {
	return strconv.FormatUint(id.XID, 10) + "-" + strconv.FormatInt(id.Seq, 10)
}

// Less reports whether id comes before o in the log.
func (id ID) Less(o ID) bool {
	return id.XID < o.XID || (id.XID == o.XID && id.Seq < o.Seq)
}

// IsZero reports whether id is the zero ID.
func (id ID) IsZero() bool { return id == ID{} }

// ParseID reads the text form of an ID ("xid-seq"; "0" is the zero ID too).
func ParseID(s string) (ID, error) {
	if s == "0" {
		return ID{}, nil
	}
	x, q, ok := strings.Cut(s, "-")
	xid, err1 := strconv.ParseUint(x, 10, 63)
	seq, err2 := strconv.ParseInt(q, 10, 64)
	if !ok || err1 != nil || err2 != nil || seq < 0 {
		return ID{}, fmt.Errorf("events: invalid event id %q: want xid-seq, two decimal numbers", truncate(s))
	}
	return ID{XID: xid, Seq: seq}, nil
}

// Event is one entry of the log.
type Event struct {
	ID ID `json:"id"`
	// Type is {category}.{name}: turn.completed, tool.executed, effect.stuck… (docs/events.md).
	Type       string          `json:"type"`
	Tenant     string          `json:"tenant"`
	SessionKey string          `json:"session_key,omitempty"`
	TurnID     *uuid.UUID      `json:"turn_id,omitempty"`
	EffectID   *uuid.UUID      `json:"effect_id,omitempty"`
	SagaID     *uuid.UUID      `json:"saga_id,omitempty"`
	RunID      string          `json:"run_id,omitempty"`
	Payload    json.RawMessage `json:"payload"`
	At         time.Time       `json:"at"`
}

// MarshalJSON writes the ID in its text form.
func (id ID) MarshalJSON() ([]byte, error) { return json.Marshal(id.String()) }

// UnmarshalJSON reads the text form of an ID.
func (id *ID) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("events: an event id is a string: %w", err)
	}
	parsed, err := ParseID(s)
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// ErrExpired: the position read after is older than events retention has dropped; events after it
// are gone. Start again from a newer position (Log.Head, or the zero ID for the oldest kept).
var ErrExpired = errors.New("events: position is older than the events retention kept")

// Listener wakes readers when events are written; *effects.Client is one (its Listen shares one
// connection among all its subscribers).
type Listener interface {
	Listen(ctx context.Context, channel, key string) (*effects.Subscription, error)
}

// Log reads the event log of one database.
type Log struct {
	pool     *pgxpool.Pool
	listener Listener
	// poll is how often a subscriber looks without a notification, and the longest it waits for
	// the horizon to pass an event that has committed.
	poll time.Duration
}

// PollInterval is how often a subscriber looks for events without being woken.
const PollInterval = 250 * time.Millisecond

// New returns the log of pool's database. listener wakes subscribers when events are written (not
// for every event: see Subscribe); subscribers also look every PollInterval.
func New(pool *pgxpool.Pool, listener Listener) *Log {
	return &Log{pool: pool, listener: listener, poll: PollInterval}
}

// MaxRead is the most events Read returns at once.
const MaxRead = 1000

// Read returns up to limit events after position after that match f, in log order, and the
// position to read after next time: the last event returned, or further when the events between
// did not match f. It returns only events every earlier one of which has been seen (see the package
// documentation), so a reader that reads after next each time misses none and sees none twice.
// held reports that later events have committed but wait for an older transaction still running;
// read again shortly. Errors: ErrExpired, a FieldError for a bad filter, and the database's.
func (l *Log) Read(ctx context.Context, f Filter, after ID, limit int) (evs []Event, next ID, held bool, err error) {
	m, err := f.compile()
	if err != nil {
		return nil, after, false, err
	}
	if limit <= 0 || limit > MaxRead {
		limit = MaxRead
	}
	next = after
	err = pgx.BeginTxFunc(ctx, l.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if !after.IsZero() {
			dropped, err := q.EventsDropped(ctx)
			if err != nil {
				return err
			}
			if after.Less(ID{XID: uint64(dropped.Xid), Seq: dropped.Seq}) {
				return ErrExpired
			}
		}
		rows, err := q.EventsRead(ctx, dbsqlc.EventsReadParams{
			AfterXid: int64(after.XID), AfterSeq: after.Seq, Tenant: nonEmpty(f.Tenant),
			AllTypes: m.all, Types: m.types, Categories: m.categories, MaxEvents: int32(limit),
		})
		if err != nil {
			return err
		}
		evs = make([]Event, 0, len(rows))
		for _, r := range rows {
			evs = append(evs, eventFromRow(r))
		}
		if len(evs) > 0 {
			next = evs[len(evs)-1].ID
		}
		if len(evs) == limit {
			return nil // more may follow at once
		}
		h, err := q.EventsHorizon(ctx)
		if err != nil {
			return err
		}
		if last := (ID{XID: uint64(h.Xid), Seq: h.Seq}); next.Less(last) {
			next = last // nothing between matched f
		}
		held = h.Held
		return nil
	})
	if err != nil {
		return nil, after, false, err
	}
	return evs, next, held, nil
}

// Head returns the position of the newest event readers can see: Subscribe after it for the events
// from now on.
func (l *Log) Head(ctx context.Context) (ID, error) {
	h, err := dbsqlc.New(l.pool).EventsHorizon(ctx)
	if err != nil {
		return ID{}, err
	}
	return ID{XID: uint64(h.Xid), Seq: h.Seq}, nil
}

// Subscribe yields the events after position after that match f, in log order, as they are
// written, until ctx ends or an error occurs (yielded once, as the last pair; ctx's end is not an
// error). A subscriber that records the ID of each event it has handled and, after a crash,
// subscribes after the last one recorded, misses none and handles none twice.
//
// It wakes on the database's notifications through the log's Listener — events other than effect
// transitions (Channel), and effects that settle — and looks every PollInterval regardless, which
// bounds how late it sees an effect's other transitions (recorded, UNKNOWN, retried). While a
// committed event waits for an older transaction to end, it looks again sooner.
func (l *Log) Subscribe(ctx context.Context, f Filter, after ID) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if _, err := f.compile(); err != nil {
			yield(Event{}, err)
			return
		}
		var wake, settled <-chan struct{}
		if l.listener != nil {
			for _, w := range []struct {
				channel string
				c       *<-chan struct{}
			}{{Channel, &wake}, {settledChannel, &settled}} {
				sub, err := l.listener.Listen(ctx, w.channel, "")
				if err != nil {
					if ctx.Err() == nil {
						yield(Event{}, err)
					}
					return
				}
				defer sub.Close()
				*w.c = sub.C
			}
		}
		backoff := 10 * time.Millisecond
		for {
			evs, next, held, err := l.Read(ctx, f, after, MaxRead)
			if err != nil {
				if ctx.Err() == nil {
					yield(Event{}, err)
				}
				return
			}
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
			}
			after = next
			if len(evs) == MaxRead {
				continue
			}
			wait := l.poll
			if held {
				wait, backoff = backoff, min(2*backoff, l.poll)
			} else {
				backoff = 10 * time.Millisecond
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-wake:
			case <-settled:
			case <-timer.C:
			}
			timer.Stop()
		}
	}
}

func eventFromRow(r dbsqlc.EventsReadRow) Event {
	ev := Event{
		ID:   ID{XID: uint64(r.Xid), Seq: r.Seq},
		Type: r.Type, Tenant: r.TenantID, TurnID: r.TurnID, EffectID: r.EffectID, SagaID: r.SagaID,
		Payload: r.Payload, At: r.At,
	}
	if r.SessionKey != nil {
		ev.SessionKey = *r.SessionKey
	}
	if r.RunID != nil {
		ev.RunID = *r.RunID
	}
	return ev
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
