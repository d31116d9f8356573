// Package openapi holds Reckon's two OpenAPI 3.1 documents, the machine-readable forms of
// docs/api.md and docs/connectors.md:
//   - API (api.json): the HTTP API of cmd/server — every route, its parameters, bodies and
//     answers, errors included. The server serves it at GET /openapi.json.
//   - Connector (connector.json): the connector wire protocol — as OpenAPI webhooks, the
//     requests Reckon's reactors send to HTTP connectors (dispatch, compensate, status check,
//     cancel), to webhook subscribers and to HTTP turn handlers, and the answers they understand.
//     The server serves it at GET /openapi/connector.json.
//
// The tests of cmd/server/internal/api and effects/httpconn hold both to the code: every route is
// described and every description is a route, and every request and answer of their end-to-end
// tests validates against them. Edit the JSON files by hand; keep docs/api.md in step.
package openapi

import _ "embed" // the documents

// API is the OpenAPI 3.1 document of the HTTP API, as JSON.
//
//go:embed api.json
var API string

// Connector is the OpenAPI 3.1 document of the connector wire protocol, as JSON.
//
//go:embed connector.json
var Connector string
