package fakebank

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freshClient never reuses connections, so that the transport never transparently retries a
// dropped request.
func freshClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

// getStatus sends a GET to u with c and returns the answer's status.
func getStatus(t *testing.T, c *http.Client, u string) int {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
}

func post(ctx context.Context, c *http.Client, u, key, body string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewBufferString(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	out := reply{status: resp.StatusCode, header: resp.Header}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			return reply{}, fmt.Errorf("decoding %q: %w", raw, err)
		}
	}
	return out, nil
}

func wire(t *testing.T, b *Bank, key string, amount int64) reply {
	t.Helper()
	r, err := post(t.Context(), freshClient(5*time.Second), b.URL()+"/wires", key,
		fmt.Sprintf(`{"account":"acc-1","amount":%d}`, amount))
	require.NoError(t, err)
	return r
}

func status(t *testing.T, b *Bank, key string) map[string]any {
	t.Helper()
	r, err := post(t.Context(), freshClient(5*time.Second), b.URL()+"/wires/status", "",
		fmt.Sprintf(`{"key":%q}`, key))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.status)
	return r.body
}

func compensate(t *testing.T, b *Bank, key, of string, amount int64) reply {
	t.Helper()
	r, err := post(t.Context(), freshClient(5*time.Second), b.URL()+"/wires/compensate", key,
		fmt.Sprintf(`{"original_key":%q,"amount":%d}`, of, amount))
	require.NoError(t, err)
	return r
}

func checkpointURL(b *Bank, name, key string) string {
	return b.URL() + "/checkpoint?" + url.Values{"name": {name}, "key": {key}}.Encode()
}

func TestSucceedPerformsOnce(t *testing.T) {
	t.Parallel()
	b := New(t)

	r := wire(t, b, "k1", 123)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, map[string]any{"wire_id": "w-1", "key": "k1", "amount": float64(123)}, r.body)
	assert.Equal(t, 1, b.Count("k1"))
	assert.Equal(t, int64(123), b.Net("k1"))
	assert.Equal(t, 1, b.Calls("/wires"))

	ledger := b.Ledger()
	require.Len(t, ledger, 1)
	assert.Equal(t, "k1", ledger[0].Key)
	assert.Equal(t, "", ledger[0].Of)
	assert.Equal(t, int64(123), ledger[0].Amount)
	assert.Equal(t, "w-1", ledger[0].WireID)
	assert.False(t, ledger[0].At.IsZero())

	select {
	case e := <-b.Performed():
		assert.Equal(t, ledger[0], e)
	default:
		t.Fatal("entry not sent on Performed")
	}
}

func TestKeyInBodyAndHeaderWins(t *testing.T) {
	t.Parallel()
	b := New(t)
	c := freshClient(5 * time.Second)

	r, err := post(t.Context(), c, b.URL()+"/wires", "", `{"key":"body-key","amount":5}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "body-key", r.body["key"])

	r, err = post(t.Context(), c, b.URL()+"/wires", "header-key", `{"key":"body-key","amount":5}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "header-key", r.body["key"])
	assert.Equal(t, 1, b.Count("body-key"))
	assert.Equal(t, 1, b.Count("header-key"))
}

func TestNonIdempotentPerformsAgain(t *testing.T) {
	t.Parallel()
	b := New(t)

	r1 := wire(t, b, "k", 10)
	r2 := wire(t, b, "k", 10)
	require.Equal(t, http.StatusOK, r1.status)
	require.Equal(t, http.StatusOK, r2.status)
	assert.Equal(t, "w-1", r1.body["wire_id"])
	assert.Equal(t, "w-2", r2.body["wire_id"])
	assert.Equal(t, 2, b.Count("k"))
	assert.Equal(t, int64(20), b.Net("k"))
}

func TestIdempotentDedups(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.SetIdempotent(true)

	r1 := wire(t, b, "k", 10)
	r2 := wire(t, b, "k", 10)
	require.Equal(t, http.StatusOK, r1.status)
	require.Equal(t, http.StatusOK, r2.status)
	assert.Equal(t, r1.body, r2.body)
	assert.Equal(t, 1, b.Count("k"))
	assert.Len(t, b.Ledger(), 1)
}

