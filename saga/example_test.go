package saga_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/saga"
)

// An order saga: reserve inventory, charge the card, ship. The carrier refuses the parcel, so the
// charge is refunded and the reservation released — in reverse order — and the saga ends
// COMPENSATED.
func Example() {
	ctx := context.Background()
	pool, cleanup := pgtest.NewExampleDB()
	defer cleanup()

	var (
		mu  sync.Mutex
		log []string // what the upstreams did, in order
	)
	record := func(line string) json.RawMessage {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, line)
		return json.RawMessage(fmt.Sprintf(`{"id":"%s-%d"}`, line[:4], len(log)))
	}
	registry := effects.NewRegistry()
	// Inventory: an idempotent reservation whose connector knows how to release it.
	registry.MustRegister(effects.Connector{
		Name: "inventory.reserve",
		Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			return record("reserve " + string(call.Args)), nil
		},
		Compensate: func(ctx context.Context, call effects.Call, original effects.Original) (json.RawMessage, error) {
			return record("release " + string(original.Result)), nil
		},
	})
	// Payments: a charge, and a refund that is an effect of its own.
	registry.MustRegister(effects.Connector{
		Name: "card.charge", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			return record("charge " + string(call.Args)), nil
		},
	})
	registry.MustRegister(effects.Connector{
		Name: "card.refund", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			return record("refund " + string(call.Args)), nil
		},
	})
	// Shipping: the carrier refuses this parcel.
	registry.MustRegister(effects.Connector{
		Name: "shipping.ship", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			return nil, effects.Permanent(fmt.Errorf("carrier refuses parcel to %s", call.Args))
		},
	})

	sagas, err := saga.NewClient(pool, &saga.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	reactor, err := effects.NewClient(pool, &effects.Config{Registry: registry, Plugins: []effects.Plugin{sagas}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	type order struct {
		SKU     string `json:"sku"`
		Card    string `json:"card"`
		Amount  int    `json:"amount"`
		Address string `json:"address"`
	}
	sagas.MustRegister(saga.Definition{
		Name: "order",
		Steps: []saga.Step{
			{
				Name: "reserve",
				Effect: func(in saga.Input) (effects.Spec, error) {
					var o order
					err := in.Decode(&o)
					return effects.Spec{Connector: "inventory.reserve", Args: map[string]any{"sku": o.SKU}}, err
				},
				Undo: saga.UndoByConnector(), // inventory.reserve's Compensate releases it
			},
			{
				Name: "charge",
				Effect: func(in saga.Input) (effects.Spec, error) {
					var o order
					err := in.Decode(&o)
					return effects.Spec{Connector: "card.charge", Args: map[string]any{"card": o.Card, "amount": o.Amount}}, err
				},
				Undo: saga.UndoWith(func(in saga.Input) (effects.Spec, error) {
					var charge struct {
						ID string `json:"id"`
					}
					err := in.DecodeResult(in.Step, &charge) // the result of the charge being undone
					return effects.Spec{Connector: "card.refund", Args: map[string]any{"charge": charge.ID}}, err
				}),
			},
			{
				Name: "ship",
				Effect: func(in saga.Input) (effects.Spec, error) {
					var o order
					var reservation struct {
						ID string `json:"id"`
					}
					if err := in.Decode(&o); err != nil {
						return effects.Spec{}, err
					}
					err := in.DecodeResult(0, &reservation) // results flow from earlier steps
					return effects.Spec{Connector: "shipping.ship", Args: map[string]any{"to": o.Address, "reservation": reservation.ID}}, err
				},
				Undo: saga.NoUndo(), // the last step: nothing after it can fail
			},
		},
	})
	if err := reactor.Start(ctx); err != nil {
		panic(err)
	}
	defer reactor.Stop(ctx)

	// Start the saga in the application's own transaction, with its order row.
	var started *saga.Saga
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// … INSERT INTO orders … in tx
		started, err = sagas.StartTx(ctx, tx, "order", order{SKU: "book-1", Card: "card-9", Amount: 30, Address: "Mars"}, nil)
		return err
	})
	if err != nil {
		panic(err)
	}
	done, err := sagas.Wait(ctx, started.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(done.State)
	for _, step := range done.Steps {
		fmt.Printf("%-7s %s\n", step.Name, step.State)
	}
	mu.Lock()
	for _, line := range log {
		fmt.Println(line)
	}
	mu.Unlock()
	// Output:
	// COMPENSATED
	// reserve COMPENSATED
	// charge  COMPENSATED
	// ship    FAILED
	// reserve {"sku": "book-1"}
	// charge {"card": "card-9", "amount": 30}
	// refund {"charge": "char-2"}
	// release {"id": "rese-1"}
}
