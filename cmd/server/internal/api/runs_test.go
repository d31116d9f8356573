package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
)

// TestEnqueueRunRefusals: an enqueue into another tenant's run (while run ids are global), a run
// past its max_steps and a cancelled run are clear 4xx answers that enqueue nothing (they were 500
// before), and the first does not say whose run it is.
func TestEnqueueRunRefusals(t *testing.T) {
	h := setup(t, 0)
	acme := h.token("acme", false)
	globex := h.token("globex", false)
	wire := func(key, run string) string {
		return `{"connector":"bank.wire","idempotency_key":"` + key + `","run_id":"` + run + `","args":{"account":"a-1","amount":1}}`
	}
	message := func(r response) string {
		var body struct {
			Error struct{ Code, Message string }
		}
		require.NoError(t, json.Unmarshal(r.body, &body))
		return body.Error.Message
	}

	r := h.do("POST", "/v1/effects", acme, wire("k1", "run-1"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	before := h.rows()

	// Another tenant naming acme's run id: refused without saying whose it is while run ids are
	// global, or globex's own run once they are per tenant; never a server error.
	r = h.do("POST", "/v1/effects", globex, wire("k1", "run-1"))
	if r.status == http.StatusCreated {
		require.Equal(t, "globex", r.effect(t).TenantID)
	} else {
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
		require.Equal(t, "run_conflict", r.errorCode(t))
		require.Contains(t, message(r), "not available to this tenant")
		require.NotContains(t, message(r), "acme")
		require.NotContains(t, message(r), "another tenant")
		require.Equal(t, before, h.rows())
	}
	// A fresh run id is fine.
	r = h.do("POST", "/v1/effects", globex, wire("k2", "run-2"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)

	// A run at its max_steps.
	ctx := context.Background()
	_, err := h.client.StartRun(ctx, effects.RunSpec{ID: "capped", TenantID: "acme", MaxSteps: 1})
	require.NoError(t, err)
	r = h.do("POST", "/v1/effects", acme, wire("c1", "capped"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	before = h.rows()
	r = h.do("POST", "/v1/effects", acme, wire("c2", "capped"))
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "run_halted", r.errorCode(t))
	require.Contains(t, message(r), "steps")
	require.Equal(t, before, h.rows())
	// Its replay is not a new step.
	r = h.do("POST", "/v1/effects", acme, wire("c1", "capped"))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	// A cancelled run.
	_, err = h.client.CancelRun(ctx, "run-1", "test", "customer withdrew")
	require.NoError(t, err)
	before = h.rows()
	r = h.do("POST", "/v1/effects", acme, wire("k3", "run-1"))
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "run_cancelled", r.errorCode(t))
	require.Contains(t, message(r), "customer withdrew")
	require.Equal(t, before, h.rows())
}
