package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/cmd/internal/engine"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/turns"
)

// newEngine builds the server's effects client and its plugins (package cmd/internal/engine); the
// server never starts the effects client, the reactors do the work. Its parts:
//   - the turns client records inbound messages and schedules their turns (POST
//     /v1/sessions/{key}/messages) on the effects client's River client; reactors run the turns
//     with their HTTP turn handler, so it has none. Its aggregation policies are the defaults, as
//     the reactors'.
//   - the saga client counts the sagas started over HTTP (reckon_saga_started_total) in metrics;
//     the server computes no statistics, it reports the reactors' (reckon_sagas). It loads the
//     stored definitions whenever a request names one it has not loaded.
//   - the webhook deliveries' settle hook, for operators who resolve a STUCK delivery here; the
//     reactors deliver.
//
// metrics nil: none. confirmation nil: no confirmation holds set here.
func newEngine(pool *pgxpool.Pool, logger *slog.Logger, metrics prometheus.Registerer, confirmation *cli.ConfirmationFlags) (*engine.Engine, error) {
	if metrics == nil {
		metrics = prometheus.NewRegistry() // scraped by nobody
	}
	return engine.New(pool, &engine.Config{
		Logger: logger, Registerer: metrics, Subsystem: "server",
		Effects:      &effects.Config{},
		Turns:        &turns.Config{RecoverInterval: -1},
		Confirmation: confirmation,
	})
}
