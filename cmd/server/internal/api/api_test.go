package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"
	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
	"github.com/reckonhq/reckon/retention"
)

// TestTenantIsolation: tenant B can neither read, list, resolve nor cancel tenant A's effects —
// each answers 404 exactly as for a missing effect — and nothing of A's changes. The same
// idempotency key is independent per tenant.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	tokenA, tokenB := h.token("acme", false), h.token("globex", false)
	pending := h.enqueue(tokenA, "w-1", 10)
	stuck := h.enqueue(tokenA, "w-2", 20)
	h.makeStuck(stuck.ID)
	require.Equal(t, "acme", pending.TenantID)
	before := h.rows()

	missing := uuid.New()
	for _, id := range []uuid.UUID{pending.ID, stuck.ID, missing} {
		r := h.do("GET", "/v1/effects/"+id.String(), tokenB, "")
		require.Equal(t, http.StatusNotFound, r.status)
		require.Equal(t, "not_found", r.errorCode(t))
		for _, to := range []string{"CONFIRMED", "FAILED", "PENDING"} {
			r = h.do("POST", "/v1/effects/"+id.String()+"/resolve", tokenB, `{"to":"`+to+`","reason":"mine now"}`)
			require.Equal(t, http.StatusNotFound, r.status, "resolve %s to %s: %s", id, to, r.body)
			require.Equal(t, "not_found", r.errorCode(t))
		}
		r = h.do("POST", "/v1/effects/"+id.String()+"/cancel", tokenB, `{"reason":"mine now"}`)
		require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	}
	for _, query := range []string{"", "?state=PENDING", "?state=STUCK", "?connector=bank.wire"} {
		r := h.do("GET", "/v1/effects"+query, tokenB, "")
		require.Equal(t, http.StatusOK, r.status)
		require.JSONEq(t, `{"effects":[]}`, string(r.body), "B lists nothing of A's with %q", query)
	}
	require.Equal(t, before, h.rows(), "B changed nothing")
	require.Equal(t, "PENDING", h.state(pending.ID))
	require.Equal(t, "STUCK", h.state(stuck.ID))

	// A sees its own.
	r := h.do("GET", "/v1/effects/"+stuck.ID.String(), tokenA, "")
	require.Equal(t, http.StatusOK, r.status)
	got := r.effect(t)
	require.Equal(t, "STUCK", got.State)
	require.Len(t, got.History, 3)
	r = h.do("GET", "/v1/effects", tokenA, "")
	var list struct{ Effects []effectBody }
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Effects, 2)

	// B's own effect with A's key is B's alone.
	mine := h.enqueue(tokenB, "w-1", 99)
	require.NotEqual(t, pending.ID, mine.ID)
	require.Equal(t, "globex", mine.TenantID)
	r = h.do("GET", "/v1/effects/"+mine.ID.String(), tokenA, "")
	require.Equal(t, http.StatusNotFound, r.status)
}

