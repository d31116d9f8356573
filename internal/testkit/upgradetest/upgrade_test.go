package upgradetest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// defaultFrom are the commits the upgrade starts from (RECKON_UPGRADE_FROM overrides them, space
// separated). Two, because each costs a build (about a minute and a half on CI's two cores) and a
// run (about a minute):
//   - 97ac916 (Nov 22), at migration 0009: the last commit before reactor registration (0010), so
//     its reactors never register and the jobs they leave running test the takeover of
//     unregistered clients' jobs; the upgrade applies every migration since, among them 0016 (the
//     histories partitioned) and 0027 (the event triggers) under its traffic;
//   - 58315fb (Nov 24), at migration 0022: the last commit before the claims (0023) and the
//     migrations after it that touch the hot tables (0023, 0024 and 0027), with registered reactors.
//
// These are the two versions from which issue 34 saw 0027 deadlock with the running binaries.
const defaultFrom = "97ac916 58315fb"

// Timeline of one upgrade (each phase under load; the old reactor is SIGKILLed every killEvery).
const (
	killEvery    = 3 * time.Second
	warmUp       = 9 * time.Second // old binaries, old schema
	oldOnNew     = 6 * time.Second // old binaries, new schema
	newLoad      = 6 * time.Second // new binaries
	loadWorkers  = 4
	loadPause    = 80 * time.Millisecond // per worker, between requests
	settleWithin = 2 * time.Minute
	// callTimeout and inFlightMargin bound how long a job left running by a SIGKILLed reactor
	// waits for its takeover (unregistered clients: call timeout + margin).
	callTimeout    = 5 * time.Second
	inFlightMargin = 5 * time.Second
)

// TestOnlineUpgrade upgrades a database under load from each commit of defaultFrom to this one.
// It runs only with RECKON_UPGRADE_TEST=1 (make test-upgrade). When it cannot run — no git
// history, no Postgres, a build that fails — it skips, except under CI=true, where it fails.
func TestOnlineUpgrade(t *testing.T) {
	if os.Getenv("RECKON_UPGRADE_TEST") != "1" {
		t.Skip("the online upgrade test runs with RECKON_UPGRADE_TEST=1 (make test-upgrade)")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		unable(t, "no git repository (the old commits are built from its history): %v", err)
	}
	from := strings.Fields(os.Getenv("RECKON_UPGRADE_FROM"))
	if len(from) == 0 {
		from = strings.Fields(defaultFrom)
	}
	admin := adminURL()
	conn, err := pgx.Connect(context.Background(), admin)
	if err != nil {
		unable(t, "no Postgres at %s: %v", redact(admin), err)
	}
	_ = conn.Close(context.Background())
	newServer, newReactor := proctest.Binary(t, "server"), proctest.Binary(t, "reactor")
	for _, commit := range from {
		t.Run("from "+commit, func(t *testing.T) {
			oldBin := buildOld(t, strings.TrimSpace(string(root)), commit)
			upgrade(t, admin, commit, filepath.Join(oldBin, "server"), filepath.Join(oldBin, "reactor"), newServer, newReactor)
		})
	}
}

// unable skips the test, or under CI=true fails it: CI must run it.
func unable(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("online upgrade test cannot run (CI=true): "+format, args...)
	}
	t.Skipf("online upgrade test cannot run: "+format, args...)
}

// adminURL is the Postgres server the test creates its databases on: RECKON_UPGRADE_DATABASE_URL,
// else TEST_DATABASE_URL, else the local Postgres.
func adminURL() string {
	for _, name := range []string{"RECKON_UPGRADE_DATABASE_URL", "TEST_DATABASE_URL"} {
		if v := os.Getenv(name); v != "" {
			return v
		}
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// buildOld builds the server and reactor of commit into a directory kept between runs
// (RECKON_UPGRADE_CACHE, default under the user's cache directory), from `git archive`: the
// working tree is not touched. The module proxy supplies the old commit's dependencies.
func buildOld(t *testing.T, root, commit string) string {
	t.Helper()
	full, err := exec.Command("git", "-C", root, "rev-parse", "--verify", commit+"^{commit}").Output()
	if err != nil {
		unable(t, "commit %s is not in the history of %s (a shallow clone?): %v", commit, root, err)
	}
	hash := strings.TrimSpace(string(full))
	cache := os.Getenv("RECKON_UPGRADE_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cache = filepath.Join(base, "reckon-upgrade")
	}
	bin := filepath.Join(cache, hash)
	if _, err := os.Stat(filepath.Join(bin, "reactor")); err == nil {
		return bin
	}
	src, err := os.MkdirTemp("", "reckon-upgrade-src-")
	require.NoError(t, err)
	defer func() { _ = os.RemoveAll(src) }()
	start := time.Now()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, hash, src)
	if out, err := archive.CombinedOutput(); err != nil {
		unable(t, "git archive %s: %v\n%s", commit, err, out)
	}
	tmp := bin + ".tmp"
	_ = os.RemoveAll(tmp)
	build := exec.Command("go", "build", "-o", tmp+string(filepath.Separator), "./cmd/server", "./cmd/reactor")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		unable(t, "build the binaries of %s: %v\n%s", commit, err, out)
	}
	require.NoError(t, os.Rename(tmp, bin))
	fmt.Printf("upgrade test: built the server and reactor of %s in %s\n", commit, time.Since(start).Round(time.Second))
	return bin
}

