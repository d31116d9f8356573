package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// refused is a reactor configuration that must not start: the environment and arguments, and what
// the message must say.
type refused struct {
	env  []string
	args []string
	want string
}

// requireRefused runs the reactor binary with each configuration and requires exit status 2 and a
// message containing what it names.
func requireRefused(t *testing.T, cases []refused) {
	t.Helper()
	reactor := proctest.Binary(t, "reactor")
	for _, c := range cases {
		res := proctest.Run(t, c.env, reactor, c.args...)
		require.Equal(t, 2, res.ExitCode, "%v %v: %s", c.env, c.args, res.Stderr)
		require.Contains(t, res.Stderr, c.want)
	}
}

// fixture is a migrated database, a fake bank on 127.0.0.1 and an effects client that enqueues
// (it is never started: the reactor binary does the work).
type fixture struct {
	t        *testing.T
	pool     *pgxpool.Pool
	bank     *fakebank.Bank
	registry *effects.Registry
	synced   httpconn.Syncer // the HTTP connectors of registry
	client   *effects.Client
	env      []string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, pool: pgtest.NewDB(t), bank: fakebank.New(t), registry: effects.NewRegistry()}
	f.env = []string{"DATABASE_URL=" + f.pool.Config().ConnString()}
	client, err := effects.NewClient(f.pool, &effects.Config{Registry: f.registry, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	f.client = client
	t.Cleanup(func() { _ = client.Stop(context.Background()) })
	return f
}

// put stores an HTTP connector and syncs it into the enqueuing client's registry.
func (f *fixture) put(def httpconn.Definition) {
	f.t.Helper()
	_, _, err := httpconn.Put(context.Background(), f.pool, def)
	require.NoError(f.t, err)
	_, err = f.synced.Sync(context.Background(), f.pool, f.registry)
	require.NoError(f.t, err)
}

// bankWire is the bank's wire connector over the wire protocol, with a status check and a
// compensation, quick backoff and the given timeout.
func (f *fixture) bankWire(name string, timeout time.Duration) httpconn.Definition {
	base := f.bank.URL() + fakebank.ReckonPrefix
	return httpconn.Definition{
		Name: name, Tags: []effects.Tag{effects.TagWrite, effects.TagExternal, effects.TagNetwork},
		DispatchURL: base + "/wires", StatusURL: base + "/wires/status", CompensateURL: base + "/wires/compensate",
		Timeout: timeout, BackoffInitial: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
	}
}

func (f *fixture) enqueue(connector, key string, amount int) *effects.Effect {
	f.t.Helper()
	effect, err := f.client.Enqueue(context.Background(), effects.Spec{Connector: connector, IdempotencyKey: key,
		Args: map[string]any{"account": "acc-1", "amount": amount}}, nil)
	require.NoError(f.t, err)
	return effect
}

// startReactor starts the reactor binary with quick polling, sweeping and connector syncing. Its
// in-flight margin is 10 s: with 2 s, a race-built reactor on CI's loaded machine ran calls past
// their job's timeout (500 ms + margin) and swept its own live effects to UNKNOWN.
func (f *fixture) startReactor(extra ...string) *proctest.Process {
	f.t.Helper()
	args := append([]string{"-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms", "-fetch-poll-interval", "50ms",
		"-fetch-cooldown", "10ms", "-sweep-interval", "200ms", "-in-flight-margin", "10s"}, extra...)
	p := proctest.Start(f.t, f.env, proctest.Binary(f.t, "reactor"), args...)
	p.Addr(f.t)
	return p
}

// scrape returns what the reactor serves on /metrics.
func scrape(t *testing.T, p *proctest.Process) string {
	t.Helper()
	_, body := testkit.Do(t, http.MethodGet, "http://"+p.Addr(t)+"/metrics", "", "")
	return string(body)
}

func (f *fixture) wait(effect *effects.Effect) *effects.Effect {
	f.t.Helper()
	return testkit.Wait(f.t, f.client, effect.ID, 60*time.Second)
}

// path is the states the effect went through, in order, its insert included.
func (f *fixture) path(effect *effects.Effect) string {
	f.t.Helper()
	history, err := f.client.History(context.Background(), effect.ID)
	require.NoError(f.t, err)
	var states []string
	for _, tr := range history {
		if len(states) == 0 || states[len(states)-1] != string(tr.To) {
			states = append(states, string(tr.To))
		}
	}
	return strings.Join(states, " → ")
}

// TestReactorHTTPConnectorOutcomes runs the reactor binary against HTTP connectors stored in the
// database, in front of the fake bank on 127.0.0.1, and checks that every class of answer of the
// wire protocol ends where docs/connectors.md says, with the bank's ledger showing each wire
// performed exactly once (never twice, never lost). It also checks that a connector stored while
// the reactor runs is picked up, and that a refused connection is retried until the endpoint is up.
func TestReactorHTTPConnectorOutcomes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.put(f.bankWire("bank.wire", 500*time.Millisecond))
	cases := []struct {
		key    string
		script []fakebank.Behavior
		state  effects.State
		path   string
		wires  int
	}{
		{"ok", nil, effects.StateConfirmed, "PENDING → CONFIRMED", 1},
		{"rejected-400", []fakebank.Behavior{fakebank.Reject}, effects.StateFailed, "PENDING → FAILED", 0},
		{"unavailable-503-retry-after", []fakebank.Behavior{fakebank.Unavailable, fakebank.Succeed}, effects.StateConfirmed, "PENDING → CONFIRMED", 1},
		{"throttled-429", []fakebank.Behavior{fakebank.TooManyRequests, fakebank.Succeed}, effects.StateConfirmed, "PENDING → CONFIRMED", 1},
		{"request-timeout-408", []fakebank.Behavior{fakebank.RequestTimeout, fakebank.Succeed}, effects.StateConfirmed, "PENDING → UNKNOWN → PENDING → CONFIRMED", 1},
		{"server-error-500", []fakebank.Behavior{fakebank.ServerError, fakebank.Succeed}, effects.StateConfirmed, "PENDING → UNKNOWN → PENDING → CONFIRMED", 1},
		{"timeout", []fakebank.Behavior{fakebank.Timeout, fakebank.Succeed}, effects.StateConfirmed, "PENDING → UNKNOWN → PENDING → CONFIRMED", 1},
		{"performed-then-dropped", []fakebank.Behavior{fakebank.PerformThenDrop}, effects.StateConfirmed, "PENDING → UNKNOWN → CONFIRMED", 1},
		{"performed-then-hung", []fakebank.Behavior{fakebank.PerformThenHang}, effects.StateConfirmed, "PENDING → UNKNOWN → CONFIRMED", 1},
	}
	enqueued := map[string]*effects.Effect{}
	for _, tc := range cases {
		f.bank.Script(tc.key, tc.script...)
		enqueued[tc.key] = f.enqueue("bank.wire", tc.key, 100)
	}
	reactor := f.startReactor()

	for _, tc := range cases {
		effect := f.wait(enqueued[tc.key])
		require.Equal(t, tc.state, effect.State, "%s: %s", tc.key, effect.Error)
		require.Equal(t, tc.path, f.path(effect), tc.key)
		require.Equal(t, tc.wires, f.bank.Count(tc.key), "%s: wires performed", tc.key)
		switch tc.key {
		case "unavailable-503-retry-after", "throttled-429":
			require.Equal(t, 2, effect.Attempts, "%s: retried once, without reconciliation", tc.key)
		case "rejected-400":
			require.Contains(t, effect.Error, "400")
		}
	}

	// A connector stored while the reactor runs, whose endpoint refuses connections at first.
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	movedAddr := listener.Addr().String()
	require.NoError(t, listener.Close())
	moved := f.bankWire("bank.moved", 500*time.Millisecond)
	moved.DispatchURL = "http://" + movedAddr + fakebank.ReckonPrefix + "/wires"
	moved.MaxAttempts, moved.BackoffInitial, moved.BackoffMax = 1000, 50*time.Millisecond, 100*time.Millisecond
	f.put(moved)
	require.Eventually(t, func() bool {
		return strings.Contains(reactor.Stderr(), `"msg":"http connector added","connector":"bank.moved"`)
	}, 10*time.Second, 20*time.Millisecond, "the reactor loads a connector stored while it runs")
	refused := f.enqueue("bank.moved", "refused-then-up", 100)
	require.Eventually(t, func() bool {
		e, err := f.client.Get(context.Background(), refused.ID)
		require.NoError(t, err)
		return e.State == effects.StatePending && e.Attempts >= 2 && strings.Contains(e.Error, "nothing sent")
	}, 30*time.Second, 20*time.Millisecond, "the new connector is loaded and the refused calls are retried")
	require.Equal(t, 0, f.bank.Count("refused-then-up"))
	bankURL, err := url.Parse(f.bank.URL())
	require.NoError(t, err)
	listener, err = net.Listen("tcp", movedAddr)
	require.NoError(t, err)
	proxy := &http.Server{Handler: httputil.NewSingleHostReverseProxy(bankURL)}
	go func() { _ = proxy.Serve(listener) }()
	t.Cleanup(func() { _ = proxy.Close() })
	effect := f.wait(refused)
	require.Equal(t, effects.StateConfirmed, effect.State, effect.Error)
	require.Equal(t, "PENDING → CONFIRMED", f.path(effect))
	require.Equal(t, 1, f.bank.Count("refused-then-up"))

	reactor.Stop(t)
}

