// Package httpturn is a turns.Handler for teams that do not write Go: it hands each logical turn
// to an HTTP endpoint of theirs and stages the effects it answers.
//
// For every turn the handler POSTs JSON to the handler URL:
//
//	{"session_key":"acme:agent-1:user-7:web", "tenant":"acme", "channel":"web",
//	 "turn_id":"…", "turn_group":"…", "seq":3, "attempt":1,
//	 "messages":[{"id":"…","message_id":"m-1","content":{…},"received_at":"…","sent_at":"…"}]}
//
// with the headers Content-Type: application/json, Reckon-Turn-Id, Reckon-Turn-Group and
// Reckon-Attempt. The endpoint answers 200 with the effects the turn decides:
//
//	{"effects":[{"connector":"bank.refund","args":{…},"decision":0,"call_index":0,"business_key":"order-9"}]}
//
// Each effect is enqueued with turns.Turn.Enqueue at the journal position (decision, call_index)
// of the turn group, so its idempotency key is "{turn_group}/d-{decision}/{connector}/{call_index}"
// in every turn of the group: a superseding or retried turn that answers the same position gets
// the same effect. When any answered effect's connector is irreversible (effects.PolicyOf), the
// handler first calls Turn.BeforeIrreversible, so that messages that arrived meanwhile are
// decided on (by default: the turn is superseded and its messages run again, with the new ones,
// in the next turn of the same group; after an ABSORB decision of an application decider the
// endpoint is asked again with every message). All the effects are committed with the turn, or
// none.
//
// Outcomes: 2xx with a valid body commits the turn; 400–499 except 408, 425 and 429 fails the
// turn for good (FAILED, with the status and the start of the body as its reason); any other
// status, a timeout or a connection error leaves the turn to be attempted again (turns'
// Config.MaxAttempts). A 2xx body that is not the documented JSON fails the turn for good; an
// effect naming a connector this reactor does not know is attempted again (the registry may
// not have loaded it yet).
//
// Where turns go: a tenant's own handler, stored in reckon_turn_handlers (Put, Get, Delete; the
// API's PUT /v1/turn-handlers/{tenant}) and found by Config.Lookup = StoreLookup, else
// Config.URL (the reactor's -turn-handler-url). For a tenant with neither the Handler is not
// ready (turns.Readier): its turns wait, ACCUMULATING with their messages, until one is set.
package httpturn