func TestIdempotentConcurrent(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.SetIdempotent(true)

	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", i%4)
			r, err := post(context.Background(), freshClient(5*time.Second), b.URL()+"/wires", key, `{"amount":1}`)
			if assert.NoError(t, err) {
				assert.Equal(t, http.StatusOK, r.status)
			}
			_ = b.Ledger()
			_ = b.Net(key)
		})
	}
	wg.Wait()
	for i := range 4 {
		assert.Equal(t, 1, b.Count(fmt.Sprintf("k%d", i)))
	}
	assert.Equal(t, 40, b.Calls("/wires"))
}

func TestRejectAndUnavailable(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.Script("k", Reject, Unavailable)

	r := wire(t, b, "k", 10)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, "rejected", r.body["error"])
	assert.Equal(t, 0, b.Count("k"))

	r = wire(t, b, "k", 10)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, "0", r.header.Get("Retry-After"))
	assert.Equal(t, 0, b.Count("k"))
	assert.Empty(t, b.Ledger())

	// Script exhausted: Succeed.
	r = wire(t, b, "k", 10)
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, 1, b.Count("k"))
}

func TestSetDefault(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.SetDefault(Unavailable)
	b.Script("scripted", Succeed)

	assert.Equal(t, http.StatusServiceUnavailable, wire(t, b, "k", 1).status)
	assert.Equal(t, http.StatusOK, wire(t, b, "scripted", 1).status)
	assert.Equal(t, http.StatusServiceUnavailable, wire(t, b, "scripted", 1).status)
	assert.Equal(t, 0, b.Count("k"))
	assert.Equal(t, 1, b.Count("scripted"))
}

func TestPerformThenDrop(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.Script("k", PerformThenDrop)

	_, err := post(t.Context(), freshClient(5*time.Second), b.URL()+"/wires", "k", `{"amount":7}`)
	require.Error(t, err)
	assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF), "unexpected error: %v", err)
	assert.Equal(t, 1, b.Count("k"))
	assert.Equal(t, int64(7), b.Net("k"))
}

func TestTimeoutPerformsNothing(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.Script("k", Timeout)

	start := time.Now()
	_, err := post(t.Context(), freshClient(200*time.Millisecond), b.URL()+"/wires", "k", `{"amount":7}`)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, 0, b.Count("k"))
	assert.Empty(t, b.Ledger())
}

func TestPerformThenHang(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.Script("k", PerformThenHang)

	_, err := post(t.Context(), freshClient(200*time.Millisecond), b.URL()+"/wires", "k", `{"amount":7}`)
	require.Error(t, err)
	assert.Equal(t, 1, b.Count("k"))
}

func TestPerformTwice(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.Script("k", PerformTwice)

	r := wire(t, b, "k", 5)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "w-1", r.body["wire_id"])
	assert.Equal(t, 2, b.Count("k"))
	assert.Equal(t, int64(10), b.Net("k"))

	s := status(t, b, "k")
	assert.Equal(t, "duplicate", s["status"])
	assert.Equal(t, float64(2), s["count"])
	assert.Equal(t, map[string]any{"wire_id": "w-1", "key": "k", "amount": float64(5)}, s["result"])
}

func TestStatus(t *testing.T) {
	t.Parallel()
	b := New(t)

	assert.Equal(t, map[string]any{"status": "absent"}, status(t, b, "k"))

	r := wire(t, b, "k", 9)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, map[string]any{"status": "present", "result": r.body}, status(t, b, "k"))

	b.ScriptStatus("k", StatusInconclusive)
	assert.Equal(t, map[string]any{"status": "inconclusive"}, status(t, b, "k"))
	assert.Equal(t, "present", status(t, b, "k")["status"])

	b.ScriptStatus("never", StatusInconclusive)
	assert.Equal(t, "inconclusive", status(t, b, "never")["status"])
	assert.Equal(t, "absent", status(t, b, "never")["status"])
	assert.Equal(t, 6, b.Calls("/wires/status"))
}

