package effects_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// A connector with a status check: the upstream performs the wire but the response is lost, so
// the outcome is UNKNOWN; the reactor asks the upstream, finds the wire, and confirms it without
// sending it again.
func ExampleConnector_statusCheck() {
	ctx := context.Background()
	pool, cleanup := pgtest.NewExampleDB()
	defer cleanup()

	var (
		mu           sync.Mutex
		ledger       = map[string]int{} // what the upstream performed, by idempotency key
		loseResponse = true
	)
	registry := effects.NewRegistry()
	registry.MustRegister(effects.Connector{
		Name: "bank.wire",
		Tags: []effects.Tag{effects.TagWrite, effects.TagExternal},
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			mu.Lock()
			defer mu.Unlock()
			ledger[call.IdempotencyKey]++
			if loseResponse {
				loseResponse = false
				return nil, errors.New("connection reset after sending")
			}
			return json.RawMessage(`{"wire":"sent"}`), nil
		},
		StatusCheck: func(ctx context.Context, call effects.Call) (effects.Status, error) {
			mu.Lock()
			defer mu.Unlock()
			if ledger[call.IdempotencyKey] == 0 {
				return effects.Absent(), nil
			}
			return effects.Present(json.RawMessage(`{"wire":"found"}`)), nil
		},
	})
	client, err := effects.NewClient(pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	effect, err := client.Enqueue(ctx, effects.Spec{
		Connector: "bank.wire", IdempotencyKey: "invoice-42/wire", Args: map[string]any{"to": "acct-7", "amount": 1200},
	}, nil)
	if err != nil {
		panic(err)
	}
	if effect, err = client.Wait(ctx, effect.ID); err != nil {
		panic(err)
	}
	history, _ := client.History(ctx, effect.ID)
	for _, t := range history {
		fmt.Printf("%-8s -> %-9s %s\n", cmpOr(string(t.From), "(new)"), t.To, t.Reason)
	}
	mu.Lock()
	fmt.Println("wires performed:", ledger["invoice-42/wire"], "result:", string(effect.Result))
	mu.Unlock()
	// Output:
	// (new)    -> PENDING   enqueued
	// PENDING  -> UNKNOWN   outcome unknown: connection reset after sending
	// UNKNOWN  -> CONFIRMED status check: present
	// wires performed: 1 result: {"wire": "found"}
}

// EnqueueTx inside a business transaction: the refund row and the refund effect commit together
// or not at all, and a reactor performs the effect after the commit.
func ExampleClient_EnqueueTx() {
	ctx := context.Background()
	pool, cleanup := pgtest.NewExampleDB()
	defer cleanup()
	if _, err := pool.Exec(ctx, `CREATE TABLE refunds (order_id text PRIMARY KEY, amount integer)`); err != nil {
		panic(err)
	}

	registry := effects.NewRegistry()
	registry.MustRegister(effects.Connector{
		Name: "payments.refund",
		Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent, effects.TagExternal},
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			return json.RawMessage(`{"refund_id":"rf-1"}`), nil // the payment provider's answer
		},
	})
	client, err := effects.NewClient(pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	var refund *effects.Effect
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO refunds VALUES ($1, $2)`, "order-17", 2500); err != nil {
			return err
		}
		refund, err = client.EnqueueTx(ctx, tx, effects.Spec{
			Connector:      "payments.refund",
			IdempotencyKey: "order-17/refund",
			Args:           map[string]any{"order": "order-17", "amount": 2500},
		}, nil)
		return err
	})
	if err != nil {
		panic(err)
	}
	refund, err = client.Wait(ctx, refund.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(refund.State, string(refund.Result))
	// Output: CONFIRMED {"refund_id": "rf-1"}
}

// An async effect: the upstream (here a goroutine standing in for a rendering service) accepts
// the job at once and reports the outcome later through a webhook, which the service hands to
// Client.Callback. WaitRun is the completion gate of the run.
func ExampleClient_Callback() {
	ctx := context.Background()
	pool, cleanup := pgtest.NewExampleDB()
	defer cleanup()

	webhooks := make(chan string, 1) // what the upstream will call back with: the correlation id
	registry := effects.NewRegistry()
	registry.MustRegister(effects.Connector{
		Name:         "render.video",
		Tags:         []effects.Tag{effects.TagWrite, effects.TagIdempotent, effects.TagExpensive},
		AsyncTimeout: 10 * time.Minute, // how long to await the callback
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			// Start the job upstream, passing call.CorrelationID for its webhook, and return.
			webhooks <- call.CorrelationID
			return nil, effects.Accepted(call.CorrelationID)
		},
	})
	client, err := effects.NewClient(pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	if _, err := client.StartRun(ctx, effects.RunSpec{ID: "run-7", MaxSteps: 10, MaxConsecutiveFailures: 3}); err != nil {
		panic(err)
	}
	effect, err := client.Enqueue(ctx, effects.Spec{
		Connector: "render.video", IdempotencyKey: "run-7/render", RunID: "run-7", Args: map[string]any{"scene": 3},
	}, nil)
	if err != nil {
		panic(err)
	}

	// Later, the upstream's webhook arrives (POST /v1/callbacks/{correlation_id} in cmd/server).
	// Even one that overtakes the dispatch's own record of the acceptance is applied.
	correlationID := <-webhooks
	if _, err := client.Callback(ctx, correlationID, json.RawMessage(`{"url":"https://cdn.example/3.mp4"}`), "", nil); err != nil {
		panic(err)
	}

	res, err := client.WaitRun(ctx, "run-7", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("correlation id is {run}:{effect id}:", correlationID == "run-7:"+effect.ID.String())
	for _, e := range res.Async {
		fmt.Println(e.Connector, e.State, string(e.Result))
	}
	fmt.Println("steps:", res.Run.Steps, "of", res.Run.MaxSteps)
	// Output:
	// correlation id is {run}:{effect id}: true
	// render.video CONFIRMED {"url": "https://cdn.example/3.mp4"}
	// steps: 1 of 10
}

func cmpOr(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// A connector that says what its args look like: registering compiles the schema, and an enqueue
// whose args it refuses fails with ErrInvalidArgs before anything is written.
func ExampleConnector_argsSchema() {
	ctx := context.Background()
	pool, cleanup := pgtest.NewExampleDB()
	defer cleanup()

	registry := effects.NewRegistry()
	registry.MustRegister(effects.Connector{
		Name:        "tickets.open",
		Tags:        []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Description: "Open a support ticket.",
		ArgsSchema:  json.RawMessage(`{"type":"object","properties":{"title":{"type":"string","minLength":1}},"required":["title"]}`),
		Tenants:     []string{"acme"},
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			return json.RawMessage(`{"ticket":"T-1"}`), nil
		},
	})
	client, err := effects.NewClient(pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer client.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // never started

	_, err = client.Enqueue(ctx, effects.Spec{TenantID: "acme", Connector: "tickets.open", IdempotencyKey: "t-1", Args: map[string]any{"title": ""}}, nil)
	fmt.Println(errors.Is(err, effects.ErrInvalidArgs))
	_, err = client.Enqueue(ctx, effects.Spec{TenantID: "globex", Connector: "tickets.open", IdempotencyKey: "t-2", Args: map[string]any{"title": "printer"}}, nil)
	fmt.Println(errors.Is(err, effects.ErrUnknownConnector))
	effect, err := client.Enqueue(ctx, effects.Spec{TenantID: "acme", Connector: "tickets.open", IdempotencyKey: "t-3", Args: map[string]any{"title": "printer"}}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(effect.State)
	// Output:
	// true
	// true
	// PENDING
}
