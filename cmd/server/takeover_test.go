package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// Through the binaries and the HTTP API only: six sessions get bursts of messages while one of
// two reactors is SIGKILLed (and replaced) every 4 s, often in the middle of a turn. Within
// seconds of the last kill every message is in a COMPLETE turn, no session is left with an
// unfinished turn, the turn handler never saw two turns of one session at once, and no River job
// is left running.
func TestSessionsSurviveReactorKills(t *testing.T) {
	t.Parallel()
	server, pool, env := serverOnDB(t)
	reactorBin := proctest.Binary(t, "reactor")
	token := tenantToken(t, env, server, "acme")
	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	api := apiClient{t: t, base: "http://" + srv.Addr(t)}

	// The turn handler takes 300ms per turn and checks that no two turns of a session overlap.
	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
		overlaps []string
		handled  int
	)
	handler := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			SessionKey string `json:"session_key"`
			TurnID     string `json:"turn_id"`
		}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		inFlight[req.SessionKey]++
		if inFlight[req.SessionKey] > 1 {
			overlaps = append(overlaps, req.SessionKey+" turn "+req.TurnID)
		}
		mu.Unlock()
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done(): // the reactor died
		}
		mu.Lock()
		inFlight[req.SessionKey]--
		handled++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"effects":[]}`)
	}))
	t.Cleanup(handler.Close)

	startReactor := func() *proctest.Process {
		p := proctest.Start(t, env, reactorBin, "-addr", "127.0.0.1:0", "-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms",
			"-in-flight-margin", "1m", "-turn-handler-url", handler.URL+"/turns", "-turn-handler-timeout", "30s")
		p.Addr(t)
		return p
	}
	reactors := []*proctest.Process{startReactor(), startReactor()}

	sessions := make([]string, 6)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("acme:bot:user-%d:web", i)
	}
	// Four rounds, a kill every 4 s (the takeover takes about as long): a turn can lose at most
	// four attempts to kills, so its fifth and last (turns.Config.MaxAttempts) always survives.
	const rounds = 4
	posted := 0
	var lastKill time.Time
	for round := range rounds {
		roundStart := time.Now()
		for burst := range 2 {
			for _, session := range sessions {
				r := api.do("POST", "/v1/sessions/"+url.PathEscape(session)+"/messages", token,
					fmt.Sprintf(`{"message_id":"r%d-%d","content":{"text":"hello"}}`, round, burst))
				require.Equal(t, http.StatusAccepted, r.status, r.raw)
				posted++
			}
			time.Sleep(30 * time.Millisecond)
		}
		time.Sleep(900 * time.Millisecond) // windows close; turns are being handled
		victim := round % 2
		reactors[victim].Signal(t, syscall.SIGKILL)
		reactors[victim].Wait(t, 10*time.Second)
		lastKill = time.Now()
		reactors[victim] = startReactor()
		time.Sleep(time.Until(roundStart.Add(4 * time.Second)))
	}

	count := func(sql string, args ...any) int { return testkit.Count(t, pool, sql, args...) }
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM reckon_messages m JOIN reckon_turns t ON t.id = m.turn_id WHERE t.status = 'COMPLETE'`) == posted
	}, 20*time.Second, 50*time.Millisecond, "every message in a COMPLETE turn")
	t.Logf("%d messages in COMPLETE turns %v after the last kill; %d turns handled; %d reactors taken over, %d jobs",
		posted, time.Since(lastKill).Round(time.Millisecond), handled,
		count(`SELECT count(*) FROM reckon_reactors WHERE dead_at IS NOT NULL`), count(`SELECT coalesce(sum(jobs_taken_over), 0) FROM reckon_reactors`))
	require.Equal(t, 0, count(`SELECT count(*) FROM reckon_turns WHERE status IN ('ACCUMULATING', 'PROCESSING', 'COMMITTING')`))
	testkit.RequireNoRunningJobs(t, pool)
	mu.Lock()
	require.Empty(t, overlaps, "two turns of a session at once")
	mu.Unlock()
}
