package saga_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
)

// refundConnector reverses a bank wire through POST /wires/compensate with its own idempotency
// key; the bank performs a compensation once per key, so the connector is idempotent. Args:
// {"original_key":"…","amount":N}.
func refundConnector(bankURL string) effects.Connector {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return effects.Connector{
		Name: "card.refund", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent, effects.TagExternal},
		Timeout: 300 * time.Millisecond, MaxAttempts: 2, Backoff: testkit.FastBackoff,
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, bankURL+"/wires/compensate", bytes.NewReader(call.Args))
			if err != nil {
				return nil, effects.Permanent(err)
			}
			req.Header.Set("Idempotency-Key", call.IdempotencyKey)
			resp, err := client.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			switch {
			case err != nil:
				return nil, err
			case resp.StatusCode == http.StatusOK:
				return body, nil
			case resp.StatusCode == http.StatusServiceUnavailable:
				return nil, effects.Retryable(fmt.Errorf("%s: %s", resp.Status, body))
			case resp.StatusCode >= 400 && resp.StatusCode < 500:
				return nil, effects.Permanent(fmt.Errorf("%s: %s", resp.Status, body))
			default:
				return nil, fmt.Errorf("%s: %s", resp.Status, body)
			}
		},
	}
}
