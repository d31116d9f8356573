package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/turns"
)

// newTurnsClient is the server's turns client: it records inbound messages and schedules their
// turns (POST /v1/sessions/{key}/messages) on the effects client's River client, which the server
// never starts; reactors run the turns with their HTTP turn handler, so it has no handler. Its
// aggregation policies are the defaults, as the reactors'.
func newTurnsClient(pool *pgxpool.Pool, logger *slog.Logger) (*turns.Client, error) {
	return turns.NewClient(pool, &turns.Config{Logger: logger, RecoverInterval: -1})
}
