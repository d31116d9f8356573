package effects_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

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

func cmpOr(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
