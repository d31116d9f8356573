package fakejobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit/fakehttp"
)

// ConnectorOptions describes a Go connector that runs jobs on an Upstream at BaseURL and is told
// their outcome by callback at CallbackURL + "/" + correlation id.
type ConnectorOptions struct {
	// Name of the connector. Default "jobs.run".
	Name string
	// BaseURL of the upstream and CallbackURL of the callback receiver. Required.
	BaseURL, CallbackURL string
	// Cancel gives the connector a Cancel (POST /jobs/cancel).
	Cancel bool
	// AsyncTimeout, HardTimeout, Timeout, StatusCheckLimit and Backoff are passed to the
	// connector.
	AsyncTimeout     time.Duration
	HardTimeout      bool
	Timeout          time.Duration
	StatusCheckLimit int
	Backoff          func(int) time.Duration
}

// Connector returns the effects.Connector described by o: Dispatch posts the job, with the
// effect's id and callback secret in the headers an HTTP connector sends (so that the upstream
// signs its callback), and answers effects.Accepted with the upstream's correlation id;
// StatusCheck reports a done job present, an
// unknown, failed or cancelled one absent and a running one inconclusive.
func (o ConnectorOptions) Connector() effects.Connector {
	if o.Name == "" {
		o.Name = "jobs.run"
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	c := effects.Connector{
		Name: o.Name, Tags: []effects.Tag{effects.TagWrite, effects.TagExternal, effects.TagNetwork},
		Timeout: o.Timeout, StatusCheckLimit: o.StatusCheckLimit, Backoff: o.Backoff,
		AsyncTimeout: o.AsyncTimeout, HardTimeout: o.HardTimeout,
	}
	c.Dispatch = func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
		status, body, err := post(ctx, client, o.BaseURL+"/jobs", map[string]string{
			"Idempotency-Key": call.IdempotencyKey, httpconn.HeaderEffectID: call.EffectID.String(), httpconn.HeaderCallbackSecret: call.CallbackSecret,
		}, map[string]any{
			"correlation_id": call.CorrelationID,
			"callback_url":   o.CallbackURL + "/" + url.PathEscape(call.CorrelationID),
			"args":           call.Args,
		})
		switch {
		case err != nil:
			return nil, err
		case status == http.StatusAccepted:
			var reply struct {
				CorrelationID string `json:"correlation_id"`
			}
			if err := json.Unmarshal(body, &reply); err != nil {
				return nil, fmt.Errorf("202 with a bad body: %w", err)
			}
			return nil, effects.Accepted(reply.CorrelationID)
		case status >= 400 && status < 500:
			return nil, effects.Permanent(fmt.Errorf("upstream refused: %d %s", status, body))
		default:
			return nil, fmt.Errorf("upstream answered %d", status)
		}
	}
	c.StatusCheck = func(ctx context.Context, call effects.Call) (effects.Status, error) {
		_, body, err := post(ctx, client, o.BaseURL+"/jobs/status", nil, map[string]any{"correlation_id": call.CorrelationID})
		if err != nil {
			return effects.Status{}, err
		}
		var reply struct {
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(body, &reply); err != nil {
			return effects.Status{}, err
		}
		switch reply.Status {
		case "done":
			return effects.Present(reply.Result), nil
		case "absent", "failed", "cancelled":
			return effects.Absent(), nil
		default:
			return effects.Inconclusive("job " + reply.Status), nil
		}
	}
	if o.Cancel {
		c.Cancel = func(ctx context.Context, call effects.Call) error {
			status, body, err := post(ctx, client, o.BaseURL+"/jobs/cancel", nil, map[string]any{"correlation_id": call.CorrelationID})
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				return fmt.Errorf("upstream refused to cancel: %d %s", status, bytes.TrimSpace(body))
			}
			return nil
		}
	}
	return c
}

// post sends body as JSON to u with the headers whose values are not empty (fakehttp.Post).
func post(ctx context.Context, client *http.Client, u string, headers map[string]string, body any) (int, []byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, nil, effects.Permanent(err)
	}
	return fakehttp.Post(ctx, client, u, headers, raw)
}

// CallbackHandler is an HTTP handler for POST {prefix}/{correlation_id} with {"result":…} or
// {"error":"…"} that hands callbacks to client.Callback: 200 when applied (or repeated), 404 for
// an unknown correlation id, 409 for a conflict, a STUCK effect or one that awaits no callback,
// 400 for a bad request. It stands in for the API's POST /v1/callbacks in the tests of package
// effects and does not check signatures (the API's tests do).
func CallbackHandler(client *effects.Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Result json.RawMessage `json:"result"`
			Error  string          `json:"error"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body) != nil {
			fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "POST a JSON body"})
			return
		}
		id, err := url.PathUnescape(r.PathValue("id"))
		if err != nil {
			fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "bad correlation id"})
			return
		}
		if string(body.Result) == "null" {
			body.Result = nil
		}
		effect, err := client.Callback(r.Context(), id, body.Result, body.Error, nil)
		switch {
		case err == nil:
			fakehttp.WriteJSON(w, http.StatusOK, map[string]string{"state": string(effect.State)})
		case errors.Is(err, effects.ErrUnknownCorrelation):
			fakehttp.WriteJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case errors.Is(err, effects.ErrCallbackConflict), errors.Is(err, effects.ErrCallbackStuck), errors.Is(err, effects.ErrNotAwaitingCallback):
			fakehttp.WriteJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		default:
			fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		}
	})
}
