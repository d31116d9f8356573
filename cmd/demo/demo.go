package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

type config struct {
	// token is the demo tenant's (its effects); systemToken registers the connector, which every
	// tenant shares.
	token, systemToken, server, reactor, bankAddr string
	once                                          bool
	timeout                                       time.Duration
}

// scenario is one wire of the tour: how the bank behaves and what the reader should see.
type scenario struct {
	name     string
	script   []fakebank.Behavior
	status   []fakebank.StatusBehavior
	amount   int
	expected string
}

var scenarios = []scenario{
	{"plain", nil, nil, 100, "PENDING → CONFIRMED: the bank answered 200"},
	{"dropped", []fakebank.Behavior{fakebank.PerformThenDrop}, nil, 250,
		"PENDING → UNKNOWN → CONFIRMED: the bank moved the money and dropped the connection; the status check found the wire"},
	{"timeout", []fakebank.Behavior{fakebank.Timeout, fakebank.Succeed}, nil, 300,
		"PENDING → UNKNOWN → PENDING → CONFIRMED: no answer in time; the status check found nothing, so it was sent again"},
	{"busy", []fakebank.Behavior{fakebank.Unavailable, fakebank.Succeed}, nil, 120,
		"PENDING → CONFIRMED on the 2nd attempt: 503 with Retry-After means not applied, so a plain retry is safe"},
	{"rejected", []fakebank.Behavior{fakebank.Reject}, nil, 999,
		"PENDING → FAILED: 400 is a definite refusal"},
	{"double", []fakebank.Behavior{fakebank.PerformTwiceThenDrop}, nil, 75,
		"PENDING → UNKNOWN → CONFIRMED + a compensation: the bank applied it twice; the extra one is reversed"},
	{"mystery", []fakebank.Behavior{fakebank.PerformThenDrop},
		[]fakebank.StatusBehavior{fakebank.StatusInconclusive, fakebank.StatusInconclusive, fakebank.StatusInconclusive}, 500,
		"PENDING → UNKNOWN → STUCK: the bank cannot say; a person decides (in the console, or curl below)"},
}

// connectorName is the demo's HTTP connector.
const connectorName = "demo.bank.wire"

// tracked is an effect the demo follows.
type tracked struct {
	label   string
	id      string
	seen    int       // transitions printed
	updated time.Time // updated_at when its history was read
	state   string
	err     string
}

// pollInterval is how often the demo asks the API what changed while the effects settle: one list
// call per round, and a read of an effect's history only when the list shows it changed.
const pollInterval = 500 * time.Millisecond

// effectView is the part of GET /v1/effects/{id} the demo reads.
type effectView struct {
	ID             string    `json:"id"`
	State          string    `json:"state"`
	UpdatedAt      time.Time `json:"updated_at"`
	IdempotencyKey string    `json:"idempotency_key"`
	Attempts       int       `json:"attempts"`
	Error          string    `json:"error"`
	CompensatesID  string    `json:"compensates_id"`
	History        []struct {
		From   string `json:"from"`
		To     string `json:"to"`
		Actor  string `json:"actor"`
		Reason string `json:"reason"`
	} `json:"history"`
}

// serveBank serves a fake bank on addr (cli.ServeOn, as every server of Reckon's binaries) until
// stop, which releases the requests the bank holds and shuts its server down.
func serveBank(ctx context.Context, addr string) (bank *fakebank.Bank, stop func() error, err error) {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("fake bank: listen on %s: %w", addr, err)
	}
	bank = fakebank.NewHandler("http://" + listener.Addr().String())
	serveCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- cli.ServeOn(serveCtx, slog.New(slog.DiscardHandler), "bank", listener, bank, &cli.ServeOpts{Drain: bankDrain})
	}()
	return bank, func() error {
		bank.Close()
		cancel()
		return <-errc
	}, nil
}

// bankDrain bounds the fake bank's shutdown.
const bankDrain = 2 * time.Second

