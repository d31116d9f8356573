package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestRequestIDsAndMetrics drives the server binary: every answer (API, console, health) carries
// an X-Request-Id, the client's when well-formed, and an API error body names it; the request
// metrics count by route pattern (an unknown path is "unmatched"); and `promtool check metrics`
// finds nothing wrong in a scrape (skipped without promtool, except under CI=true).
func TestRequestIDsAndMetrics(t *testing.T) {
	t.Parallel()
	server, _, env := serverOnDB(t)
	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	base := "http://" + srv.Addr(t)

	resp, _ := testkit.Do(t, "GET", base+"/healthz", "", "", "X-Request-Id", "client-7")
	require.Equal(t, "client-7", resp.Header.Get("X-Request-Id"))
	resp, _ = testkit.Do(t, "GET", base+"/console/sign-in", "", "", "X-Request-Id", "caf\xc3\xa9")
	_, err := uuid.Parse(resp.Header.Get("X-Request-Id"))
	require.NoError(t, err, "a non-ASCII id is replaced by a generated one")

	for _, path := range []string{"/v1/effects/6b0f0a59-0000-4000-8000-000000000000", "/v1/nowhere", "/v1/effects/6b0f0a59-0000-4000-8000-000000000001"} {
		resp, raw := testkit.Do(t, "GET", base+path, "", "")
		id := resp.Header.Get("X-Request-Id")
		_, err := uuid.Parse(id)
		require.NoError(t, err, "generated when the client sends none")
		var body struct {
			Error struct {
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(raw, &body), string(raw))
		require.Equal(t, id, body.Error.RequestID, "the error body names the request: %s", raw)
	}
	testkit.Do(t, "GET", base+"/no/such/page", "", "")

	code, metrics := get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, metrics, `reckon_http_requests_total{code="200",method="get",route="/healthz"} 1`)
	require.Contains(t, metrics, `reckon_http_requests_total{code="401",method="get",route="/v1/effects/{id}"} 2`, "the pattern, not the path")
	require.Contains(t, metrics, `reckon_http_requests_total{code="404",method="get",route="unmatched"} 2`, "/v1/nowhere and /no/such/page")
	require.Contains(t, metrics, `reckon_http_request_duration_seconds_count{method="get",route="/v1/effects/{id}"} 2`)
	require.Contains(t, metrics, `reckon_http_request_duration_seconds_bucket{method="get",route="/healthz",le="60"} 1`)

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is missing (Debian's prometheus package): .ci/run installs it")
		}
		t.Skip("promtool is missing (Debian's prometheus package); CI=true fails instead")
	}
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = bytes.NewBufferString(metrics)
	out, err := check.CombinedOutput()
	require.NoError(t, err, "promtool check metrics: %s", out)
}

// TestInternalErrorNamesRequest: a request that fails for a reason of the server's own (here a
// table renamed under the running binary) answers 500 internal whose body names the request id
// that the response header carries, and the server's log line of that failure carries the same id
// — what an operator needs to go from a client's report to the log.
func TestInternalErrorNamesRequest(t *testing.T) {
	t.Parallel()
	server, pool, env := serverOnDB(t)
	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	token := tenantToken(t, env, server, "acme")
	base := "http://" + srv.Addr(t)

	_, err := pool.Exec(t.Context(), `ALTER TABLE reckon_runs RENAME TO reckon_runs_elsewhere`)
	require.NoError(t, err)
	resp, raw := testkit.Do(t, "GET", base+"/v1/runs/order-1", token, "", "X-Request-Id", "support-ticket-42")
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode, string(raw))
	require.Equal(t, "support-ticket-42", resp.Header.Get("X-Request-Id"))
	var body struct {
		Error struct {
			Code, Message string
			RequestID     string `json:"request_id"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(raw, &body), string(raw))
	require.Equal(t, "internal", body.Error.Code)
	require.Equal(t, "support-ticket-42", body.Error.RequestID)
	require.Contains(t, body.Error.Message, "support-ticket-42", "the message people read names it too")
	require.NotContains(t, string(raw), "reckon_runs", "the cause stays in the log")

	require.Eventually(t, func() bool {
		for _, line := range strings.Split(srv.Stderr(), "\n") {
			var record struct {
				Msg, Error string
				RequestID  string `json:"request_id"`
			}
			if json.Unmarshal([]byte(line), &record) == nil && record.Msg == "api request failed" &&
				record.RequestID == "support-ticket-42" && strings.Contains(record.Error, "reckon_runs") {
				return true
			}
		}
		return false
	}, 5*time.Second, 50*time.Millisecond, "the log line of the failure carries the request id and the cause:\n%s", srv.Stderr())
}
