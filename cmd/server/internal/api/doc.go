// Package api is the HTTP API of cmd/server (docs/api.md): effects enqueued, inspected,
// listed, resolved and cancelled over JSON, callbacks and runs, HTTP connectors and operators'
// limits of connectors, sagas (started, inspected, resolved by operators), sessions (inbound
// messages and their turns), the event stream (Server-Sent Events of package events' log) and
// webhook subscriptions to it, for callers authenticated by a bearer token of their tenant.
// docs/api.md is the reference; its OpenAPI 3.1 form (package docs/openapi) is served at
// GET /openapi.json, and the tests hold it to the routes and to every exchange they make.
//
// # Tenants and tokens
//
// Every request under /v1 carries "Authorization: Bearer <token>". A token belongs to one tenant
// and is stored only as its SHA-256 (package tenants: reckon_tenants, reckon_api_tokens): it is
// shown once, when it is made. Every query is scoped to the caller's tenant: another tenant's
// effect answers 404, exactly like one that does not exist, and is never changed. A system token
// belongs to the deployment instead: it alone changes what every tenant shares (HTTP connectors,
// saga definitions) and may manage any tenant's turn handler; the routes registered without
// admitSystem refuse it with 403, so no handler of a tenant-scoped route sees a call without a
// tenant. Each change of a shared definition or a turn handler is recorded, with its token, in
// reckon_definition_changes.
//
// # Idempotency
//
// A POST may carry an Idempotency-Key header. Its transaction first claims the key for the tenant
// (a concurrent request with the same key waits), runs, stores its response and commits, all at
// once. A later request with the same key and the same method, path and JSON body (compared after
// canonicalization: key order and spacing do not matter) gets the stored response again, with the
// header Idempotent-Replayed: true; with another body it gets 422 idempotency_key_reused. Only
// successful (2xx) responses are stored: a request that failed changed nothing, and may be retried
// with the same key. Callbacks, saga resolves and changes of connector limits (handleAction) run
// in transactions of their own: their response is stored after them.
//
// # Connections
//
// A request never holds two of the pool's connections at once: a mutation works through the
// request's transaction only; a reload of connectors or saga definitions it needs is done after
// rolling that transaction back, and the mutation then runs again; callbacks, saga resolves and
// changes of connector limits hold no request transaction. Config.MaxConcurrentRequests (default half the pool) bounds the
// requests answered at once, so health checks and reloads always find a connection. An event
// stream (GET /v1/events) gives its slot back once it has started: it waits for events holding
// neither a slot nor a connection, and takes one of the pool's connections for each short read.
//
// # Errors
//
// Every error is JSON, {"error":{"code":…,"message":…}}, with a stable code (see Error and the
// Code constants). Bad input is refused before anything is written.
//
// # Extending
//
// Within the package, Server.handleQuery, Server.handleMutation and Server.handleAction add
// authenticated endpoints with the same error, size-limit and idempotency handling (routes.go). A
// mutationFunc must not ask the pool for a connection: it has tx. The operators' reads and actions
// the endpoints share with the console and the CLI are package ops's; this package serves HTTP.
package api
