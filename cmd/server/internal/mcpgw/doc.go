// Package mcpgw is Reckon's MCP gateway: a Model Context Protocol server whose tools are the
// connectors a tenant may use, so that every tool call an agent makes through it is an effect —
// recorded under an idempotency key, dispatched under a fenced lease, reconciled by a status check
// when its outcome is unknown, held for a person's confirmation where the connector asks it, and
// kept in the audit trail (docs/mcp.md).
//
// # Basics
//
// Gateway.Register mounts Streamable HTTP at /mcp on the server's mux, next to the API; a request
// is authenticated by a tenant's API token (Authorization: Bearer), exactly as the API's, and a
// session belongs to the token that opened it. Gateway.ServeStdio serves one token's session over
// stdin and stdout (`server mcp -token …`).
//
// tools/list answers the registry's connectors available to the token's tenant
// (effects.Connector.AvailableTo): name, description, args schema as the input schema, and
// annotations from the tags. tools/call enqueues an effect with the effects client (so per-tenant
// limits and confirmation holds apply as for the HTTP API) and waits, up to Config.Wait, for it to
// settle, sending progress notifications as it moves; a call may name its agent run
// (params._meta["reckon/run_id"]), whose guardrails then apply. A held call is put to the user
// through elicitation (an input request of the call) where the client can elicit and four eyes
// do not forbid the caller's confirmation. Effect evidence is readable as the resource
// reckon://effects/{id}.
//
// # Idempotency keys
//
// A call's key is, in order: the requestState of an input-required round trip (the key of the
// call being continued); the caller's, in params._meta["reckon/idempotency_key"]; else
// "mcp/{session id}/{JSON-RPC request id}" — the call's position in its session. A client that
// sends the same request again after losing its answer (same session, same request id, as
// JSON-RPC asks) gets the same effect. Across sessions (a new connection, a restarted server) only
// the caller's key identifies a call.
//
// # Caveats
//
// MCP tasks (long-running calls polled by the client) are not offered: the Go SDK v1.8.0 has no
// support for them. A call still PENDING or UNKNOWN after Config.Wait answers with the effect's id,
// key and evidence, and says to ask again with that key (the same effect) rather than make a new
// call. Sessions live in the server process: a restarted server has none, and a client opens a new
// one.
package mcpgw
