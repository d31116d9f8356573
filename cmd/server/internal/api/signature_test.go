package api_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakejobs"
)

// setupSigned is setupRunning with connectors of an upstream that
// accepts jobs and calls the server back, signing with the secret each dispatch brought: "jobs.go"
// is a Go connector of it, "jobs.http" an HTTP connector. "sync.ok" answers at once, and
// "sync.lost" loses every answer (UNKNOWN, and its status checks are inconclusive for an hour):
// ordinary effects, which no callback may settle.
func setupSigned(t *testing.T) (*harness, *fakejobs.Upstream) {
	t.Helper()
	h, registry, up := setupRunning(t)
	callbacks := h.url + "/v1/callbacks"
	up.CallbackTo(callbacks) // the HTTP connector's dispatches name no callback URL
	hour := func(int) time.Duration { return time.Hour }
	for _, c := range []effects.Connector{
		fakejobs.ConnectorOptions{Name: "jobs.go", BaseURL: up.URL(), CallbackURL: callbacks, AsyncTimeout: time.Hour, Timeout: 2 * time.Second}.Connector(),
		httpconn.Definition{Name: "jobs.http", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal},
			DispatchURL: up.URL() + "/jobs", StatusURL: up.URL() + "/jobs/status", Timeout: 2 * time.Second, AsyncTimeout: time.Hour}.Connector(nil),
		{Name: "sync.ok", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
			Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
				return json.RawMessage(`{"paid":true}`), nil
			}},
		{Name: "sync.lost", Tags: []effects.Tag{effects.TagWrite}, Backoff: hour,
			Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
				return nil, errors.New("connection reset")
			},
			StatusCheck: func(context.Context, effects.Call) (effects.Status, error) {
				return effects.Inconclusive("upstream down"), nil
			}},
	} {
		require.NoError(t, registry.Register(c))
	}
	testkit.Start(t, h.client)
	return h, up
}

// enqueueUntil enqueues an effect of connector over the API and waits until ok says it is where
// the test wants it.
func (h *harness) enqueueUntil(token, connector, key string, ok func(effectBody) bool) effectBody {
	h.t.Helper()
	r := h.do("POST", "/v1/effects", token, fmt.Sprintf(`{"connector":%q,"idempotency_key":%q,"args":{"job":%q}}`, connector, key, key))
	require.Equal(h.t, http.StatusCreated, r.status, "%s", r.body)
	id := r.effect(h.t).ID
	var e effectBody
	require.Eventually(h.t, func() bool {
		e = h.do("GET", "/v1/effects/"+id.String(), token, "").effect(h.t)
		return ok(e)
	}, 20*time.Second, 20*time.Millisecond, "effect %s never got there", id)
	return e
}

func awaiting(e effectBody) bool { return e.State == "PENDING" && e.CorrelationID != "" }

// secret is the callback secret of an effect.
func (h *harness) secret(id uuid.UUID) string {
	h.t.Helper()
	secret, err := h.client.CallbackSecret(context.Background(), id)
	require.NoError(h.t, err)
	return secret
}

// signed posts a callback with the given Reckon-Effect-Id and Reckon-Signature and no token;
// headers are more name, value pairs.
func (h *harness) signed(correlationID, effectID, signature, body string, headers ...string) response {
	h.t.Helper()
	return h.do("POST", "/v1/callbacks/"+correlationID, "", body,
		append([]string{"Reckon-Effect-Id", effectID, "Reckon-Signature", signature}, headers...)...)
}

// signedRows counts what a callback may write, the used signatures included.
func (h *harness) signedRows() map[string]int {
	h.t.Helper()
	rows := h.rows()
	rows["signatures"] = testkit.Count(h.t, h.pool, `SELECT count(*) FROM reckon_callback_signatures`)
	return rows
}

