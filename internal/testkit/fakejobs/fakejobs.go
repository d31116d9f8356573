// Package fakejobs is a fake asynchronous upstream for tests and demos of Reckon's pending events
// (docs/async.md): a real HTTP server on 127.0.0.1 that accepts jobs, answers 202 at once,
// and reports each job's outcome later by calling the callback URL it was given — when the test
// says so (Finish, Fail).
//
// Endpoints (JSON bodies):
//
//	POST /jobs          Idempotency-Key header; {"correlation_id","callback_url","args"}
//	                    -> 202 {"job_id":"j-1","correlation_id":"…"} (the same job again for a
//	                    repeated key); 400 for a bad request. It also takes an HTTP connector's
//	                    dispatch (docs/connectors.md), which names no callback_url: the job then
//	                    calls back at CallbackTo's URL. The Reckon-Effect-Id and
//	                    Reckon-Callback-Secret headers are kept with the job.
//	POST /jobs/status   {"correlation_id"} -> {"status":"running"|"done"|"failed"|"cancelled"|"absent","result":…}
//	POST /jobs/cancel   {"correlation_id"} -> 200 {"status":"cancelled"} for a running job unless
//	                    cancelling is refused (SetCancellable); 409 otherwise
//
// A callback is POST {callback_url} with {"result":…} or {"error":"…"}, signed as Reckon's API
// expects when the job came with a callback secret (Reckon-Effect-Id and Reckon-Signature headers,
// docs/async.md), as a real upstream would: Sign implements the signature from the documentation,
// apart from the server's code that verifies it.
package fakejobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/internal/testkit/fakehttp"
)

// Job is one job the upstream accepted.
type Job struct {
	ID            string
	Key           string
	CorrelationID string
	CallbackURL   string
	Args          json.RawMessage
	// EffectID and CallbackSecret are what the dispatch's Reckon-Effect-Id and
	// Reckon-Callback-Secret headers said (empty without them). With a secret the job's callback
	// is signed.
	EffectID       string
	CallbackSecret string
	// State is running, done, failed or cancelled.
	State  string
	Result json.RawMessage
	Error  string
}

// Upstream is the fake. It is safe for concurrent use.
type Upstream struct {
	srv    *httptest.Server
	client *http.Client

	mu            sync.Mutex
	jobs          map[string]*Job // by correlation id
	byKey         map[string]*Job
	dispatches    int
	notCancelable bool
	early         map[string]json.RawMessage // key -> result to call back before answering 202
	accepted      chan string
	callbackTo    string // the callback URL prefix of jobs that name none (CallbackTo)
}

// New starts an upstream and closes it when the test ends.
func New(tb testing.TB) *Upstream {
	tb.Helper()
	u := &Upstream{
		client:   &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		jobs:     map[string]*Job{},
		byKey:    map[string]*Job{},
		early:    map[string]json.RawMessage{},
		accepted: make(chan string, 1000),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", u.handleJob)
	mux.HandleFunc("POST /jobs/status", u.handleStatus)
	mux.HandleFunc("POST /jobs/cancel", u.handleCancel)
	u.srv = httptest.NewServer(mux)
	tb.Cleanup(u.srv.Close)
	return u
}

// URL returns the base URL, e.g. http://127.0.0.1:port.
func (u *Upstream) URL() string { return u.srv.URL }

// Dispatches counts POST /jobs requests, repeated keys included.
func (u *Upstream) Dispatches() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.dispatches
}

// Accepted delivers the correlation id of every new job, once the upstream has answered 202.
func (u *Upstream) Accepted() <-chan string { return u.accepted }

// Job returns the job of a correlation id.
func (u *Upstream) Job(correlationID string) (Job, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	j, ok := u.jobs[correlationID]
	if !ok {
		return Job{}, false
	}
	return *j, true
}

// Forget drops the job of a correlation id, as if the upstream never had it: its status becomes
// absent.
func (u *Upstream) Forget(correlationID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if j, ok := u.jobs[correlationID]; ok {
		delete(u.jobs, correlationID)
		delete(u.byKey, j.Key)
	}
}

// SetCancellable says whether POST /jobs/cancel succeeds on running jobs (default true).
func (u *Upstream) SetCancellable(ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.notCancelable = !ok
}

// CallbackTo makes the jobs that name no callback_url — an HTTP connector's dispatches — call back
// at baseURL + "/" + their correlation id (path-escaped), e.g. an API's
// "http://127.0.0.1:port/v1/callbacks".
func (u *Upstream) CallbackTo(baseURL string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.callbackTo = baseURL
}

// FinishEarly makes the job of idempotency key call back with result before the upstream answers
// 202: a fast upstream whose callback overtakes its own acceptance.
func (u *Upstream) FinishEarly(key string, result json.RawMessage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.early[key] = result
}

// Finish marks the job done with result and calls back. It returns the callback's HTTP status.
func (u *Upstream) Finish(ctx context.Context, correlationID string, result json.RawMessage) (int, error) {
	return u.report(ctx, correlationID, "done", map[string]any{"result": result})
}

