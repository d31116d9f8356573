package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
)

// decodeOK decodes a 200 answer as T.
func decodeOK[T any](t *testing.T, r response) T {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	return decode[T](t, r)
}

// pause pauses connector's shared limit key for 30 s the way an upstream's Retry-After does.
func pause(t *testing.T, h *harness, connector string) {
	t.Helper()
	_, err := h.pool.Exec(context.Background(),
		`SELECT reckon_limit_release($1, '', gen_random_uuid(), false, 0, 30000, true, 30000)`, connector)
	require.NoError(t, err)
}

// TestLimits: a system token sets, reads, replaces, resets and clears an operator's limit of a
// connector; what it sets is what effects.Client reads; a tenant token reads but changes nothing.
func TestLimits(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	system, admin := h.systemToken(), h.token("acme", true)
	path := "/v1/connectors/bank.wire/limit"

	require.Equal(t, api.LimitsJSON{Limits: []api.LimitJSON{}, States: []api.LimitStateJSON{}}, decodeOK[api.LimitsJSON](t, h.do("GET", "/v1/limits", admin, "")))
	r := h.do("GET", path, system, "")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	require.Equal(t, "not_found", r.errorCode(t))
	r = h.do("DELETE", path, system, "")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)

	// A tenant's token, admin or not, changes nothing.
	for _, req := range []struct{ method, path, body string }{
		{"PUT", path, `{"rate":1}`}, {"DELETE", path, ""}, {"POST", path + "/reset", ""},
	} {
		r := h.do(req.method, req.path, admin, req.body)
		require.Equal(t, http.StatusForbidden, r.status, "%s %s: %s", req.method, req.path, r.body)
		require.Contains(t, string(r.body), "connector limits are shared by every tenant")
	}
	require.Zero(t, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_connector_limits`))

	// Set: the defaults are filled in, the actor is the token's.
	r = h.do("PUT", path, system, `{"rate":20,"max_in_flight":5,"break_after":5,"reason":"bank slow: INC-42"}`, "Idempotency-Key", "limit-1")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var set api.LimitJSON
	require.NoError(t, json.Unmarshal(r.body, &set))
	require.WithinDuration(t, time.Now(), set.SetAt, time.Minute)
	set.SetAt = time.Time{}
	require.Equal(t, api.LimitJSON{Connector: "bank.wire", SetBy: "api:platform",
		LimitFields: api.LimitFields{Rate: 20, PerMS: 1000, Burst: 20, MaxInFlight: 5, BreakAfter: 5, BreakForMS: 30000, Reason: "bank slow: INC-42"}}, set)
	replay := h.do("PUT", path, system, `{"rate":20,"max_in_flight":5,"break_after":5,"reason":"bank slow: INC-42"}`, "Idempotency-Key", "limit-1")
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))

	settings, err := h.client.LimitSettings(ctx)
	require.NoError(t, err)
	require.Len(t, settings, 1)
	require.Equal(t, effects.Limit{Rate: 20, Per: time.Second, Burst: 20, MaxInFlight: 5, BreakAfter: 5, BreakFor: 30 * time.Second}, settings[0].Limit)
	require.Equal(t, "api:platform", settings[0].SetBy)

	// Read by any token.
	one := decodeOK[api.ConnectorLimitJSON](t, h.do("GET", path, admin, ""))
	require.NotNil(t, one.Limit)
	require.Equal(t, 20, one.Limit.Rate)
	require.Empty(t, one.States, "no call yet: no limit key")
	all := decodeOK[api.LimitsJSON](t, h.do("GET", "/v1/limits", system, ""))
	require.Len(t, all.Limits, 1)
	require.Equal(t, "bank.wire", all.Limits[0].Connector)

	// Replaced, every field given.
	r = h.do("PUT", path, system, `{"rate":3,"per_ms":60000,"burst":1,"max_in_flight":2,"per_tenant":true,"break_after":2,"break_for_ms":5000}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	settings, err = h.client.LimitSettings(ctx)
	require.NoError(t, err)
	require.Equal(t, effects.Limit{Rate: 3, Per: time.Minute, Burst: 1, MaxInFlight: 2, PerTenant: true, BreakAfter: 2, BreakFor: 5 * time.Second}, settings[0].Limit)
	require.Empty(t, settings[0].Reason)

	// Reset: a paused key is paused before and not after; a second reset finds nothing.
	pause(t, h, "bank.wire")
	// The operator's limit is per tenant: the pause is on the key of tenant "" all the same.
	one = decodeOK[api.ConnectorLimitJSON](t, h.do("GET", path, system, ""))
	require.Len(t, one.States, 1)
	require.NotNil(t, one.States[0].PausedUntil, "paused")
	require.Equal(t, "closed", one.States[0].Circuit)
	r = h.do("POST", path+"/reset", system, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.JSONEq(t, `{"connector":"bank.wire","reset":true}`, string(r.body))
	one = decodeOK[api.ConnectorLimitJSON](t, h.do("GET", path, system, ""))
	require.Len(t, one.States, 1)
	require.Nil(t, one.States[0].PausedUntil, "no longer paused")
	r = h.do("POST", path+"/reset", system, "")
	require.JSONEq(t, `{"connector":"bank.wire","reset":false}`, string(r.body))

	// Clear.
	r = h.do("DELETE", path, system, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.JSONEq(t, `{"connector":"bank.wire","cleared":true}`, string(r.body))
	r = h.do("GET", path, system, "")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	r = h.do("DELETE", path, system, "")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	require.Zero(t, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_connector_limits`))
}

// TestLimitStatesByTenant: a tenant's token sees the limit keys shared by every tenant and its
// own, never another tenant's; a system token sees every key.
func TestLimitStatesByTenant(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	system, acme := h.systemToken(), h.token("acme", false)
	// Per-tenant keys of acme and globex whose circuits opened (break after 1 failure), and a
	// shared key, paused.
	for _, tenant := range []string{"acme", "globex"} {
		_, err := h.pool.Exec(context.Background(),
			`SELECT reckon_limit_release('crm.api', $1, gen_random_uuid(), true, 1, 30000, true, 0)`, tenant)
		require.NoError(t, err)
	}
	pause(t, h, "crm.api")

	keys := func(states []api.LimitStateJSON) []string {
		var out []string
		for _, s := range states {
			out = append(out, s.Connector+"/"+s.TenantID+"/"+s.Circuit)
		}
		return out
	}
	require.Equal(t, []string{"crm.api//closed", "crm.api/acme/open", "crm.api/globex/open"}, keys(decodeOK[api.LimitsJSON](t, h.do("GET", "/v1/limits", system, "")).States))
	require.Equal(t, []string{"crm.api//closed", "crm.api/acme/open"}, keys(decodeOK[api.LimitsJSON](t, h.do("GET", "/v1/limits", acme, "")).States))

	// The connector's route, with an operator's limit.
	r := h.do("PUT", "/v1/connectors/crm.api/limit", system, `{"per_tenant":true,"break_after":1}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, []string{"crm.api//closed", "crm.api/acme/open"}, keys(decodeOK[api.ConnectorLimitJSON](t, h.do("GET", "/v1/connectors/crm.api/limit", acme, "")).States))
	one := decodeOK[api.ConnectorLimitJSON](t, h.do("GET", "/v1/connectors/crm.api/limit", system, ""))
	require.Len(t, one.States, 3)
	require.Equal(t, 1, one.States[1].Failures)
	require.NotNil(t, one.States[1].OpenUntil)
}

// TestLimitInputIsRefusedNamingTheField: a limit out of range, of the wrong type, or with a reason
// or name Postgres cannot store or the API does not take is refused with 400 naming the field,
// before anything is stored.
func TestLimitInputIsRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	system := h.systemToken()
	path := "/v1/connectors/bank.wire/limit"
	for _, tc := range []struct {
		name, path, body, code, field string
	}{
		{"negative rate", path, `{"rate":-1}`, "invalid_request", `field \"rate\"`},
		{"rate over a million", path, `{"rate":1000001}`, "invalid_request", `field \"rate\"`},
		{"fractional rate", path, `{"rate":1.5}`, "invalid_request", `field \"rate\"`},
		{"rate a string", path, `{"rate":"20"}`, "invalid_request", `field \"rate\"`},
		{"rate beyond int64", path, `{"rate":1e30}`, "invalid_request", `field \"rate\"`},
		{"negative per", path, `{"rate":1,"per_ms":-1}`, "invalid_request", `field \"per_ms\"`},
		{"per over an hour", path, `{"rate":1,"per_ms":3600001}`, "invalid_request", `field \"per_ms\"`},
		{"per beyond a duration", path, `{"per_ms":9000000000000000}`, "invalid_request", `field \"per_ms\"`},
		{"per wrapping into range", path, `{"rate":1,"per_ms":18446744074710}`, "invalid_request", `field \"per_ms\"`},
		{"negative burst", path, `{"rate":5,"burst":-5}`, "invalid_request", `field \"burst\"`},
		{"max in flight over a million", path, `{"max_in_flight":2000000}`, "invalid_request", `field \"max_in_flight\"`},
		{"negative break after", path, `{"break_after":-1}`, "invalid_request", `field \"break_after\"`},
		{"break for under a second", path, `{"break_after":1,"break_for_ms":999}`, "invalid_request", `field \"break_for_ms\"`},
		{"break for over an hour", path, `{"break_for_ms":3600001}`, "invalid_request", `field \"break_for_ms\"`},
		{"per tenant not a boolean", path, `{"per_tenant":"yes"}`, "invalid_request", `field \"per_tenant\"`},
		{"reason too long", path, `{"reason":"` + strings.Repeat("x", 2001) + `"}`, "invalid_request", `field \"reason\"`},
		{"reason not a string", path, `{"reason":7}`, "invalid_request", `field \"reason\"`},
		{"an actor", path, `{"actor":"alice"}`, "invalid_request", `unknown field \"actor\"`},
		{"misspelt field", path, `{"Rate":1}`, "invalid_request", `unknown field \"Rate\"`},
		{"not an object", path, `[1]`, "invalid_request", ``},
		{"empty body", path, ``, "invalid_json", ``},
		{"name too long", "/v1/connectors/" + strings.Repeat("n", 201) + "/limit", `{}`, "invalid_parameter", `path value name`},
		{"reset with a field", path + "/reset", `{"reason":"x"}`, "invalid_request", `unknown field \"reason\"`},
		{"reset name too long", "/v1/connectors/" + strings.Repeat("n", 201) + "/limit/reset", ``, "invalid_parameter", `path value name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "PUT"
			if strings.HasSuffix(tc.path, "/reset") {
				method = "POST"
			}
			r := h.do(method, tc.path, system, tc.body)
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			require.Equal(t, tc.code, r.errorCode(t), "%s", r.body)
			require.Contains(t, string(r.body), tc.field)
		})
	}
	for _, method := range []string{"GET", "DELETE"} {
		r := h.do(method, "/v1/connectors/"+strings.Repeat("n", 201)+"/limit", system, "")
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", method, r.body)
		require.Equal(t, "invalid_parameter", r.errorCode(t))
	}
	require.Zero(t, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_connector_limits`))

	// The bounds themselves are accepted.
	r := h.do("PUT", path, system, `{"rate":1000000,"per_ms":3600000,"burst":1000000,"max_in_flight":1000000,"break_after":1000000,"break_for_ms":3600000,"reason":"`+strings.Repeat("x", 2000)+`"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = h.do("PUT", path, system, `{"per_ms":1,"break_for_ms":1000}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}
