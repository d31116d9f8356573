package httpconn_test

import (
	"net/http"
	"net/http/httptest"
	"path"
	"testing"

	"github.com/reckonhq/reckon/docs/openapi"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/openapitest"
)

// The connector wire protocol's OpenAPI document (docs/openapi/connector.json) is held to the
// connector: the upstreams of these tests — the fakes of connector_test.go and the fake bank the
// reactor test calls through a started effects client — check every request they receive, and
// every answer they give (but those marked offProtocol), against its webhooks.

// upstreamDocument wraps h, an upstream of the wire protocol, in openapitest.Webhooks.
func upstreamDocument(t *testing.T, h http.HandlerFunc) http.Handler {
	t.Helper()
	return openapitest.Webhooks(t, openapitest.Load(t, openapi.Connector), webhookOf, h)
}

// webhookOf names the webhook of a request to these tests' upstreams, by its path's last element:
// /dispatch (the fake bank's /reckon/wires), /status, /compensate and /cancel.
func webhookOf(r *http.Request) string {
	switch path.Base(r.URL.Path) {
	case "dispatch", "wires":
		return "connectorDispatch"
	case "status":
		return "connectorStatusCheck"
	case "compensate":
		return "connectorCompensate"
	case "cancel":
		return "connectorCancel"
	}
	return ""
}

// newBank serves a fake bank (internal/testkit/fakebank) whose exchanges are held to the connector
// document, until the test ends.
func newBank(t *testing.T) *fakebank.Bank {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil) // listening already: its address is the bank's
	bank := fakebank.NewHandler("http://" + srv.Listener.Addr().String())
	srv.Config.Handler = upstreamDocument(t, bank.ServeHTTP)
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(bank.Close) // first: it releases the requests it holds
	return bank
}
