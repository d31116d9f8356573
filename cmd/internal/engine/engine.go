// Package engine composes what cmd/server and cmd/reactor run on a database, one way for both: the
// effects client with its plugins — the turns client, the saga client, the webhook deliveries,
// the scheduler of the stored schedules and, when asked, the retention job — and the Loader of the stored HTTP connectors and saga
// definitions (package cmd/internal/definitions). What differs between the binaries is in Config.
package engine

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/cmd/internal/definitions"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/retention"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
	"github.com/reckonhq/reckon/schedule"
	"github.com/reckonhq/reckon/turns"
)

// Config says how to build an Engine. The configurations of the parts are the caller's; New sets
// their Logger (and the effects client's Registry and Plugins), never their Registerer: each part's
// metrics go where its own configuration says.
type Config struct {
	// Logger logs for every part. Required.
	Logger *slog.Logger
	// Registerer takes the metrics of the saga client and of the Loader, named
	// reckon_<Subsystem>_… (definitions.New). Required.
	Registerer prometheus.Registerer
	// Subsystem names the Loader's metrics: "reactor" or "server". Required.
	Subsystem string
	// Effects is the effects client's configuration. Its Registry, when set, is the registry to
	// use (a turn handler may need it before New); default: a new one. Required.
	Effects *effects.Config
	// Turns is the turns client's configuration. Required.
	Turns *turns.Config
	// Webhooks is the webhook deliveries' configuration. Default: the defaults.
	Webhooks *events.WebhookConfig
	// Schedules is the scheduler's configuration (package schedule): it enqueues the ticks of the
	// stored schedules while the effects client runs. Default: the defaults.
	Schedules *schedule.Config
	// Retention, when set, adds the retention job (package retention). Default: none.
	Retention *retention.Config
	// Confirmation is applied to Effects: the confirmation holds of the effects enqueued. Default:
	// none set here.
	Confirmation *cli.ConfirmationFlags
}

// Engine is what a binary runs: the effects client (not started), the plugins the binary calls
// directly, and the Loader of the stored definitions (nothing loaded yet).
type Engine struct {
	Effects     *effects.Client
	Turns       *turns.Client
	Sagas       *saga.Client
	Definitions *definitions.Loader
}

// New builds the plugins and the effects client on pool, as cfg says. It starts and loads nothing.
func New(pool *pgxpool.Pool, cfg *Config) (*Engine, error) {
	logger := cfg.Logger
	effectsConfig := cfg.Effects
	if effectsConfig.Registry == nil {
		effectsConfig.Registry = effects.NewRegistry()
	}
	effectsConfig.Logger = logger
	if cfg.Confirmation != nil {
		cfg.Confirmation.Apply(effectsConfig)
	}
	cfg.Turns.Logger = logger
	sessions, err := turns.NewClient(pool, cfg.Turns)
	if err != nil {
		return nil, err
	}
	var sagaDefs sagadef.Syncer
	sagas, err := saga.NewClient(pool, &saga.Config{Logger: logger, Registerer: cfg.Registerer, OnUnknownDefinition: sagaDefs.Load})
	if err != nil {
		return nil, err
	}
	loader, err := definitions.New(pool, effectsConfig.Registry, sagas, &sagaDefs, logger, cfg.Registerer, cfg.Subsystem)
	if err != nil {
		return nil, err
	}
	plugins, err := newPlugins(pool, cfg, sessions, sagas)
	if err != nil {
		return nil, err
	}
	effectsConfig.Plugins = plugins
	client, err := effects.NewClient(pool, effectsConfig)
	if err != nil {
		return nil, err
	}
	return &Engine{Effects: client, Turns: sessions, Sagas: sagas, Definitions: loader}, nil
}

// newPlugins is the effects client's plugins: the turns and saga clients, the webhook deliveries
// (each a connector's effect), the scheduler and, if cfg asks, the retention job.
func newPlugins(pool *pgxpool.Pool, cfg *Config, sessions *turns.Client, sagas *saga.Client) ([]effects.Plugin, error) {
	webhooksConfig := cfg.Webhooks
	if webhooksConfig == nil {
		webhooksConfig = &events.WebhookConfig{}
	}
	webhooksConfig.Logger = cfg.Logger
	webhooks, err := events.NewWebhooks(pool, webhooksConfig)
	if err != nil {
		return nil, err
	}
	schedulesConfig := cfg.Schedules
	if schedulesConfig == nil {
		schedulesConfig = &schedule.Config{}
	}
	schedulesConfig.Logger = cfg.Logger
	scheduler, err := schedule.New(pool, schedulesConfig)
	if err != nil {
		return nil, err
	}
	plugins := []effects.Plugin{sessions, sagas, webhooks, scheduler}
	if cfg.Retention != nil {
		cfg.Retention.Logger = cfg.Logger
		pruner, err := retention.New(pool, cfg.Retention)
		if err != nil {
			return nil, err
		}
		plugins = append(plugins, pruner)
	}
	return plugins, nil
}
