package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/docs/openapi"
	"github.com/reckonhq/reckon/internal/testkit/openapitest"
)

// The API's OpenAPI document (docs/openapi/api.json) is held to the server three ways: it is a
// valid OpenAPI 3.1 document (openapitest.Load, here and in every test server); its operations are
// exactly the server's routes (TestOpenAPIRoutes); and every exchange of every test of this
// package matches it (harness.serve wraps each test server in openapitest.Server).

// TestOpenAPIRoutes: every route the server serves is an operation of the document, and every
// operation of the document is a route.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	doc := openapitest.Load(t, openapi.API)
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	served := h.server.Routes()
	require.NotEmpty(t, served)
	require.Equal(t, len(served), len(slices.Compact(slices.Sorted(slices.Values(served)))), "a route is added twice")
	var undocumented, unserved []string
	for _, route := range served {
		if !slices.Contains(documented, route) {
			undocumented = append(undocumented, route)
		}
	}
	for _, op := range documented {
		if !slices.Contains(served, op) {
			unserved = append(unserved, op)
		}
	}
	require.Empty(t, undocumented, "routes the OpenAPI document (docs/openapi/api.json) does not describe")
	require.Empty(t, unserved, "operations of the OpenAPI document (docs/openapi/api.json) that are no route")
	t.Logf("%d routes, each described", len(served))
}

// TestOpenAPIServed: the server serves both documents as they are embedded, with no token.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	for path, want := range map[string]string{"/openapi.json": openapi.API, "/openapi/connector.json": openapi.Connector} {
		r := h.do("GET", path, "", "")
		require.Equal(t, http.StatusOK, r.status, path)
		require.Equal(t, want, string(r.body), path)
	}
	openapitest.Load(t, openapi.Connector)
}
