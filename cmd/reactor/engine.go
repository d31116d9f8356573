package main

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/cmd/internal/engine"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/schedule"
	"github.com/reckonhq/reckon/turns"
	"github.com/reckonhq/reckon/turns/httpturn"
)

// newEngine builds the reactor's effects client and its plugins (package cmd/internal/engine), with
// metrics to metrics: the turns client, which runs turns with an HTTP turn handler; the saga client,
// whose settle hook advances every saga whose step or compensation settles here; the webhook
// deliveries, effects of the built-in connector reckon.webhook; the scheduler of the stored
// schedules (package schedule); and the retention job unless
// -retention-interval is 0. Go connectors are registered by services that embed the reactor
// (effects.Client in their own process); this one has the HTTP connectors stored in the database.
func newEngine(pool *pgxpool.Pool, cfg *config, logger *slog.Logger, metrics prometheus.Registerer) (*engine.Engine, error) {
	logger.Info("confirmation holds of the effects this reactor enqueues", cfg.confirmation.LogAttrs()...)
	registry := effects.NewRegistry()
	turnsConfig, err := newTurnsConfig(pool, cfg, registry, logger, metrics)
	if err != nil {
		return nil, err
	}
	engineConfig := &engine.Config{
		Logger: logger, Registerer: metrics, Subsystem: "reactor",
		Effects:      newEffectsConfig(cfg, registry, metrics),
		Turns:        turnsConfig,
		Webhooks:     &events.WebhookConfig{Registerer: metrics},
		Schedules:    &schedule.Config{Registerer: metrics},
		Confirmation: &cfg.confirmation,
	}
	if cfg.retention.Config.Interval > 0 {
		retentionConfig := cfg.retention.Config
		retentionConfig.Registerer = metrics
		engineConfig.Retention = &retentionConfig
	}
	return engine.New(pool, engineConfig)
}

// newEffectsConfig is the effects client's configuration from the reactor's flags.
func newEffectsConfig(cfg *config, registry *effects.Registry, metrics prometheus.Registerer) *effects.Config {
	return &effects.Config{
		Registry:          registry,
		Registerer:        metrics,
		ID:                cfg.id,
		Queue:             cfg.queue,
		Workers:           cfg.workers,
		InFlightMargin:    cfg.inFlightMargin,
		SweepInterval:     cfg.sweepInterval,
		FetchPollInterval: cfg.fetchPoll,
		FetchCooldown:     cfg.fetchCooldown,
		ClaimInterval:     cfg.claimInterval,
		LivenessInterval:  cfg.livenessInterval,
		TakeoverGrace:     takeoverGrace(cfg.takeoverGrace),
		HeartbeatTimeout:  cfg.heartbeatTimeout,
		AsyncTimeout:      cfg.asyncTimeout,
		StatsInterval:     cfg.statsInterval,
		// A River job is only the vehicle of an effect: its row and transitions are the record.
		JobRetention: min(24*time.Hour, cfg.retention.Config.EffectRetention),
	}
}

// newTurnsConfig is the reactor's turns client's configuration: its aggregation jobs run on the
// effects client's River client (it is a plugin of the effects client), and its turns go to an HTTP
// turn handler, with the connectors of registry: the tenant's own, stored in reckon_turn_handlers
// (PUT /v1/turn-handlers/{tenant}, read at every turn), else -turn-handler-url. A tenant with
// neither waits: its turn jobs snooze and its turns stay ACCUMULATING with their messages.
func newTurnsConfig(pool *pgxpool.Pool, cfg *config, registry *effects.Registry, logger *slog.Logger, registerer prometheus.Registerer) (*turns.Config, error) {
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
	return &turns.Config{Handler: handler, Registerer: registerer, ID: cfg.id, NotReadyDelay: cfg.turnNotReadyDelay}, nil
}