// fleet is every process the upgrade started, for their logs.
type fleet struct {
	mu    sync.Mutex
	procs []*started
}

type started struct {
	name string // "old reactor", "new server", …
	p    *proctest.Process
}

func (f *fleet) add(name string, p *proctest.Process) *proctest.Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procs = append(f.procs, &started{name: name, p: p})
	return p
}

// count counts the log lines matching re of the processes whose name has prefix.
func (f *fleet) count(prefix string, re *regexp.Regexp) (n int, sample string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.procs {
		if !strings.HasPrefix(s.name, prefix) {
			continue
		}
		for _, line := range strings.Split(s.p.Stderr(), "\n") {
			if re.MatchString(line) {
				n++
				if sample == "" {
					sample = s.name + ": " + line
				}
			}
		}
	}
	return n, sample
}

// load enqueues wires through the current server's API, each with its Idempotency-Key, and counts
// the answers.
type load struct {
	server atomic.Pointer[string]
	token  string
	commit string
	http   *http.Client

	next     atomic.Int64
	requests atomic.Int64
	mu       sync.Mutex
	created  map[string]string // idempotency key → effect id
	order    []string          // keys in the order created
	status5x []string          // 5xx answers: status and body
	failures []string          // transport errors
	bodies   map[string][]byte // key → body sent
}

func (l *load) run(ctx context.Context, bank *fakebank.Bank) {
	for ctx.Err() == nil {
		n := l.next.Add(1)
		key := fmt.Sprintf("up-%s-%05d", l.commit, n)
		switch n % 13 {
		case 3:
			bank.Script(key, fakebank.Unavailable) // retried (503), then the default: performed
		case 7:
			bank.Script(key, fakebank.PerformThenDrop) // ambiguous: UNKNOWN, resolved by status check
		}
		body, _ := json.Marshal(map[string]any{"connector": "bank.wire", "idempotency_key": key,
			"args": map[string]any{"account": "acct-" + fmt.Sprint(n%17), "amount": 100 + n}})
		status, id, err := l.post(*l.server.Load(), key, body)
		l.requests.Add(1)
		l.mu.Lock()
		switch {
		case err != nil:
			l.failures = append(l.failures, fmt.Sprintf("%s: %v", key, err))
		case status >= 500:
			l.status5x = append(l.status5x, fmt.Sprintf("%s: %d %s", key, status, id))
		case status == http.StatusCreated || status == http.StatusOK:
			l.created[key] = id
			l.order = append(l.order, key)
			l.bodies[key] = body
		default:
			l.failures = append(l.failures, fmt.Sprintf("%s: unexpected %d %s", key, status, id))
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(loadPause):
		}
	}
}

// post sends one enqueue; it returns the status and the effect id (or, for an error, the body).
func (l *load) post(server, key string, body []byte) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, server+"/v1/effects", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := l.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &out) != nil || out.ID == "" {
		return resp.StatusCode, strings.TrimSpace(string(raw)), nil
	}
	return resp.StatusCode, out.ID, nil
}

