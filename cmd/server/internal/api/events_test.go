package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/cmd/server/internal/ssetest"
	"github.com/reckonhq/reckon/events"
)

// eventWait bounds the wait for one event: readers wait for every transaction older than the
// event's to end, and other tests' transactions run on the same Postgres.
const eventWait = 20 * time.Second

// logged returns the events of reckon_events that where selects, in log order, as "id type".
func (h *harness) logged(where string, args ...any) []string {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(),
		`SELECT xid::text || '-' || seq, type FROM reckon_event_log WHERE `+where+` ORDER BY xid, seq`, args...)
	require.NoError(h.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, typ string
		require.NoError(h.t, rows.Scan(&id, &typ))
		out = append(out, id+" "+typ)
	}
	require.NoError(h.t, rows.Err())
	return out
}

// stream opens GET /v1/events with query and the headers, and requires 200.
func (h *harness) stream(token, query string, headers ...string) *ssetest.Stream {
	h.t.Helper()
	s, resp, raw := ssetest.Open(h.t, h.url+"/v1/events"+query, token, headers...)
	require.NotNil(h.t, s, "GET /v1/events%s: %d %s", query, resp.StatusCode, raw)
	require.Equal(h.t, "text/event-stream", s.Response.Header.Get("Content-Type"))
	return s
}

