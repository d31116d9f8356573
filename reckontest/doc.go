// Package reckontest helps you test code that records effects with Reckon: a migrated database
// per test, a scripted fake upstream behind a real connector, a reactor run to completion inside
// the test, and assertions on states and audit paths.
//
// A test of a wire whose response is lost — performed, then the connection drops — checks that
// Reckon confirms it by asking the upstream instead of sending it again:
//
//	func TestWireIsPerformedOnce(t *testing.T) {
//		pool := reckontest.NewDB(t)
//		bank := reckontest.NewUpstream(t)
//		bank.Script("invoice-42/wire", reckontest.PerformThenDrop())
//
//		registry := effects.NewRegistry()
//		registry.MustRegister(bank.Connector("bank.wire"))
//		client := reckontest.NewClient(t, pool, &effects.Config{Registry: registry})
//
//		effect, err := client.Enqueue(context.Background(), effects.Spec{
//			Connector: "bank.wire", IdempotencyKey: "invoice-42/wire", Args: map[string]any{"amount": 1200},
//		}, nil)
//		if err != nil {
//			t.Fatal(err)
//		}
//		reckontest.Drain(t, pool, client, nil)
//
//		reckontest.RequireState(t, client, effect.ID, effects.StateConfirmed)
//		reckontest.RequirePath(t, client, effect.ID, ">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED")
//		if n := bank.Performed("invoice-42/wire"); n != 1 {
//			t.Fatalf("performed %d times", n)
//		}
//	}
//
// # Databases
//
// NewDB gives each test a database of its own, migrated as `server migrate up` leaves it (package
// db), dropped when the test ends. It takes the server from RECKON_TEST_DATABASE_URL, else from
// TEST_DATABASE_URL, else it starts one Postgres container per test binary with testcontainers-go
// (image RECKON_TEST_PG_IMAGE, default postgres:15-alpine; Docker required) and clones a
// template database in it for each test, in milliseconds. Call Main from TestMain to stop the
// container when the tests end. Without any of these a test fails with the reason — it never
// passes without a database — unless RECKON_TEST_SKIP_DB=1 asks to skip it (ignored under
// CI=true).
//
// # A scripted upstream
//
// NewUpstream starts an Upstream: an HTTP server on 127.0.0.1 that speaks Reckon's HTTP connector
// protocol (package effects/httpconn). Upstream.Connector returns an effects.Connector that calls
// it, with a dispatch, a status check and a compensation; Upstream.Definition returns the same as
// an httpconn.Definition, to change its settings or store it in the database. By default every
// call succeeds. Script says what the calls of one idempotency key do, in turn, and Next what the
// next calls of any key do: an Answer performs the operation or not, and answers, drops the
// connection or hangs — Succeed, Reject, Retryable, ServerError, PerformThenDrop, Hang,
// PerformThenHang, Accept, and Respond for any other status; Times makes one perform twice (a
// duplicate). Answer's documentation tables what each becomes. Status checks answer from
// what the upstream performed (absent, present, duplicate) unless ScriptStatus says otherwise
// (effects.Inconclusive, say, until the effect is STUCK). SetIdempotent makes it honour
// idempotency keys, and Close makes it unreachable (its calls are refused from then on). It
// records everything: Performed counts the operations of a key, Received its calls, and Calls
// lists every call with its body and what was done.
//
// # Running the reactor: Drain
//
// NewClient builds an effects.Client with fast timings (FastConfig) and stops it when the test
// ends. Drain starts it, waits until the work due is done — dispatches, retries, the status
// checks of UNKNOWN effects, compensations, the steps of sagas when the client has the saga
// plugin — and stops it again, so that what the test asserts next is final. A test that wants a
// reactor running throughout starts the client itself and waits with client.Wait instead.
//
// # Assertions
//
// RequireState checks an effect's state; Path returns its audit trail as "FROM>TO" steps and
// RequirePath checks it. They fail the test with what they found. Everything else is plain Go on
// the public API (client.Get, client.History, saga.Client.Get) and the Upstream's record.
//
// # Caveats
//
//   - The helpers fail the test with tb.Fatalf: call them from the test's goroutine.
//   - Drain refuses a client that is already running; run one reactor per test database, or the
//     other one takes some of the work.
//   - Upstream.Definition's connector is not retry safe, so that an unknown outcome goes through
//     the status check; tag it effects.TagIdempotent to test the other path.
package reckontest
