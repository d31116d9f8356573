package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
)

// atOnce sends the same request n times at once and returns the answers.
func (h *harness) atOnce(n int, method, path, token, body string) []response {
	h.t.Helper()
	answers := make([]response, n)
	testkit.AtOnce(n, func(i int) { answers[i] = h.do(method, path, token, body) })
	return answers
}

// TestDeduplicatedEnqueueOverHTTPRecordsNothing: the same idempotency_key posted again — one
// request after the other (201, 200, 200) and many at once — records one effect, with one history
// row and one event for its insert, and nothing about the effects the duplicates would have been
// (issue 33: each duplicate left a '(new) -> PENDING' row and a tool.authorized event).
func TestDeduplicatedEnqueueOverHTTPRecordsNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	token := h.token("acme", false)
	body := func(key string) string {
		return fmt.Sprintf(`{"connector":"bank.wire","idempotency_key":%q,"args":{"account":"a-1","amount":10}}`, key)
	}

	first := h.do("POST", "/v1/effects", token, body("w-1"))
	require.Equal(t, http.StatusCreated, first.status, "%s", first.body)
	for range 2 {
		again := h.do("POST", "/v1/effects", token, body("w-1"))
		require.Equal(t, http.StatusOK, again.status, "%s", again.body)
		require.True(t, *again.effect(t).Deduplicated)
		require.Equal(t, first.effect(t).ID, again.effect(t).ID)
	}
	for _, key := range []string{"w-1", "w-2"} {
		created := 0
		for _, a := range h.atOnce(8, "POST", "/v1/effects", token, body(key)) {
			require.Contains(t, []int{http.StatusCreated, http.StatusOK}, a.status, "%s", a.body)
			if a.status == http.StatusCreated {
				created++
			}
		}
		require.Equal(t, map[string]int{"w-1": 0, "w-2": 1}[key], created, "key %s", key)
	}

	require.Equal(t, 2, testkit.RequireRecordedOnce(t, h.pool))
	shown := h.do("GET", "/v1/effects/"+first.effect(t).ID.String(), token, "")
	require.Equal(t, http.StatusOK, shown.status)
	require.Len(t, shown.effect(t).History, 1, "its history: the one insert")
}

// TestDeduplicatedSagaStartOverHTTPRecordsNothing: a saga started again with its start_key, one
// request after the other and many at once, records one saga — one start in its history, one
// step-0 effect recorded once — and nothing about the sagas or effects the duplicates would have
// been.
func TestDeduplicatedSagaStartOverHTTPRecordsNothing(t *testing.T) {
	t.Parallel()
	h := setupSagas(t)
	acme := h.token("acme", false)
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/saga-definitions", h.systemToken(), transferDef).status)
	start := func(key string) string {
		return fmt.Sprintf(`{"definition":"transfer","input":{"account":"a-1","amount":30},"start_key":%q}`, key)
	}

	r := h.do("POST", "/v1/sagas", acme, start("order-1"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	again := h.do("POST", "/v1/sagas", acme, start("order-1"))
	require.Equal(t, http.StatusOK, again.status, "%s", again.body)
	for _, a := range h.atOnce(6, "POST", "/v1/sagas", acme, start("order-1")) {
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	}
	for _, a := range h.atOnce(6, "POST", "/v1/sagas", acme, start("order-2")) {
		// A start that loses the race for a new key is told to start again (409), or finds the
		// winner's saga (200).
		require.Contains(t, []int{http.StatusCreated, http.StatusOK, http.StatusConflict}, a.status, "%s", a.body)
	}

	require.Equal(t, 2, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_sagas`))
	require.Equal(t, 2, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_saga_transitions WHERE from_state IS NULL`))
	require.Equal(t, 2, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_event_log WHERE type = 'saga.started'`))
	require.Equal(t, 2, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_saga_steps WHERE idx = 0`))
	require.GreaterOrEqual(t, testkit.RequireRecordedOnce(t, h.pool), 2)
}