// next reads n events of s as "id type", checking that each one's data is the event as JSON with
// the same id and type, of the tenant, if given.
func next(t *testing.T, s *ssetest.Stream, n int, tenant string) []string {
	t.Helper()
	var out []string
	for range n {
		ev, ok := s.Next(t, eventWait)
		require.True(t, ok, "event %d of %d did not come; got %v", len(out)+1, n, out)
		var data struct {
			ID, Type, Tenant string
			EffectID         string `json:"effect_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &data), ev.Data)
		require.Equal(t, ev.ID, data.ID)
		require.Equal(t, ev.Type, data.Type)
		if tenant != "" {
			require.Equal(t, tenant, data.Tenant, "%s", ev.Data)
		}
		out = append(out, ev.ID+" "+ev.Type)
	}
	return out
}

// effectOf returns the effect_id of the next event of s, and its type.
func effectOf(t *testing.T, s *ssetest.Stream) (string, string) {
	t.Helper()
	ev, ok := s.Next(t, eventWait)
	require.True(t, ok, "no event came")
	var data struct {
		EffectID string `json:"effect_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &data), ev.Data)
	return data.EffectID, ev.Type
}

// TestEventsStreamFiltersByPatternAndTenant: GET /v1/events from the oldest event streams exactly
// the events the patterns select, in log order, of the token's tenant only: a tenant token never
// sees another tenant's events and may not ask for them (403); a system token sees every tenant's,
// or one tenant's with tenant=. New events reach open streams, each only its own tenant's.
func TestEventsStreamFiltersByPatternAndTenant(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	acme, globex, system := h.token("acme", false), h.token("globex", true), h.systemToken()
	h.enqueue(acme, "w-1", 10)
	h.enqueue(globex, "w-1", 20)
	stuck := h.enqueue(acme, "w-2", 30)
	h.makeStuck(stuck.ID)

	for _, tc := range []struct {
		name, token, query, tenant, where string
	}{
		{"tenant token, every type", acme, "?after=0", "acme", `tenant_id = 'acme'`},
		{"a category", acme, "?after=0&pattern=effect.*", "acme", `tenant_id = 'acme' AND type LIKE 'effect.%'`},
		{"two patterns", acme, "?pattern=tool.authorized&after=0&pattern=effect.stuck", "acme", `tenant_id = 'acme' AND type IN ('tool.authorized', 'effect.stuck')`},
		{"its own tenant named", acme, "?after=0&tenant=acme&pattern=*", "acme", `tenant_id = 'acme'`},
		{"another tenant's admin token", globex, "?after=0", "globex", `tenant_id = 'globex'`},
		{"system token, every tenant", system, "?after=0", "", `true`},
		{"system token, one tenant", system, "?after=0&tenant=globex&pattern=tool.*", "globex", `tenant_id = 'globex' AND type LIKE 'tool.%'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := h.logged(tc.where)
			require.NotEmpty(t, want)
			s := h.stream(tc.token, tc.query)
			got := next(t, s, len(want), tc.tenant)
			require.Equal(t, want, got)
			s.Close()
			// The query's where and package events agree on what the patterns select.
			parsed, err := url.ParseQuery(strings.TrimPrefix(tc.query, "?"))
			require.NoError(t, err)
			for _, e := range got {
				typ := strings.Fields(e)[1]
				require.True(t, len(parsed["pattern"]) == 0 || slices.ContainsFunc(parsed["pattern"], func(p string) bool { return events.Match(p, typ) }),
					"%s matches none of %v", typ, parsed["pattern"])
			}
		})
	}
	require.Len(t, h.logged(`tenant_id = 'acme'`), 4, "tool.authorized twice, effect.unknown, effect.stuck")

	r := h.do("GET", "/v1/events?tenant=globex", acme, "")
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	require.Equal(t, "forbidden", r.errorCode(t))
	require.Contains(t, string(r.body), "globex")

	// Live: from now on (no after), each stream gets its own tenant's new events only.
	acmeStream, globexStream := h.stream(acme, ""), h.stream(system, "?tenant=globex")
	g2 := h.enqueue(globex, "w-2", 40)
	a3 := h.enqueue(acme, "w-3", 50)
	id, typ := effectOf(t, acmeStream)
	require.Equal(t, a3.ID.String(), id, "acme's stream skipped globex's effect")
	require.Equal(t, "tool.authorized", typ)
	id, _ = effectOf(t, globexStream)
	require.Equal(t, g2.ID.String(), id)
}

// TestEventsResumeWithLastEventID: a client that disconnects and reconnects with the id of the
// last event it got (Last-Event-ID, which takes precedence over after) gets exactly the events
// after it, those written while it was away included: none is lost and none comes twice. after=
// does the same. Without either the stream starts from now.
func TestEventsResumeWithLastEventID(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	acme := h.token("acme", false)
	for i := range 3 {
		h.enqueue(acme, fmt.Sprintf("w-%d", i), 10)
	}
	s := h.stream(acme, "?after=0")
	got := next(t, s, 2, "acme")
	s.Close()
	stuck := h.enqueue(acme, "w-3", 10)
	h.makeStuck(stuck.ID)
	h.enqueue(acme, "w-4", 10)
	want := h.logged(`tenant_id = 'acme'`)
	require.Len(t, want, 7)

	lastID := strings.Fields(got[1])[0]
	s = h.stream(acme, "?after=0", "Last-Event-ID", lastID)
	require.Equal(t, want, append(got, next(t, s, len(want)-2, "acme")...))
	s.Close()

	s = h.stream(acme, "?after="+url.QueryEscape(lastID))
	require.Equal(t, want[2:], next(t, s, len(want)-2, "acme"))
	s.Close()

	s = h.stream(acme, "")
	fresh := h.enqueue(acme, "w-5", 10)
	id, typ := effectOf(t, s)
	require.Equal(t, fresh.ID.String(), id, "from now: the older events are not sent")
	require.Equal(t, "tool.authorized", typ)
}

// TestEventsExpiredPosition: a position older than the last one retention dropped is 410
// events_expired as JSON, by after and by Last-Event-ID, before any stream starts; the dropped
// position itself, and 0 (the oldest kept), still stream.
func TestEventsExpiredPosition(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	acme := h.token("acme", false)
	h.enqueue(acme, "w-1", 10)
	h.enqueue(acme, "w-2", 10)
	logged := h.logged(`true`)
	require.Len(t, logged, 2)
	first, second := strings.Fields(logged[0])[0], strings.Fields(logged[1])[0]
	xid, seq, _ := strings.Cut(second, "-")
	_, err := h.pool.Exec(context.Background(), `INSERT INTO reckon_events_dropped (xid, seq) VALUES ($1::text::xid8, $2::bigint)`, xid, seq)
	require.NoError(t, err)

	for _, headers := range [][]string{nil, {"Last-Event-ID", first}} {
		query := "?after=" + first
		if headers != nil {
			query = ""
		}
		r := h.do("GET", "/v1/events"+query, acme, "", headers...)
		require.Equal(t, http.StatusGone, r.status, "%s", r.body)
		require.Equal(t, "events_expired", r.errorCode(t))
		require.Contains(t, string(r.body), first)
	}
	s := h.stream(acme, "?after="+second)
	s.Close()
	s = h.stream(acme, "?after=0")
	require.Equal(t, logged, next(t, s, 2, "acme"))
}

// TestEventsBadInput: every mistake in the query or the Last-Event-ID header is 400 naming the
// parameter or header, before a stream starts; none is a 500.
func TestEventsBadInput(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	acme, system := h.token("acme", false), h.systemToken()
	tooMany := strings.Repeat("&pattern=turn.*", 33)
	for _, tc := range []struct {
		name, token, query string
		headers            []string
		want               string
	}{
		{"upper case pattern", acme, "?pattern=Turn.*", nil, `pattern \"Turn.*\"`},
		{"category alone", acme, "?pattern=turn", nil, `pattern \"turn\"`},
		{"empty pattern", acme, "?pattern=", nil, `pattern \"\"`},
		{"three parts", acme, "?pattern=turn.a.b", nil, "pattern"},
		{"wildcard name", acme, "?pattern=*.started", nil, "pattern"},
		{"overlong pattern", acme, "?pattern=turn." + strings.Repeat("a", 5000), nil, "pattern"},
		{"too many patterns", acme, "?" + tooMany[1:], nil, "pattern given 33 times"},
		{"NUL in a pattern", acme, "?pattern=turn.%00", nil, `\"pattern\"`},
		{"FF in a pattern", acme, "?pattern=%FF", nil, `\"pattern\"`},
		{"after not an id", acme, "?after=abc", nil, `after \"abc\"`},
		{"after without seq", acme, "?after=12-", nil, "after"},
		{"after negative", acme, "?after=-1-2", nil, "after"},
		{"after three parts", acme, "?after=1-2-3", nil, "after"},
		{"after overflowing", acme, "?after=99999999999999999999-1", nil, "after"},
		{"after empty", acme, "?after=", nil, "after"},
		{"after overlong", acme, "?after=" + strings.Repeat("1", 100), nil, "after"},
		{"after NUL", acme, "?after=1-%00", nil, `\"after\"`},
		{"after twice", acme, "?after=0&after=0", nil, `\"after\" given 2 times`},
		{"unknown parameter", acme, "?patterns=turn.*", nil, `unknown query parameter \"patterns\"`},
		{"tenant twice", system, "?tenant=acme&tenant=acme", nil, `\"tenant\" given 2 times`},
		{"malformed tenant", system, "?tenant=not+a+tenant", nil, "tenant"},
		{"Last-Event-ID not an id", acme, "", []string{"Last-Event-ID", "x"}, `Last-Event-ID \"x\"`},
		{"Last-Event-ID latin-1", acme, "", []string{"Last-Event-ID", "1-\xe9"}, "Last-Event-ID"},
		{"Last-Event-ID control character", acme, "", []string{"Last-Event-ID", "1-\t2"}, "Last-Event-ID"},
		{"Last-Event-ID overlong", acme, "?after=0", []string{"Last-Event-ID", strings.Repeat("9", 65)}, "Last-Event-ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("GET", "/v1/events"+tc.query, tc.token, "", tc.headers...)
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			require.Equal(t, "invalid_parameter", r.errorCode(t))
			require.Contains(t, string(r.body), tc.want)
		})
	}
}

// TestEventsStreamKeepAliveSlotAndStop: an idle stream sends a keepalive comment every
// EventsKeepAlive; an open stream holds no request slot (another request gets the only one); and
// closing Config.Stopping ends open streams and refuses new ones with 503.
func TestEventsStreamKeepAliveSlotAndStop(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	acme := h.token("acme", false)
	stopping := make(chan struct{})
	h.serve(&api.Config{Pool: h.pool, Effects: h.client, MaxConcurrentRequests: 1, EventsKeepAlive: 50 * time.Millisecond, Stopping: stopping})

	s := h.stream(acme, "")
	comment, ok := s.Comment(t, 5*time.Second)
	require.True(t, ok)
	require.Equal(t, "keepalive", comment)
	other := h.stream(acme, "")
	r := h.do("GET", "/v1/effects", acme, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	close(stopping)
	require.True(t, s.Ended(5*time.Second), "the stream ended when the server began to stop")
	require.True(t, other.Ended(5*time.Second))
	r = h.do("GET", "/v1/events", acme, "")
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	require.Equal(t, "unavailable", r.errorCode(t))
}
