// Package httpturn is a turns.Handler for teams that do not write Go: it hands each logical turn
// to an HTTP endpoint of theirs and stages the effects it answers.
//
// For every turn the handler POSTs JSON to the handler URL:
//
//	{"session_key":"acme:agent-1:user-7:web", "tenant":"acme", "channel":"web",
//	 "turn_id":"…", "turn_group":"…", "seq":3, "attempt":1,
//	 "messages":[{"id":"…","message_id":"m-1","content":{…},"received_at":"…","sent_at":"…"}],
//	 "artifacts":[{"name":"plan","data":{…},"input_fingerprint":"…","dependency_fingerprint":"…",
//	               "policy":"CONDITIONAL","turn_id":"…","saved_at":"…"}]}
//
// with the headers Content-Type: application/json, Reckon-Turn-Id, Reckon-Turn-Group and
// Reckon-Attempt. The endpoint answers 200 with the effects the turn decides, and optionally the
// artifacts it saves and the names of the stored artifacts it reused:
//
//	{"effects":[{"connector":"bank.refund","args":{…},"decision":0,"call_index":0,"business_key":"order-9"}],
//	 "artifacts":[{"name":"plan","data":{…},"input_fingerprint":"…","dependency_fingerprint":"…","policy":"CONDITIONAL"}],
//	 "reused":["quote"]}
//
// Artifacts (turns.Artifact): "artifacts" in the request are every artifact stored for the turn
// group, whatever its policy; the endpoint compares their fingerprints with its own and reuses
// what its rules allow (ALWAYS_SAFE: the same input_fingerprint; CONDITIONAL: the same
// input_fingerprint and dependency_fingerprint; NEVER: never). The answer's "reused" names are
// reported as artifact.reused events of the turn; its "artifacts" are saved for the group at once
// (Turn.SaveArtifact), before the supersede check, so that a superseding or retried turn gets
// them; saving over a stored artifact its fingerprints would not reuse reports that one
// invalidated. Bounds: at most MaxArtifacts of each; a name of 1–200 bytes, data of at most 1 MiB
// of JSON, fingerprints of at most 512 bytes, without NUL; policy ALWAYS_SAFE, CONDITIONAL
// (default) or NEVER. A reused name that is not in the request, a NEVER artifact, or one the
// answer also saves, is an invalid answer.
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
// Config.MaxAttempts). A 2xx body that is not the documented JSON (including an artifact out of
// bounds or a wrong reused name) fails the turn for good, with an error naming the field (e.g.
// "artifacts[2]: … input_fingerprint is required"), before anything of the answer is written; an
// effect naming a connector this reactor does not know is attempted again (the registry may
// not have loaded it yet).
//
// Where turns go: a tenant's own handler, stored in reckon_turn_handlers (Put, Get, Delete; the
// API's PUT /v1/turn-handlers/{tenant}) and found by Config.Lookup = StoreLookup, else
// Config.URL (the reactor's -turn-handler-url). For a tenant with neither the Handler is not
// ready (turns.Readier): its turns wait, ACCUMULATING with their messages, until one is set.
package httpturn
