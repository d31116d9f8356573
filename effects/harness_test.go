package effects_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) {
	testkit.MainOrChild(m, childReactorEnv, func(string) int { return runChildReactor() })
}

type harness struct {
	t        *testing.T
	pool     *pgxpool.Pool
	bank     *fakebank.Bank
	registry *effects.Registry
	client   *effects.Client
	metrics  *prometheus.Registry
}

// setup gives a test its own database, bank and client, configured by testkit.FastConfig and
// then by configure. The connectors of the registry are registered by the caller through the returned
// harness before start.
func setup(t *testing.T, configure ...func(*effects.Config)) *harness {
	t.Helper()
	h := &harness{t: t, pool: pgtest.NewDB(t), bank: fakebank.New(t), registry: effects.NewRegistry(), metrics: prometheus.NewRegistry()}
	config := testkit.FastConfig(h.registry)
	config.Registerer = h.metrics
	for _, fn := range configure {
		fn(config)
	}
	h.client = testkit.NewClient(t, h.pool, config)
	return h
}

// setupWired is setup with the bank's wire connector (bank.wire, with a status check) registered,
// the bundle most tests start from.
func setupWired(t *testing.T, configure ...func(*effects.Config)) *harness {
	t.Helper()
	h := setup(t, configure...)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true})
	return h
}

// wire registers a bank connector with fast backoff.
func (h *harness) wire(o fakebank.ConnectorOptions) {
	h.t.Helper()
	o.BaseURL = h.bank.URL()
	if o.Backoff == nil {
		o.Backoff = testkit.FastBackoff
	}
	require.NoError(h.t, h.registry.Register(o.Connector()))
}

func (h *harness) start() {
	h.t.Helper()
	testkit.Start(h.t, h.client)
}

func (h *harness) enqueue(connector, key string, amount int) *effects.Effect {
	h.t.Helper()
	effect, err := h.client.Enqueue(context.Background(), effects.Spec{
		Connector: connector, IdempotencyKey: key, Args: map[string]any{"account": "acct-1", "amount": amount},
	}, nil)
	require.NoError(h.t, err)
	return effect
}

// enqueueWithJob enqueues like enqueue, with its dispatch job at once (ScheduledAt now: an effect
// enqueued alone and unscheduled waits for a reactor's claimer to give it its job), for tests that
// tamper with the job before a reactor runs.
func (h *harness) enqueueWithJob(connector, key string, amount int) *effects.Effect {
	h.t.Helper()
	effect, err := h.client.Enqueue(context.Background(), effects.Spec{
		Connector: connector, IdempotencyKey: key, Args: map[string]any{"account": "acct-1", "amount": amount},
	}, &effects.EnqueueOpts{ScheduledAt: time.Now()})
	require.NoError(h.t, err)
	return effect
}

// wait waits for the effect to settle (CONFIRMED, FAILED or STUCK).
func (h *harness) wait(id uuid.UUID) *effects.Effect {
	h.t.Helper()
	return testkit.Wait(h.t, h.client, id, 30*time.Second)
}

// path returns the effect's audit trail as "FROM>TO" steps, the insert as ">PENDING".
func (h *harness) path(id uuid.UUID) []string {
	h.t.Helper()
	return testkit.Path(h.t, h.client, id)
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	return testkit.Count(h.t, h.pool, sql, args...)
}

func (h *harness) inTx(fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(context.Background(), h.pool, fn)
}

// metric returns the value of the counter or gauge name with exactly these labels (0 if absent).
func (h *harness) metric(name string, labels map[string]string) float64 {
	h.t.Helper()
	return testkit.Metric(h.t, h.metrics, name, labels)
}
