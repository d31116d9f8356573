package main

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestServerConfirmationConfig: the server's -require-irreversible-confirmation, -confirmation-ttl
// and -four-eyes (or their RECKON_* variables) hold the effects its API enqueues. Out-of-range
// values are refused with exit status 2, naming the flag; without them an irreversible effect is
// not held.
func TestServerConfirmationConfig(t *testing.T) {
	t.Parallel()
	server, _, env := serverOnDB(t)
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{args: []string{"-confirmation-ttl", "999ms"}, want: "-confirmation-ttl must be 0 (no expiry) or between 1s and 720h0m0s, got 999ms"},
		{env: []string{"RECKON_CONFIRMATION_TTL=800h"}, want: "-confirmation-ttl must be 0 (no expiry) or between 1s and 720h0m0s, got 800h0m0s"},
		{env: []string{"RECKON_FOUR_EYES=2"}, want: `RECKON_FOUR_EYES="2": not true or false`},
		{env: []string{"RECKON_REQUIRE_IRREVERSIBLE_CONFIRMATION=on"}, want: `RECKON_REQUIRE_IRREVERSIBLE_CONFIRMATION="on"`},
	} {
		res := proctest.Run(t, append(env, tc.env...), server, tc.args...)
		require.Equal(t, 2, res.ExitCode, "%v %v: %s", tc.env, tc.args, res.Stderr)
		require.Contains(t, res.Stderr, tc.want)
	}

	token := tenantToken(t, env, server, "acme", "-name", "ops")
	system := systemToken(t, env, server)
	bank := fakebank.New(t)
	base := bank.URL() + fakebank.ReckonPrefix
	// No idempotent tag, no compensation: irreversible (effects.PolicyOf).
	connector := `{"name":"bank.wire","tags":["write","external","network"],"dispatch_url":"` + base + `/wires","status_url":"` + base + `/wires/status"}`
	enqueue := func(api apiClient, key string) apiAnswer {
		t.Helper()
		r := api.do("POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"`+key+`","args":{"account":"a-1","amount":10}}`)
		require.Equal(t, http.StatusCreated, r.status, r.raw)
		return r
	}

	plain := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	api := apiClient{t: t, base: "http://" + plain.Addr(t)}
	r := api.do("POST", "/v1/connectors", system, connector)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	require.Nil(t, enqueue(api, "free").body["confirmation"], "not held by default")
	plain.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, plain.Wait(t, 15*time.Second), plain.Stderr())

	srv := proctest.Start(t, append(env, "RECKON_REQUIRE_IRREVERSIBLE_CONFIRMATION=true", "RECKON_CONFIRMATION_TTL=90m"), server,
		"-addr", "127.0.0.1:0", "-four-eyes")
	api = apiClient{t: t, base: "http://" + srv.Addr(t)}
	held := enqueue(api, "held")
	confirmation, ok := held.body["confirmation"].(map[string]any)
	require.True(t, ok, held.raw)
	require.Equal(t, "AWAITING", confirmation["state"])
	require.Equal(t, "Confirm bank.wire?", confirmation["prompt"])
	expires, err := time.Parse(time.RFC3339Nano, confirmation["expires_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(90*time.Minute), expires, time.Minute)
	id := held.body["id"].(string)
	r = api.do("POST", "/v1/effects/"+id+"/confirm", token, `{"reason":"mine"}`)
	require.Equal(t, http.StatusConflict, r.status, "four eyes: not by the actor that enqueued it: %s", r.raw)
	require.Equal(t, "four_eyes", r.code())
	r = api.do("POST", "/v1/effects/"+id+"/confirm", token, `{"reason":"checked","actor":"alice"}`)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	require.Equal(t, "CONFIRMED", r.body["confirmation"].(map[string]any)["state"])
	srv.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.Wait(t, 15*time.Second), srv.Stderr())
}
