package turns_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/turns"
)

func TestMain(m *testing.M) { testkit.MainOrChild(m, childEnv, runChild) }

// bank is an in-process upstream for the test connector: it counts the refunds performed per
// idempotency key.
type bank struct {
	mu        sync.Mutex
	performed map[string]int
}

func newBank() *bank { return &bank{performed: map[string]int{}} }

func (b *bank) count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.performed[key]
}

// refundConnector is an irreversible connector (write, external, no compensation) with a status
// check, so that the registry accepts it.
func (b *bank) refundConnector() effects.Connector {
	return effects.Connector{
		Name: "bank.refund",
		Tags: []effects.Tag{effects.TagWrite, effects.TagExternal},
		Dispatch: func(_ context.Context, call effects.Call) (json.RawMessage, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.performed[call.IdempotencyKey]++
			return json.RawMessage(`{"ok":true}`), nil
		},
		StatusCheck: func(_ context.Context, call effects.Call) (effects.Status, error) {
			if b.count(call.IdempotencyKey) > 0 {
				return effects.Present(json.RawMessage(`{"ok":true}`)), nil
			}
			return effects.Absent(), nil
		},
		Timeout: 5 * time.Second,
	}
}

// clients builds a turns client attached to an effects client on pool, the way an application
// does.
func clients(pool *pgxpool.Pool, registry *effects.Registry, config turns.Config, registerer prometheus.Registerer, plugins ...effects.Plugin) (*turns.Client, *effects.Client, error) {
	if config.Logger == nil {
		config.Logger = slog.New(slog.DiscardHandler)
	}
	config.Registerer = registerer
	tc, err := turns.NewClient(pool, &config)
	if err != nil {
		return nil, nil, err
	}
	effectsConfig := testkit.FastConfig(registry)
	effectsConfig.Logger, effectsConfig.Workers = config.Logger, 10
	effectsConfig.Plugins = append([]effects.Plugin{tc}, plugins...)
	ec, err := effects.NewClient(pool, effectsConfig)
	if err != nil {
		return nil, nil, err
	}
	return tc, ec, nil
}

const appSchema = `CREATE TABLE app_notes (turn_id uuid NOT NULL, note text NOT NULL);
CREATE TABLE probe (session_key text PRIMARY KEY, inflight integer NOT NULL DEFAULT 0, max_seen integer NOT NULL DEFAULT 0, runs integer NOT NULL DEFAULT 0, max_processing integer NOT NULL DEFAULT 0)`

type harness struct {
	t       testing.TB
	pool    *pgxpool.Pool
	bank    *bank
	tc      *turns.Client
	ec      *effects.Client
	metrics *prometheus.Registry
}

// setup gives a test its own database (with the application tables app_notes and probe), a
// bank, and attached clients with config (Handler required). River is not started: see start.
func setup(t testing.TB, config turns.Config) *harness {
	t.Helper()
	return setupOn(t, pgtest.NewDB(t), config)
}

// setupOn is setup on a given pool, with more plugins of the effects client.
func setupOn(t testing.TB, pool *pgxpool.Pool, config turns.Config, plugins ...effects.Plugin) *harness {
	t.Helper()
	h := &harness{t: t, pool: pool, bank: newBank(), metrics: prometheus.NewRegistry()}
	_, err := h.pool.Exec(context.Background(), appSchema)
	require.NoError(t, err)
	registry := effects.NewRegistry()
	require.NoError(t, registry.Register(h.bank.refundConnector()))
	h.tc, h.ec, err = clients(h.pool, registry, config, h.metrics, plugins...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.ec.Stop(context.Background())) })
	return h
}

// start runs the River workers (aggregation jobs, dispatch) until the test ends.
func (h *harness) start() {
	h.t.Helper()
	require.NoError(h.t, h.ec.Start(context.Background()))
}

// newSession returns a session key of its own on channel.
func newSession(channel string) string {
	return turns.SessionKey("acme", "agent-1", "user-"+uuid.NewString()[:8], channel)
}

func (h *harness) submit(session, messageID string) *turns.Message {
	h.t.Helper()
	m, err := h.tc.Submit(context.Background(), turns.Inbound{SessionKey: session, MessageID: messageID, Content: map[string]string{"text": messageID}})
	require.NoError(h.t, err)
	return m
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	return testkit.Count(h.t, h.pool, sql, args...)
}

func (h *harness) turnsOf(session string) []*turns.Record {
	h.t.Helper()
	records, err := h.tc.List(context.Background(), session)
	require.NoError(h.t, err)
	return records
}

// awaitTurns waits until session has exactly n turns, the last of them COMPLETE, and returns them;
// awaitComplete waits for the last turn whatever their number.
func (h *harness) awaitTurns(session string, n int) []*turns.Record {
	h.t.Helper()
	var records []*turns.Record
	require.Eventually(h.t, func() bool {
		records = h.turnsOf(session)
		return len(records) == n && records[n-1].Status == turns.StatusComplete
	}, 30*time.Second, 10*time.Millisecond)
	return records
}

// messageIDs returns the caller's ids of a turn's messages.
func (h *harness) messageIDs(turnID uuid.UUID) []string {
	h.t.Helper()
	messages, err := h.tc.Messages(context.Background(), turnID)
	require.NoError(h.t, err)
	ids := make([]string, len(messages))
	for i, m := range messages {
		ids[i] = m.MessageID
	}
	return ids
}

// metric returns the value of the counter or gauge name with exactly these labels (0 if absent).
func (h *harness) metric(name string, labels map[string]string) float64 {
	h.t.Helper()
	return testkit.Metric(h.t, h.metrics, name, labels)
}

// refundSpec is a refund effect at journal position (decision, 0) of the turn.
func refundSpec(turn *turns.Turn, decision int, amount int) effects.Spec {
	return effects.Spec{Connector: "bank.refund", Args: map[string]int{"amount": amount}, Position: turn.Position(decision, 0)}
}
