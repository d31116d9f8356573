package turns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/turns"
)

// A turn handler that refunds an order safely: it checks for new messages before the
// irreversible refund, and stages the order update and the refund so that both commit with the
// turn — or neither does. The refund's idempotency key comes from the turn group and the journal
// position, so a retry or a superseding turn of the group gets the same effect, never a second one.
func Example() {
	ctx := context.Background()
	pool, cleanup := pgtest.NewExampleDB()
	defer cleanup()
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY, refunded boolean NOT NULL DEFAULT false);
		INSERT INTO orders (id) VALUES ('12345')`); err != nil {
		panic(err)
	}

	registry := effects.NewRegistry()
	registry.MustRegister(effects.Connector{
		Name: "shop.refund",
		Tags: []effects.Tag{effects.TagWrite, effects.TagExternal}, // irreversible
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			return json.RawMessage(`{"refund":"done"}`), nil // call the payment provider here
		},
		StatusCheck: func(ctx context.Context, call effects.Call) (effects.Status, error) {
			return effects.Inconclusive("ask the provider by idempotency key"), nil
		},
	})

	handler := turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		var texts []string
		for _, m := range turn.Messages() {
			var body struct{ Text string }
			_ = json.Unmarshal(m.Content, &body)
			texts = append(texts, body.Text)
		}
		fmt.Printf("turn %d sees: %s\n", turn.Seq, strings.Join(texts, " / "))

		// The supersede check: stop here if the user said something new.
		if _, err := turn.BeforeIrreversible(ctx); err != nil {
			return err // turns.ErrSuperseded: nothing is committed
		}
		if err := turn.Stage(func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE orders SET refunded = true WHERE id = '12345'`)
			return err
		}); err != nil {
			return err
		}
		return turn.Enqueue(effects.Spec{
			Connector: "shop.refund",
			Args:      map[string]any{"order": "12345", "amount": 4200},
			Position:  turn.Position(0, 0), // decision 0, call 0 of the turn group
		})
	})

	tc, err := turns.NewClient(pool, &turns.Config{Handler: handler, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	ec, err := effects.NewClient(pool, &effects.Config{Registry: registry, Plugins: []effects.Plugin{tc}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer ec.Stop(ctx) //nolint:errcheck // never started
	// A reactor would call ec.Start: the session's turn then runs when its aggregation window
	// closes. Here the turn runs at once.
	session := turns.SessionKey("acme", "support-bot", "user-7", "whatsapp")
	for _, text := range []string{"Refund my order", "Order #12345"} {
		if _, err := tc.Submit(ctx, turns.Inbound{SessionKey: session, Content: map[string]string{"text": text}}); err != nil {
			panic(err)
		}
	}
	result, err := tc.RunTurn(ctx, session)
	if err != nil {
		panic(err)
	}
	var refunded bool
	if err := pool.QueryRow(ctx, `SELECT refunded FROM orders WHERE id = '12345'`).Scan(&refunded); err != nil {
		panic(err)
	}
	refund := result.Effects[0]
	fmt.Println("turn:", result.Turn.Status)
	fmt.Println("order refunded:", refunded)
	fmt.Println("refund effect:", refund.State, strings.TrimPrefix(refund.IdempotencyKey, result.Turn.Group.String()))
	// Output:
	// turn 1 sees: Refund my order / Order #12345
	// turn: COMPLETE
	// order refunded: true
	// refund effect: PENDING /d-0/shop.refund/0
}

// A dependency fingerprint from a snapshot of versions the application provides: the order of the
// map does not count, a changed version does.
func ExampleVersions_Fingerprint() {
	before := turns.Versions{"catalog": "v41", "refund_policy": "v7"}.Fingerprint()
	same := turns.Versions{"refund_policy": "v7", "catalog": "v41"}.Fingerprint()
	after := turns.Versions{"catalog": "v42", "refund_policy": "v7"}.Fingerprint()
	fmt.Println(before == same, before == after, before[:7])
	// Output: true false sha256:
}