// TestReactorLoadsConnectorsOnNotice: a connector stored while the reactor runs is loaded at once
// (the table's trigger notifies reckon_definitions), not at the next -connector-sync-interval, here
// an hour away; so is one replaced, and an effect enqueued right after the store is dispatched
// without waiting out an unknown connector's snooze.
func TestReactorLoadsConnectorsOnNotice(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.put(f.bankWire("bank.wire", time.Second))
	reactor := f.startReactor("-connector-sync-interval", "1h")
	require.Equal(t, effects.StateConfirmed, f.wait(f.enqueue("bank.wire", "first", 1)).State)

	f.put(f.bankWire("bank.late", time.Second))
	require.Eventually(t, func() bool {
		return strings.Contains(reactor.Stderr(), `"msg":"http connector added","connector":"bank.late"`)
	}, 10*time.Second, 20*time.Millisecond, "the reactor loads a connector as soon as it is stored")
	late := f.enqueue("bank.late", "late", 1)
	effect := testkit.Wait(t, f.client, late.ID, 20*time.Second) // under the unknown connector's 30 s snooze
	require.Equal(t, effects.StateConfirmed, effect.State, effect.Error)

	changed := f.bankWire("bank.late", 2*time.Second)
	f.put(changed)
	require.Eventually(t, func() bool {
		return strings.Contains(reactor.Stderr(), `"msg":"http connector updated","connector":"bank.late"`)
	}, 10*time.Second, 20*time.Millisecond, "the reactor reloads a replaced connector at once")
	reactor.Stop(t)
}

