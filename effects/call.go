package effects

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/recovery"
)

// callConnector is the one way into connector code: it calls fn (the connector's Dispatch,
// Compensate, StatusCheck or Cancel) with call, in a client span named name (child of ctx's),
// under the connector's timeout, turning a panic into an error: a panicking connector fails its
// call, never the reactor. end records fn's answer on the span before the span ends. It returns
// fn's answer and how long fn took.
func callConnector[T any](ctx context.Context, c *Client, name string, row dbsqlc.ReckonEffect, connector *Connector, call Call,
	fn func(context.Context, Call) (T, error), end func(trace.Span, T, error)) (T, time.Duration, error) {
	ctx, span := c.startCallSpan(ctx, name, row)
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, connector.Timeout)
	defer cancel()
	start := time.Now()
	result, err := recovery.Call("connector", func() (T, error) { return fn(ctx, call) })
	elapsed := time.Since(start)
	end(span, result, err)
	return result, elapsed, err
}

// callOf is the call of the effect row, without its callback secret (see signedCallOf).
func callOf(row dbsqlc.ReckonEffect) Call {
	return Call{
		EffectID:       row.ID,
		TenantID:       row.TenantID,
		Connector:      row.Connector,
		IdempotencyKey: row.IdempotencyKey,
		BusinessKey:    deref(row.BusinessKey),
		Args:           row.Args,
		Attempt:        int(row.Attempts) + 1,
		CorrelationID:  correlationIDOf(row),
	}
}

// signedCallOf is the call of the effect row with its callback secret, which the calls that may
// start or stop work upstream (Dispatch, Compensate, Cancel) carry so that the upstream can sign
// its callbacks. An error means no call can be made.
func (c *Client) signedCallOf(ctx context.Context, row dbsqlc.ReckonEffect) (Call, error) {
	call := callOf(row)
	secret, err := c.CallbackSecret(ctx, row.ID)
	if err != nil {
		return Call{}, err
	}
	call.CallbackSecret = secret
	return call, nil
}