// upgrade runs the whole upgrade from one old commit on a database of its own.
func upgrade(t *testing.T, admin, commit, oldServer, oldReactor, newServer, newReactor string) {
	ctx := context.Background()
	pool := createDatabase(t, admin, "reckon_upgrade_"+commit)
	dbURL := pool.Config().ConnString()
	bank := fakebank.NewServer()
	t.Cleanup(bank.Close)
	env := []string{"DATABASE_URL=" + dbURL, "RECKON_CONNECTOR_SYNC_INTERVAL=1s"}

	run := func(bin string, args ...string) string {
		t.Helper()
		res := proctest.Run(t, env, bin, args...)
		require.Zero(t, res.ExitCode, "%s %v:\n%s\n%s", filepath.Base(bin), args, res.Stdout, res.Stderr)
		return strings.TrimSpace(res.Stdout)
	}
	run(oldServer, "migrate", "up")
	run(oldServer, "tenants", "create", "up", "-name", "upgrade test")
	token := run(oldServer, "tokens", "create", "-tenant", "up", "-name", "upgrade load")
	base := bank.URL() + fakebank.ReckonPrefix
	run(oldServer, "connectors", "put", "-name", "bank.wire", "-tags", "write,external,network",
		"-dispatch-url", base+"/wires", "-status-url", base+"/wires/status", "-timeout", callTimeout.String(),
		"-max-attempts", "20", "-status-check-limit", "20", "-backoff-initial", "100ms", "-backoff-max", "1s")

	procs := &fleet{}
	startServer := func(name, bin string) (*proctest.Process, string) {
		p := procs.add(name, proctest.Start(t, env, bin, "-addr", "127.0.0.1:0"))
		addr := "http://" + p.Addr(t)
		waitReady(t, addr)
		return p, addr
	}
	reactorArgs := []string{"-addr", "127.0.0.1:0", "-in-flight-margin", inFlightMargin.String(), "-sweep-interval", "1s"}
	startReactor := func(name, bin string) *proctest.Process {
		p := procs.add(name, proctest.Start(t, env, bin, reactorArgs...))
		waitReady(t, "http://"+p.Addr(t))
		return p
	}
	var deadlocksBefore int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&deadlocksBefore))

	oldSrv, oldSrvURL := startServer("old server", oldServer)
	reactor := startReactor("old reactor", oldReactor)
	l := &load{token: token, commit: commit, http: &http.Client{Timeout: 30 * time.Second},
		created: map[string]string{}, bodies: map[string][]byte{}}
	l.server.Store(&oldSrvURL)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var loaders sync.WaitGroup
	for range loadWorkers {
		loaders.Add(1)
		go func() {
			defer loaders.Done()
			l.run(loadCtx, bank)
		}()
	}
	defer func() { stopLoad(); loaders.Wait() }()

	// kill SIGKILLs the reactor and starts another of the same binary.
	kills := 0
	lastKill := time.Now()
	killLoop := func(until func() bool) {
		for !until() {
			if time.Since(lastKill) >= killEvery {
				reactor.Signal(t, syscall.SIGKILL)
				reactor.Wait(t, 10*time.Second)
				kills++
				lastKill = time.Now()
				reactor = startReactor("old reactor", oldReactor)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	after := func(d time.Duration) func() bool {
		end := time.Now().Add(d)
		return func() bool { return time.Now().After(end) }
	}

	// 1. The old version under load.
	killLoop(after(warmUp))
	before := snapshot(t, pool)

	// 2. The new `server migrate up`, still under load.
	type migrateResult struct {
		out      string
		err      error
		duration time.Duration
	}
	migrated := make(chan migrateResult, 1)
	go func() {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(mctx, newServer, "migrate", "up")
		cmd.Env = append(os.Environ(), env...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		migrated <- migrateResult{out: string(out), err: err, duration: time.Since(start)}
	}()
	var migration migrateResult
	killLoop(func() bool {
		select {
		case migration = <-migrated:
			return true
		default:
			return false
		}
	})
	require.NoError(t, migration.err, "new `server migrate up` under load:\n%s", migration.out)

	// 3. The old binaries on the new schema.
	killLoop(after(oldOnNew))

	// 4. Roll the reactors, then the servers (docs/operations.md, "Upgrades").
	startReactor("new reactor", newReactor)
	reactor.Signal(t, syscall.SIGTERM)
	require.Zero(t, reactor.Wait(t, time.Minute), "the old reactor stops cleanly")
	_, newSrvURL := startServer("new server", newServer)
	l.server.Store(&newSrvURL)
	oldSrv.Signal(t, syscall.SIGTERM)
	require.Zero(t, oldSrv.Wait(t, time.Minute), "the old server stops cleanly")
	time.Sleep(newLoad)
	stopLoad()
	loaders.Wait()

	// Keys enqueued through the old server replay on the new one: same effect.
	l.mu.Lock()
	replayKeys := append([]string(nil), l.order[:min(20, len(l.order))]...)
	l.mu.Unlock()
	for _, key := range replayKeys {
		status, id, err := l.post(newSrvURL, key, l.bodies[key])
		require.NoError(t, err)
		require.Less(t, status, 300, "replay of %s: %d %s", key, status, id)
		require.Equal(t, l.created[key], id, "replay of %s", key)
	}

	// Everything settles, every wire performed exactly once, and no job is left running.
	var pending, running int
	deadline := time.Now().Add(settleWithin)
	for {
		require.NoError(t, pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM reckon_effects WHERE state <> 'CONFIRMED'),
			(SELECT count(*) FROM river_job WHERE state = 'running')`).Scan(&pending, &running))
		if (pending == 0 && running == 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var deadlocksAfter int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&deadlocksAfter))

	migrationRetries := strings.Count(migration.out, "migration lost a lock to the running code")
	writeRetries, _ := procs.count("new", regexp.MustCompile(`transaction aborted by Postgres; running it again`))
	oldDeadlocks, deadlockSample := procs.count("old", regexp.MustCompile(`deadlock detected|40P01`))
	lostWrites, lostSample := procs.count("old reactor", regexp.MustCompile(`write \d+ outcomes`))
	takeovers, _ := procs.count("", regexp.MustCompile(`took over the running jobs of a dead reactor`))
	var unknowns, unregistered int
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM reckon_effect_transitions WHERE to_state = 'UNKNOWN'),
		(SELECT count(*) FROM river_job WHERE errors::text LIKE '%is not a registered reactor%')`).Scan(&unknowns, &unregistered))
	l.mu.Lock()
	created, requests := len(l.created), l.requests.Load()
	status5x, failures := l.status5x, l.failures
	l.mu.Unlock()
	fmt.Printf("upgrade test from %s: migration under load %s (%d migration retries on lock timeout or deadlock); "+
		"%d API requests, %d effects, %d 5xx, %d transport errors; %d reactor SIGKILLs; "+
		"writes retried by the new binaries %d; deadlocks seen by Postgres %d, in the old binaries' logs %d; "+
		"UNKNOWN transitions %d (SIGKILLs and dropped bank connections); takeovers logged %d; jobs of unregistered reactors handed back %d\n",
		commit, migration.duration.Round(time.Millisecond), migrationRetries, requests, created, len(status5x), len(failures),
		kills, writeRetries, deadlocksAfter-deadlocksBefore, oldDeadlocks, unknowns, takeovers, unregistered)

	require.NotContains(t, migration.out, "deadlock detected")
	require.Empty(t, status5x, "no request is answered 5xx")
	require.Empty(t, failures, "every request is answered")
	require.Zero(t, oldDeadlocks, "no deadlock reaches the old binaries: %s", deadlockSample)
	require.Zero(t, lostWrites, "no old reactor loses an outcome write: %s", lostSample)
	require.Greater(t, created, 100, "the load ran")
	require.Zero(t, pending, "every effect CONFIRMED")
	require.Zero(t, running, "no River job left running")
	for key := range l.created {
		require.Equal(t, 1, bank.Count(key), "wire %s performed exactly once", key)
	}
	upgraded := snapshot(t, pool)
	for table, rows := range before.rows {
		for id, row := range rows {
			require.Equal(t, row, upgraded.rowsOf(table, id), "%s %s changed by the upgrade", table, id)
		}
	}
	require.NotEmpty(t, before.rows["reckon_effects"], "effects settled before the upgrade")
}

// state is the settled effects and every transition, as their columns at snapshot time read.
type state struct{ rows map[string]map[string]string }

func (s state) rowsOf(table, id string) string { return s.rows[table][id] }

// snapshot reads the settled effects and the transitions, each row as the text of the columns it
// had before the upgrade (the new schema adds columns; the old ones must keep their values).
func snapshot(t *testing.T, pool *pgxpool.Pool) state {
	t.Helper()
	ctx := context.Background()
	s := state{rows: map[string]map[string]string{}}
	for table, where := range map[string]string{
		"reckon_effects":            `state IN ('CONFIRMED', 'FAILED', 'STUCK')`,
		"reckon_effect_transitions": `true`,
	} {
		columns := []string{"id", "tenant_id", "state", "args", "result", "error", "attempts", "idempotency_key", "connector", "created_at"}
		if table == "reckon_effect_transitions" {
			columns = []string{"id", "effect_id", "tenant_id", "from_state", "to_state", "actor", "reason", "attempt", "at", "detail"}
		}
		rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT id::text, row(%s)::text FROM %s WHERE %s`,
			strings.Join(columns, ", "), table, where))
		require.NoError(t, err)
		s.rows[table] = map[string]string{}
		var id, text string
		_, err = pgx.ForEachRow(rows, []any{&id, &text}, func() error {
			s.rows[table][id] = text
			return nil
		})
		require.NoError(t, err)
	}
	return s
}

// createDatabase creates a database of its own on admin's server, dropped when the test ends, and
// returns a pool on it.
func createDatabase(t *testing.T, admin, prefix string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	require.NoError(t, err)
	u, err := url.Parse(admin)
	require.NoError(t, err)
	u.Path = "/" + name
	pool, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(func() {
		pool.Close()
		conn, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			return
		}
		defer func() { _ = conn.Close(context.Background()) }()
		_, _ = conn.Exec(context.Background(), `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
	})
	return pool
}

// waitReady waits for base's /readyz to answer 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz not ready within 30s (last: %v)", base, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