// TestReactorSIGTERMUnderLoad stops a reactor with SIGTERM while it has calls in flight that do not
// finish within its shutdown timeout, enqueues more work while no reactor runs, then starts a new
// reactor: every effect ends CONFIRMED, and the bank performed each wire exactly once. Nothing was
// lost and nothing was done twice.
func TestReactorSIGTERMUnderLoad(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.put(f.bankWire("bank.wire", 20*time.Second))
	const n = 150
	var all []*effects.Effect
	for i := range n {
		key := fmt.Sprintf("load-%03d", i)
		switch {
		case i%10 == 3:
			f.bank.Script(key, fakebank.Timeout, fakebank.Succeed) // in flight at SIGTERM, not performed
		case i%10 == 7:
			f.bank.Script(key, fakebank.PerformThenHang) // in flight at SIGTERM, performed
		}
		all = append(all, f.enqueue("bank.wire", key, i+1))
	}
	reactor := f.startReactor("-workers", "40", "-shutdown-timeout", "1s")
	require.Eventually(t, func() bool { return testkit.Count(t, f.pool, countSettled) >= n/2 }, 60*time.Second, 50*time.Millisecond)
	reactor.Stop(t) // a drained reactor exits 0
	require.True(t, reactor.Logged("reactor stopped"))
	require.True(t, reactor.Logged("reactor: work in flight did not finish in time; cancelling it"),
		"the held calls were still in flight at the shutdown deadline")

	for i := n; i < n+30; i++ {
		all = append(all, f.enqueue("bank.wire", fmt.Sprintf("load-%03d", i), i+1))
	}
	reactor = f.startReactor()
	require.Eventually(t, func() bool { return testkit.Count(t, f.pool, countSettled) == len(all) }, 90*time.Second, 100*time.Millisecond,
		"every effect settles after the restart")
	interrupted := 0
	for i, enqueued := range all {
		effect, err := f.client.Get(context.Background(), enqueued.ID)
		require.NoError(t, err)
		path := f.path(effect)
		require.Equal(t, effects.StateConfirmed, effect.State, "%s: %s (%s)", effect.IdempotencyKey, effect.Error, path)
		if strings.Contains(path, "UNKNOWN") {
			interrupted++
		}
		require.Equal(t, 1, f.bank.Count(effect.IdempotencyKey), "%s performed once", effect.IdempotencyKey)
		require.Equal(t, int64(i+1), f.bank.Net(effect.IdempotencyKey))
	}
	require.Positive(t, interrupted, "some calls were cut by the shutdown and reconciled")
	reactor.Stop(t)
}

