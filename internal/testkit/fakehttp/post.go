package fakehttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"

	"github.com/reckonhq/reckon/effects"
)

// Post sends body as JSON to url with the headers whose values are not empty, and returns the
// answer's status and body (at most MaxBody bytes). A request that cannot be made is
// effects.Permanent, a refused connection effects.Retryable (nothing reached the upstream, so
// nothing was performed); any other failure to get an answer is an ordinary error.
func Post(ctx context.Context, client *http.Client, url string, headers map[string]string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, effects.Permanent(err)
	}
	// Without GetBody net/http never replays the request on its own: a POST to an upstream must
	// not be sent twice behind the connector's back.
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	for name, value := range headers {
		if value != "" {
			req.Header.Set(name, value)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return 0, nil, effects.Retryable(err)
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return 0, nil, fmt.Errorf("read response: %w", err)
	}
	return resp.StatusCode, raw, nil
}