// TestSignedCallback: an upstream settles the effect it was dispatched with no API token, by
// signing its callback with the effect's callback secret, which both connector kinds hand it with
// the dispatch (Reckon-Callback-Secret for an HTTP connector). The secret is the effect's alone.
func TestSignedCallback(t *testing.T) {
	t.Parallel()
	h, up := setupSigned(t)
	ctx := context.Background()
	acme := h.token("acme", false)

	viaGo := h.enqueueUntil(acme, "jobs.go", "go-1", awaiting)
	viaHTTP := h.enqueueUntil(acme, "jobs.http", "http-1", awaiting)
	secrets := map[string]bool{}
	for _, e := range []effectBody{viaGo, viaHTTP} {
		job, ok := up.Job(e.CorrelationID)
		require.True(t, ok)
		require.Equal(t, e.ID.String(), job.EffectID, "Reckon-Effect-Id")
		require.Equal(t, h.secret(e.ID), job.CallbackSecret, "the dispatch brought the effect's secret")
		secrets[job.CallbackSecret] = true
	}
	require.Len(t, secrets, 2, "a secret per effect")

	status, err := up.Finish(ctx, viaGo.CorrelationID, json.RawMessage(`{"rows":7}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	status, err = up.Fail(ctx, viaHTTP.CorrelationID, "quota exceeded")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	got := h.do("GET", "/v1/effects/"+viaGo.ID.String(), acme, "")
	require.Equal(t, "CONFIRMED", got.effect(t).State)
	require.JSONEq(t, `{"rows":7}`, string(mustField(t, got.body, "result")))
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, testkit.Path(t, h.client, viaGo.ID))
	got = h.do("GET", "/v1/effects/"+viaHTTP.ID.String(), acme, "")
	require.Equal(t, "FAILED", got.effect(t).State)
	require.Equal(t, 2, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_callback_signatures`), "each signature used once")
}

