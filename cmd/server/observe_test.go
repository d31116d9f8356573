package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/pgtest"
	"github.com/reckonhq/reckon/internal/proctest"
	"github.com/reckonhq/reckon/internal/reckontest"
)

// TestRequestIDsAndMetrics drives the server binary: every answer (API, console, health) carries
// an X-Request-Id, the client's when well-formed, and an API error body names it; the request
// metrics count by route pattern (an unknown path is "unmatched"); and `promtool check metrics`
// finds nothing wrong in a scrape (skipped without promtool, except under CI=true).
func TestRequestIDsAndMetrics(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	pool := pgtest.NewDB(t)
	srv := proctest.Start(t, []string{"DATABASE_URL=" + pool.Config().ConnString()}, server, "-addr", "127.0.0.1:0")
	base := "http://" + srv.Addr(t)

	resp, _ := reckontest.Do(t, "GET", base+"/healthz", "", "", "X-Request-Id", "client-7")
	require.Equal(t, "client-7", resp.Header.Get("X-Request-Id"))
	resp, _ = reckontest.Do(t, "GET", base+"/console/sign-in", "", "", "X-Request-Id", "caf\xc3\xa9")
	_, err := uuid.Parse(resp.Header.Get("X-Request-Id"))
	require.NoError(t, err, "a non-ASCII id is replaced by a generated one")

	for _, path := range []string{"/v1/effects/6b0f0a59-0000-4000-8000-000000000000", "/v1/nowhere", "/v1/effects/6b0f0a59-0000-4000-8000-000000000001"} {
		resp, raw := reckontest.Do(t, "GET", base+path, "", "")
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
	reckontest.Do(t, "GET", base+"/no/such/page", "", "")

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
