package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
)

// pauseAnswer is the answer to POST /v1/connectors/{name}/pause.
type pauseAnswer struct {
	effects.ConnectorPause
	Created bool `json:"created"`
}

// TestPauses: a system token pauses a connector for every tenant or one, lists the pauses and
// resumes them; each is logged with its actor and reason; a tenant's token sees its own tenant's
// pauses and those of every tenant, never another tenant's, and changes nothing.
func TestPauses(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	system, acme, globex := h.systemToken(), h.token("acme", true), h.token("globex", false)
	path := "/v1/connectors/bank.wire/"

	r := h.do("POST", path+"pause", system, `{"tenant_id":"acme","reason":"acme's account under review","actor":"ann"}`, "Idempotency-Key", "pause-1")
	got := decodeOK[pauseAnswer](t, r)
	require.True(t, got.Created)
	require.WithinDuration(t, time.Now(), got.PausedAt, time.Minute)
	require.Equal(t, effects.ConnectorPause{Connector: "bank.wire", TenantID: "acme", PausedBy: "api:platform/ann",
		Reason: "acme's account under review", PausedAt: got.PausedAt}, got.ConnectorPause)
	replay := h.do("POST", path+"pause", system, `{"tenant_id":"acme","reason":"acme's account under review","actor":"ann"}`, "Idempotency-Key", "pause-1")
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
	again := decodeOK[pauseAnswer](t, h.do("POST", path+"pause", system, `{"tenant_id":"acme","reason":"again"}`))
	require.False(t, again.Created, "a second pause keeps the first")
	require.Equal(t, "acme's account under review", again.Reason)
	decodeOK[pauseAnswer](t, h.do("POST", path+"pause", system, `{"reason":"bank maintenance 02:00-04:00"}`))

	type list struct {
		Pauses []effects.ConnectorPause `json:"pauses"`
	}
	tenants := func(token string) []string {
		var out []string
		for _, p := range decodeOK[list](t, h.do("GET", "/v1/pauses", token, "")).Pauses {
			out = append(out, p.TenantID)
		}
		return out
	}
	require.Equal(t, []string{"", "acme"}, tenants(system))
	require.Equal(t, []string{"", "acme"}, tenants(acme))
	require.Equal(t, []string{""}, tenants(globex), "another tenant's pause is not shown")

	// A tenant's token, admin or not, changes nothing.
	for _, p := range []string{"pause", "resume"} {
		r := h.do("POST", path+p, acme, `{"tenant_id":"acme","reason":"mine"}`)
		require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
		require.Equal(t, "forbidden", r.errorCode(t))
	}

	resumed := decodeOK[map[string]any](t, h.do("POST", path+"resume", system, `{"reason":"maintenance over"}`))
	require.Equal(t, map[string]any{"connector": "bank.wire", "tenant_id": "", "resumed": true}, resumed)
	require.Equal(t, []string{"acme"}, tenants(system), "resuming every tenant's pause leaves a tenant's")
	resumed = decodeOK[map[string]any](t, h.do("POST", path+"resume", system, `{"reason":"maintenance over"}`))
	require.Equal(t, false, resumed["resumed"])
	decodeOK[map[string]any](t, h.do("POST", path+"resume", system, `{"tenant_id":"acme","reason":"review done"}`))
	require.Empty(t, tenants(system))
	require.Equal(t, 4, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_connector_pause_log WHERE connector = 'bank.wire'`))
	pauses, err := h.client.ConnectorPauses(ctx)
	require.NoError(t, err)
	require.Empty(t, pauses)
}

// TestPauseRefusesBadInput: bad input is a 400 naming the field, an unknown connector a 404; no
// pause is stored and nothing is logged.
func TestPauseRefusesBadInput(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	system := h.systemToken()
	for _, c := range []struct {
		name, path, body string
		status           int
		code, field      string
	}{
		{"no reason", "/v1/connectors/bank.wire/pause", `{}`, 400, "invalid_request", "reason"},
		{"blank reason", "/v1/connectors/bank.wire/pause", `{"reason":"  "}`, 400, "invalid_request", "reason"},
		{"long reason", "/v1/connectors/bank.wire/pause", `{"reason":"` + strings.Repeat("r", 2001) + `"}`, 400, "invalid_request", "reason"},
		{"bad tenant", "/v1/connectors/bank.wire/pause", `{"tenant_id":"a b","reason":"r"}`, 400, "invalid_request", "tenant_id"},
		{"unknown field", "/v1/connectors/bank.wire/pause", `{"reason":"r","until":"tomorrow"}`, 400, "invalid_request", "until"},
		{"wrong type", "/v1/connectors/bank.wire/resume", `{"reason":7}`, 400, "invalid_request", "reason"},
		{"no body", "/v1/connectors/bank.wire/resume", ``, 400, "invalid_json", ""},
		{"long name", "/v1/connectors/" + strings.Repeat("n", 201) + "/pause", `{"reason":"r"}`, 400, "invalid_parameter", "name"},
		{"unknown connector", "/v1/connectors/nowhere.api/pause", `{"reason":"r"}`, 404, "not_found", "nowhere.api"},
		{"unknown connector resumed", "/v1/connectors/nowhere.api/resume", `{"reason":"r"}`, 404, "not_found", "nowhere.api"},
	} {
		r := h.do("POST", c.path, system, c.body)
		require.Equal(t, c.status, r.status, "%s: %s", c.name, r.body)
		require.Equal(t, c.code, r.errorCode(t), c.name)
		require.Contains(t, string(r.body), c.field, c.name)
	}
	require.Zero(t, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_connector_pauses`))
	require.Zero(t, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_connector_pause_log`))
}
