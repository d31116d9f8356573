package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
)

// POST /v1/effects/{id}/redrive sends a FAILED effect again: 200 with the effect PENDING, its
// attempts at 0, and the operator in its history; every refusal is a 409 with its code and bad
// input a 400, changing nothing.
func TestRedriveOverHTTP(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	token := h.token("acme", false)
	fail := func(key string) string {
		t.Helper()
		e := h.enqueue(token, key, 5)
		_, err := h.pool.Exec(ctx, `UPDATE reckon_effects SET state = 'FAILED', attempts = 3, error = 'rejected',
			transition_actor = 'test', transition_reason = 'rejected' WHERE id = $1`, e.ID)
		require.NoError(t, err)
		return e.ID.String()
	}
	failed, inRun := fail("r-1"), fail("r-run")
	_, err := h.pool.Exec(ctx, `UPDATE reckon_effects SET run_id = 'run-1' WHERE id = $1`, inRun)
	require.NoError(t, err)
	_, err = h.client.StartRun(ctx, effects.RunSpec{ID: "run-1", TenantID: "acme"})
	require.NoError(t, err)
	_, err = h.client.CancelRun(ctx, "run-1", "test", "stop", &effects.RunOpts{TenantID: "acme"})
	require.NoError(t, err)

	for _, tc := range []struct{ body, want string }{
		{`{}`, "reason is required"},
		{`{"reason":"ok","to":"PENDING"}`, "to"},
		{`{"reason":"bad\u0000"}`, "reason"},
	} {
		r := h.do("POST", "/v1/effects/"+failed+"/redrive", token, tc.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		require.Contains(t, string(r.body), tc.want)
	}
	r := h.do("POST", "/v1/effects/not-a-uuid/redrive", token, `{"reason":"x"}`)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	r = h.do("POST", "/v1/effects/"+failed+"/redrive", h.token("globex", false), `{"reason":"not mine"}`)
	require.Equal(t, http.StatusNotFound, r.status, "another tenant's effect is not found")
	r = h.do("POST", "/v1/effects/"+inRun+"/redrive", token, `{"reason":"again"}`)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "run_cancelled", r.errorCode(t))
	pending := h.enqueue(token, "r-pending", 5).ID.String()
	before := h.rows()
	r = h.do("POST", "/v1/effects/"+pending+"/redrive", token, `{"reason":"again"}`)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "not_failed", r.errorCode(t))
	require.Equal(t, before, h.rows(), "refusals change nothing")
	require.Equal(t, "FAILED", h.state(uuid.MustParse(failed)))

	r = h.do("POST", "/v1/effects/"+failed+"/redrive", token, `{"reason":"outage over","actor":"alice"}`, "Idempotency-Key", "redrive-1")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	e := r.effect(t)
	require.Equal(t, "PENDING", e.State)
	var attempts int
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT attempts FROM reckon_effects WHERE id = $1`, e.ID).Scan(&attempts))
	require.Zero(t, attempts, "a fresh attempt budget")
	require.Equal(t, "r-1", e.IdempotencyKey)
	var actor, reason string
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT actor, reason FROM reckon_effect_transitions WHERE effect_id = $1 ORDER BY id DESC LIMIT 1`,
		e.ID).Scan(&actor, &reason))
	require.Equal(t, "operator:api:acme-ops/alice", actor)
	require.Equal(t, "redrive: outage over", reason)
	// The same request again (Idempotency-Key) is answered as before; a new one is 409 not_failed.
	r = h.do("POST", "/v1/effects/"+failed+"/redrive", token, `{"reason":"outage over","actor":"alice"}`, "Idempotency-Key", "redrive-1")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	r = h.do("POST", "/v1/effects/"+failed+"/redrive", token, `{"reason":"again"}`)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "not_failed", r.errorCode(t))
}
