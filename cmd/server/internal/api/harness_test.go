package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
	"github.com/reckonhq/reckon/docs/openapi"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/openapitest"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness is an API server on its own database, with a Go connector "bank.wire" registered in
// its (never started) effects client: effects stay where the test puts them.
type harness struct {
	t      *testing.T
	pool   *pgxpool.Pool
	bank   *fakebank.Bank
	client *effects.Client
	server *api.Server
	url    string
}

func setup(t *testing.T, maxBody int64) *harness {
	t.Helper()
	h := &harness{t: t, pool: pgtest.NewDB(t), bank: fakebank.New(t)}
	h.client = bankClient(t, h.pool, h.bank)
	h.server = h.serve(&api.Config{Pool: h.pool, Effects: h.client, MaxBodyBytes: maxBody})
	return h
}

// bankClient is a never-started effects client on pool with bank's Go connector "bank.wire".
func bankClient(t *testing.T, pool *pgxpool.Pool, bank *fakebank.Bank) *effects.Client {
	t.Helper()
	registry := effects.NewRegistry()
	require.NoError(t, registry.Register(fakebank.ConnectorOptions{BaseURL: bank.URL(), StatusCheck: true}.Connector()))
	return testkit.NewClient(t, pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler)})
}

// serve serves the API of config (with a logger that discards) on a test HTTP server, which h.url
// then names, and returns it. Every exchange with it is held to the API's OpenAPI document
// (openapitest.Server): every answer, and every request answered 2xx — a refused request may be
// malformed on purpose.
func (h *harness) serve(config *api.Config) *api.Server {
	h.t.Helper()
	config.Logger = slog.New(slog.DiscardHandler)
	server, err := api.New(config)
	require.NoError(h.t, err)
	mux := http.NewServeMux()
	server.Register(mux)
	srv := httptest.NewServer(openapitest.Server(h.t, openapitest.Load(h.t, openapi.API), mux))
	h.t.Cleanup(srv.Close)
	h.url = srv.URL
	return server
}

// token creates the tenant if needed and returns a new token of it.
func (h *harness) token(tenant string, admin bool) string {
	h.t.Helper()
	ctx := context.Background()
	if _, err := tenants.Create(ctx, h.pool, tenant, ""); err != nil {
		require.ErrorIs(h.t, err, tenants.ErrExists)
	}
	secret, _, err := tenants.CreateToken(ctx, h.pool, tenant, &tenants.TokenOpts{Name: tenant + "-ops", Admin: admin})
	require.NoError(h.t, err)
	return secret
}

// systemToken returns a new system token, named "platform".
func (h *harness) systemToken() string {
	h.t.Helper()
	secret, _, err := tenants.CreateSystemToken(context.Background(), h.pool, "platform")
	require.NoError(h.t, err)
	return secret
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// errorCode returns the code of a JSON error answer.
func (r response) errorCode(t *testing.T) string {
	t.Helper()
	var body struct {
		Error struct{ Code, Message string }
	}
	require.NoError(t, json.Unmarshal(r.body, &body), "not a JSON error: %s", r.body)
	require.NotEmpty(t, body.Error.Message)
	return body.Error.Code
}

// decode decodes a JSON answer as T.
func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.body, &v), "%s", r.body)
	return v
}

// effect decodes an effect answer.
func (r response) effect(t *testing.T) effectBody { return decode[effectBody](t, r) }

type effectBody struct {
	ID             uuid.UUID `json:"id"`
	TenantID       string    `json:"tenant_id"`
	State          string    `json:"state"`
	Connector      string    `json:"connector"`
	IdempotencyKey string    `json:"idempotency_key"`
	CorrelationID  string    `json:"correlation_id"`
	Deduplicated   *bool     `json:"deduplicated"`
	Args           json.RawMessage
	History        []struct {
		From, To, Actor, Reason string
	}
}

// do sends a request; headers are name, value pairs. A body is sent as application/json.
func (h *harness) do(method, path, token, body string, headers ...string) response {
	h.t.Helper()
	resp, raw := testkit.Do(h.t, method, h.url+path, token, body, headers...)
	require.Equal(h.t, "application/json", resp.Header.Get("Content-Type"), "%s %s: %s", method, path, raw)
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// enqueue enqueues an effect over the API and returns it.
func (h *harness) enqueue(token, key string, amount int) effectBody {
	h.t.Helper()
	r := h.do("POST", "/v1/effects", token, fmt.Sprintf(`{"connector":"bank.wire","idempotency_key":%q,"args":{"account":"a-1","amount":%d}}`, key, amount))
	require.Equal(h.t, http.StatusCreated, r.status, "%s", r.body)
	return r.effect(h.t)
}

// rows counts what requests may write: effects, transitions, jobs, stored idempotency keys,
// connectors and the effects in each state.
func (h *harness) rows() map[string]int {
	h.t.Helper()
	return h.rowsWith(nil)
}

// rowsWith is rows and, by name, the counts of the queries in extra.
func (h *harness) rowsWith(extra map[string]string) map[string]int {
	h.t.Helper()
	queries := map[string]string{
		"effects":          `SELECT count(*) FROM reckon_effects`,
		"transitions":      `SELECT count(*) FROM reckon_effect_transitions`,
		"jobs":             `SELECT count(*) FROM river_job`,
		"cancelled_jobs":   `SELECT count(*) FROM river_job WHERE state = 'cancelled'`,
		"idempotency_keys": `SELECT count(*) FROM reckon_idempotency_keys`,
		"connectors":       `SELECT count(*) FROM reckon_connectors`,
		"pending":          `SELECT count(*) FROM reckon_effects WHERE state = 'PENDING'`,
		"stuck":            `SELECT count(*) FROM reckon_effects WHERE state = 'STUCK'`,
	}
	maps.Copy(queries, extra)
	counts := make(map[string]int, len(queries))
	for name, sql := range queries {
		counts[name] = testkit.Count(h.t, h.pool, sql)
	}
	return counts
}

// makeStuck moves a PENDING effect to STUCK the way a reactor would (PENDING → UNKNOWN → STUCK),
// through the state-machine trigger.
func (h *harness) makeStuck(id uuid.UUID) {
	h.t.Helper()
	for _, to := range []string{"UNKNOWN", "STUCK"} {
		tag, err := h.pool.Exec(context.Background(),
			`UPDATE reckon_effects SET state = $2, transition_actor = 'test', transition_reason = 'status check inconclusive' WHERE id = $1`, id, to)
		require.NoError(h.t, err)
		require.EqualValues(h.t, 1, tag.RowsAffected())
	}
}

func (h *harness) state(id uuid.UUID) string {
	h.t.Helper()
	var state string
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `SELECT state FROM reckon_effects WHERE id = $1`, id).Scan(&state))
	return state
}
