package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ssetest"
	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// eventWait bounds the wait for one event: readers wait for every transaction older than the
// event's to end, and other tests' transactions run on the same Postgres.
const eventWait = 20 * time.Second

// loggedEvents returns the events of reckon_event_log of tenant ("": every tenant's) in log order, as
// "id type".
func loggedEvents(t *testing.T, f *opsFixture, tenant string) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT xid::text || '-' || seq, type FROM reckon_event_log
		WHERE $1 = '' OR tenant_id = $1 ORDER BY xid, seq`, tenant)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, typ string
		require.NoError(t, rows.Scan(&id, &typ))
		out = append(out, id+" "+typ)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestEventsThroughBinary: effects enqueued over the API of the real server binary come out of
// GET /v1/events, read with a plain net/http client: a client that disconnects after some events
// and reconnects with Last-Event-ID gets the rest, those written while it was away included,
// exactly as reckon_events orders them — none lost, none twice, no other tenant's. The stream
// outlives the server's read and write timeouts, and SIGTERM ends it at once: the server exits 0
// without waiting for -shutdown-timeout.
func TestEventsThroughBinary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := proctest.Binary(t, "server")
	f := newOpsFixture(t)
	tokens := map[string]string{}
	for _, tenant := range []string{"acme", "globex"} {
		_, err := tenants.Create(ctx, f.pool, tenant, "")
		require.NoError(t, err)
		tokens[tenant], _, err = tenants.CreateToken(ctx, f.pool, tenant, &tenants.TokenOpts{Name: "ops"})
		require.NoError(t, err)
	}
	const drain = 8 * time.Second
	srv := proctest.Start(t, f.env, server, "-addr", "127.0.0.1:0", "-read-timeout", "1s", "-write-timeout", "1s",
		"-shutdown-timeout", drain.String())
	client := apiClient{t: t, base: "http://" + srv.Addr(t)}
	keys := 0
	enqueue := func(tenant string, n int) {
		for range n {
			keys++
			key := fmt.Sprintf("w-%d", keys)
			// With an Idempotency-Key, Go's transport sends the request again on a kept-alive
			// connection the server closed meanwhile (-read-timeout 1s, the sleep below), as a
			// client should: without one, that race answered EOF once in CI.
			r := client.do("POST", "/v1/effects", tokens[tenant], `{"connector":"bank.wire","idempotency_key":"`+key+`","args":{"amount":1}}`,
				"Idempotency-Key", "events-"+key)
			require.Equal(t, http.StatusCreated, r.status, r.raw)
		}
	}
	read := func(s *ssetest.Stream, n int) []string {
		var out []string
		for range n {
			ev, ok := s.Next(t, eventWait)
			require.True(t, ok, "event %d of %d did not come; got %v", len(out)+1, n, out)
			var data struct{ ID, Type, Tenant string }
			require.NoError(t, json.Unmarshal([]byte(ev.Data), &data), ev.Data)
			require.Equal(t, []string{ev.ID, ev.Type, "acme"}, []string{data.ID, data.Type, data.Tenant})
			out = append(out, ev.ID+" "+ev.Type)
		}
		return out
	}
	url := client.base + "/v1/events?pattern=tool.*&pattern=effect.*&after=0"

	enqueue("acme", 5)
	enqueue("globex", 2)
	s, resp, raw := ssetest.Open(t, url, tokens["acme"])
	require.NotNil(t, s, "%d %s", resp.StatusCode, raw)
	got := read(s, 3)
	s.Close()
	enqueue("acme", 3)
	enqueue("globex", 1)

	s, resp, raw = ssetest.Open(t, url, tokens["acme"], "Last-Event-ID", strings.Fields(got[2])[0])
	require.NotNil(t, s, "%d %s", resp.StatusCode, raw)
	got = append(got, read(s, 5)...)
	time.Sleep(2500 * time.Millisecond) // past -read-timeout and -write-timeout
	enqueue("acme", 1)
	got = append(got, read(s, 1)...)
	require.Equal(t, loggedEvents(t, f, "acme"), got)
	require.Len(t, got, 9)

	start := time.Now()
	srv.Signal(t, syscall.SIGTERM)
	require.True(t, s.Ended(drain), "SIGTERM ended the stream")
	require.Equal(t, 0, srv.Wait(t, drain+5*time.Second), srv.Stderr())
	require.Less(t, time.Since(start), drain/2, "the stream did not hold up the shutdown")
	require.False(t, srv.Logged("shutdown: cancelling the requests still running"), srv.Stderr())
}

// tailProcess is a running `server events tail`, its stdout read line by line.
type tailProcess struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	err   error
}

func startTail(t *testing.T, env []string, server string, args ...string) *tailProcess {
	t.Helper()
	cmd := exec.Command(server, append([]string{"events", "tail"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	p := &tailProcess{cmd: cmd, lines: make(chan string, 100), done: make(chan struct{})}
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			p.lines <- scanner.Text()
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("events tail stderr:\n%s", stderr.String())
		}
	})
	return p
}

// next returns the next line printed, or fails the test.
func (p *tailProcess) next(t *testing.T) string {
	t.Helper()
	select {
	case line := <-p.lines:
		return line
	case <-p.done:
		t.Fatalf("events tail exited: %v", p.err)
	case <-time.After(eventWait):
		t.Fatal("events tail printed nothing")
	}
	return ""
}

// stop sends sig and requires exit status 0.
func (p *tailProcess) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("events tail still running 10s after %v", sig)
	}
	require.NoError(t, p.err, "exit status 0 after %v", sig)
}

// TestEventsTailCLI drives `server events tail`: from the oldest event with -after 0, one JSON
// line per event of the -tenant asked (-o json), new events as they are written, another tenant's
// never; the table form with -pattern; SIGINT and SIGTERM end it with exit status 0; bad flags exit
// 2 naming the flag before the database is opened; a position retention dropped exits 1.
func TestEventsTailCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := proctest.Binary(t, "server")
	f := newOpsFixture(t)
	enqueue := func(tenant, key string) *effects.Effect {
		e, err := f.effects.Enqueue(ctx, effects.Spec{TenantID: tenant, Connector: "bank.wire", IdempotencyKey: key, Args: json.RawMessage(`{}`)}, nil)
		require.NoError(t, err)
		return e
	}
	a1, g1, a2 := enqueue("acme", "w-1"), enqueue("globex", "w-1"), enqueue("acme", "w-2")
	tooMany := []string{"tail"}
	for range 33 {
		tooMany = append(tooMany, "-pattern", "turn.*")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tail", "-pattern", "Turn.*"}, `-pattern: pattern "Turn.*"`},
		{[]string{"tail", "-pattern", "turn.*", "-pattern", "turn"}, `-pattern: pattern "turn"`},
		{tooMany, "-pattern given 33 times"},
		{[]string{"tail", "-after", "x"}, "-after"},
		{[]string{"tail", "-after", "1-2-3"}, "-after"},
		{[]string{"tail", "-tenant", "not a tenant"}, "-tenant"},
		{[]string{"tail", "-tenant", "a\xffb"}, "-tenant"},
		{[]string{"tail", "-o", "yaml"}, "-o"},
		{[]string{"tail", "extra"}, `unexpected argument "extra"`},
		{[]string{"follow"}, "unknown events action"},
	} {
		// Nothing listens there: a command that got past its flags would exit 1.
		res := proctest.Run(t, []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1"}, server, append([]string{"events"}, tc.args...)...)
		require.Equal(t, 2, res.ExitCode, "%v: %s", tc.args, res.Stderr)
		require.Contains(t, res.Stderr, tc.want, "%v", tc.args)
	}

	tail := startTail(t, f.env, server, "-after", "0", "-tenant", "acme", "-o", "json")
	var seen []string
	for range 2 {
		var ev struct {
			ID, Type, Tenant string
			EffectID         string `json:"effect_id"`
		}
		line := tail.next(t)
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		require.Equal(t, "acme", ev.Tenant)
		require.Equal(t, "tool.authorized", ev.Type)
		seen = append(seen, ev.EffectID)
	}
	require.Equal(t, []string{a1.ID.String(), a2.ID.String()}, seen)
	enqueue("globex", "w-2")
	a3 := enqueue("acme", "w-3")
	line := tail.next(t)
	require.Contains(t, line, `"effect_id":"`+a3.ID.String()+`"`, "globex's effect is not acme's")
	tail.stop(t, syscall.SIGINT)

	tail = startTail(t, f.env, server, "-after", "0", "-pattern", "tool.*")
	for _, e := range []*effects.Effect{a1, g1, a2} {
		line := tail.next(t)
		require.Regexp(t, `^\S+Z  \d+-\d+  tool\.authorized  `+e.TenantID+`  effect=`+e.ID.String()+`  \{.*"connector": ?"bank.wire"`, line)
	}
	tail.stop(t, syscall.SIGTERM)

	logged := loggedEvents(t, f, "")
	first, last := strings.Fields(logged[0])[0], strings.Fields(logged[len(logged)-1])[0]
	xid, seq, _ := strings.Cut(last, "-")
	_, err := f.pool.Exec(ctx, `INSERT INTO reckon_events_dropped (xid, seq) VALUES ($1::text::xid8, $2::bigint)`, xid, seq)
	require.NoError(t, err)
	res := proctest.Run(t, f.env, server, "events", "tail", "-after", first)
	require.Equal(t, 1, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, "-after "+first+": older than events retention kept")
}
