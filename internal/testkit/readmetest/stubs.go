//lint:file-ignore U1000 these stand in for what the checked blocks of README.md and docs/ use; the test compiles them with the blocks

package readmetest

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/effects"
)

// What the examples of README.md and of docs/ leave to the reader. Functions are variables, never called: the
// examples are type-checked, not run.
var (
	databaseURL string
	pool        *pgxpool.Pool
	registry    *effects.Registry
	client      *effects.Client

	sendWire    func(ctx context.Context, call effects.Call) (json.RawMessage, error)
	findWire    func(ctx context.Context, call effects.Call) (effects.Status, error)
	reverseWire func(ctx context.Context, call effects.Call, original effects.Original) (json.RawMessage, error)

	startRender  func(ctx context.Context, job renderJob) error
	cancelRender func(ctx context.Context, correlationID string) error

	invoiceID         int64
	orderID           string
	userID            string
	whatsappMessageID string
	text              string
	correlationID     string

	inventoryReserve, cardCharge, cardRefund, shippingShip effects.Connector
	order                                                  Order
)

// Order is the saga example's input.
type Order struct {
	ID      string
	SKU     string
	Card    string
	Amount  int
	Address string
}

// renderJob is what the async example's renderer client submits (docs/async.md).
type renderJob struct {
	Scene          json.RawMessage
	IdempotencyKey string
	Webhook        string
	EffectID       string
	WebhookSecret  string
}
