package saga_test

import (
	"context"
	"encoding/json"
	"log/slog"
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
	"github.com/reckonhq/reckon/saga"
)

func TestMain(m *testing.M) {
	testkit.MainOrChild(m, childReactorEnv, func(string) int { return runChildReactor() })
}

// effectsConfig is a reactor configuration for tests: testkit.FastConfig with a margin of a
// second before an attempt is presumed dead, and the shared statistics (reckon_sagas) computed
// every statsInterval.
func effectsConfig(registry *effects.Registry) *effects.Config {
	config := testkit.FastConfig(registry)
	config.InFlightMargin = time.Second
	config.StatsInterval = statsInterval
	return config
}

// statsInterval is how often the shared statistics are computed in these tests.
const statsInterval = 200 * time.Millisecond

// eventuallyMetric waits until the counter or gauge name with exactly these labels is want: a
// gauge of the shared statistics follows within an interval or two.
func (h *harness) eventuallyMetric(want float64, name string, labels map[string]string) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return h.metric(name, labels) == want }, 10*time.Second, 10*time.Millisecond,
		"%s%v: want %v, have %v", name, labels, want, h.metric(name, labels))
}

// order is the input of the "order" saga: reserve inventory, charge the card, ship. Every step
// moves money through the fake bank (one ledger, keyed by the step's idempotency key), so that the
// ledger shows what was performed and what was undone.
type order struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	// ShipAmount 0 makes the bank refuse the shipment (400): the last step FAILS.
	ShipAmount int64 `json:"ship_amount"`
}

type wireResult struct {
	WireID string `json:"wire_id"`
	Key    string `json:"key"`
	Amount int64  `json:"amount"`
}

// registerConnectors registers the three bank connectors of the order saga, plus card.refund (an
// idempotent connector of its own that reverses a charge: UndoWith).
func registerConnectors(registry *effects.Registry, bankURL string, checkpoints bool, timeout time.Duration) {
	for _, name := range []string{"inventory.reserve", "card.charge", "shipping.ship"} {
		registry.MustRegister(fakebank.ConnectorOptions{
			Name: name, BaseURL: bankURL, StatusCheck: true, Compensate: true, Timeout: timeout,
			Backoff: testkit.FastBackoff, Checkpoints: checkpoints, CompensateCheckpoints: checkpoints,
		}.Connector())
	}
	registry.MustRegister(refundConnector(bankURL))
}

// orderAfter decodes the saga's order and the result of its earlier step: the order saga's
// charge and shipment each build on the step before.
func orderAfter(in saga.Input, step int) (order, wireResult, error) {
	var o order
	var prev wireResult
	if err := in.Decode(&o); err != nil {
		return o, prev, err
	}
	err := in.DecodeResult(step, &prev)
	return o, prev, err
}

// orderSaga reserves, charges and ships. Results flow: the charge carries the reservation's
// wire id, the shipment the charge's. Inventory is undone by its connector's Compensate, the
// charge by a refund effect of its own (UndoWith), and a shipment is final (NoUndo).
func orderSaga(compensationAttempts int) saga.Definition {
	return saga.Definition{
		Name:                 "order",
		CompensationAttempts: compensationAttempts,
		CompensationBackoff:  func(int) time.Duration { return 10 * time.Millisecond },
		Steps: []saga.Step{
			{
				Name: "reserve",
				Effect: func(in saga.Input) (effects.Spec, error) {
					var o order
					if err := in.Decode(&o); err != nil {
						return effects.Spec{}, err
					}
					return effects.Spec{Connector: "inventory.reserve", Args: map[string]any{"account": o.Account, "amount": o.Amount}}, nil
				},
				Undo: saga.UndoByConnector(),
			},
			{
				Name: "charge",
				Effect: func(in saga.Input) (effects.Spec, error) {
					o, reserved, err := orderAfter(in, 0)
					if err != nil {
						return effects.Spec{}, err
					}
					return effects.Spec{Connector: "card.charge", Args: map[string]any{
						"account": o.Account, "amount": o.Amount, "reservation": reserved.WireID,
					}}, nil
				},
				Undo: saga.UndoWith(func(in saga.Input) (effects.Spec, error) {
					var charged wireResult
					if err := in.DecodeResult(in.Step, &charged); err != nil {
						return effects.Spec{}, err
					}
					return effects.Spec{Connector: "card.refund", Args: map[string]any{
						"original_key": charged.Key, "amount": charged.Amount,
					}}, nil
				}),
			},
			{
				Name: "ship",
				Effect: func(in saga.Input) (effects.Spec, error) {
					o, charged, err := orderAfter(in, 1)
					if err != nil {
						return effects.Spec{}, err
					}
					return effects.Spec{Connector: "shipping.ship", Args: map[string]any{
						"account": o.Account, "amount": o.ShipAmount, "charge": charged.WireID,
					}}, nil
				},
				Undo: saga.NoUndo(),
			},
		},
	}
}

