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
// River client (it is a plugin of the effects client), and its turns go to an HTTP turn handler, with the
// connectors of registry: the tenant's own, stored in reckon_turn_handlers (PUT
// /v1/turn-handlers/{tenant}, read at every turn), else -turn-handler-url. A tenant with neither
// waits: its turn jobs snooze and its turns stay ACCUMULATING with their messages.
func newTurnsClient(pool *pgxpool.Pool, cfg *config, registry *effects.Registry, logger *slog.Logger, registerer prometheus.Registerer) (*turns.Client, error) {
	handler, err := httpturn.New(httpturn.Config{
		URL: cfg.turnHandlerURL, Lookup: httpturn.StoreLookup(pool), Registry: registry, Timeout: cfg.turnHandlerTimeout,
	})
	if err != nil {
		return nil, err
	}
	if cfg.turnHandlerURL == "" {
		// Debug, not a warning: most deployments use no turns at all. A turn that waits for want of a
		// handler is warned about when it waits (turns: "turn handler not ready for the session").
		logger.Debug("no default HTTP turn handler: this reactor runs the turns of tenants with their own (PUT /v1/turn-handlers/{tenant}) only; the others wait with their messages (set -turn-handler-url, env RECKON_TURN_HANDLER_URL)")
	} else {
		logger.Info("default HTTP turn handler", slog.String("url", cfg.turnHandlerURL), slog.Duration("timeout", cfg.turnHandlerTimeout))
	}
	return turns.NewClient(pool, &turns.Config{Handler: handler, Logger: logger, Registerer: registerer, ID: cfg.id, NotReadyDelay: cfg.turnNotReadyDelay})
}
