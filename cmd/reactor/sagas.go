package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
)

// sagaSync is the reactor's saga client — its settle hook advances every saga whose step or
// compensation settles here — with the saga definitions stored in reckon_saga_definitions (package
// saga/sagadef): loaded at start, every -connector-sync-interval, and whenever a saga names one
// not loaded yet (in the settling transaction).
type sagaSync struct {
	pool   *pgxpool.Pool
	sagas  *saga.Client
	logger *slog.Logger
}

// newSagaSync creates the saga client (a plugin of the effects client) and loads the definitions.
func newSagaSync(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, registerer prometheus.Registerer) (*sagaSync, error) {
	sagas, err := saga.NewClient(pool, &saga.Config{Logger: logger, Registerer: registerer, OnUnknownDefinition: sagadef.Load})
	if err != nil {
		return nil, err
	}
	s := &sagaSync{pool: pool, sagas: sagas, logger: logger}
	if err := s.sync(ctx); err != nil {
		return nil, fmt.Errorf("load saga definitions: %w", err)
	}
	return s, nil
}

func (s *sagaSync) sync(ctx context.Context) error {
	res, err := sagadef.Sync(ctx, s.pool, s.sagas)
	if err != nil {
		return err
	}
	for _, name := range res.Added {
		s.logger.InfoContext(ctx, "saga definition added", slog.String("definition", name))
	}
	for name, err := range res.Skipped {
		s.logger.WarnContext(ctx, "saga definition skipped", slog.String("definition", name), slog.String("error", err.Error()))
	}
	return nil
}
