package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBodiesAreNotHTMLEscaped: what the API answers is read by people in terminals, so <, > and &
// are written as themselves, not as \u003c, \u003e and \u0026.
func TestBodiesAreNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)

	resp := h.do(http.MethodGet, "/v1/effects", "", "")
	require.Equal(t, http.StatusUnauthorized, resp.status)
	require.Contains(t, string(resp.body), "Authorization: Bearer <token>")
	require.NotContains(t, string(resp.body), `\u003c`)
	require.Equal(t, byte('\n'), resp.body[len(resp.body)-1], "one newline ends the body")
	require.NotEqual(t, byte('\n'), resp.body[len(resp.body)-2], "and only one")

	token := h.token("acme", false)
	body := `{"connector":"bank.wire","idempotency_key":"a<b>&c","args":{"account":"<acc>&1","amount":1}}`
	resp = h.do(http.MethodPost, "/v1/effects", token, body)
	require.Equal(t, http.StatusCreated, resp.status, string(resp.body))
	require.Contains(t, string(resp.body), `"idempotency_key":"a<b>&c"`)
	require.NotContains(t, string(resp.body), `\u00`)
}