// countSettled counts the effects in a final state.
const countSettled = `SELECT count(*) FROM reckon_effects WHERE state IN ('CONFIRMED', 'FAILED', 'STUCK')`

// TestReactorConfig: flags and environment configure the reactor; bad values are refused with
// exit status 2 and a message naming them.
func TestReactorConfig(t *testing.T) {
	t.Parallel()
	requireRefused(t, []refused{
		{env: []string{"RECKON_WORKERS=many"}, want: `RECKON_WORKERS="many": not an integer`},
		{env: []string{"RECKON_SWEEP_INTERVAL=5"}, want: "RECKON_SWEEP_INTERVAL"},
		{args: []string{"-workers", "0"}, want: "-workers must be between 1 and 10000"},
		{args: []string{"-shutdown-timeout", "-1s"}, want: "-shutdown-timeout must be positive"},
		{args: []string{"-fetch-poll-interval", "50ms"}, want: "must not be shorter than the fetch cooldown 100ms"},
		{args: []string{"extra"}, want: `unexpected argument "extra"`},
		{
			env:  []string{"RECKON_TURN_HANDLER_URL=bot.example/turns"},
			want: `-turn-handler-url: httpturn: handler URL "bot.example/turns": want an absolute http:// or https:// URL`,
		},
		{args: []string{"-turn-handler-timeout", "0s"}, want: "-turn-handler-timeout and -turn-not-ready-delay must be positive"},

		// -async-timeout and RECKON_ASYNC_TIMEOUT out of range (1ms to 7 days) or unparsable.
		{args: []string{"-async-timeout", "0s"}, want: "-async-timeout must be between 1ms and 168h0m0s, got 0s"},
		{args: []string{"-async-timeout", "-1m"}, want: "-async-timeout must be between 1ms and 168h0m0s, got -1m0s"},
		{args: []string{"-async-timeout", "169h"}, want: "-async-timeout must be between 1ms and 168h0m0s, got 169h0m0s"},
		{args: []string{"-async-timeout", "soon"}, want: "-async-timeout"},
		{env: []string{"RECKON_ASYNC_TIMEOUT=soon"}, want: `RECKON_ASYNC_TIMEOUT="soon": not a duration`},
		{env: []string{"RECKON_ASYNC_TIMEOUT=200h"}, want: "-async-timeout must be between 1ms and 168h0m0s, got 200h0m0s"},

		// -claim-interval and RECKON_CLAIM_INTERVAL out of range (1ms to 1s) or unparsable.
		{args: []string{"-claim-interval", "0s"}, want: "-claim-interval must be between 1ms and 1s, got 0s"},
		{args: []string{"-claim-interval", "500us"}, want: "-claim-interval must be between 1ms and 1s, got 500µs"},
		{args: []string{"-claim-interval", "2s"}, want: "-claim-interval must be between 1ms and 1s, got 2s"},
		{args: []string{"-claim-interval", "soon"}, want: "-claim-interval"},
		{env: []string{"RECKON_CLAIM_INTERVAL=soon"}, want: `RECKON_CLAIM_INTERVAL="soon": not a duration`},

		// -stats-interval and RECKON_STATS_INTERVAL out of range (100ms to 1h) or unparsable.
		{args: []string{"-stats-interval", "0s"}, want: "-stats-interval must be between 100ms and 1h, got 0s"},
		{args: []string{"-stats-interval", "99ms"}, want: "-stats-interval must be between 100ms and 1h, got 99ms"},
		{args: []string{"-stats-interval", "61m"}, want: "-stats-interval must be between 100ms and 1h, got 1h1m0s"},
		{args: []string{"-stats-interval", "often"}, want: "-stats-interval"},
		{env: []string{"RECKON_STATS_INTERVAL=often"}, want: `RECKON_STATS_INTERVAL="often": not a duration`},

		// A retention flag or variable out of range.
		{args: []string{"-effect-retention", "30m"}, want: "-effect-retention must be at least 1h0m0s"},
		{args: []string{"-audit-retention", "24h"}, want: "-audit-retention must be 0 (keep forever) or at least -effect-retention 720h0m0s"},
		{args: []string{"-audit-retention", "-1h"}, want: "-audit-retention"},
		{args: []string{"-dedup-window", "-1s"}, want: "-dedup-window must be 0"},
		{args: []string{"-idempotency-ttl", "0s"}, want: "-idempotency-ttl must be at least 1s"},
		{args: []string{"-retention-interval", "10ms"}, want: "-retention-interval must be 0"},
		{args: []string{"-retention-batch", "0"}, want: "-retention-batch must be between 1 and 10000"},
		{env: []string{"RECKON_RETENTION_BATCH=20000"}, want: "-retention-batch must be between 1 and 10000, got 20000"},
		{env: []string{"RECKON_EFFECT_RETENTION=30"}, want: `RECKON_EFFECT_RETENTION="30": not a duration`},
	})

	// Environment values reach the reactor: its id appears in its logs.
	f := setup(t)
	env := append(f.env, "RECKON_REACTOR_ID=env-reactor-7", "RECKON_WORKERS=3")
	p := proctest.Start(t, env, proctest.Binary(t, "reactor"), "-addr", "127.0.0.1:0")
	p.Addr(t)
	require.Eventually(t, func() bool { return strings.Contains(p.Stderr(), `"reactor_id":"env-reactor-7"`) }, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, p.Stderr(), `"workers":3`)
	p.Stop(t)
}