// TestSignedCallbackRefused: a signature that is wrong, made for another effect, over another
// body, out of its five minutes, malformed or replayed is refused with a stable code, and
// nothing changes; a callback that was refused after its signature was checked, and so rolled
// back, may be sent again with the same signature.
func TestSignedCallbackRefused(t *testing.T) {
	t.Parallel()
	h, _ := setupSigned(t)
	acme := h.token("acme", false)
	target := h.enqueueUntil(acme, "jobs.go", "target", awaiting)
	other := h.enqueueUntil(acme, "jobs.go", "other", awaiting)
	id, corr := target.ID.String(), target.CorrelationID
	body := `{"result":{"rows":1}}`
	now := time.Now()
	sign := func(secret string, at time.Time, body string) string { return fakejobs.Sign(secret, at, []byte(body)) }
	good := sign(h.secret(target.ID), now, body)
	mac := good[strings.Index(good, "v1=")+3:]
	unix := fmt.Sprint(now.Unix())

	before := h.signedRows()
	for _, tc := range []struct {
		name, effectID, signature, body string
		headers                         []string
		status                          int
		code                            string
	}{
		{"another secret", id, sign(hex.EncodeToString(make([]byte, 32)), now, body), body, nil, 401, "invalid_signature"},
		{"another effect's signature", id, sign(h.secret(other.ID), now, body), body, nil, 401, "invalid_signature"},
		{"another effect's id", other.ID.String(), good, body, nil, 401, "invalid_signature"},
		{"an effect that does not exist", uuid.NewString(), good, body, nil, 401, "invalid_signature"},
		{"another body", id, good, `{"result":{"rows":2}}`, nil, 401, "invalid_signature"},
		{"expired", id, sign(h.secret(target.ID), now.Add(-6*time.Minute), body), body, nil, 401, "signature_expired"},
		{"from the future", id, sign(h.secret(target.ID), now.Add(6*time.Minute), body), body, nil, 401, "signature_expired"},
		{"no effect id", "", good, body, nil, 401, "invalid_signature"},
		{"a malformed effect id", "effect-1", good, body, nil, 401, "invalid_signature"},
		{"empty", id, "", body, nil, 401, "invalid_signature"},
		{"no t", id, "v1=" + mac, body, nil, 401, "invalid_signature"},
		{"no v1", id, "t=" + unix, body, nil, 401, "invalid_signature"},
		{"t not a number", id, "t=soon,v1=" + mac, body, nil, 401, "invalid_signature"},
		{"t signed", id, "t=+" + unix + ",v1=" + mac, body, nil, 401, "invalid_signature"},
		{"v1 not hex", id, "t=" + unix + ",v1=" + strings.Repeat("z", 64), body, nil, 401, "invalid_signature"},
		{"v1 short", id, "t=" + unix + ",v1=" + mac[:62], body, nil, 401, "invalid_signature"},
		{"t twice", id, good + ",t=" + unix, body, nil, 401, "invalid_signature"},
		{"not key=value", id, good + ",v0", body, nil, 401, "invalid_signature"},
		{"too long", id, good + ",x=" + strings.Repeat("a", 600), body, nil, 401, "invalid_signature"},
		{"and a bearer token", id, good, body, []string{"Authorization", "Bearer " + acme}, 400, "invalid_request"},
	} {
		effectID := []string{"Reckon-Effect-Id", tc.effectID}
		if tc.effectID == "" {
			effectID = nil
		}
		headers := append(append(effectID, "Reckon-Signature", tc.signature), tc.headers...)
		r := h.do("POST", "/v1/callbacks/"+corr, "", tc.body, headers...)
		require.Equal(t, tc.status, r.status, "%s: %s", tc.name, r.body)
		require.Equal(t, tc.code, r.errorCode(t), tc.name)
	}
	twice, err := http.NewRequest("POST", h.url+"/v1/callbacks/"+corr, strings.NewReader(body))
	require.NoError(t, err)
	twice.Header.Set("Reckon-Effect-Id", id)
	twice.Header.Add("Reckon-Signature", good)
	twice.Header.Add("Reckon-Signature", good)
	resp, err := http.DefaultClient.Do(twice)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "two Reckon-Signature headers")
	require.Equal(t, before, h.signedRows(), "nothing changed")
	require.Equal(t, "PENDING", h.state(target.ID))

	// Other fields may come along (schemes to come), in any order and spacing.
	r := h.signed(corr, id, " v0=abc, v1="+mac+" , t="+unix, body)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "CONFIRMED", r.effect(t).State)
	applied := h.signedRows()

	// The same request again is a replay: refused, nothing written. A fresh signature of the same
	// report is a repeat: answered as before.
	r = h.signed(corr, id, " v0=abc, v1="+mac+" , t="+unix, body)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "callback_replayed", r.errorCode(t))
	r = h.signed(corr, id, good, body)
	require.Equal(t, http.StatusConflict, r.status, "the same signature in another header: %s", r.body)
	require.Equal(t, "callback_replayed", r.errorCode(t))
	require.Equal(t, applied, h.signedRows())
	r = h.signed(corr, id, sign(h.secret(target.ID), now.Add(time.Second), body), body)
	require.Equal(t, http.StatusOK, r.status, "a repeated report, signed afresh: %s", r.body)

	// A signature for one effect, sent under another's correlation id: 404, rolled back, so the
	// signature is not used up and the right request gets through.
	otherSig := sign(h.secret(other.ID), now, `{"error":"disk full"}`)
	r = h.signed(corr, other.ID.String(), otherSig, `{"error":"disk full"}`)
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	require.Equal(t, "PENDING", h.state(other.ID))
	r = h.signed(other.CorrelationID, other.ID.String(), otherSig, `{"error":"disk full"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "FAILED", r.effect(t).State)
}

// TestCallbackNotAwaiting: an effect that awaits no callback — an ordinary one, CONFIRMED, or
// UNKNOWN after a lost answer — is not settled by one, signed with its own secret or sent with the
// tenant's token, under its self-routing id: 409 not_awaiting_callback, the refusal recorded in
// its history and nothing else changed.
func TestCallbackNotAwaiting(t *testing.T) {
	t.Parallel()
	h, _ := setupSigned(t)
	acme := h.token("acme", false)
	confirmed := h.enqueueUntil(acme, "sync.ok", "ok", func(e effectBody) bool { return e.State == "CONFIRMED" })
	unknown := h.enqueueUntil(acme, "sync.lost", "lost", func(e effectBody) bool { return e.State == "UNKNOWN" })
	forged := `{"result":{"paid":"forged"}}`

	for _, e := range []effectBody{confirmed, unknown} {
		before := h.signedRows()
		r := h.signed(e.ID.String(), e.ID.String(), fakejobs.Sign(h.secret(e.ID), time.Now(), []byte(forged)), forged)
		require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
		require.Equal(t, "not_awaiting_callback", r.errorCode(t))
		require.Contains(t, string(r.body), "was never accepted upstream")
		r = h.do("POST", "/v1/callbacks/"+e.ID.String(), acme, forged)
		require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
		require.Equal(t, "not_awaiting_callback", r.errorCode(t))

		after := h.signedRows()
		require.Equal(t, before["transitions"]+2, after["transitions"], "two refusals recorded")
		require.Equal(t, before["signatures"]+1, after["signatures"], "the signature was used")
		after["transitions"], after["signatures"] = before["transitions"], before["signatures"]
		require.Equal(t, before, after, "nothing else changed")
		got := h.do("GET", "/v1/effects/"+e.ID.String(), acme, "")
		require.Equal(t, e.State, got.effect(t).State)
		if e.State == "CONFIRMED" {
			require.JSONEq(t, `{"paid":true}`, string(mustField(t, got.body, "result")))
		}
		history := got.effect(t).History
		require.Equal(t, "callback", history[len(history)-1].Actor)
		require.Contains(t, history[len(history)-1].Reason, "callback not applied")
	}
}
