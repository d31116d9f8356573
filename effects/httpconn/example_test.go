package httpconn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// An HTTP connector: the endpoint speaks the wire protocol, the definition is stored, Sync loads
// it into the registry of a reactor, and the reactor dispatches an effect to it.
func Example() {
	ctx := context.Background()
	pool, cleanup := pgtest.NewExampleDB()
	defer cleanup()

	// The service, in any language: POST with Idempotency-Key; 200 + JSON confirms.
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var call httpconn.Request
		_ = json.NewDecoder(r.Body).Decode(&call)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"sent_to":%s,"key":%q}`, call.Args, r.Header.Get("Idempotency-Key"))
	}))
	defer endpoint.Close()

	_, created, err := httpconn.Put(ctx, pool, httpconn.Definition{
		Name:        "email.send",
		Tags:        []effects.Tag{effects.TagWrite, effects.TagIdempotent}, // the endpoint honours the key
		DispatchURL: endpoint.URL + "/send",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("stored, new:", created)

	registry := effects.NewRegistry()
	var syncer httpconn.Syncer // one per registry, kept for later syncs
	synced, err := syncer.Sync(ctx, pool, registry)
	if err != nil {
		panic(err)
	}
	fmt.Println("loaded:", synced.Added)

	client, err := effects.NewClient(pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer func() { _ = client.Stop(ctx) }()
	effect, err := client.Enqueue(ctx, effects.Spec{Connector: "email.send", IdempotencyKey: "welcome/42",
		Args: map[string]any{"to": "ada@example.com"}}, nil)
	if err != nil {
		panic(err)
	}
	effect, err = client.Wait(ctx, effect.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(effect.State, string(effect.Result)) // jsonb: keys sorted
	// Output:
	// stored, new: true
	// loaded: [email.send]
	// CONFIRMED {"key": "welcome/42", "sent_to": {"to": "ada@example.com"}}
}