// TestReactorConfirmationConfig: -require-irreversible-confirmation, -confirmation-ttl and
// -four-eyes default to their RECKON_* variables and reach the effects client; a TTL out of range or
// a variable that is not a boolean is refused with exit status 2, naming it.
func TestReactorConfirmationConfig(t *testing.T) {
	t.Parallel()
	requireRefused(t, []refused{
		{args: []string{"-confirmation-ttl", "500ms"}, want: "-confirmation-ttl must be 0 (no expiry) or between 1s and 720h0m0s, got 500ms"},
		{args: []string{"-confirmation-ttl", "721h"}, want: "-confirmation-ttl must be 0 (no expiry) or between 1s and 720h0m0s, got 721h0m0s"},
		{env: []string{"RECKON_CONFIRMATION_TTL=-1s"}, want: "-confirmation-ttl must be 0"},
		{env: []string{"RECKON_CONFIRMATION_TTL=soon"}, want: `RECKON_CONFIRMATION_TTL="soon"`},
		{env: []string{"RECKON_FOUR_EYES=maybe"}, want: `RECKON_FOUR_EYES="maybe": not true or false`},
		{env: []string{"RECKON_REQUIRE_IRREVERSIBLE_CONFIRMATION=yes"}, want: "RECKON_REQUIRE_IRREVERSIBLE_CONFIRMATION"},
	})

	f := setup(t)
	reactor := proctest.Binary(t, "reactor")
	const logged = `"msg":"confirmation holds of the effects this reactor enqueues"`
	p := proctest.Start(t, f.env, reactor, "-addr", "127.0.0.1:0")
	p.Addr(t)
	require.Eventually(t, func() bool { return strings.Contains(p.Stderr(), logged) }, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, p.Stderr(), logged+`,"require_irreversible_confirmation":false,"confirmation_ttl":"0s","four_eyes":false`, "off by default")
	p.Stop(t)

	env := append(f.env, "RECKON_REQUIRE_IRREVERSIBLE_CONFIRMATION=true", "RECKON_CONFIRMATION_TTL=2h", "RECKON_FOUR_EYES=false")
	p = proctest.Start(t, env, reactor, "-addr", "127.0.0.1:0", "-four-eyes") // the flag overrides its variable
	p.Addr(t)
	require.Eventually(t, func() bool { return strings.Contains(p.Stderr(), logged) }, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, p.Stderr(), logged+`,"require_irreversible_confirmation":true,"confirmation_ttl":"2h0m0s","four_eyes":true`)
	p.Stop(t)
}

