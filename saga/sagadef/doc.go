// Package sagadef stores saga definitions as data, for teams that cannot register Go
// definitions: a name and ordered steps, each naming a connector (an HTTP connector of
// effects/httpconn or a Go connector) and how to undo it. They live in reckon_saga_definitions
// and are loaded into saga clients by Sync, which cmd/server and cmd/reactor call at start,
// periodically, and whenever a saga names a definition they have not loaded (Install).
//
// # The JSON form
//
//	{
//	  "name": "transfer",
//	  "steps": [
//	    {"name": "debit",  "connector": "bank.debit",  "undo": "connector"},
//	    {"name": "credit", "connector": "bank.credit", "undo": {"connector": "bank.reverse"}},
//	    {"name": "notify", "connector": "mail.send",   "undo": "none"}
//	  ],
//	  "compensation_attempts": 5
//	}
//
// undo is "connector" (the step's connector's compensation: an HTTP connector's compensate_url,
// a Go connector's Compensate), {"connector": name} (an effect of another connector, e.g. a
// refund) or "none" (nothing to undo). compensation_attempts is optional (saga.Definition).
//
// # The effects of a saga
//
// Every step's effect gets the args
//
//	{"input": <the saga's input>, "results": {"<earlier step>": <its result>, …}}
//
// so an HTTP upstream picks what it needs. A compensating effect ({"connector": name}) gets the
// same with the undone step's own result included and "compensates": "<step name>". The saga
// derives the idempotency keys (saga.StepKey, saga.CompensationKey).
//
// # Rules
//
// Names use letters, digits, '.', '_', '-' and ':' (at most 200 bytes); step names are unique
// within a definition; a definition has 1 to 100 steps. Validate with a registry also checks that
// every connector is registered and that "connector" undo names a connector that can compensate.
// A stored definition never changes (Put of the same name with other steps is ErrExists): sagas
// in flight rely on their definition's steps, so a new version is a new name ("transfer-v2").
package sagadef