func demo(ctx context.Context, cfg *config, out io.Writer) error {
	say := func(format string, args ...any) { fmt.Fprintf(out, "demo: "+format+"\n", args...) }
	bank, stopBank, err := serveBank(ctx, cfg.bankAddr)
	if err != nil {
		return err
	}
	defer func() {
		if err := stopBank(); err != nil {
			say("fake bank: %v", err)
		}
	}()
	say("fake bank listening on %s (wire protocol under %s/)", bank.URL(), fakebank.ReckonPrefix)
	api := &apiClient{base: cfg.server, token: cfg.token, http: &http.Client{Timeout: 10 * time.Second}}
	system := &apiClient{base: cfg.server, token: cfg.systemToken, http: api.http}

	syncsBefore, err := reactorSyncs(ctx, cfg.reactor)
	if err != nil {
		return fmt.Errorf("reactor metrics at %s: %w", cfg.reactor, err)
	}
	base := bank.URL() + fakebank.ReckonPrefix
	connector := map[string]any{
		"name": connectorName, "tags": []string{"write", "external", "network"},
		"dispatch_url": base + "/wires", "status_url": base + "/wires/status", "compensate_url": base + "/wires/compensate",
		"timeout_ms": 2000, "max_attempts": 5, "status_check_limit": 3, "backoff_initial_ms": 300, "backoff_max_ms": 2000,
	}
	if _, err := system.do(ctx, http.MethodPost, "/v1/connectors", "", connector, nil); err != nil {
		return fmt.Errorf("register the connector: %w", err)
	}
	say("registered HTTP connector %s (POST /v1/connectors, with the system token); waiting for the reactor to load it", connectorName)
	if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
		syncs, err := reactorSyncs(ctx, cfg.reactor)
		return syncs >= syncsBefore+2, err // a whole sync ran after the POST
	}); err != nil {
		return fmt.Errorf("the reactor did not reload its connectors: %w", err)
	}

	runID := strconv.FormatInt(time.Now().Unix(), 36)
	var effects []*tracked
	for _, s := range scenarios {
		key := "demo-" + runID + "-" + s.name
		bank.Script(key, s.script...)
		bank.ScriptStatus(key, s.status...)
		var created effectView
		body := map[string]any{"connector": connectorName, "idempotency_key": key, "run_id": "demo-" + runID,
			"args": map[string]any{"account": "acc-" + s.name, "amount": s.amount}}
		if _, err := api.do(ctx, http.MethodPost, "/v1/effects", key, body, &created); err != nil {
			return fmt.Errorf("enqueue %s: %w", s.name, err)
		}
		say("enqueued %-8s %s  expect %s", s.name, created.ID, s.expected)
		effects = append(effects, &tracked{label: s.name, id: created.ID})
	}

	deadline := time.Now().Add(cfg.timeout)
	for {
		var settled bool
		effects, settled, err = poll(ctx, api, effects, say)
		if err != nil {
			return err
		}
		if settled {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the demo effects did not settle within %v", cfg.timeout)
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return err
		}
	}
	summary(out, cfg, effects, bank)
	if cfg.once {
		return nil
	}
	say("following the demo effects until Ctrl-C (resolve the STUCK one in the console, or try the curl above)")
	for {
		if err := sleep(ctx, time.Second); err != nil {
			say("stopped")
			return nil
		}
		if effects, _, err = poll(ctx, api, effects, say); err != nil && ctx.Err() == nil {
			say("could not read the demo effects: %v", err)
		}
	}
}

// poll lists the connector's effects once, adds the compensations of effects it follows, prints
// the transitions of those that changed, and reports whether they have all settled and the
// compensation the tour expects has appeared.
func poll(ctx context.Context, api *apiClient, effects []*tracked, say func(string, ...any)) ([]*tracked, bool, error) {
	var page struct {
		Effects []effectView `json:"effects"`
	}
	if _, err := api.do(ctx, http.MethodGet, "/v1/effects?connector="+connectorName+"&limit=1000", "", nil, &page); err != nil {
		return effects, false, fmt.Errorf("list effects: %w", err)
	}
	byID := make(map[string]*tracked, len(effects))
	compensations := 0
	for _, e := range effects {
		byID[e.id] = e
		if strings.HasSuffix(e.label, "/undo") {
			compensations++
		}
	}
	for _, view := range page.Effects {
		if compensated, ok := byID[view.CompensatesID]; ok && byID[view.ID] == nil {
			e := &tracked{label: compensated.label + "/undo", id: view.ID}
			effects = append(effects, e)
			byID[e.id] = e
			compensations++
		}
	}
	updated := make(map[string]time.Time, len(page.Effects))
	for _, view := range page.Effects {
		updated[view.ID] = view.UpdatedAt
	}
	settled := compensations > 0
	for _, e := range effects { // in the tour's order, not the list's (newest first)
		if at, ok := updated[e.id]; e.state == "" || (ok && !at.Equal(e.updated)) {
			if err := follow(ctx, api, e, say); err != nil {
				return effects, false, err
			}
		}
		settled = settled && isFinal(e.state)
	}
	return effects, settled, nil
}

