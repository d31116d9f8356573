package reckontest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/reckontest"
	"github.com/reckonhq/reckon/saga"
)

// A wire whose response is lost: the upstream performs it, then drops the connection. Reckon
// records the outcome as UNKNOWN, asks the upstream's status check, and confirms the wire without
// sending it again.
func Example() {
	t := newExampleT() // in a test: its *testing.T
	defer t.finish()
	ctx := context.Background()

	pool := reckontest.NewDB(t)
	bank := reckontest.NewUpstream(t)
	bank.Script("invoice-42/wire", reckontest.PerformThenDrop())

	registry := effects.NewRegistry()
	registry.MustRegister(bank.Connector("bank.wire"))
	client := reckontest.NewClient(t, pool, &effects.Config{Registry: registry})

	effect, err := client.Enqueue(ctx, effects.Spec{
		Connector: "bank.wire", IdempotencyKey: "invoice-42/wire", Args: map[string]any{"to": "acct-7", "amount": 1200},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reckontest.Drain(t, pool, client, nil)

	effect = reckontest.RequireState(t, client, effect.ID, effects.StateConfirmed)
	fmt.Println(effect.State, strings.Join(reckontest.Path(t, client, effect.ID), " "))
	fmt.Println("performed:", bank.Performed("invoice-42/wire"))
	for _, call := range bank.Calls() {
		fmt.Println(call.Op, call.Key, call.Answer)
	}
	// Output:
	// CONFIRMED >PENDING PENDING>UNKNOWN UNKNOWN>CONFIRMED
	// performed: 1
	// dispatch invoice-42/wire perform-then-drop
	// status invoice-42/wire present
}

// Scripts for one key, answered in turn: the upstream is unavailable once, then refuses for good.
// The effect is retried once, without a status check (a 503 with Retry-After proves nothing was
// done), and ends FAILED.
func ExampleUpstream_Script() {
	t := newExampleT()
	defer t.finish()
	ctx := context.Background()

	pool := reckontest.NewDB(t)
	bank := reckontest.NewUpstream(t)
	bank.Script("refund-9", reckontest.Retryable(0), reckontest.Reject("card expired"))

	registry := effects.NewRegistry()
	registry.MustRegister(bank.Connector("card.refund"))
	client := reckontest.NewClient(t, pool, &effects.Config{Registry: registry})
	effect, err := client.Enqueue(ctx, effects.Spec{Connector: "card.refund", IdempotencyKey: "refund-9"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reckontest.Drain(t, pool, client, nil)

	effect = reckontest.RequireState(t, client, effect.ID, effects.StateFailed)
	fmt.Println(effect.State, effect.Attempts, "attempts")
	fmt.Println("received:", bank.Received("refund-9"), "performed:", bank.Performed("refund-9"))
	// Output:
	// FAILED 2 attempts
	// received: 2 performed: 0
}

// Drain runs sagas to the end as well, when the client has the saga plugin: the shipment is
// refused, so the charge before it is compensated through its connector.
func ExampleDrain_saga() {
	t := newExampleT()
	defer t.finish()
	ctx := context.Background()

	pool := reckontest.NewDB(t)
	shop := reckontest.NewUpstream(t)

	registry := effects.NewRegistry()
	registry.MustRegister(shop.Connector("card.charge"))
	registry.MustRegister(shop.Connector("shipping.ship"))
	sagas, err := saga.NewClient(pool, &saga.Config{})
	if err != nil {
		t.Fatal(err)
	}
	client := reckontest.NewClient(t, pool, &effects.Config{Registry: registry, Plugins: []effects.Plugin{sagas}})
	step := func(name, connector string, undo saga.Undo) saga.Step {
		return saga.Step{Name: name, Undo: undo, Effect: func(in saga.Input) (effects.Spec, error) {
			return effects.Spec{Connector: connector, Args: in.Data}, nil
		}}
	}
	sagas.MustRegister(saga.Definition{Name: "order", Steps: []saga.Step{
		step("charge", "card.charge", saga.UndoByConnector()),
		step("ship", "shipping.ship", saga.NoUndo()),
	}})

	started, err := sagas.Start(ctx, "order", map[string]any{"to": "Mars"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing runs before Drain: the keys derived from the saga's id can be scripted now.
	shop.Script(saga.StepKey(started.ID, 1), reckontest.Reject("no carrier for Mars"))
	reckontest.Drain(t, pool, client, nil)

	done, err := sagas.Get(ctx, started.ID)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(done.State)
	for _, call := range shop.Calls() {
		fmt.Println(call.Op, call.Connector, call.Answer)
	}
	// Output:
	// COMPENSATED
	// dispatch card.charge succeed
	// dispatch shipping.ship reject
	// compensate card.charge succeed
}

// exampleT stands in for a test's *testing.T in these examples, which have none: it runs the
// cleanups when the example ends and panics where a test would fail. Only the methods reckontest
// calls are implemented.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func newExampleT() *exampleT { return &exampleT{} }

func (t *exampleT) Helper()                           {}
func (t *exampleT) Cleanup(fn func())                 { t.cleanups = append(t.cleanups, fn) }
func (t *exampleT) Logf(string, ...any)               {}
func (t *exampleT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) Skipf(format string, args ...any) {
	panic("an example cannot be skipped: " + fmt.Sprintf(format, args...))
}

// finish runs the cleanups, last registered first, within a minute.
func (t *exampleT) finish() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, fn := range slices.Backward(t.cleanups) {
			fn()
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		panic("cleanups did not finish within a minute")
	}
}
