package fakebank

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/fakehttp"
)

// ConnectorOptions describes a Go connector that moves money through a Bank at BaseURL. Its args
// are {"account":"…","amount":N}.
type ConnectorOptions struct {
	// Name of the connector. Default "bank.wire".
	Name string
	// BaseURL of the bank. Required.
	BaseURL string
	// Tags. Default write, external, network (not idempotent).
	Tags []effects.Tag
	// StatusCheck and Compensate add the bank's status check and reversal.
	StatusCheck, Compensate bool
	// Checkpoints makes Dispatch visit the bank's checkpoints "before-call" and "after-call", and
	// StatusCheck "before-status" (with the effect's idempotency key as key), so that a crash test
	// can hold (and kill) the process there.
	Checkpoints bool
	// CompensateCheckpoints makes Compensate visit the checkpoints "before-compensate" and
	// "after-compensate" (with the compensation's idempotency key) in the same way.
	CompensateCheckpoints bool
	// Timeout, MaxAttempts, StatusCheckLimit, Backoff and Unsafe are passed to the connector.
	Timeout          time.Duration
	MaxAttempts      int
	StatusCheckLimit int
	Backoff          func(int) time.Duration
	Unsafe           bool
}

// Connector returns the effects.Connector described by o.
func (o ConnectorOptions) Connector() effects.Connector {
	if o.Name == "" {
		o.Name = "bank.wire"
	}
	if o.Tags == nil {
		o.Tags = []effects.Tag{effects.TagWrite, effects.TagExternal, effects.TagNetwork}
	}
	// No keep-alive reuse surprises: one connection per call.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	c := effects.Connector{
		Name: o.Name, Tags: o.Tags, Timeout: o.Timeout, MaxAttempts: o.MaxAttempts,
		StatusCheckLimit: o.StatusCheckLimit, Backoff: o.Backoff, Unsafe: o.Unsafe,
	}
	c.Dispatch = func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
		if o.Checkpoints {
			if err := checkpoint(ctx, client, o.BaseURL, "before-call", call.IdempotencyKey); err != nil {
				return nil, effects.Retryable(err)
			}
		}
		result, err := postJSON(ctx, client, o.BaseURL+"/wires", call.IdempotencyKey, call.Args)
		if err != nil {
			return nil, err
		}
		if o.Checkpoints {
			_ = checkpoint(ctx, client, o.BaseURL, "after-call", call.IdempotencyKey)
		}
		return result, nil
	}
	if o.StatusCheck {
		c.StatusCheck = func(ctx context.Context, call effects.Call) (effects.Status, error) {
			if o.Checkpoints {
				if err := checkpoint(ctx, client, o.BaseURL, "before-status", call.IdempotencyKey); err != nil {
					return effects.Status{}, err
				}
			}
			body, _ := json.Marshal(map[string]string{"key": call.IdempotencyKey})
			raw, err := postJSON(ctx, client, o.BaseURL+"/wires/status", "", body)
			if err != nil {
				return effects.Status{}, err
			}
			var status struct {
				Status string          `json:"status"`
				Count  int             `json:"count"`
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(raw, &status); err != nil {
				return effects.Status{}, err
			}
			switch status.Status {
			case "present":
				return effects.Present(status.Result), nil
			case "absent":
				return effects.Absent(), nil
			case "duplicate":
				return effects.Duplicate(status.Count, status.Result), nil
			default:
				return effects.Inconclusive("bank says " + status.Status), nil
			}
		}
	}
	if o.Compensate {
		c.Compensate = func(ctx context.Context, call effects.Call, original effects.Original) (json.RawMessage, error) {
			var args struct {
				Amount int64 `json:"amount"`
			}
			if err := json.Unmarshal(original.Args, &args); err != nil {
				return nil, effects.Permanent(err)
			}
			body, _ := json.Marshal(map[string]any{"original_key": original.IdempotencyKey, "amount": args.Amount})
			if o.CompensateCheckpoints {
				if err := checkpoint(ctx, client, o.BaseURL, "before-compensate", call.IdempotencyKey); err != nil {
					return nil, effects.Retryable(err)
				}
			}
			result, err := postJSON(ctx, client, o.BaseURL+"/wires/compensate", call.IdempotencyKey, body)
			if err != nil {
				return nil, err
			}
			if o.CompensateCheckpoints {
				_ = checkpoint(ctx, client, o.BaseURL, "after-compensate", call.IdempotencyKey)
			}
			return result, nil
		}
	}
	return c
}

// postJSON sends body and classifies the answer the way Reckon's HTTP connector protocol does (docs/connectors.md):
// 2xx → result; 4xx (but 408, 425, 429) → Permanent; 429 and 503 → Retryable (not performed);
// connection refused → Retryable; anything else → an ordinary error (UNKNOWN).
func postJSON(ctx context.Context, client *http.Client, url, idempotencyKey string, body []byte) (json.RawMessage, error) {
	code, raw, err := fakehttp.Post(ctx, client, url, map[string]string{"Idempotency-Key": idempotencyKey}, body)
	if err != nil {
		return nil, err
	}
	status := fmt.Sprintf("%d %s", code, http.StatusText(code))
	switch {
	case code >= 200 && code < 300:
		if !json.Valid(raw) {
			return nil, fmt.Errorf("truncated or invalid JSON response (%d bytes)", len(raw))
		}
		return raw, nil
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		return nil, effects.Retryable(fmt.Errorf("%s: %s", status, raw))
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooEarly:
		return nil, effects.Permanent(fmt.Errorf("%s: %s", status, raw))
	default:
		return nil, fmt.Errorf("%s: %s", status, raw)
	}
}

func checkpoint(ctx context.Context, client *http.Client, base, name, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/checkpoint?name="+url.QueryEscape(name)+"&key="+url.QueryEscape(key), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