func isFinal(state string) bool { return state == "CONFIRMED" || state == "FAILED" || state == "STUCK" }

// follow reads e and prints its transitions not printed yet.
func follow(ctx context.Context, api *apiClient, e *tracked, say func(string, ...any)) error {
	var view effectView
	if _, err := api.do(ctx, http.MethodGet, "/v1/effects/"+e.id, "", nil, &view); err != nil {
		return fmt.Errorf("read %s: %w", e.label, err)
	}
	for _, tr := range view.History[min(e.seen, len(view.History)):] {
		if tr.From == "" {
			continue // the insert, already announced
		}
		if tr.From == tr.To {
			say("%-12s %s (%s)", e.label, tr.To, tr.Reason)
			continue
		}
		say("%-12s %s → %s  (%s)", e.label, tr.From, tr.To, tr.Reason)
	}
	e.seen = len(view.History)
	e.state, e.err, e.updated = view.State, view.Error, view.UpdatedAt
	return nil
}

func summary(out io.Writer, cfg *config, effects []*tracked, bank *fakebank.Bank) {
	fmt.Fprintln(out, "\ndemo: every demo effect has settled:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  EFFECT\tID\tSTATE\tERROR")
	var stuck []*tracked
	for _, e := range effects {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.label, e.id, e.state, shorten(e.err, 70))
		if e.state == "STUCK" {
			stuck = append(stuck, e)
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "\ndemo: what the bank actually did (its ledger):")
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, entry := range bank.Ledger() {
		what := "wire"
		if entry.Of != "" {
			what = "reversal of " + entry.Of
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", entry.WireID, entry.Key, entry.Amount, what)
	}
	_ = tw.Flush()
	for _, e := range stuck {
		fmt.Fprintf(out, "\ndemo: %s is STUCK: the bank dropped the connection and its status checks were inconclusive.\n"+
			"demo: the ledger above shows the wire happened, so confirm it (or say FAILED or PENDING to send it again)\n"+
			"demo: in the console, %s/console/effects/%s (its evidence and a Resolve form; sign in with the\n"+
			"demo: operator token make run printed), or with curl:\n\n"+
			"  curl -sS -X POST %s/v1/effects/%s/resolve \\\n    -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \\\n"+
			"    -d '{\"to\":\"CONFIRMED\",\"reason\":\"bank ledger shows the wire\",\"actor\":\"you\"}'\n\n"+
			"  curl -sS %s/v1/effects/%s -H 'Authorization: Bearer %s'   # the effect and its audit trail\n",
			e.label, cfg.server, e.id, cfg.server, e.id, cfg.token, cfg.server, e.id, cfg.token)
	}
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}

// apiClient calls the server's API with a token.
type apiClient struct {
	base, token string
	http        *http.Client
}

func (c *apiClient) do(ctx context.Context, method, path, idempotencyKey string, body, into any) (int, error) {
	var reader io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, reader)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw))
	}
	if into != nil {
		if err := json.Unmarshal(raw, into); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// reactorSyncs reads reckon_reactor_connector_syncs_total{result="ok"} from a reactor's metrics.
func reactorSyncs(ctx context.Context, base string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if value, ok := strings.CutPrefix(line, `reckon_reactor_connector_syncs_total{result="ok"} `); ok {
			return strconv.ParseFloat(value, 64)
		}
	}
	return 0, scanner.Err()
}

// waitFor polls check until it reports true, fails, or within passes.
func waitFor(ctx context.Context, within time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := check()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", within)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
