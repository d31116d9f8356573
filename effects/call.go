package effects

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/internal/dbsqlc"
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
	result, err := recovered("connector", func() (T, error) { return fn(ctx, call) })
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

// recovered runs fn, user code (a connector, a settle hook), turning a panic in it into the error
// "<what> panicked: <value>", as River fails a job whose Work panics: the user's code fails, not
// the process.
func recovered[T any](what string, fn func() (T, error)) (result T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", what, r)
		}
	}()
	return fn()
}
