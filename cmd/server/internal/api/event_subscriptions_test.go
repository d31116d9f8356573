package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/events"
)

// A tenant's token creates, sees and changes its own tenant's subscriptions only; a system token
// any, and subscriptions of every tenant's events. Bad input is 400 naming the field.
func TestWebhookSubscriptionRoutes(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	acme, globex, system := h.token("acme", false), h.token("globex", false), h.systemToken()

	r := h.do("POST", "/v1/event-subscriptions", acme, `{"url":"https://hooks.example.com/reckon","patterns":["turn.*","tool.executed"]}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	mine := decode[events.Subscription](t, r)
	require.Equal(t, "acme", mine.Tenant)
	require.Equal(t, events.SubscriptionActive, mine.State)
	require.Len(t, mine.Secret, 64, "a generated secret, shown once")
	r = h.do("POST", "/v1/event-subscriptions", system, `{"url":"http://127.0.0.1:9/all","secret":"0123456789abcdef"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	all := decode[events.Subscription](t, r)
	require.Empty(t, all.Tenant)

	r = h.do("GET", "/v1/event-subscriptions/"+mine.ID.String(), acme, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Empty(t, decode[events.Subscription](t, r).Secret, "the secret is never shown again")
	for _, path := range []string{"", "/pause", "/resume"} {
		method := "POST"
		if path == "" {
			method = "GET"
		}
		r = h.do(method, "/v1/event-subscriptions/"+mine.ID.String()+path, globex, "")
		require.Equal(t, http.StatusNotFound, r.status, "%s %s: %s", method, path, r.body)
	}
	r = h.do("GET", "/v1/event-subscriptions/"+all.ID.String(), acme, "")
	require.Equal(t, http.StatusNotFound, r.status, "a system subscription is no tenant's")

	var list struct{ Subscriptions []events.Subscription }
	r = h.do("GET", "/v1/event-subscriptions", acme, "")
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Subscriptions, 1)
	r = h.do("GET", "/v1/event-subscriptions", system, "")
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Subscriptions, 2)

	r = h.do("POST", "/v1/event-subscriptions/"+mine.ID.String()+"/pause", acme, `{"reason":"maintenance"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "maintenance", decode[events.Subscription](t, r).PausedReason)
	r = h.do("POST", "/v1/event-subscriptions/"+mine.ID.String()+"/resume", acme, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, events.SubscriptionActive, decode[events.Subscription](t, r).State)

	for _, tc := range []struct{ token, body, field string }{
		{acme, `{"url":"ftp://example.com/"}`, "url"},
		{acme, `{"url":"example.com"}`, "url"},
		{acme, `{}`, "url"},
		{acme, `{"url":"https://example.com/","patterns":["Turn.*"]}`, "patterns"},
		{acme, `{"url":"https://example.com/","secret":"short"}`, "secret"},
		{acme, `{"url":"https://example.com/","tenant":"globex"}`, "tenant"},
		{system, `{"url":"https://example.com/","tenant":"Not A Tenant"}`, "tenant"},
	} {
		r = h.do("POST", "/v1/event-subscriptions", tc.token, tc.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", tc.body, r.body)
		require.Equal(t, "invalid_request", r.errorCode(t))
		require.Contains(t, string(r.body), `field \"`+tc.field+`\"`, tc.body)
	}

	r = h.do("DELETE", "/v1/event-subscriptions/"+mine.ID.String(), globex, "")
	require.Equal(t, http.StatusNotFound, r.status)
	r = h.do("DELETE", "/v1/event-subscriptions/"+mine.ID.String(), acme, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = h.do("GET", "/v1/event-subscriptions/"+mine.ID.String(), acme, "")
	require.Equal(t, http.StatusNotFound, r.status)
}
