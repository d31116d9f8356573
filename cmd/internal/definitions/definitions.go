// Package definitions loads what the binaries serve from the database: the HTTP connectors stored
// in reckon_connectors (package effects/httpconn) and the saga definitions stored in
// reckon_saga_definitions (package saga/sagadef). cmd/server and cmd/reactor load them the same way:
// at start, then as soon as one changes (a trigger of each table notifies Channel, migration 0034)
// and every -connector-sync-interval besides, logging what changed and counting the reloads.
package definitions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
)

// Loader keeps a registry's HTTP connectors and a saga client's definitions in step with the
// database, through the registry's and the client's Syncers (one of each per registry and client).
type Loader struct {
	db         effects.DBTX
	registry   *effects.Registry
	sagas      *saga.Client
	logger     *slog.Logger
	connectors httpconn.Syncer
	sagaDefs   *sagadef.Syncer
	metrics    *metrics
}

// New is a Loader of the HTTP connectors stored in db into registry and of the saga definitions
// into sagas with sagaDefs, the Syncer whose Load is the client's OnUnknownDefinition; it loads
// nothing yet. Its metrics (reckon_<subsystem>_http_connectors,
// reckon_<subsystem>_connector_syncs_total) go to registerer.
func New(db effects.DBTX, registry *effects.Registry, sagas *saga.Client, sagaDefs *sagadef.Syncer, logger *slog.Logger, registerer prometheus.Registerer, subsystem string) (*Loader, error) {
	m, err := newMetrics(registerer, subsystem)
	if err != nil {
		return nil, err
	}
	return &Loader{db: db, registry: registry, sagas: sagas, logger: logger, sagaDefs: sagaDefs, metrics: m}, nil
}

// Load reloads the HTTP connectors, then the saga definitions, once. A failed reload keeps what is
// loaded; the errors of both are returned.
func (l *Loader) Load(ctx context.Context) error {
	connectorsErr := l.Connectors(ctx)
	if connectorsErr != nil {
		connectorsErr = fmt.Errorf("load HTTP connectors: %w", connectorsErr)
	}
	sagasErr := l.Sagas(ctx)
	if sagasErr != nil {
		sagasErr = fmt.Errorf("load saga definitions: %w", sagasErr)
	}
	return errors.Join(connectorsErr, sagasErr)
}

// Channel is where the database announces a change to a stored connector or saga definition: a
// trigger on each table notifies it at commit, whoever writes.
const Channel = "reckon_definitions"

// listenTimeout bounds Run's wait for its listener: a database that cannot be reached then leaves
// the loader reloading every interval only.
const listenTimeout = 10 * time.Second

// Run reloads as soon as the database announces a change (Channel, through client's listener) and
// every interval besides, until ctx ends; the first time on the first announcement or an interval
// from now. A failed reload is logged as a warning and keeps what is loaded. Without the listener
// (the database not reachable in time) it reloads every interval only, and says so.
func (l *Loader) Run(ctx context.Context, interval time.Duration, client *effects.Client) {
	var changes <-chan struct{}
	listenCtx, cancel := context.WithTimeout(ctx, listenTimeout)
	sub, err := client.Listen(listenCtx, Channel, "")
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		l.logger.WarnContext(ctx, "stored definitions: cannot listen for changes; reloading every interval only",
			slog.Duration("interval", interval), slog.String("error", err.Error()))
	} else {
		defer sub.Close()
		changes = sub.C
	}
	cli.Every(ctx, interval, changes, func(ctx context.Context) {
		if err := l.Connectors(ctx); err != nil && ctx.Err() == nil {
			l.logger.WarnContext(ctx, "http connectors: sync failed; keeping the ones loaded", slog.String("error", err.Error()))
		}
		if err := l.Sagas(ctx); err != nil && ctx.Err() == nil {
			l.logger.WarnContext(ctx, "saga definitions: sync failed; keeping the ones loaded", slog.String("error", err.Error()))
		}
	})
}

// Connectors reloads the HTTP connectors once, logs what changed and counts the reload.
func (l *Loader) Connectors(ctx context.Context) error {
	res, err := l.connectors.Sync(ctx, l.db, l.registry)
	if err != nil {
		l.metrics.syncs.WithLabelValues("error").Inc()
		return err
	}
	l.metrics.syncs.WithLabelValues("ok").Inc()
	l.logNames(ctx, "http connector added", "connector", res.Added)
	l.logNames(ctx, "http connector updated", "connector", res.Updated)
	l.logNames(ctx, "http connector removed", "connector", res.Removed)
	l.logSkipped(ctx, "http connector skipped", "connector", res.Skipped)
	l.metrics.loaded.Add(float64(len(res.Added) - len(res.Removed)))
	return nil
}

// Sagas loads the saga definitions not loaded yet, once, and logs what it registered.
func (l *Loader) Sagas(ctx context.Context) error {
	res, err := l.sagaDefs.Sync(ctx, l.db, l.sagas)
	if err != nil {
		return err
	}
	l.logNames(ctx, "saga definition added", "definition", res.Added)
	l.logSkipped(ctx, "saga definition skipped", "definition", res.Skipped)
	return nil
}

// logNames logs msg at info level once per name, under the attribute key.
func (l *Loader) logNames(ctx context.Context, msg, key string, names []string) {
	for _, name := range names {
		l.logger.InfoContext(ctx, msg, slog.String(key, name))
	}
}

// logSkipped logs msg as a warning once per skipped name, with why.
func (l *Loader) logSkipped(ctx context.Context, msg, key string, skipped map[string]error) {
	for name, err := range skipped {
		l.logger.WarnContext(ctx, msg, slog.String(key, name), slog.String("error", err.Error()))
	}
}
