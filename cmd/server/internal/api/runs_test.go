package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
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

// TestStartAndCancelRun: POST /v1/runs creates a run of the caller's tenant with guardrails (and
// changes them when called again) that enqueues then obey; POST /v1/runs/{id}/cancel stops the
// caller's run, fails its unattempted effects and says which; bad input, another tenant's run and
// a system token are refused and change nothing.
func TestStartAndCancelRun(t *testing.T) {
	h := setup(t, 0)
	acme := h.token("acme", false)
	globex := h.token("globex", false)
	wire := func(key string) string {
		return `{"connector":"bank.wire","idempotency_key":"` + key + `","run_id":"agent-7","args":{"account":"a-1","amount":1}}`
	}
	runs := map[string]string{"runs": `SELECT count(*) FROM reckon_runs`}

	for _, body := range []string{
		``, `{}`, `{"id":""}`, `{"id":"agent-7","max_steps":-1}`, `{"id":"agent-7","max_consecutive_failures":-2}`,
		`{"id":"agent-7","max_steps":2147483648}`, `{"id":"agent-7","max_steps":"2"}`, `{"id":"agent-7","steps":2}`,
		`{"id":"agent-7","max_steps":null}`, `{"id":null}`,
		`{"id":"` + strings.Repeat("r", 201) + `"}`,
	} {
		before := h.rowsWith(runs)
		r := h.do("POST", "/v1/runs", acme, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
		require.Contains(t, []string{"invalid_json", "invalid_request"}, r.errorCode(t), "%s", body)
		require.Equal(t, before, h.rowsWith(runs), "%s changed something", body)
	}
	r := h.do("POST", "/v1/runs", h.systemToken(), `{"id":"agent-7","max_steps":2}`)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)

	r = h.do("POST", "/v1/runs", acme, `{"id":"agent-7","max_steps":5,"max_consecutive_failures":3}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	run := decode[api.RunJSON](t, r)
	require.Equal(t, api.RunJSON{ID: "agent-7", TenantID: "acme", MaxSteps: 5, MaxConsecutiveFailures: 3, Effects: map[string]int{}, Settled: true,
		CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt}, run)
	// Again, with a tighter bound: the guardrail changes, the run stays one.
	r = h.do("POST", "/v1/runs", acme, `{"id":"agent-7","max_steps":2}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, 2, decode[api.RunJSON](t, r).MaxSteps)

	var keys []uuid.UUID
	for _, key := range []string{"s1", "s2"} {
		r = h.do("POST", "/v1/effects", acme, wire(key))
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		keys = append(keys, r.effect(t).ID)
	}
	before := h.rows()
	r = h.do("POST", "/v1/effects", acme, wire("s3"))
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "run_halted", r.errorCode(t))
	require.Equal(t, before, h.rows())

	// Cancel: bad bodies, another tenant and an unknown run change nothing.
	for _, c := range []struct {
		token, id, body, code string
		status                int
	}{
		{acme, "agent-7", `{}`, "invalid_request", http.StatusBadRequest},
		{acme, "agent-7", `{"reason":"  "}`, "invalid_request", http.StatusBadRequest},
		{acme, "agent-7", `{"reason":"x","to":"FAILED"}`, "invalid_request", http.StatusBadRequest},
		{acme, strings.Repeat("r", 201), `{"reason":"x"}`, "invalid_parameter", http.StatusBadRequest},
		{globex, "agent-7", `{"reason":"x"}`, "not_found", http.StatusNotFound},
		{acme, "nobody", `{"reason":"x"}`, "not_found", http.StatusNotFound},
	} {
		before := h.rowsWith(runs)
		r = h.do("POST", "/v1/runs/"+c.id+"/cancel", c.token, c.body)
		require.Equal(t, c.status, r.status, "%s %s: %s", c.id, c.body, r.body)
		require.Equal(t, c.code, r.errorCode(t), "%s", r.body)
		require.Equal(t, before, h.rowsWith(runs))
	}
	status, got := h.run(acme, "agent-7")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, map[string]int{"PENDING": 2}, got.Effects, "nothing was cancelled")

	r = h.do("POST", "/v1/runs/agent-7/cancel", acme, `{"reason":"user closed the chat","actor":"alice"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	cancelled := decode[cancellationBody](t, r)
	require.ElementsMatch(t, keys, cancelled.Failed)
	require.Empty(t, cancelled.Awaiting)
	require.Empty(t, cancelled.Left)
	require.Equal(t, map[string]int{"FAILED": 2}, cancelled.Run.Effects)
	require.True(t, cancelled.Run.Settled)
	require.Equal(t, "user closed the chat", cancelled.Run.CancelReason)
	require.Equal(t, "caller:api:acme-ops/alice", cancelled.Run.CancelledBy)
	require.Contains(t, cancelled.Run.Halted, "cancelled")
	require.Contains(t, string(r.body), `"awaiting":[]`, "empty lists are [] on the wire")

	r = h.do("POST", "/v1/effects", acme, `{"connector":"bank.wire","idempotency_key":"s4","run_id":"agent-7","args":{"account":"a-1","amount":1}}`)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "run_cancelled", r.errorCode(t))
	// Cancelling again keeps the first reason.
	r = h.do("POST", "/v1/runs/agent-7/cancel", acme, `{"reason":"again"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "user closed the chat", decode[cancellationBody](t, r).Run.CancelReason)
}

// cancellationBody is the answer of POST /v1/runs/{id}/cancel.
type cancellationBody struct {
	Run                    *api.RunJSON
	Failed, Awaiting, Left []uuid.UUID
}