func TestCompensation(t *testing.T) {
	t.Parallel()
	b := New(t)

	require.Equal(t, http.StatusOK, wire(t, b, "k", 100).status)

	r1 := compensate(t, b, "c-k", "k", 100)
	require.Equal(t, http.StatusOK, r1.status)
	assert.Equal(t, map[string]any{"reversal_id": "r-1", "key": "c-k", "of": "k"}, r1.body)
	assert.Equal(t, int64(0), b.Net("k"))
	assert.Equal(t, 1, b.Count("k"), "compensations are not counted as wires")

	r2 := compensate(t, b, "c-k", "k", 100)
	require.Equal(t, http.StatusOK, r2.status)
	assert.Equal(t, r1.body, r2.body)
	assert.Equal(t, int64(0), b.Net("k"))

	ledger := b.Ledger()
	require.Len(t, ledger, 2)
	assert.Equal(t, Entry{Key: "c-k", Of: "k", Amount: -100, WireID: "r-1", At: ledger[1].At}, ledger[1])
	assert.Equal(t, 2, b.Calls("/wires/compensate"))
}

func TestCompensationScripted(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.SetDefault(Unavailable) // applies to wires only
	b.Script("k", Succeed)
	b.Script("c-k", Reject, Unavailable, PerformThenDrop)

	require.Equal(t, http.StatusOK, wire(t, b, "k", 100).status)

	r := compensate(t, b, "c-k", "k", 100)
	assert.Equal(t, http.StatusBadRequest, r.status)
	r = compensate(t, b, "c-k", "k", 100)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, "0", r.header.Get("Retry-After"))
	assert.Equal(t, int64(100), b.Net("k"))

	_, err := post(t.Context(), freshClient(5*time.Second), b.URL()+"/wires/compensate", "c-k",
		`{"original_key":"k","amount":100}`)
	require.Error(t, err)
	assert.Equal(t, int64(0), b.Net("k"))

	// The retry after the drop finds the reversal already performed.
	r = compensate(t, b, "c-k", "k", 100)
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "r-1", r.body["reversal_id"])
	assert.Equal(t, int64(0), b.Net("k"))
	assert.Len(t, b.Ledger(), 2)
}

func TestArmHoldsUntilClientGoesAway(t *testing.T) {
	t.Parallel()
	b := New(t)
	hit := b.Arm("after-commit")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, checkpointURL(b, "after-commit", "k1"), nil)
		if err != nil {
			done <- err
			return
		}
		resp, err := freshClient(0).Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("unexpected answer %d", resp.StatusCode)
		}
		done <- err
	}()

	select {
	case key := <-hit:
		assert.Equal(t, "k1", key)
	case <-time.After(5 * time.Second):
		t.Fatal("checkpoint not reported")
	}
	select {
	case err := <-done:
		t.Fatalf("checkpoint request answered while held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("request not released after cancel")
	}

	// Armed once only: the next request passes.
	assert.Equal(t, http.StatusNoContent, getStatus(t, freshClient(5*time.Second), checkpointURL(b, "after-commit", "k2")))
	assert.Equal(t, 2, b.Calls("/checkpoint"))
}

