package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
)

// setupSagas is an API server with a saga client whose effects client runs: the fake bank behind
// the HTTP connector "bank.wire" (which compensates), and "always.fails", a Go connector whose
// every call fails, and the extra connectors.
func setupSagas(t *testing.T, extra ...effects.Connector) *harness {
	t.Helper()
	ctx := context.Background()
	h := &harness{t: t, pool: pgtest.NewDB(t), bank: fakebank.New(t)}
	base := h.bank.URL() + fakebank.ReckonPrefix
	_, _, err := httpconn.Put(ctx, h.pool, httpconn.Definition{
		Name: "bank.wire", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal, effects.TagNetwork},
		DispatchURL: base + "/wires", StatusURL: base + "/wires/status", CompensateURL: base + "/wires/compensate",
		Timeout: time.Second, BackoffInitial: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	registry := effects.NewRegistry()
	require.NoError(t, registry.Register(effects.Connector{
		Name: "always.fails", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			return nil, effects.Permanent(errors.New("refused by policy"))
		},
	}))
	for _, c := range extra {
		require.NoError(t, registry.Register(c))
	}
	_, err = new(httpconn.Syncer).Sync(ctx, h.pool, registry)
	require.NoError(t, err)
	var sagaDefs sagadef.Syncer
	sagas, err := saga.NewClient(h.pool, &saga.Config{Logger: slog.New(slog.DiscardHandler), OnUnknownDefinition: sagaDefs.Load})
	require.NoError(t, err)
	h.client = testkit.NewClient(t, h.pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler),
		FetchPollInterval: 50 * time.Millisecond, FetchCooldown: 10 * time.Millisecond, SweepInterval: 100 * time.Millisecond,
		Plugins: []effects.Plugin{sagas}})
	testkit.Start(t, h.client)
	h.server = h.serve(&api.Config{Pool: h.pool, Effects: h.client, Sagas: sagas})
	return h
}

type sagaBody struct {
	ID           uuid.UUID       `json:"id"`
	TenantID     string          `json:"tenant_id"`
	Definition   string          `json:"definition"`
	State        string          `json:"state"`
	Input        json.RawMessage `json:"input"`
	Deduplicated *bool           `json:"deduplicated"`
	Error        string          `json:"error"`
	Steps        []struct {
		Name               string          `json:"name"`
		State              string          `json:"state"`
		Result             json.RawMessage `json:"result"`
		CompensationResult json.RawMessage `json:"compensation_result"`
	} `json:"steps"`
	History []struct{ To string } `json:"history"`
}

func (r response) saga(t *testing.T) sagaBody { return decode[sagaBody](t, r) }

// awaitSaga polls GET /v1/sagas/{id} until the saga is settled.
func (h *harness) awaitSaga(token string, id uuid.UUID) sagaBody {
	h.t.Helper()
	var s sagaBody
	require.Eventually(h.t, func() bool {
		r := h.do("GET", "/v1/sagas/"+id.String(), token, "")
		require.Equal(h.t, http.StatusOK, r.status, "%s", r.body)
		s = r.saga(h.t)
		return s.State == "COMPLETED" || s.State == "COMPENSATED" || s.State == "STUCK"
	}, 30*time.Second, 20*time.Millisecond, "saga %s never settled", id)
	return s
}

const transferDef = `{"name":"transfer","steps":[
	{"name":"debit","connector":"bank.wire","undo":"connector"},
	{"name":"credit","connector":"bank.wire","undo":"none"}]}`

