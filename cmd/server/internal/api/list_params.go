package api

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"
)

// listParams names the query parameters an endpoint takes; parse checks a request's against
// them. Every endpoint that reads its query string goes through it (one with none takes the zero
// listParams), so an unknown, repeated or malformed parameter is always 400 invalid_parameter (or
// invalid_cursor) naming the parameter.
type listParams struct {
	// filters are the endpoint's filter parameters, e.g. "state", "connector"; their values are
	// the handler's to check.
	filters []string
	// limit is the page size without a limit parameter; maxLimit the largest one accepted. Zero:
	// the endpoint takes no limit.
	limit, maxLimit int
	// cursor: the endpoint pages with a cursor from an earlier answer's next_cursor.
	cursor bool
	// states are the values the "state" filter takes; another is 400 invalid_state.
	states []string
}

// listQuery is what a request's query parameters ask for.
type listQuery struct {
	filters map[string]string // by name; absent when not given
	limit   int               // listParams.limit when not given
	after   *cursor           // nil on the first page
}

// cursor is a position in a listing newest first: after the row created at CreatedAt with ID.
type cursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// parse checks call's query parameters against p.
func (p listParams) parse(call *Call) (listQuery, error) {
	names := append([]string(nil), p.filters...)
	if p.maxLimit > 0 {
		names = append(names, "limit")
	}
	if p.cursor {
		names = append(names, "cursor")
	}
	q := listQuery{filters: map[string]string{}, limit: p.limit}
	query := call.Request.URL.Query()
	for name, values := range query {
		switch {
		case !contains(names, name) && len(names) == 0:
			return q, badRequest(codeInvalidParameter, "unknown query parameter %q: %s takes no query parameters", name, call.Request.Pattern)
		case !contains(names, name):
			return q, badRequest(codeInvalidParameter, "unknown query parameter %q: want %s", name, wantList(names))
		case len(values) > 1:
			return q, badRequest(codeInvalidParameter, "query parameter %q given %d times", name, len(values))
		}
	}
	for _, name := range p.filters {
		if raw := query.Get(name); raw != "" {
			q.filters[name] = raw
		}
	}
	if raw, ok := q.filters["state"]; ok && !contains(p.states, raw) {
		return q, badRequest(codeInvalidState, "state %q: want one of %s", raw, strings.Join(p.states, ", "))
	}
	if raw := query.Get("limit"); raw != "" {
		limit, err := strconv.Atoi(raw)
		if err != nil || limit < 1 || limit > p.maxLimit {
			return q, badRequest(codeInvalidParameter, "limit %q: want a whole number from 1 to %d", raw, p.maxLimit)
		}
		q.limit = limit
	}
	if raw := query.Get("cursor"); raw != "" && p.cursor { // else a filter: the handler's to read
		after, err := decodeCursor(raw)
		if err != nil {
			return q, badRequest(codeInvalidCursor, "cursor %q was not issued by this API", raw)
		}
		q.after = after
	}
	return q, nil
}

// stateNames are states as the "state" filter's values.
func stateNames[S ~string](states []S) []string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return names
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// wantList is names as prose: "a, b or c".
func wantList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// pageCursor is a cursor type of a package Reckon lists from (effects.Cursor, saga.Cursor).
type pageCursor interface {
	~struct {
		CreatedAt time.Time
		ID        uuid.UUID
	}
}

// afterOf is the position query.after asks for, as the listing package's cursor type; nil on the
// first page.
func afterOf[C pageCursor](query listQuery) *C {
	if query.after == nil {
		return nil
	}
	after := C(*query.after)
	return &after
}

// listPage answers a cursor listing: it parses call's query parameters against params, lists the
// page they ask for, and returns it in its JSON form with the next_cursor that continues it.
func listPage[T, J any, C pageCursor](ctx context.Context, call *Call, params listParams, list func(context.Context, listQuery) ([]T, *C, error), toJSON func(T) J) ([]J, string, error) {
	query, err := params.parse(call)
	if err != nil {
		return nil, "", err
	}
	rows, next, err := list(ctx, query)
	if err != nil {
		return nil, "", err
	}
	out, nextCursor := page(rows, toJSON, next)
	return out, nextCursor, nil
}

// page is a listing's page in its JSON form, and the next_cursor that continues it ("" on the last
// page: next is nil).
func page[T, J any, C pageCursor](rows []T, toJSON func(T) J, next *C) ([]J, string) {
	out := make([]J, len(rows))
	for i, row := range rows {
		out[i] = toJSON(row)
	}
	if next == nil {
		return out, ""
	}
	return out, encodeCursor(cursor(*next))
}

// encodeCursor is c as a next_cursor, in the one cursor form of the server (package pagecursor),
// which decodeCursor reads.
func encodeCursor(c cursor) string {
	return pagecursor.Cursor{At: c.CreatedAt, ID: c.ID.String()}.String()
}

func decodeCursor(s string) (*cursor, error) {
	at, id, err := pagecursor.ParseUUID(s)
	if err != nil {
		return nil, err
	}
	return &cursor{CreatedAt: at, ID: id}, nil
}
