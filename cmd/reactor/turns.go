package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/turns"
	"github.com/reckonhq/reckon/turns/httpturn"
)

// newTurnsClient is the reactor's turns client: its aggregation jobs run on the effects client's
// River client (AddWorkers, then Attach), and its turns go to the HTTP turn handler at
// -turn-handler-url with the connectors of registry. Without a URL the handler is not ready: the
// jobs snooze and the turns wait, ACCUMULATING with their messages, for a reactor that has one.
func newTurnsClient(pool *pgxpool.Pool, cfg *config, registry *effects.Registry, logger *slog.Logger, registerer prometheus.Registerer) (*turns.Client, error) {
	handler, err := httpturn.New(httpturn.Config{URL: cfg.turnHandlerURL, Registry: registry, Timeout: cfg.turnHandlerTimeout})
	if err != nil {
		return nil, err
	}
	if cfg.turnHandlerURL == "" {
		logger.Warn("no HTTP turn handler: this reactor runs no turns; they wait with their messages for a reactor started with -turn-handler-url (env RECKON_TURN_HANDLER_URL)")
	} else {
		logger.Info("HTTP turn handler", slog.String("url", cfg.turnHandlerURL), slog.Duration("timeout", cfg.turnHandlerTimeout))
	}
	return turns.NewClient(pool, &turns.Config{Handler: handler, Logger: logger, Registerer: registerer, ID: cfg.id, NotReadyDelay: cfg.turnNotReadyDelay})
}
