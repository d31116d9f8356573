package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/turns"
)

// errSubmitOnly is what the server's turn handler would answer: the server never runs turns.
var errSubmitOnly = errors.New("the server only submits messages: reactors run the turns (reactor -turn-handler-url)")

// newTurnsClient is the server's turns client: it records inbound messages and schedules their
// turns (POST /v1/sessions/{key}/messages) on the effects client's River client, which the server
// never starts; reactors run the turns with their HTTP turn handler. Its aggregation policies are
// the defaults, as the reactors'.
func newTurnsClient(pool *pgxpool.Pool, logger *slog.Logger) (*turns.Client, error) {
	return turns.NewClient(pool, &turns.Config{
		Handler: turns.HandlerFunc(func(context.Context, *turns.Turn) error { return errSubmitOnly }),
		Logger:  logger, RecoverInterval: -1,
	})
}
