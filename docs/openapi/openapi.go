// Package openapi holds Reckon's two OpenAPI 3.1 documents, the machine-readable forms of
// docs/api.md and docs/connectors.md:
//   - API (api.json): the HTTP API of cmd/server — every route, its parameters, bodies and
//     answers, errors included. The server serves it at GET /openapi.json.
//   - Connector (connector.json): the connector wire protocol — as OpenAPI webhooks, the
//     requests Reckon's reactors send to HTTP connectors (dispatch, compensate, status check,
//     cancel), to webhook subscribers and to HTTP turn handlers, and the answers they understand.
//     The server serves it at GET /openapi/connector.json.
//
// Tests hold both to the code: cmd/server/internal/api's, that every route is described and every
// operation is a route, and that every answer of its end-to-end tests, and every request they
// make that the server accepts, matches the API's; effects/httpconn's, that every call the
// connector makes and every answer of their fake upstreams matches the connector's; this
// package's, that the Go types of what the other webhooks carry match it. Edit the JSON files by
// hand; keep docs/api.md and docs/connectors.md in step.
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
