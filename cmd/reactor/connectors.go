package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
)

// connectorSync keeps the registry's HTTP connectors in step with reckon_connectors.
type connectorSync struct {
	pool     *pgxpool.Pool
	registry *effects.Registry
	logger   *slog.Logger
	syncs    *prometheus.CounterVec
	loaded   prometheus.Gauge
	count    int
}

func newConnectorSync(pool *pgxpool.Pool, registry *effects.Registry, logger *slog.Logger, registerer prometheus.Registerer) (*connectorSync, error) {
	s := &connectorSync{
		pool: pool, registry: registry, logger: logger,
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reckon", Subsystem: "reactor", Name: "connector_syncs_total",
			Help: "Reloads of the HTTP connectors from the database, by result (ok, error).",
		}, []string{"result"}),
		loaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "reckon", Subsystem: "reactor", Name: "http_connectors",
			Help: "HTTP connectors registered in this reactor.",
		}),
	}
	for _, result := range []string{"ok", "error"} {
		s.syncs.WithLabelValues(result) // at 0 until the first sync, for alerts on rate()
	}
	for _, c := range []prometheus.Collector{s.syncs, s.loaded} {
		if err := registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// sync reloads the connectors once and logs what changed.
func (s *connectorSync) sync(ctx context.Context) error {
	res, err := httpconn.Sync(ctx, s.pool, s.registry)
	if err != nil {
		s.syncs.WithLabelValues("error").Inc()
		return err
	}
	s.syncs.WithLabelValues("ok").Inc()
	for _, name := range res.Added {
		s.logger.InfoContext(ctx, "http connector added", slog.String("connector", name))
	}
	for _, name := range res.Updated {
		s.logger.InfoContext(ctx, "http connector updated", slog.String("connector", name))
	}
	for _, name := range res.Removed {
		s.logger.InfoContext(ctx, "http connector removed", slog.String("connector", name))
	}
	for name, err := range res.Skipped {
		s.logger.WarnContext(ctx, "http connector skipped", slog.String("connector", name), slog.String("error", err.Error()))
	}
	s.count += len(res.Added) - len(res.Removed)
	s.loaded.Set(float64(s.count))
	return nil
}