// TestIdempotencyKeyReplay: the same Idempotency-Key with the same request (even re-serialized)
// replays the first response and records one effect; with another body it is 422 and changes
// nothing; concurrent requests with one key record one effect; a failed request stores nothing,
// so its key can be used again.
func TestIdempotencyKeyReplay(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	token := h.token("acme", false)
	body := `{"connector":"bank.wire","idempotency_key":"w-1","args":{"account":"a-1","amount":10}}`

	first := h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusCreated, first.status, "%s", first.body)
	require.Empty(t, first.header.Get("Idempotent-Replayed"))
	reordered := `{ "args": {"amount": 10, "account": "a-1"}, "idempotency_key": "w-1", "connector": "bank.wire" }`
	again := h.do("POST", "/v1/effects", token, reordered, "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusCreated, again.status, "the first response, status included")
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.body), string(again.body))
	before := h.rows()
	require.Equal(t, 1, before["effects"])
	require.Equal(t, 1, before["idempotency_keys"])

	other := h.do("POST", "/v1/effects", token, strings.Replace(body, `"amount":10`, `"amount":11`, 1), "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusUnprocessableEntity, other.status)
	require.Equal(t, "idempotency_key_reused", other.errorCode(t))
	other = h.do("POST", "/v1/effects/"+first.effect(t).ID.String()+"/cancel", token, `{"reason":"x"}`, "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusUnprocessableEntity, other.status, "another path with the key")
	require.Equal(t, before, h.rows())

	// Without the header, the effect's own key deduplicates: 200 with the same effect.
	dedup := h.do("POST", "/v1/effects", token, body)
	require.Equal(t, http.StatusOK, dedup.status)
	require.True(t, *dedup.effect(t).Deduplicated)
	require.Equal(t, first.effect(t).ID, dedup.effect(t).ID)

	// Another tenant's "req-1" is its own.
	otherTenant := h.do("POST", "/v1/effects", h.token("globex", false), body, "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusCreated, otherTenant.status)

	// A failed request stores nothing: the key is free for the corrected request.
	failed := h.do("POST", "/v1/effects", token, strings.Replace(body, "bank.wire", "bank.nope", 1), "Idempotency-Key", "req-2")
	require.Equal(t, http.StatusUnprocessableEntity, failed.status)
	require.Equal(t, "unknown_connector", failed.errorCode(t))
	fixed := h.do("POST", "/v1/effects", token, strings.Replace(body, "w-1", "w-2", 1), "Idempotency-Key", "req-2")
	require.Equal(t, http.StatusCreated, fixed.status, "%s", fixed.body)

	// Concurrent requests with one key: one effect, one stored response, the same answer to all.
	const n = 8
	var wg sync.WaitGroup
	answers := make([]response, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = h.do("POST", "/v1/effects", token, strings.Replace(body, "w-1", "w-race", 1), "Idempotency-Key", "req-race")
		}()
	}
	wg.Wait()
	for _, a := range answers {
		require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
		require.Equal(t, string(answers[0].body), string(a.body))
	}
	var effectsWithKey int
	require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT count(*) FROM reckon_effects WHERE idempotency_key = 'w-race'`).Scan(&effectsWithKey))
	require.Equal(t, 1, effectsWithKey)
}

// TestBadInputsChangeNothing: malformed, oversized, unknown or unauthenticated requests get a 4xx
// with a stable code, and no row is written (counted before and after), although each carries an
// Idempotency-Key.
func TestBadInputsChangeNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, 4096)
	token := h.token("acme", false)
	revoked := h.token("acme", false)
	tokens, err := tenants.ListTokens(context.Background(), h.pool, "acme")
	require.NoError(t, err)
	_, err = tenants.RevokeToken(context.Background(), h.pool, tokens[1].ID)
	require.NoError(t, err)
	disabled := h.token("initech", false)
	_, err = tenants.SetDisabled(context.Background(), h.pool, "initech", true)
	require.NoError(t, err)
	pending := h.enqueue(token, "w-1", 10)
	stuck := h.enqueue(token, "w-2", 20)
	h.makeStuck(stuck.ID)
	before := h.rows()

	ok := `{"connector":"bank.wire","idempotency_key":"new-1","args":{"amount":1}}`
	big := `{"connector":"bank.wire","idempotency_key":"new-1","args":{"pad":"` + strings.Repeat("x", 5000) + `"}}`
	resolvePending := "/v1/effects/" + pending.ID.String() + "/resolve"
	resolveStuck := "/v1/effects/" + stuck.ID.String() + "/resolve"
	for _, tc := range []struct {
		name, method, path, token, body string
		headers                         []string
		status                          int
		code                            string
	}{
		{"no token", "POST", "/v1/effects", "", ok, nil, 401, "unauthenticated"},
		{"not bearer", "POST", "/v1/effects", "", ok, []string{"Authorization", "Basic YTpi"}, 401, "unauthenticated"},
		{"unknown token", "POST", "/v1/effects", "rk_" + strings.Repeat("A", 43), ok, nil, 401, "invalid_token"},
		{"garbage token", "GET", "/v1/effects", "hunter2", "", nil, 401, "invalid_token"},
		{"revoked token", "POST", "/v1/effects", revoked, ok, nil, 401, "invalid_token"},
		{"disabled tenant", "POST", "/v1/effects", disabled, ok, nil, 401, "invalid_token"},
		{"revoked token reads", "GET", "/v1/effects/" + pending.ID.String(), revoked, "", nil, 401, "invalid_token"},
		{"malformed JSON", "POST", "/v1/effects", token, `{"connector":"bank.wire",`, nil, 400, "invalid_json"},
		{"not an object", "POST", "/v1/effects", token, `[1,2]`, nil, 400, "invalid_request"},
		{"trailing data", "POST", "/v1/effects", token, ok + `{}`, nil, 400, "invalid_json"},
		{"empty body", "POST", "/v1/effects", token, "", nil, 400, "invalid_json"},
		{"unknown field", "POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"k","amount":1}`, nil, 400, "invalid_request"},
		{"wrong type", "POST", "/v1/effects", token, `{"connector":7,"idempotency_key":"k"}`, nil, 400, "invalid_request"},
		{"args not an object", "POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"k","args":[1]}`, nil, 400, "invalid_request"},
		{"no key", "POST", "/v1/effects", token, `{"connector":"bank.wire"}`, nil, 400, "invalid_request"},
		{"key and position", "POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"k","position":{"turn_group":"g","decision":0,"call_index":0}}`, nil, 400, "invalid_request"},
		{"bad position", "POST", "/v1/effects", token, `{"connector":"bank.wire","position":{"turn_group":"g","decision":-1,"call_index":0}}`, nil, 400, "invalid_request"},
		{"bad turn id", "POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"k","turn_id":"nope"}`, nil, 400, "invalid_request"},
		{"negative max attempts", "POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"k","max_attempts":-1}`, nil, 400, "invalid_request"},
		{"unknown connector", "POST", "/v1/effects", token, `{"connector":"bank.nope","idempotency_key":"k"}`, nil, 422, "unknown_connector"},
		{"effect key conflict", "POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"w-1","args":{"account":"a-1","amount":11}}`, nil, 409, "idempotency_conflict"},
		{"oversized body", "POST", "/v1/effects", token, big, nil, 413, "body_too_large"},
		{"form body", "POST", "/v1/effects", token, ok, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"empty idempotency key", "POST", "/v1/effects", token, ok, []string{"Idempotency-Key", " "}, 400, "invalid_idempotency_key"},
		{"long idempotency key", "POST", "/v1/effects", token, ok, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "invalid_idempotency_key"},
		{"resolve to UNKNOWN", "POST", resolveStuck, token, `{"to":"UNKNOWN","reason":"r"}`, nil, 400, "invalid_state"},
		{"resolve to lower case", "POST", resolveStuck, token, `{"to":"confirmed","reason":"r"}`, nil, 400, "invalid_state"},
		{"resolve to nonsense", "POST", resolveStuck, token, `{"to":"DONE","reason":"r"}`, nil, 400, "invalid_state"},
		{"resolve without reason", "POST", resolveStuck, token, `{"to":"CONFIRMED"}`, nil, 400, "invalid_request"},
		{"resolve unknown field", "POST", resolveStuck, token, `{"to":"CONFIRMED","reason":"r","force":true}`, nil, 400, "invalid_request"},
		{"resolve PENDING to CONFIRMED", "POST", resolvePending, token, `{"to":"CONFIRMED","reason":"r"}`, nil, 409, "not_stuck"},
		{"cancel STUCK", "POST", "/v1/effects/" + stuck.ID.String() + "/cancel", token, `{"reason":"r"}`, nil, 409, "not_cancellable"},
		{"cancel with to", "POST", "/v1/effects/" + pending.ID.String() + "/cancel", token, `{"reason":"r","to":"FAILED"}`, nil, 400, "invalid_request"},
		{"resolve bad id", "POST", "/v1/effects/42/resolve", token, `{"to":"FAILED","reason":"r"}`, nil, 400, "invalid_parameter"},
		{"resolve missing effect", "POST", "/v1/effects/" + uuid.NewString() + "/resolve", token, `{"to":"FAILED","reason":"r"}`, nil, 404, "not_found"},
		{"list bad state", "GET", "/v1/effects?state=DONE", token, "", nil, 400, "invalid_state"},
		{"list lower-case state", "GET", "/v1/effects?state=pending", token, "", nil, 400, "invalid_state"},
		{"list unknown parameter", "GET", "/v1/effects?status=PENDING", token, "", nil, 400, "invalid_parameter"},
		{"list bad limit", "GET", "/v1/effects?limit=0", token, "", nil, 400, "invalid_parameter"},
		{"list huge limit", "GET", "/v1/effects?limit=1001", token, "", nil, 400, "invalid_parameter"},
		{"list bad cursor", "GET", "/v1/effects?cursor=abc", token, "", nil, 400, "invalid_cursor"},
		{"get bad id", "GET", "/v1/effects/not-a-uuid", token, "", nil, 400, "invalid_parameter"},
		{"unknown route", "GET", "/v1/nothing", token, "", nil, 404, "not_found"},
		{"wrong method", "DELETE", "/v1/effects", token, "", nil, 405, "method_not_allowed"},
		{"connector without admin", "POST", "/v1/connectors", token, `{"name":"x","dispatch_url":"http://127.0.0.1:1/"}`, nil, 403, "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := append([]string{"Idempotency-Key", "bad-" + tc.name}, tc.headers...)
			r := h.do(tc.method, tc.path, tc.token, tc.body, headers...)
			require.Equal(t, tc.status, r.status, "%s", r.body)
			require.Equal(t, tc.code, r.errorCode(t))
		})
	}
	require.Equal(t, before, h.rows(), "nothing written")
	require.Equal(t, "PENDING", h.state(pending.ID))
	require.Equal(t, "STUCK", h.state(stuck.ID))
}

// TestPaginationWalk: walking a filtered list page by page yields every effect exactly once, newest
// first, even while new effects are enqueued during the walk (they are newer than the cursor).
func TestPaginationWalk(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	token := h.token("acme", false)
	var want []uuid.UUID
	for i := range 23 {
		want = append(want, h.enqueue(token, fmt.Sprintf("w-%02d", i), i+1).ID)
	}
	h.makeStuck(want[4])
	h.makeStuck(want[9])
	other := h.token("globex", false)
	for i := range 3 {
		h.enqueue(other, fmt.Sprintf("w-%02d", i), 1)
	}

	walk := func(query string, limit int, during func()) []uuid.UUID {
		var got []uuid.UUID
		cursor := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 50, "the walk must end")
			params := url.Values{"limit": {fmt.Sprint(limit)}}
			if query != "" {
				params.Set("state", query)
			}
			if cursor != "" {
				params.Set("cursor", cursor)
			}
			r := h.do("GET", "/v1/effects?"+params.Encode(), token, "")
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			var page struct {
				Effects    []effectBody
				NextCursor string `json:"next_cursor"`
			}
			require.NoError(t, json.Unmarshal(r.body, &page))
			require.LessOrEqual(t, len(page.Effects), limit)
			for _, e := range page.Effects {
				got = append(got, e.ID)
			}
			if during != nil && pages == 0 {
				during()
			}
			if page.NextCursor == "" {
				return got
			}
			// The server's one cursor form: what the CLI's -after and the console's links carry too.
			_, _, err := pagecursor.ParseUUID(page.NextCursor)
			require.NoError(t, err)
			cursor = page.NextCursor
		}
	}
	newestFirst := func(ids []uuid.UUID) []uuid.UUID {
		out := make([]uuid.UUID, len(ids))
		for i, id := range ids {
			out[len(ids)-1-i] = id
		}
		return out
	}

	got := walk("", 5, func() {
		for i := range 3 {
			h.enqueue(token, fmt.Sprintf("late-%d", i), 1)
		}
	})
	require.Equal(t, newestFirst(want), got, "every effect once, newest first, none of the later ones")
	require.Equal(t, []uuid.UUID{want[9], want[4]}, walk("STUCK", 1, nil))
	require.Len(t, walk("", 1000, nil), 26)
	require.Len(t, walk("PENDING", 7, nil), 24)
}

// TestResolveAndCancel: an operator resolves STUCK effects over the API (to CONFIRMED; to PENDING,
// which gives the effect a new dispatch job) and cancels a PENDING one, by resolve to FAILED or
// by /cancel; the audit trail names the token and the person, and a second decision is refused.
func TestResolveAndCancel(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	token := h.token("acme", false)
	confirmMe := h.enqueue(token, "w-1", 10)
	retryMe := h.enqueue(token, "w-2", 20)
	cancelMe := h.enqueue(token, "w-3", 30)
	cancelMeToo := h.enqueue(token, "w-4", 40)
	h.makeStuck(confirmMe.ID)
	h.makeStuck(retryMe.ID)

	r := h.do("POST", "/v1/effects/"+confirmMe.ID.String()+"/resolve", token,
		`{"to":"CONFIRMED","reason":"bank confirmed wire by phone","actor":"alice"}`, "Idempotency-Key", "resolve-1")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "CONFIRMED", r.effect(t).State)
	replay := h.do("POST", "/v1/effects/"+confirmMe.ID.String()+"/resolve", token,
		`{"to":"CONFIRMED","reason":"bank confirmed wire by phone","actor":"alice"}`, "Idempotency-Key", "resolve-1")
	require.Equal(t, http.StatusOK, replay.status, "a retried decision replays its answer")
	require.Equal(t, string(r.body), string(replay.body))
	again := h.do("POST", "/v1/effects/"+confirmMe.ID.String()+"/resolve", token, `{"to":"FAILED","reason":"changed my mind"}`)
	require.Equal(t, http.StatusConflict, again.status)
	require.Equal(t, "not_stuck", again.errorCode(t))
	history := h.do("GET", "/v1/effects/"+confirmMe.ID.String(), token, "").effect(t).History
	last := history[len(history)-1]
	require.Equal(t, "STUCK", last.From)
	require.Equal(t, "CONFIRMED", last.To)
	require.Equal(t, "operator:api:acme-ops/alice", last.Actor)
	require.Equal(t, "bank confirmed wire by phone", last.Reason)

	jobs := h.rows()["jobs"]
	r = h.do("POST", "/v1/effects/"+retryMe.ID.String()+"/resolve", token, `{"to":"PENDING","reason":"bank never got it"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "PENDING", r.effect(t).State)
	require.Equal(t, jobs+1, h.rows()["jobs"], "a new dispatch job")

	r = h.do("POST", "/v1/effects/"+cancelMe.ID.String()+"/resolve", token, `{"to":"FAILED","reason":"customer withdrew"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "FAILED", r.effect(t).State)
	r = h.do("POST", "/v1/effects/"+cancelMeToo.ID.String()+"/cancel", token, `{"reason":"duplicate order"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "FAILED", r.effect(t).State)
	require.Equal(t, 0, h.rows()["cancelled_jobs"], "no reactor runs: both were cancelled before any claim gave them a job")
	r = h.do("POST", "/v1/effects/"+cancelMe.ID.String()+"/cancel", token, `{"reason":"again"}`)
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "not_cancellable", r.errorCode(t))
}

// TestPurgeIdempotencyKeys: a stored response is replayed until purged (by
// retention.PruneIdempotencyKeys, which retention runs use); after that the same key
// runs the request again (here: the effect's own key deduplicates it, 200).
func TestPurgeIdempotencyKeys(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	token := h.token("acme", false)
	body := `{"connector":"bank.wire","idempotency_key":"w-1","args":{"amount":1}}`
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k").status)

	ctx := context.Background()
	n, err := retention.PruneIdempotencyKeys(ctx, h.pool, time.Now().Add(-time.Hour), 100)
	require.NoError(t, err)
	require.Zero(t, n, "younger than the cutoff: kept")
	r := h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k")
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))

	n, err = retention.PruneIdempotencyKeys(ctx, h.pool, time.Now().Add(time.Minute), 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	r = h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k")
	require.Equal(t, http.StatusOK, r.status, "run again: the effect deduplicates")
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
	require.Equal(t, 1, h.rows()["effects"])
}

// TestIdempotencyKeyExpiresAtItsTTL: a stored response is replayed while its key is younger than
// the TTL (24h by default); once older — its row not purged yet — the key is free: the request runs
// again (the effect deduplicates), its new response is stored and replayed in turn, and a
// different request may now use the key.
func TestIdempotencyKeyExpiresAtItsTTL(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	token := h.token("acme", false)
	body := `{"connector":"bank.wire","idempotency_key":"w-1","args":{"amount":1}}`
	other := `{"connector":"bank.wire","idempotency_key":"w-2","args":{"amount":2}}`
	age := func(by string) {
		t.Helper()
		_, err := h.pool.Exec(ctx, `UPDATE reckon_idempotency_keys SET created_at = created_at - $1::interval WHERE key = 'k'`, by)
		require.NoError(t, err)
	}

	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k").status)
	age("23 hours")
	r := h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k")
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"), "younger than the TTL: replayed")
	require.Equal(t, http.StatusUnprocessableEntity, h.do("POST", "/v1/effects", token, other, "Idempotency-Key", "k").status)

	age("2 hours")
	r = h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k")
	require.Equal(t, http.StatusOK, r.status, "past the TTL: run again, and the effect deduplicates")
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
	r = h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"), "the new response is the one replayed")

	age("25 hours")
	r = h.do("POST", "/v1/effects", token, other, "Idempotency-Key", "k")
	require.Equal(t, http.StatusCreated, r.status, "an expired key may carry another request")
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
	require.Equal(t, 2, h.rows()["effects"])
	var keys int
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM reckon_idempotency_keys`).Scan(&keys))
	require.Equal(t, 1, keys, "one row per key, claimed afresh")
}

// TestEnqueueOfPrunedKey: POST /v1/effects with the idempotency key of an effect that retention
// pruned, while its tombstone keeps the key, is 409 effect_pruned naming the effect, its final
// state and when it was pruned, and writes nothing (not even the stored answer of an
// Idempotency-Key header). The key is the tenant's only: another tenant enqueues it, and once the
// window has ended the tenant does too.
func TestEnqueueOfPrunedKey(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	acme, initech := h.token("acme", false), h.token("initech", false)
	effectID := uuid.New()
	prunedAt := time.Date(2026, 10, 2, 3, 4, 5, 0, time.UTC)
	_, err := h.pool.Exec(ctx, `INSERT INTO reckon_effect_tombstones
		(tenant_id, idempotency_key, effect_id, state, settled_at, pruned_at, expires_at)
		VALUES ('acme', 'w-1', $1, 'CONFIRMED', $2, $3, now() + interval '1 day'), ('acme', 'w-2', $4, 'FAILED', $2, $3, now() - interval '1 second')`,
		effectID, prunedAt.Add(-30*24*time.Hour), prunedAt, uuid.New())
	require.NoError(t, err)
	before := h.rows()

	body := `{"connector":"bank.wire","idempotency_key":"w-1","args":{"account":"a-1","amount":10}}`
	r := h.do("POST", "/v1/effects", acme, body, "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "effect_pruned", r.errorCode(t))
	var answer struct{ Error struct{ Message string } }
	require.NoError(t, json.Unmarshal(r.body, &answer))
	require.Contains(t, answer.Error.Message, effectID.String())
	require.Contains(t, answer.Error.Message, "CONFIRMED")
	require.Contains(t, answer.Error.Message, "pruned at 2026-10-02T03:04:05Z")
	require.Contains(t, answer.Error.Message, "nothing was enqueued")
	require.Equal(t, before, h.rows())

	// Another tenant's key of the same name is free.
	other := h.enqueue(initech, "w-1", 10)
	require.Equal(t, "initech", other.TenantID)
	// An expired tombstone keeps nothing: the key is enqueued anew.
	renewed := h.enqueue(acme, "w-2", 10)
	require.Equal(t, "w-2", renewed.IdempotencyKey)
	require.Equal(t, before["effects"]+2, h.rows()["effects"])
}