// Fail marks the job failed with errMsg and calls back. It returns the callback's HTTP status.
func (u *Upstream) Fail(ctx context.Context, correlationID, errMsg string) (int, error) {
	return u.report(ctx, correlationID, "failed", map[string]any{"error": errMsg})
}

func (u *Upstream) report(ctx context.Context, correlationID, state string, body map[string]any) (int, error) {
	u.mu.Lock()
	j, ok := u.jobs[correlationID]
	if !ok {
		u.mu.Unlock()
		return 0, fmt.Errorf("fakejobs: no job %q", correlationID)
	}
	j.State = state
	if r, ok := body["result"].(json.RawMessage); ok {
		j.Result = r
	}
	if e, ok := body["error"].(string); ok {
		j.Error = e
	}
	job := *j
	u.mu.Unlock()
	return u.callback(ctx, job, body)
}

// callback POSTs body to the job's callback URL, signed when the job has a callback secret.
func (u *Upstream) callback(ctx context.Context, j Job, body map[string]any) (int, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.CallbackURL, bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if j.CallbackSecret != "" {
		req.Header.Set(httpconn.HeaderEffectID, j.EffectID)
		req.Header.Set(httpconn.HeaderSignature, Sign(j.CallbackSecret, time.Now(), raw))
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func (u *Upstream) handleJob(w http.ResponseWriter, r *http.Request) {
	var req struct {
		CorrelationID string          `json:"correlation_id"`
		CallbackURL   string          `json:"callback_url"`
		Args          json.RawMessage `json:"args"`
	}
	key := r.Header.Get("Idempotency-Key")
	u.mu.Lock()
	callbackTo := u.callbackTo
	u.mu.Unlock()
	err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
	if req.CallbackURL == "" && callbackTo != "" {
		req.CallbackURL = callbackTo + "/" + url.PathEscape(req.CorrelationID)
	}
	if err != nil || key == "" || req.CorrelationID == "" || req.CallbackURL == "" {
		fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "need Idempotency-Key, correlation_id and callback_url"})
		return
	}
	u.mu.Lock()
	u.dispatches++
	j, repeated := u.byKey[key]
	if !repeated {
		j = &Job{ID: fmt.Sprintf("j-%d", len(u.byKey)+1), Key: key, CorrelationID: req.CorrelationID,
			CallbackURL: req.CallbackURL, Args: req.Args, State: "running",
			EffectID: r.Header.Get(httpconn.HeaderEffectID), CallbackSecret: r.Header.Get(httpconn.HeaderCallbackSecret)}
		u.byKey[key] = j
		u.jobs[req.CorrelationID] = j
	}
	early, finishEarly := u.early[key]
	delete(u.early, key)
	reply := map[string]string{"job_id": j.ID, "correlation_id": j.CorrelationID}
	u.mu.Unlock()
	if finishEarly {
		if _, err := u.Finish(r.Context(), j.CorrelationID, early); err != nil {
			fakehttp.WriteJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
	}
	fakehttp.WriteJSON(w, http.StatusAccepted, reply)
	if !repeated {
		u.accepted <- j.CorrelationID
	}
}

// readCorrelationID reads a status or cancel request's correlation_id; it answers 400 and reports
// false when the body is not JSON.
func readCorrelationID(w http.ResponseWriter, r *http.Request) (string, bool) {
	var req struct {
		CorrelationID string `json:"correlation_id"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "bad request"})
		return "", false
	}
	return req.CorrelationID, true
}

// withJob reads a status or cancel request's correlation id and calls answer, with the upstream
// locked, with its job (found false: there is none). A body that is not JSON is 400.
func (u *Upstream) withJob(w http.ResponseWriter, r *http.Request, answer func(j *Job, found bool)) {
	correlationID, ok := readCorrelationID(w, r)
	if !ok {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	j, found := u.jobs[correlationID]
	answer(j, found)
}

func (u *Upstream) handleStatus(w http.ResponseWriter, r *http.Request) {
	u.withJob(w, r, func(j *Job, found bool) {
		if !found {
			fakehttp.WriteJSON(w, http.StatusOK, map[string]string{"status": "absent"})
			return
		}
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"status": j.State, "result": j.Result, "error": j.Error})
	})
}

func (u *Upstream) handleCancel(w http.ResponseWriter, r *http.Request) {
	u.withJob(w, r, func(j *Job, found bool) {
		switch {
		case !found:
			fakehttp.WriteJSON(w, http.StatusNotFound, map[string]string{"error": "no such job"})
		case j.State == "cancelled":
			fakehttp.WriteJSON(w, http.StatusOK, map[string]string{"status": "cancelled"})
		case j.State != "running" || u.notCancelable:
			fakehttp.WriteJSON(w, http.StatusConflict, map[string]string{"error": "cannot cancel a " + j.State + " job"})
		default:
			j.State = "cancelled"
			fakehttp.WriteJSON(w, http.StatusOK, map[string]string{"status": "cancelled"})
		}
	})
}

// Sign returns the Reckon-Signature header value of a callback body sent at, keyed with secret
// (the text of Reckon-Callback-Secret): the format of signed callbacks (docs/async.md), which
// webhook deliveries share (events.Sign).
func Sign(secret string, at time.Time, body []byte) string { return events.Sign(secret, at, body) }