func TestUnarmedCheckpoint(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.Arm("other")

	assert.Equal(t, http.StatusNoContent, getStatus(t, freshClient(5*time.Second), checkpointURL(b, "before-send", "k")))
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	b := New(t)
	c := freshClient(5 * time.Second)

	cases := []struct {
		path, key, body string
	}{
		{"/wires", "k", `{not json`},
		{"/wires", "k", ``},
		{"/wires", "k", `{"amount":"12"}`},
		{"/wires", "k", `{"amount":1} trailing`},
		{"/wires", "", `{"amount":1}`},
		{"/wires", "k", `{"amount":0}`},
		{"/wires", "k", `{"amount":-3}`},
		{"/wires", "k", `null`},
		{"/wires/status", "", `[1,2`},
		{"/wires/status", "", `{}`},
		{"/wires/compensate", "c", `{{`},
		{"/wires/compensate", "", `{"original_key":"k","amount":1}`},
		{"/wires/compensate", "c", `{"amount":1}`},
		{"/wires/compensate", "c", `{"original_key":"k","amount":0}`},
	}
	for _, tc := range cases {
		r, err := post(t.Context(), c, b.URL()+tc.path, tc.key, tc.body)
		require.NoError(t, err, "%s %q", tc.path, tc.body)
		assert.Equal(t, http.StatusBadRequest, r.status, "%s %q", tc.path, tc.body)
		assert.NotEmpty(t, r.body["error"], "%s %q", tc.path, tc.body)
	}

	assert.Equal(t, http.StatusBadRequest, getStatus(t, c, b.URL()+"/checkpoint"))

	assert.Equal(t, http.StatusMethodNotAllowed, getStatus(t, c, b.URL()+"/wires"))

	r, err := post(t.Context(), c, b.URL()+"/nope", "", `{}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, r.status)

	big := `{"amount":1,"account":"` + string(bytes.Repeat([]byte("x"), 2<<20)) + `"}`
	r, err = post(t.Context(), c, b.URL()+"/wires", "k", big)
	if err == nil { // the server may also close the connection before reading everything
		assert.Equal(t, http.StatusBadRequest, r.status)
	}

	assert.Empty(t, b.Ledger())
	assert.Equal(t, 0, b.Count("k"))
}

func TestUnknownBehavior(t *testing.T) {
	t.Parallel()
	b := New(t)
	b.Script("k", Behavior(99))
	b.ScriptStatus("k", StatusBehavior(99))

	assert.Equal(t, http.StatusInternalServerError, wire(t, b, "k", 1).status)
	r, err := post(t.Context(), freshClient(5*time.Second), b.URL()+"/wires/status", "", `{"key":"k"}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusInternalServerError, r.status)
	assert.Empty(t, b.Ledger())
}

func TestCloseReleasesHeldRequests(t *testing.T) {
	t.Parallel()
	b := NewServer()
	b.Script("k1", Timeout)
	b.Script("k2", PerformThenHang)
	b.Arm("cp")

	errs := make(chan error, 3)
	send := func(req *http.Request, err error) {
		if err != nil {
			errs <- err
			return
		}
		if req.Method == http.MethodPost {
			req.Header.Set("Idempotency-Key", req.URL.Query().Get("k"))
		}
		resp, err := freshClient(0).Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("unexpected answer %d", resp.StatusCode)
			errs <- err
			return
		}
		errs <- nil // the connection was dropped, as expected
	}
	go send(http.NewRequest(http.MethodPost, b.URL()+"/wires?k=k1", bytes.NewBufferString(`{"amount":1}`)))
	go send(http.NewRequest(http.MethodPost, b.URL()+"/wires?k=k2", bytes.NewBufferString(`{"amount":1}`)))
	go send(http.NewRequest(http.MethodGet, checkpointURL(b, "cp", "k3"), nil))

	require.Eventually(t, func() bool {
		return b.Calls("/wires") == 2 && b.Calls("/checkpoint") == 1 && b.Count("k2") == 1
	}, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // let the handlers reach their hold

	start := time.Now()
	b.Close()
	assert.Less(t, time.Since(start), 2*time.Second)
	b.Close() // idempotent

	for range 3 {
		select {
		case err := <-errs:
			assert.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("held request not released by Close")
		}
	}
	assert.Equal(t, 0, b.Count("k1"))
	assert.Equal(t, 1, b.Count("k2"))
}

func TestArmKeyHoldsOnlyThatKey(t *testing.T) {
	t.Parallel()
	b := New(t)
	hit := b.ArmKey("after-call", "k2")

	// Another key passes.
	assert.Equal(t, http.StatusNoContent, getStatus(t, freshClient(5*time.Second), checkpointURL(b, "after-call", "k1")))
	select {
	case key := <-hit:
		t.Fatalf("checkpoint reported for %q", key)
	default:
	}

	// The armed key is held until the client gives up.
	_, err := freshClient(200 * time.Millisecond).Get(checkpointURL(b, "after-call", "k2"))
	require.Error(t, err)
	select {
	case key := <-hit:
		assert.Equal(t, "k2", key)
	case <-time.After(5 * time.Second):
		t.Fatal("checkpoint not reported")
	}

	// Armed once only.
	assert.Equal(t, http.StatusNoContent, getStatus(t, freshClient(5*time.Second), checkpointURL(b, "after-call", "k2")))
}