// TestReactorDrainsOnSIGTERM: a call in flight when SIGTERM arrives is allowed to finish within the
// shutdown timeout and its outcome is recorded normally (CONFIRMED, not UNKNOWN) before the
// reactor exits 0.
func TestReactorDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	f := setup(t)
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"sent":true}`)
	}))
	t.Cleanup(upstream.Close)
	f.put(httpconn.Definition{Name: "mail.send", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		DispatchURL: upstream.URL + "/send", Timeout: 30 * time.Second})
	effect := f.enqueue("mail.send", "mail-1", 1)
	reactor := f.startReactor("-shutdown-timeout", "20s")

	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the reactor never called the upstream")
	}
	reactor.Signal(t, syscall.SIGTERM)
	require.Eventually(t, func() bool { return reactor.Logged("reactor stopping: draining work in flight") },
		10*time.Second, 10*time.Millisecond)
	close(release)
	require.Equal(t, 0, reactor.Wait(t, 30*time.Second))
	require.False(t, reactor.Logged("reactor: work in flight did not finish in time; cancelling it"))
	require.Equal(t, 1, strings.Count(reactor.Stderr(), `"msg":"reactor stopped"`), "logged once, by effects.Client.Stop\n%s", reactor.Stderr())

	got, err := f.client.Get(context.Background(), effect.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, got.State, got.Error)
	require.JSONEq(t, `{"sent":true}`, string(got.Result))
	require.Equal(t, "PENDING → CONFIRMED", f.path(got))
}

// TestTwoReactors runs two reactor binaries (default, distinct ids) against one database under
// load: every effect is CONFIRMED, each wire was performed exactly once, and both reactors did
// part of the work.
func TestTwoReactors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.put(f.bankWire("bank.wire", 5*time.Second))
	first, second := f.startReactor("-workers", "10"), f.startReactor("-workers", "10")
	const n = 200
	var all []*effects.Effect
	for i := range n {
		key := fmt.Sprintf("pair-%03d", i)
		if i%20 == 5 {
			f.bank.Script(key, fakebank.PerformThenDrop) // reconciled by whichever reactor
		}
		all = append(all, f.enqueue("bank.wire", key, 10))
	}
	require.Eventually(t, func() bool { return testkit.Count(t, f.pool, countSettled) == n }, 90*time.Second, 100*time.Millisecond)
	for _, enqueued := range all {
		effect, err := f.client.Get(context.Background(), enqueued.ID)
		require.NoError(t, err)
		require.Equal(t, effects.StateConfirmed, effect.State, "%s: %s", effect.IdempotencyKey, effect.Error)
		require.Equal(t, 1, f.bank.Count(effect.IdempotencyKey), "%s performed once", effect.IdempotencyKey)
	}
	var actors []string
	rows, err := f.pool.Query(context.Background(),
		`SELECT DISTINCT actor FROM reckon_effect_transitions WHERE to_state = 'CONFIRMED' AND actor LIKE 'reactor:%'`)
	require.NoError(t, err)
	for rows.Next() {
		var actor string
		require.NoError(t, rows.Scan(&actor))
		actors = append(actors, actor)
	}
	require.NoError(t, rows.Err())
	require.Len(t, actors, 2, "both reactors confirmed effects: %v", actors)
	for _, p := range []*proctest.Process{first, second} {
		p.Stop(t)
	}
}
