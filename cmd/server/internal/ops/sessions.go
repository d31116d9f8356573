package ops

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/turns"
)

// maxSessionTurns bounds SessionDetail.Turns.
const maxSessionTurns = 100

// SessionSummary is one session (turns' tenant:agent:interlocutor:channel) in a listing.
type SessionSummary struct {
	Key    string
	Tenant string
	// Turns counts the turns it keeps; LastAt is its latest activity: the last message received
	// by, or the completion of, its latest turn, whichever is later.
	Turns  int
	LastAt time.Time
	// Holder is the connection holding its session mutex, if any.
	Holder *turns.Holder
}

// Sessions lists the sessions in scope by their latest activity, newest first (limit: default
// 50, at most 500), and the cursor of the next page ("" when this page is the last). Each
// tenant's sessions are read from an index of turns by activity (0020) and merged: a page costs
// about the same however many turns are kept.
func (o *Ops) Sessions(ctx context.Context, scope Scope, limit int, after string) ([]SessionSummary, string, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return nil, "", err
	}
	params := dbsqlc.OpsSessionListParams{TenantIds: scope.Tenants, MaxRows: int32(limit)}
	if after != "" {
		c, err := parseCursor(after)
		if err != nil {
			return nil, "", err
		}
		params.CursorLastAt, params.CursorSessionKey = &c.At, &c.ID
	}
	if scope.Tenants != nil && len(scope.Tenants) == 0 {
		return []SessionSummary{}, "", nil
	}
	var rows []dbsqlc.OpsSessionListRow
	err = o.read(ctx, func(q *dbsqlc.Queries) (err error) {
		if params.TenantIds == nil {
			if params.TenantIds, err = q.OpsSessionTenants(ctx); err != nil {
				return err
			}
		}
		rows, err = q.OpsSessionList(ctx, params)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("ops: list sessions: %w", err)
	}
	holders, err := o.holders(ctx)
	if err != nil {
		return nil, "", err
	}
	out := make([]SessionSummary, len(rows))
	for i, row := range rows {
		out[i] = SessionSummary{Key: row.SessionKey, Turns: int(row.Turns), LastAt: row.LastAt, Holder: holders[row.SessionKey]}
		if s, err := turns.ParseSessionKey(row.SessionKey); err == nil {
			out[i].Tenant = s.Tenant
		}
	}
	next := ""
	if len(rows) == int(params.MaxRows) {
		last := rows[len(rows)-1]
		next = pagecursor.Cursor{At: last.LastAt, ID: last.SessionKey}.String()
	}
	return out, next, nil
}

// SessionDetail is a session: who holds it, what it has received and not yet processed, and its
// turns with their decisions.
type SessionDetail struct {
	Key    string
	Tenant string
	// Holder is the connection holding its session mutex, if any.
	Holder *turns.Holder
	// Accumulating are the messages received and not yet in a processed turn (those of its
	// ACCUMULATING turn), oldest first.
	Accumulating []turns.Message
	// Turns are its latest turns, newest first, at most 100.
	Turns []TurnDetail
}

// TurnDetail is a turn with the supersede decisions it took.
type TurnDetail struct {
	Turn      *turns.Record
	Decisions []turns.DecisionRecord
}

// Session returns the session key, or ErrNotFound (no turn, or its tenant is outside scope). A
// malformed key is a *FieldError.
func (o *Ops) Session(ctx context.Context, scope Scope, key string) (*SessionDetail, error) {
	session, err := turns.ParseSessionKey(key)
	if err != nil || len(key) > 1000 {
		return nil, &FieldError{Field: "session", Message: "want tenant:agent:interlocutor:channel (UTF-8, no NUL, at most 1000 bytes)"}
	}
	if !scope.Sees(session.Tenant) {
		return nil, ErrNotFound
	}
	records, err := o.turns.List(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	if len(records) == 0 {
		return nil, ErrNotFound
	}
	holders, err := o.holders(ctx)
	if err != nil {
		return nil, err
	}
	detail := &SessionDetail{Key: key, Tenant: session.Tenant, Holder: holders[key], Accumulating: []turns.Message{}}
	slices.Reverse(records)
	for i, r := range records {
		if r.Status == turns.StatusAccumulating {
			if detail.Accumulating, err = o.turns.Messages(ctx, r.ID); err != nil {
				return nil, fmt.Errorf("ops: %w", err)
			}
		}
		if i >= maxSessionTurns {
			continue // still looking for the accumulating turn (the newest, normally)
		}
		decisions, err := o.turns.Decisions(ctx, r.ID)
		if err != nil {
			return nil, fmt.Errorf("ops: %w", err)
		}
		detail.Turns = append(detail.Turns, TurnDetail{Turn: r, Decisions: decisions})
	}
	return detail, nil
}

// holders returns the granted session-mutex holders by session key.
func (o *Ops) holders(ctx context.Context) (map[string]*turns.Holder, error) {
	all, err := o.turns.Holders(ctx)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	out := map[string]*turns.Holder{}
	for i := range all {
		if h := &all[i]; h.Granted && h.SessionKey != "" {
			out[h.SessionKey] = h
		}
	}
	return out, nil
}
