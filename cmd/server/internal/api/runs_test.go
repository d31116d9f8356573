package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
)

// TestEnqueueRunRefusals: run ids are per tenant, so a run id another tenant uses is the caller's
// own run (201, where it was 422 run_conflict, which told the caller that the other tenant's run
// existed); a run past its max_steps and a cancelled run are clear 4xx answers that enqueue
// nothing (they were 500 before), and each refuses only its own tenant. GET /v1/runs/{id} shows
// each tenant its own run of a shared id.
func TestEnqueueRunRefusals(t *testing.T) {
	h := setup(t, 0)
	acme := h.token("acme", false)
	globex := h.token("globex", false)
	initech := h.token("initech", false)
	wire := func(key, run string) string {
		return `{"connector":"bank.wire","idempotency_key":"` + key + `","run_id":"` + run + `","args":{"account":"a-1","amount":1}}`
	}
	// refused requires that token's enqueue of body is 409 with code, a message that mentions
	// mentions, and nothing written.
	refused := func(token, body, code, mentions string) {
		t.Helper()
		before := h.rows()
		r := h.do("POST", "/v1/effects", token, body)
		require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
		require.Equal(t, code, r.errorCode(t))
		var answer struct {
			Error struct{ Code, Message string }
		}
		require.NoError(t, json.Unmarshal(r.body, &answer))
		require.Contains(t, answer.Error.Message, mentions)
		require.Equal(t, before, h.rows())
	}

	r := h.do("POST", "/v1/effects", acme, wire("k1", "run-1"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)

	// Another tenant naming acme's run id gets a run of its own: the answer is the same as for an
	// id nobody uses.
	for _, key := range []string{"k1", "k2"} {
		r = h.do("POST", "/v1/effects", globex, wire(key, "run-1"))
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		require.Equal(t, "globex", r.effect(t).TenantID)
	}
	r = h.do("POST", "/v1/effects", globex, wire("k3", "run-2"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	status, run := h.run(acme, "run-1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, runBody{ID: "run-1", Steps: 1, Effects: map[string]int{"PENDING": 1}, Unresolved: 1}, run)
	status, run = h.run(globex, "run-1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, runBody{ID: "run-1", Steps: 2, Effects: map[string]int{"PENDING": 2}, Unresolved: 2}, run)
	status, _ = h.run(initech, "run-1")
	require.Equal(t, http.StatusNotFound, status, "a run id only others use is not found")
	status, _ = h.run(acme, "run-2")
	require.Equal(t, http.StatusNotFound, status)

	// A run at its max_steps.
	ctx := context.Background()
	_, err := h.client.StartRun(ctx, effects.RunSpec{ID: "capped", TenantID: "acme", MaxSteps: 1})
	require.NoError(t, err)
	r = h.do("POST", "/v1/effects", acme, wire("c1", "capped"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	refused(acme, wire("c2", "capped"), "run_halted", "steps")
	// Its replay is not a new step.
	r = h.do("POST", "/v1/effects", acme, wire("c1", "capped"))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	// acme's full run does not refuse globex's run of that id.
	r = h.do("POST", "/v1/effects", globex, wire("c2", "capped"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)

	// A cancelled run.
	_, err = h.client.CancelRun(ctx, "run-1", "test", "customer withdrew", &effects.RunOpts{TenantID: "acme"})
	require.NoError(t, err)
	refused(acme, wire("k3", "run-1"), "run_cancelled", "customer withdrew")
	// globex's run-1 is neither cancelled nor touched.
	r = h.do("POST", "/v1/effects", globex, wire("k4", "run-1"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	status, run = h.run(globex, "run-1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, map[string]int{"PENDING": 3}, run.Effects)
	status, run = h.run(acme, "run-1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, map[string]int{"FAILED": 1}, run.Effects, "acme's unattempted effect failed by the cancellation")
}
