package fakejobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func call(t *testing.T, u, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewBufferString(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var reply map[string]any
	require.NoError(t, json.Unmarshal(raw, &reply), string(raw))
	return resp.StatusCode, reply
}

func TestJobLifecycle(t *testing.T) {
	u := New(t)
	var got []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		got = append(got, body)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hook.Close)

	job := `{"correlation_id":"r:1","callback_url":"` + hook.URL + `/cb","args":{"n":1}}`
	status, reply := call(t, u.URL()+"/jobs", "k1", job)
	require.Equal(t, http.StatusAccepted, status)
	require.Equal(t, "r:1", reply["correlation_id"])
	require.Equal(t, "r:1", <-u.Accepted())
	status, again := call(t, u.URL()+"/jobs", "k1", job)
	require.Equal(t, http.StatusAccepted, status)
	require.Equal(t, reply["job_id"], again["job_id"], "the same key is the same job")
	require.Equal(t, 2, u.Dispatches())

	_, st := call(t, u.URL()+"/jobs/status", "", `{"correlation_id":"r:1"}`)
	require.Equal(t, "running", st["status"])
	code, err := u.Finish(context.Background(), "r:1", json.RawMessage(`{"ok":true}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []map[string]any{{"result": map[string]any{"ok": true}}}, got)
	_, st = call(t, u.URL()+"/jobs/status", "", `{"correlation_id":"r:1"}`)
	require.Equal(t, "done", st["status"])
	status, _ = call(t, u.URL()+"/jobs/cancel", "", `{"correlation_id":"r:1"}`)
	require.Equal(t, http.StatusConflict, status, "a done job cannot be cancelled")

	call(t, u.URL()+"/jobs", "k2", `{"correlation_id":"r:2","callback_url":"`+hook.URL+`/cb"}`)
	u.SetCancellable(false)
	status, _ = call(t, u.URL()+"/jobs/cancel", "", `{"correlation_id":"r:2"}`)
	require.Equal(t, http.StatusConflict, status)
	u.SetCancellable(true)
	status, _ = call(t, u.URL()+"/jobs/cancel", "", `{"correlation_id":"r:2"}`)
	require.Equal(t, http.StatusOK, status)
	j, ok := u.Job("r:2")
	require.True(t, ok)
	require.Equal(t, "cancelled", j.State)

	u.Forget("r:2")
	_, st = call(t, u.URL()+"/jobs/status", "", `{"correlation_id":"r:2"}`)
	require.Equal(t, "absent", st["status"])

	status, _ = call(t, u.URL()+"/jobs", "", `{"correlation_id":"r:3","callback_url":"x"}`)
	require.Equal(t, http.StatusBadRequest, status, "no idempotency key")
	status, _ = call(t, u.URL()+"/jobs", "k3", `{not json`)
	require.Equal(t, http.StatusBadRequest, status)
	_, err = u.Fail(context.Background(), "nope", "x")
	require.Error(t, err)
}

// TestSign: Sign is the recipe of docs/async.md, checked against what its openssl command prints
// for the same secret, time and body.
func TestSign(t *testing.T) {
	// printf '%s.%s' 1795000000 '{"result":{"pages":12}}' | openssl dgst -sha256 -hmac abc -r
	got := Sign("abc", time.Unix(1795000000, 0), []byte(`{"result":{"pages":12}}`))
	require.Equal(t, "t=1795000000,v1=216c8c7d057901426e7b282e407cedc0a7faa8b05e52ae1802a3848006399391", got)
}

// TestSignedCallback: a job dispatched with Reckon-Effect-Id and Reckon-Callback-Secret calls back
// signed with that secret; a job whose dispatch names no callback_url (an HTTP connector's) calls
// back under CallbackTo's URL.
func TestSignedCallback(t *testing.T) {
	u := New(t)
	type delivery struct {
		path, effectID, signature string
		body                      []byte
	}
	got := make(chan delivery, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- delivery{r.URL.Path, r.Header.Get("Reckon-Effect-Id"), r.Header.Get("Reckon-Signature"), body}
	}))
	t.Cleanup(hook.Close)
	u.CallbackTo(hook.URL + "/v1/callbacks")

	req, err := http.NewRequest(http.MethodPost, u.URL()+"/jobs", bytes.NewBufferString(`{"correlation_id":"r:1","args":{}}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set("Reckon-Effect-Id", "e-1")
	req.Header.Set("Reckon-Callback-Secret", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	job, ok := u.Job("r:1")
	require.True(t, ok)
	require.Equal(t, "e-1", job.EffectID)
	require.Equal(t, "s3cret", job.CallbackSecret)

	before := time.Now()
	_, err = u.Finish(context.Background(), "r:1", json.RawMessage(`{"ok":true}`))
	require.NoError(t, err)
	d := <-got
	require.Equal(t, "/v1/callbacks/r:1", d.path)
	require.Equal(t, "e-1", d.effectID)
	var at int64
	_, err = fmt.Sscanf(d.signature, "t=%d,", &at)
	require.NoError(t, err)
	require.InDelta(t, before.Unix(), at, 2)
	require.Equal(t, Sign("s3cret", time.Unix(at, 0), d.body), d.signature)
}
