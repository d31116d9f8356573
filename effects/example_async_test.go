package effects_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

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
