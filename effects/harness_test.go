package effects_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/fakebank"
	"github.com/reckonhq/reckon/internal/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childReactorEnv) != "" {
		os.Exit(runChildReactor())
	}
	pgtest.Main(m)
}

// fastBackoff keeps retries quick in tests.
func fastBackoff(int) time.Duration { return 20 * time.Millisecond }

// testConfig is a reactor configuration for tests: quick fetching, a quick sweeper, and a short
// margin before an attempt is presumed dead.
func testConfig(registry *effects.Registry) *effects.Config {
	return &effects.Config{
		Registry:          registry,
		Logger:            slog.New(slog.DiscardHandler),
		Workers:           20,
		InFlightMargin:    2 * time.Second,
		SweepInterval:     100 * time.Millisecond,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
	}
}

type harness struct {
	t        *testing.T
	pool     *pgxpool.Pool
	bank     *fakebank.Bank
	registry *effects.Registry
	client   *effects.Client
	metrics  *prometheus.Registry
}

// setup gives a test its own database, bank and client, configured by testConfig and then by
// configure. The connectors of the registry are registered by the caller through the returned
// harness before start.
func setup(t *testing.T, configure ...func(*effects.Config)) *harness {
	t.Helper()
	h := &harness{t: t, pool: pgtest.NewDB(t), bank: fakebank.New(t), registry: effects.NewRegistry(), metrics: prometheus.NewRegistry()}
	config := testConfig(h.registry)
	config.Registerer = h.metrics
	for _, fn := range configure {
		fn(config)
	}
	client, err := effects.NewClient(h.pool, config)
	require.NoError(t, err)
	h.client = client
	t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) }) // Wait's listener
	return h
}

// wire registers a bank connector with fast backoff.
func (h *harness) wire(o fakebank.ConnectorOptions) {
	h.t.Helper()
	o.BaseURL = h.bank.URL()
	if o.Backoff == nil {
		o.Backoff = fastBackoff
	}
	require.NoError(h.t, h.registry.Register(o.Connector()))
}

func (h *harness) start() {
	h.t.Helper()
	require.NoError(h.t, h.client.Start(context.Background()))
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(h.t, h.client.Stop(ctx))
	})
}

func (h *harness) enqueue(connector, key string, amount int) *effects.Effect {
	h.t.Helper()
	effect, err := h.client.Enqueue(context.Background(), effects.Spec{
		Connector: connector, IdempotencyKey: key, Args: map[string]any{"account": "acct-1", "amount": amount},
	}, nil)
	require.NoError(h.t, err)
	return effect
}

// wait waits for the effect to settle (CONFIRMED, FAILED or STUCK).
func (h *harness) wait(id uuid.UUID) *effects.Effect {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	effect, err := h.client.Wait(ctx, id)
	require.NoError(h.t, err, "effect %s did not settle", id)
	return effect
}

// path returns the effect's audit trail as "FROM>TO" steps, the insert as ">PENDING".
func (h *harness) path(id uuid.UUID) []string {
	h.t.Helper()
	history, err := h.client.History(context.Background(), id)
	require.NoError(h.t, err)
	var steps []string
	for _, tr := range history {
		if tr.From == tr.To {
			continue // observations
		}
		steps = append(steps, fmt.Sprintf("%s>%s", tr.From, tr.To))
	}
	return steps
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	var n int
	require.NoError(h.t, h.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func (h *harness) inTx(fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(context.Background(), h.pool, fn)
}

// metric returns the value of the counter or gauge name with exactly these labels (0 if absent).
func (h *harness) metric(name string, labels map[string]string) float64 {
	h.t.Helper()
	families, err := h.metrics.Gather()
	require.NoError(h.t, err)
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
	metrics:
		for _, m := range family.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, label := range m.GetLabel() {
				if labels[label.GetName()] != label.GetValue() {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