// TestSagaDefinitionsAPI: system tokens store definitions, validated against the registry (clear
// 400s that store nothing); storing the same again is 200, another one of that name 409.
func TestSagaDefinitionsAPI(t *testing.T) {
	t.Parallel()
	h := setupSagas(t)
	system, user := h.systemToken(), h.token("acme", false)

	r := h.do("POST", "/v1/saga-definitions", user, transferDef)
	require.Equal(t, http.StatusForbidden, r.status)
	for body, want := range map[string]string{
		`{"name":"x","steps":[{"name":"a","connector":"nowhere","undo":"none"}]}`:                                                      `"nowhere" is not registered`,
		`{"name":"x","steps":[{"name":"a","connector":"always.fails","undo":"connector"}]}`:                                            "cannot compensate",
		`{"name":"x","steps":[{"name":"a","connector":"bank.wire","undo":"none"},{"name":"a","connector":"bank.wire","undo":"none"}]}`: "unique",
		`{"name":"x","steps":[]}`: "at least one",
		`{"name":"x","steps":[{"name":"a","connector":"bank.wire","undo":"sometimes"}]}`: "undo",
		`{"name":"x","stepz":[]}`: "unknown field",
	} {
		r := h.do("POST", "/v1/saga-definitions", system, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s", body)
		require.Equal(t, "invalid_saga_definition", r.errorCode(t), "%s", body)
		var e struct{ Error struct{ Message string } }
		require.NoError(t, json.Unmarshal(r.body, &e))
		require.Contains(t, e.Error.Message, want, "%s", body)
	}
	r = h.do("POST", "/v1/saga-definitions", system, `{"name":`)
	require.Equal(t, "invalid_json", r.errorCode(t))
	r = h.do("GET", "/v1/saga-definitions", user, "")
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"definitions":[]}`, string(r.body), "nothing stored")

	r = h.do("POST", "/v1/saga-definitions", system, transferDef)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = h.do("POST", "/v1/saga-definitions", system, transferDef)
	require.Equal(t, http.StatusOK, r.status, "the same again")
	r = h.do("POST", "/v1/saga-definitions", system, strings.Replace(transferDef, `"undo":"none"`, `"undo":"connector"`, 1))
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "saga_definition_exists", r.errorCode(t))

	r = h.do("GET", "/v1/saga-definitions/transfer", user, "")
	require.Equal(t, http.StatusOK, r.status)
	var def sagadef.Definition
	require.NoError(t, json.Unmarshal(r.body, &def))
	require.Len(t, def.Steps, 2)
	require.Equal(t, sagadef.UndoNone, def.Steps[1].Undo.Kind, "unchanged by the refused replacement")
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/saga-definitions/nope", user, "").status)
}

// TestSagasAPI: sagas started over HTTP run to COMPLETED, or to COMPENSATED with the bank's
// ledger netting to zero; a start_key deduplicates (200) or conflicts (409); another tenant sees
// none of them; bad requests change nothing; lists paginate.
func TestSagasAPI(t *testing.T) {
	t.Parallel()
	h := setupSagas(t)
	system, acme, globex := h.systemToken(), h.token("acme", false), h.token("globex", false)
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/saga-definitions", system, transferDef).status)
	r := h.do("POST", "/v1/saga-definitions", system, `{"name":"doomed","steps":[
		{"name":"debit","connector":"bank.wire","undo":"connector"},
		{"name":"refused","connector":"always.fails","undo":"none"}]}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)

	requireRefusedStarts(t, h, acme)

	start := `{"definition":"transfer","input":{"account":"a-1","amount":30},"start_key":"order-1"}`
	r = h.do("POST", "/v1/sagas", acme, start)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	ok := r.saga(t)
	require.Equal(t, "acme", ok.TenantID)
	require.False(t, *ok.Deduplicated)
	r = h.do("POST", "/v1/sagas", acme, start)
	require.Equal(t, http.StatusOK, r.status, "the same start_key again: %s", r.body)
	require.Equal(t, ok.ID, r.saga(t).ID)
	require.True(t, *r.saga(t).Deduplicated)
	r = h.do("POST", "/v1/sagas", acme, strings.Replace(start, "30", "31", 1))
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "start_key_conflict", r.errorCode(t))
	r = h.do("POST", "/v1/sagas", globex, start)
	require.Equal(t, http.StatusCreated, r.status, "start keys are per tenant")
	other := r.saga(t)

	doomedStart := `{"definition":"doomed","input":{"account":"a-2","amount":12}}`
	r = h.do("POST", "/v1/sagas", acme, doomedStart, "Idempotency-Key", "req-9")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	doomed := r.saga(t)
	replay := h.do("POST", "/v1/sagas", acme, doomedStart, "Idempotency-Key", "req-9")
	require.Equal(t, http.StatusCreated, replay.status)
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
	require.Equal(t, doomed.ID, replay.saga(t).ID, "the stored response, not a second saga")
	r = h.do("POST", "/v1/sagas", acme, strings.Replace(doomedStart, "12", "13", 1), "Idempotency-Key", "req-9")
	require.Equal(t, http.StatusUnprocessableEntity, r.status)
	require.Equal(t, "idempotency_key_reused", r.errorCode(t))

	done := h.awaitSaga(acme, ok.ID)
	require.Equal(t, "COMPLETED", done.State)
	require.Equal(t, []string{"CONFIRMED", "CONFIRMED"}, []string{done.Steps[0].State, done.Steps[1].State})
	require.Contains(t, string(done.Steps[0].Result), saga.StepKey(ok.ID, 0))
	require.Equal(t, "RUNNING", done.History[0].To)
	require.Equal(t, "COMPLETED", done.History[len(done.History)-1].To)
	require.Equal(t, 1, h.bank.Count(saga.StepKey(ok.ID, 0)))
	require.Equal(t, 1, h.bank.Count(saga.StepKey(ok.ID, 1)))

	undone := h.awaitSaga(acme, doomed.ID)
	require.Equal(t, "COMPENSATED", undone.State)
	require.Equal(t, "COMPENSATED", undone.Steps[0].State)
	require.Equal(t, "FAILED", undone.Steps[1].State)
	require.Contains(t, undone.Error, "refused by policy")
	require.Equal(t, 1, h.bank.Count(saga.StepKey(doomed.ID, 0)))
	require.EqualValues(t, 0, h.bank.Net(saga.StepKey(doomed.ID, 0)), "the debit was reversed")

	// Tenants see their own only.
	for _, id := range []uuid.UUID{ok.ID, doomed.ID} {
		require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/sagas/"+id.String(), globex, "").status)
	}
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/sagas/"+other.ID.String(), acme, "").status)
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/sagas/"+uuid.NewString(), acme, "").status)
	require.Equal(t, "invalid_parameter", h.do("GET", "/v1/sagas/not-a-uuid", acme, "").errorCode(t))

	requireSagaPages(t, h, acme, globex, ok.ID, doomed.ID)
}

