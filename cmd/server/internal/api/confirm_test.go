package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// confirmationBody is the confirmation part of an effect on the wire.
type confirmationBody struct {
	Confirmation *struct {
		State  string `json:"state"`
		Prompt string `json:"prompt"`
		By     string `json:"by"`
		Reason string `json:"reason"`
	} `json:"confirmation"`
	State string `json:"state"`
	Error string `json:"error"`
}

func (r response) confirmation(t *testing.T) confirmationBody {
	return decode[confirmationBody](t, r)
}

// An effect asked for with require_confirmation awaits POST /confirm or /decline, each answered with
// the effect, its decision and who made it; the wrong moment is 409 not_awaiting_confirmation and
// bad input a 400 naming the field, changing nothing.
func TestConfirmAndDeclineOverHTTP(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	token := h.token("acme", false)
	enqueue := func(key string) string {
		r := h.do("POST", "/v1/effects", token, fmt.Sprintf(`{"connector":"bank.wire","idempotency_key":%q,"args":{"amount":5},"require_confirmation":true,"confirmation_ttl_ms":60000}`, key))
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		c := r.confirmation(t)
		require.NotNil(t, c.Confirmation)
		require.Equal(t, "AWAITING", c.Confirmation.State)
		require.Equal(t, "Confirm bank.wire?", c.Confirmation.Prompt)
		return r.effect(t).ID.String()
	}
	confirmMe, declineMe := enqueue("c-1"), enqueue("c-2")

	for _, tc := range []struct{ body, want string }{
		{`{}`, "reason is required"},
		{`{"reason":"ok","extra":1}`, "extra"},
	} {
		r := h.do("POST", "/v1/effects/"+confirmMe+"/confirm", token, tc.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		require.Contains(t, string(r.body), tc.want)
	}
	r := h.do("POST", "/v1/effects/"+confirmMe+"/confirm", token, `{"reason":"customer called","actor":"alice"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	c := r.confirmation(t)
	require.Equal(t, "CONFIRMED", c.Confirmation.State)
	require.Equal(t, "api:acme-ops/alice", c.Confirmation.By)
	require.Equal(t, "PENDING", c.State)

	r = h.do("POST", "/v1/effects/"+declineMe+"/decline", token, `{"reason":"not authorised"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	c = r.confirmation(t)
	require.Equal(t, "DECLINED", c.Confirmation.State)
	require.Equal(t, "FAILED", c.State)
	require.Equal(t, "declined: not authorised", c.Error)

	for _, path := range []string{"/v1/effects/" + confirmMe + "/decline", "/v1/effects/" + declineMe + "/confirm"} {
		r := h.do("POST", path, token, `{"reason":"again"}`)
		require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
		require.Equal(t, "not_awaiting_confirmation", r.errorCode(t))
	}
	other := h.token("globex", false)
	r = h.do("POST", "/v1/effects/"+confirmMe+"/confirm", other, `{"reason":"not mine"}`)
	require.Equal(t, http.StatusNotFound, r.status, "another tenant's effect is not found")
	r = h.do("POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"c-3","require_confirmation":true,"confirmation_ttl_ms":5}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Contains(t, string(r.body), "confirmation_ttl_ms")
}
