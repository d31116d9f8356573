package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
)

// TestTenantAdminsStayInTheirTenant: tenant acme's admin token cannot read, replace or delete
// globex's turn handler — 404, word for word what an absent one answers — nor change the HTTP
// connectors or saga definitions that every tenant shares (403); nothing changes and nothing is
// recorded. A system token does all of it, for any tenant, and every change lands in
// reckon_definition_changes, append-only, with its actor, its token and what was stored.
func TestTenantAdminsStayInTheirTenant(t *testing.T) {
	t.Parallel()
	h := setupSagas(t)
	ctx := context.Background()
	acmeAdmin, globexAdmin, system := h.token("acme", true), h.token("globex", true), h.systemToken()
	_ = h.token("initech", false) // a tenant without a turn handler
	tokenID := func(secret string) uuid.UUID {
		var id uuid.UUID
		require.NoError(t, h.pool.QueryRow(ctx, `SELECT id FROM reckon_api_tokens WHERE token_sha256 = sha256(convert_to($1, 'UTF8'))`, secret).Scan(&id))
		return id
	}

	// A tenant's admin manages its own tenant's handler.
	r := h.do("PUT", "/v1/turn-handlers/globex", globexAdmin, `{"url":"https://bot.globex.example/turns"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)

	state := func() map[string]int {
		return h.rowsWith(map[string]string{
			"turn_handlers":      `SELECT count(*) FROM reckon_turn_handlers`,
			"globex_handler":     `SELECT count(*) FROM reckon_turn_handlers WHERE tenant_id = 'globex' AND url = 'https://bot.globex.example/turns'`,
			"saga_definitions":   `SELECT count(*) FROM reckon_saga_definitions`,
			"definition_changes": `SELECT count(*) FROM reckon_definition_changes`,
		})
	}
	before := state()
	// Another tenant's handler is absent to acme's admin: the same answer as a tenant without one
	// (or no such tenant), so acme cannot even learn that globex has one.
	for _, tc := range []struct{ method, body, absent string }{
		{"GET", "", "/v1/turn-handlers/initech"},
		{"PUT", `{"url":"https://evil.acme.example/turns"}`, "/v1/turn-handlers/nobody"},
		{"DELETE", "", "/v1/turn-handlers/initech"},
	} {
		theirs := h.do(tc.method, "/v1/turn-handlers/globex", acmeAdmin, tc.body)
		require.Equal(t, http.StatusNotFound, theirs.status, "%s: %s", tc.method, theirs.body)
		absent := h.do(tc.method, tc.absent, system, tc.body)
		require.Equal(t, http.StatusNotFound, absent.status, "%s: %s", tc.method, absent.body)
		name := strings.TrimPrefix(tc.absent, "/v1/turn-handlers/")
		require.Equal(t, strings.ReplaceAll(string(absent.body), name, "globex"), string(theirs.body), "%s: indistinguishable", tc.method)
	}
	requireSharedNeedSystemToken(t, h, acmeAdmin, h.token("acme", false))
	require.Equal(t, before, state(), "nothing changed, nothing recorded")
	r = h.do("GET", "/v1/connectors/bank.wire", acmeAdmin, "")
	require.Equal(t, http.StatusOK, r.status, "reading stays open to every token")
	require.NotContains(t, string(r.body), "evil", "the definition is unchanged")

	// A system token: any tenant's turn handler, the connectors and the saga definitions.
	r = h.do("GET", "/v1/turn-handlers/globex", system, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "https://bot.globex.example/turns")
	r = h.do("PUT", "/v1/turn-handlers/acme", system, `{"url":"https://bot.acme.example/turns","timeout_ms":5000}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = h.do("DELETE", "/v1/turn-handlers/globex", system, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	probe := `{"name":"audit.probe","tags":["write","idempotent"],"dispatch_url":"http://127.0.0.1:1/probe"}`
	r = h.do("POST", "/v1/connectors", system, probe, "Idempotency-Key", "probe-1")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = h.do("POST", "/v1/connectors", system, probe, "Idempotency-Key", "probe-1")
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"), "system tokens' Idempotency-Keys work: a replay changes nothing")
	r = h.do("POST", "/v1/connectors", system, strings.Replace(probe, "/probe", "/probe-v2", 1))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = h.do("DELETE", "/v1/connectors/audit.probe", system, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = h.do("POST", "/v1/saga-definitions", system, transferDef)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = h.do("POST", "/v1/saga-definitions", system, transferDef)
	require.Equal(t, http.StatusOK, r.status, "the same definition again: no change, no record")
	// A tenant's Idempotency-Key is its own: the system tokens' "probe-1" is not acme's.
	r = h.do("POST", "/v1/effects", h.token("acme", false), `{"connector":"bank.wire","idempotency_key":"w-1","args":{}}`, "Idempotency-Key", "probe-1")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)

	changes := definitionChanges(t, h)
	str := func(s string) *string { return &s }
	systemID := tokenID(system)
	require.Equal(t, []definitionChange{
		{"turn_handler", "globex", "create", "api:globex-ops", tokenID(globexAdmin), str("https://bot.globex.example/turns")},
		{"turn_handler", "acme", "create", "api:platform", systemID, str("https://bot.acme.example/turns")},
		{"turn_handler", "globex", "delete", "api:platform", systemID, nil},
		{"connector", "audit.probe", "create", "api:platform", systemID, str("http://127.0.0.1:1/probe")},
		{"connector", "audit.probe", "replace", "api:platform", systemID, str("http://127.0.0.1:1/probe-v2")},
		{"connector", "audit.probe", "delete", "api:platform", systemID, nil},
		{"saga_definition", "transfer", "create", "api:platform", systemID, str("transfer")},
	}, changes)

	// The record is append-only.
	for _, sql := range []string{
		`UPDATE reckon_definition_changes SET actor = 'someone else'`,
		`DELETE FROM reckon_definition_changes`,
		`TRUNCATE reckon_definition_changes`,
	} {
		_, err := h.pool.Exec(ctx, sql)
		require.ErrorContains(t, err, "reckon_definition_changes is append-only", sql)
	}
	require.Equal(t, len(changes), testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_definition_changes`))
}

// TestSystemTokenRefusedOnTenantRoutes: a system token has no tenant, so every tenant-scoped route
// refuses it with 403 before its handler runs (none sees a call without a tenant), and nothing
// changes: no effect, transition, job, stored Idempotency-Key, saga or message.
func TestSystemTokenRefusedOnTenantRoutes(t *testing.T) {
	t.Parallel()
	h := setup(t, 0) // no reactor runs: the effect stays PENDING unless a request changes it
	acme, system := h.token("acme", false), h.systemToken()
	effect := h.enqueue(acme, "w-1", 10)
	id, sagaID := effect.ID.String(), uuid.NewString()
	state := func() map[string]int {
		return h.rowsWith(map[string]string{
			"sagas":    `SELECT count(*) FROM reckon_sagas`,
			"messages": `SELECT count(*) FROM reckon_messages`,
			"runs":     `SELECT count(*) FROM reckon_runs`,
		})
	}
	before := state()
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/v1/effects", `{"connector":"bank.wire","idempotency_key":"sys-1","args":{},"run_id":"run-1"}`},
		{"GET", "/v1/effects", ""},
		{"GET", "/v1/effects/" + id, ""},
		{"POST", "/v1/effects/" + id + "/resolve", `{"to":"FAILED","reason":"r"}`},
		{"POST", "/v1/effects/" + id + "/cancel", `{"reason":"r"}`},
		{"POST", "/v1/callbacks/" + id, `{"result":{"forged":true}}`},
		{"GET", "/v1/runs/run-1", ""},
		{"POST", "/v1/sagas", `{"definition":"transfer","input":{}}`},
		{"GET", "/v1/sagas", ""},
		{"GET", "/v1/sagas/" + sagaID, ""},
		{"POST", "/v1/sagas/" + sagaID + "/resolve", `{"action":"retry_compensation","reason":"r"}`},
		{"POST", "/v1/sessions/acme:bot:u:web/messages", `{"message_id":"m1"}`},
		{"GET", "/v1/sessions/acme:bot:u:web/turns", ""},
	} {
		var headers []string
		if req.method == "POST" {
			headers = []string{"Idempotency-Key", "sys-" + req.path}
		}
		r := h.do(req.method, req.path, system, req.body, headers...)
		require.Equal(t, http.StatusForbidden, r.status, "%s %s: %s", req.method, req.path, r.body)
		require.Equal(t, "forbidden", r.errorCode(t), "%s %s", req.method, req.path)
		require.Contains(t, string(r.body), "a system token manages shared definitions", "%s %s", req.method, req.path)
		require.Contains(t, string(r.body), "use a tenant token")
	}
	require.Equal(t, before, state(), "nothing changed")
	require.Equal(t, "PENDING", h.state(effect.ID))
}

// requireSharedNeedSystemToken: what every tenant shares (HTTP connectors, saga definitions) needs
// a system token, whatever the tenant token: each of tokens is refused with 403.
func requireSharedNeedSystemToken(t *testing.T, h *harness, tokens ...string) {
	t.Helper()
	for _, token := range tokens {
		for _, req := range []struct{ method, path, body, what string }{
			{"POST", "/v1/connectors", `{"name":"bank.wire","tags":["write","idempotent"],"dispatch_url":"https://evil.acme.example/"}`, "HTTP connectors"},
			{"DELETE", "/v1/connectors/bank.wire", "", "HTTP connectors"},
			{"POST", "/v1/saga-definitions", transferDef, "saga definitions"},
		} {
			r := h.do(req.method, req.path, token, req.body, "Idempotency-Key", "shared-"+req.method)
			require.Equal(t, http.StatusForbidden, r.status, "%s %s: %s", req.method, req.path, r.body)
			require.Equal(t, "forbidden", r.errorCode(t))
			require.Contains(t, string(r.body), req.what+" are shared by every tenant: changing them needs a system token (server tokens create -system)")
		}
	}
}

// definitionChange is a row of reckon_definition_changes: what changed, by whom, and the stored
// definition's URL or name (nil: deleted).
type definitionChange struct {
	Kind, Name, Action, Actor string
	TokenID                   uuid.UUID
	Stored                    *string
}

// definitionChanges is reckon_definition_changes, oldest first.
func definitionChanges(t *testing.T, h *harness) []definitionChange {
	t.Helper()
	rows, err := h.pool.Query(context.Background(), `SELECT kind, name, action, actor, token_id,
		coalesce(definition->>'url', definition->>'dispatch_url', definition->>'name')
		FROM reckon_definition_changes ORDER BY id`)
	require.NoError(t, err)
	var changes []definitionChange
	for rows.Next() {
		var c definitionChange
		require.NoError(t, rows.Scan(&c.Kind, &c.Name, &c.Action, &c.Actor, &c.TokenID, &c.Stored))
		changes = append(changes, c)
	}
	require.NoError(t, rows.Err())
	return changes
}