// requireRefusedStarts: bad saga starts are refused with their error code and write nothing.
func requireRefusedStarts(t *testing.T, h *harness, token string) {
	t.Helper()
	before := h.rows()
	for body, code := range map[string]string{
		`{"definition":"nope","input":{}}`:                   "unknown_saga_definition",
		`{"input":{}}`:                                       "invalid_request",
		`{"definition":"transfer","input":[1]}`:              "invalid_request",
		`{"definition":"transfer","input":{},"extra":true}`:  "invalid_request",
		`{"definition":"transfer","input":{"account":"a-1"`:  "invalid_json",
		`{"definition":"transfer","start_key":7,"input":{}}`: "invalid_request",
	} {
		r := h.do("POST", "/v1/sagas", token, body)
		require.Equal(t, code, r.errorCode(t), "%s: %s", body, r.body)
	}
	require.Equal(t, before, h.rows(), "refused starts write nothing")
}

// requireSagaPages: acme's two sagas (ids) list a page at a time and by state or definition,
// globex sees its one, and bad parameters are refused.
func requireSagaPages(t *testing.T, h *harness, acme, globex string, ids ...uuid.UUID) {
	t.Helper()
	type page struct {
		Sagas      []sagaBody `json:"sagas"`
		NextCursor string     `json:"next_cursor"`
	}
	list := func(token, query string) page {
		r := h.do("GET", "/v1/sagas"+query, token, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var p page
		require.NoError(t, json.Unmarshal(r.body, &p))
		return p
	}
	first := list(acme, "?limit=1")
	require.Len(t, first.Sagas, 1)
	require.NotEmpty(t, first.NextCursor)
	second := list(acme, "?limit=1&cursor="+first.NextCursor)
	require.Len(t, second.Sagas, 1)
	require.ElementsMatch(t, ids, []uuid.UUID{first.Sagas[0].ID, second.Sagas[0].ID})
	require.Len(t, list(acme, "?state=COMPENSATED").Sagas, 1)
	require.Len(t, list(acme, "?definition=transfer").Sagas, 1)
	require.Len(t, list(globex, "").Sagas, 1)
	require.Equal(t, "invalid_state", h.do("GET", "/v1/sagas?state=DONE", acme, "").errorCode(t))
	require.Equal(t, "invalid_cursor", h.do("GET", "/v1/sagas?cursor=zzz", acme, "").errorCode(t))
	require.Equal(t, "invalid_parameter", h.do("GET", "/v1/sagas?sort=asc", acme, "").errorCode(t))
}

// TestSagasNotConfigured: a server without a saga client answers 501 on the saga endpoints.
func TestSagasNotConfigured(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	r := h.do("POST", "/v1/sagas", h.token("acme", false), `{"definition":"transfer"}`)
	require.Equal(t, http.StatusNotImplemented, r.status)
	require.Equal(t, "not_implemented", r.errorCode(t))
	require.Equal(t, http.StatusNotImplemented, h.do("POST", "/v1/saga-definitions", h.systemToken(), transferDef).status)
}

// TestResolveSagaAPI: a saga STUCK because its compensation keeps failing is resolved by an
// operator over HTTP: bad requests and other tenants change nothing; retry_compensation, once the
// upstream is fixed, compensates it to COMPENSATED, with the operator in its history.
func TestResolveSagaAPI(t *testing.T) {
	t.Parallel()
	var undoBroken atomic.Bool
	undoBroken.Store(true)
	var undone atomic.Int32
	h := setupSagas(t, effects.Connector{
		Name: "hold.funds", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			return json.RawMessage(`{"held":true}`), nil
		},
		Compensate: func(context.Context, effects.Call, effects.Original) (json.RawMessage, error) {
			if undoBroken.Load() {
				return nil, effects.Permanent(errors.New("release refused: ledger locked"))
			}
			undone.Add(1)
			return json.RawMessage(`{"released":true}`), nil
		},
	})
	system, acme, globex := h.systemToken(), h.token("acme", false), h.token("globex", false)
	r := h.do("POST", "/v1/saga-definitions", system, `{"name":"hold-then-fail","compensation_attempts":1,"steps":[
		{"name":"hold","connector":"hold.funds","undo":"connector"},
		{"name":"refused","connector":"always.fails","undo":"none"}]}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = h.do("POST", "/v1/sagas", acme, `{"definition":"hold-then-fail","input":{"amount":5}}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	id := r.saga(t).ID
	stuck := h.awaitSaga(acme, id)
	require.Equal(t, "STUCK", stuck.State, "the compensation of the hold failed")
	require.Equal(t, "COMPENSATION_STUCK", stuck.Steps[0].State)

	path := "/v1/sagas/" + id.String() + "/resolve"
	sagaRows := func() []any {
		var state string
		var transitions, effects int
		require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT state::text,
			(SELECT count(*) FROM reckon_saga_transitions WHERE saga_id = $1), (SELECT count(*) FROM reckon_effects)
			FROM reckon_sagas WHERE id = $1`, id).Scan(&state, &transitions, &effects))
		return []any{state, transitions, effects}
	}
	before := sagaRows()
	for body, code := range map[string]string{
		`{"action":"retry","reason":"x"}`:                       "invalid_request",
		`{"action":"retry_compensation"}`:                       "invalid_request",
		`{"action":"retry_compensation","reason":"x","to":"y"}`: "invalid_request",
		`{"action":"retry_compensation","reason":`:              "invalid_json",
	} {
		r := h.do("POST", path, acme, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
		require.Equal(t, code, r.errorCode(t), "%s", body)
	}
	good := `{"action":"retry_compensation","reason":"ledger unlocked","actor":"alice"}`
	r = h.do("POST", path, globex, good)
	require.Equal(t, http.StatusNotFound, r.status, "another tenant's saga")
	require.Equal(t, "not_found", r.errorCode(t))
	require.Equal(t, http.StatusNotFound, h.do("POST", "/v1/sagas/"+uuid.NewString()+"/resolve", acme, good).status)
	require.Equal(t, "invalid_parameter", h.do("POST", "/v1/sagas/nope/resolve", acme, good).errorCode(t))
	require.Equal(t, before, sagaRows(), "refused resolves change nothing")

	undoBroken.Store(false)
	r = h.do("POST", path, acme, good)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, id, r.saga(t).ID)
	done := h.awaitSaga(acme, id)
	require.Equal(t, "COMPENSATED", done.State)
	require.Equal(t, "COMPENSATED", done.Steps[0].State)
	require.EqualValues(t, 1, undone.Load(), "one successful compensation")
	var actor string
	require.NoError(t, h.pool.QueryRow(context.Background(),
		`SELECT actor FROM reckon_saga_transitions WHERE saga_id = $1 AND from_state = 'STUCK'`, id).Scan(&actor))
	require.Equal(t, "operator:api:acme-ops/alice", actor)

	r = h.do("POST", path, acme, good)
	require.Equal(t, http.StatusConflict, r.status, "no longer STUCK")
	require.Equal(t, "not_stuck", r.errorCode(t))
}