type harness struct {
	t        *testing.T
	pool     *pgxpool.Pool
	bank     *fakebank.Bank
	registry *effects.Registry
	effects  *effects.Client
	sagas    *saga.Client
	metrics  *prometheus.Registry
}

// setup gives a test its own database and bank, and a client (not started) with the order saga.
func setup(t *testing.T, compensationAttempts int) *harness {
	t.Helper()
	h := &harness{t: t, pool: pgtest.NewDB(t), bank: fakebank.New(t), registry: effects.NewRegistry(), metrics: prometheus.NewRegistry()}
	registerConnectors(h.registry, h.bank.URL(), false, time.Second)
	h.effects, h.sagas = h.newClients(h.metrics, compensationAttempts)
	return h
}

func (h *harness) newClients(registerer prometheus.Registerer, compensationAttempts int) (*effects.Client, *saga.Client) {
	h.t.Helper()
	config := effectsConfig(h.registry)
	config.Registerer = registerer
	return h.newClientsWith(config, saga.Config{}, compensationAttempts)
}

// newClientsWith is newClients with an effects configuration of the caller's (its Registerer
// serves both clients).
func (h *harness) newClientsWith(config *effects.Config, sagaConfig saga.Config, compensationAttempts int) (*effects.Client, *saga.Client) {
	h.t.Helper()
	sagaConfig.Registerer, sagaConfig.Logger = config.Registerer, slog.New(slog.DiscardHandler)
	sc, err := saga.NewClient(h.pool, &sagaConfig)
	require.NoError(h.t, err)
	config.Plugins = append(config.Plugins, sc)
	ec := testkit.NewClient(h.t, h.pool, config)
	require.NoError(h.t, sc.Register(orderSaga(compensationAttempts)))
	return ec, sc
}

// start runs a reactor on ec until the test ends.
func (h *harness) start(ec *effects.Client) {
	h.t.Helper()
	testkit.Start(h.t, ec)
}

// begin starts an order saga in a transaction and, before committing, lets prepare script the
// bank with the keys derived from the saga's id.
func (h *harness) begin(o order, prepare func(id uuid.UUID)) *saga.Saga {
	h.t.Helper()
	var s *saga.Saga
	require.NoError(h.t, pgx.BeginFunc(context.Background(), h.pool, func(tx pgx.Tx) error {
		var err error
		s, err = h.sagas.StartTx(context.Background(), tx, "order", o, nil)
		if err == nil && prepare != nil {
			prepare(s.ID)
		}
		return err
	}))
	return s
}

func (h *harness) wait(id uuid.UUID) *saga.Saga {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := h.sagas.Wait(ctx, id)
	require.NoError(h.t, err, "saga %s did not settle", id)
	return s
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	return testkit.Count(h.t, h.pool, sql, args...)
}

func (h *harness) effect(id uuid.UUID) *effects.Effect {
	h.t.Helper()
	e, err := h.effects.Get(context.Background(), id)
	require.NoError(h.t, err)
	return e
}

func (h *harness) history(id uuid.UUID) []string {
	h.t.Helper()
	history, err := h.sagas.History(context.Background(), id)
	require.NoError(h.t, err)
	var out []string
	for _, tr := range history {
		out = append(out, string(tr.From)+">"+string(tr.To))
	}
	return out
}

// ledgerNet sums every ledger entry of the bank.
func (h *harness) ledgerNet() int64 {
	var sum int64
	for _, e := range h.bank.Ledger() {
		sum += e.Amount
	}
	return sum
}

// metric returns the value of the counter or gauge name with exactly these labels (0 if absent).
func (h *harness) metric(name string, labels map[string]string) float64 {
	h.t.Helper()
	return testkit.Metric(h.t, h.metrics, name, labels)
}

func mustJSON(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}
