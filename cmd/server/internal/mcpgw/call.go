package mcpgw

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/jsonx"
)

const (
	// IdempotencyKeyMeta is the params._meta key of a caller's own idempotency key for a
	// tools/call: 1 to MaxIdempotencyKeyBytes of UTF-8 without NUL. The same key (for the same
	// tenant) always means the same effect, whatever session or server receives it.
	IdempotencyKeyMeta = "reckon/idempotency_key"
	// MaxIdempotencyKeyBytes bounds an idempotency key, as the HTTP API does.
	MaxIdempotencyKeyBytes = 512
	// RunIDMeta is the params._meta key of the agent run a tools/call belongs to (effects.Spec.RunID,
	// at most 200 bytes): the run's guardrails apply (POST /v1/runs), and a call past them or of a
	// cancelled run is refused with nothing written.
	RunIDMeta = "reckon/run_id"
	// requestStatePrefix marks the requestState of an input-required answer: the key of the
	// call it continues.
	requestStatePrefix = "reckon-key:"
	// confirmInput names the confirmation elicitation in an input-required answer.
	confirmInput = "reckon_confirm"
	// waitSlice is the longest the wait for an effect goes without a look at where it stands
	// (for progress notifications); a settled effect ends it at once.
	waitSlice = 500 * time.Millisecond
)

// invalidParams is the MCP error of a call refused before anything was recorded.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// actor names the session's caller in the audit trail: "mcp:{token name or prefix}". The same
// actor enqueues and decides through elicitation, so that the effects client's four-eyes rule
// (Config.FourEyes) refuses a confirmation by the caller who made the call.
func (s *session) actor() string {
	label := s.token.Name
	if label == "" {
		label = s.token.Prefix
	}
	return "mcp:" + label
}

// call answers tools/call: the effect of the call is enqueued (or found, for a call sent again),
// confirmed or declined through elicitation if it is held, and waited for up to Config.Wait.
func (s *session) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	params := req.Params
	connector, ok := s.g.effects.Registry().Get(params.Name)
	if !ok || !offered(connector, s.token.TenantID) {
		return nil, invalidParams("unknown tool %q", params.Name)
	}
	args, err := argsOf(params.Arguments)
	if err != nil {
		return nil, err
	}
	key, err := s.keyOf(req)
	if err != nil {
		return nil, err
	}
	runID, err := runOf(params.GetMeta())
	if err != nil {
		return nil, err
	}
	effect, err := s.g.effects.Enqueue(ctx, effects.Spec{
		TenantID: s.token.TenantID, Connector: params.Name, IdempotencyKey: key, Args: args, RunID: runID,
	}, &effects.EnqueueOpts{Actor: s.actor(), Reason: "called as an MCP tool"})
	switch {
	case errors.Is(err, effects.ErrInvalidArgs):
		return nil, invalidParams("%s; nothing was recorded", strings.TrimPrefix(err.Error(), "effects: "))
	case errors.Is(err, effects.ErrUnknownConnector):
		return nil, invalidParams("unknown tool %q", params.Name)
	case errors.Is(err, effects.ErrIdempotencyConflict):
		return nil, invalidParams("idempotency key %q belongs to another call (another tool or other arguments); nothing was recorded", key)
	case errors.Is(err, effects.ErrPruned), errors.Is(err, effects.ErrBusinessKeyConflict), errors.Is(err, effects.ErrRunCancelled), errors.Is(err, effects.ErrRunMaxSteps), errors.Is(err, effects.ErrRunMaxFailures):
		return nil, invalidParams("%s; nothing was recorded", strings.TrimPrefix(err.Error(), "effects: "))
	case err != nil:
		return nil, s.internal(ctx, "enqueue", err, key)
	}
	if awaitingConfirmation(effect) {
		decided, answer, err := s.decide(ctx, req, effect, key)
		if err != nil || answer != nil {
			return answer, err
		}
		effect = decided
	}
	effect, err = s.waitSettled(ctx, req, effect)
	if err != nil {
		return nil, err
	}
	return s.answer(effect), nil
}

// internal logs err and is the MCP error of a call that failed on the server's side. Whether its
// effect was recorded may not be known (a commit whose answer was lost): the error says how to make
// the call again under its key, which can never make a second effect.
func (s *session) internal(ctx context.Context, what string, err error, key string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.g.logger.ErrorContext(ctx, "mcp: tools/call failed", slog.String("step", what), slog.String("error", err.Error()))
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
		"internal error (%s); make the call again with the same arguments and _meta %q = %q (never a second effect)", what, IdempotencyKeyMeta, key)}
}

// argsOf checks a call's arguments: absent or null is {}, anything else must be a JSON object
// Postgres can store.
func argsOf(raw json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage(`{}`), nil
	}
	if trimmed[0] != '{' {
		return nil, invalidParams("arguments must be a JSON object")
	}
	if err := jsonx.Check(trimmed); err != nil {
		return nil, invalidParams("arguments: %v", err)
	}
	return json.RawMessage(trimmed), nil
}

// keyOf is the call's idempotency key (doc.go, "Idempotency keys").
func (s *session) keyOf(req *mcp.CallToolRequest) (string, error) {
	if state, ok := strings.CutPrefix(req.Params.RequestState, requestStatePrefix); ok {
		return checkKey(state, "requestState")
	}
	meta := req.Params.GetMeta()
	if raw, ok := meta[IdempotencyKeyMeta]; ok {
		key, isString := raw.(string)
		if !isString {
			return "", invalidParams("_meta %q: want a string", IdempotencyKeyMeta)
		}
		return checkKey(key, "_meta "+IdempotencyKeyMeta)
	}
	callID, _ := meta[callIDMeta].(string)
	sessionID := s.id
	if sessionID == "" && req.Session != nil {
		sessionID = req.Session.ID()
	}
	if callID == "" || sessionID == "" {
		return "", invalidParams("this call has no session and request id to derive its idempotency key from: give one in _meta %q", IdempotencyKeyMeta)
	}
	if len(sessionID)+len(callID) > 200 {
		sum := sha256.Sum256([]byte(callID))
		callID = "sha256-" + hex.EncodeToString(sum[:])
	}
	return checkKey("mcp/"+sessionID+"/"+callID, "derived key")
}

// runOf is the run the call's _meta names, if any.
func runOf(meta map[string]any) (string, error) {
	raw, ok := meta[RunIDMeta]
	if !ok {
		return "", nil
	}
	runID, isString := raw.(string)
	switch {
	case !isString || runID == "":
		return "", invalidParams("_meta %q: want a run id, a non-empty string", RunIDMeta)
	case len(runID) > 200:
		return "", invalidParams("_meta %q: a run id is at most 200 bytes", RunIDMeta)
	}
	if err := jsonx.CheckText(runID); err != nil {
		return "", invalidParams("_meta %q: %v", RunIDMeta, err)
	}
	return runID, nil
}

func checkKey(key, where string) (string, error) {
	switch {
	case key == "":
		return "", invalidParams("%s: an idempotency key must not be empty", where)
	case len(key) > MaxIdempotencyKeyBytes:
		return "", invalidParams("%s: an idempotency key is at most %d bytes", where, MaxIdempotencyKeyBytes)
	}
	if err := jsonx.CheckText(key); err != nil {
		return "", invalidParams("%s: %v", where, err)
	}
	return key, nil
}

func awaitingConfirmation(e *effects.Effect) bool {
	return e.State == effects.StatePending && e.Confirmation == effects.ConfirmationAwaiting
}

// decide handles a held effect: the user's answer to the confirmation elicitation, if the call
// carries one, confirms or declines it (the decided effect is returned); else the user is asked
// (an input-required answer) where the client can elicit and the caller may confirm; else the
// answer says what to confirm and where.
func (s *session) decide(ctx context.Context, req *mcp.CallToolRequest, effect *effects.Effect, key string) (*effects.Effect, *mcp.CallToolResult, error) {
	if response, ok := req.Params.InputResponses[confirmInput]; ok {
		elicited, _ := response.(*mcp.ElicitResult)
		if elicited == nil || elicited.Action == "cancel" || (elicited.Action != "accept" && elicited.Action != "decline") {
			return nil, s.awaitingAnswer(effect, "The confirmation was dismissed."), nil
		}
		confirm, _ := elicited.Content["confirm"].(bool)
		reason, _ := elicited.Content["reason"].(string)
		opts := &effects.OperatorOpts{TenantID: s.token.TenantID}
		var (
			decided *effects.Effect
			err     error
		)
		if elicited.Action == "accept" && confirm {
			decided, err = s.g.effects.Confirm(ctx, effect.ID, s.actor(), reasonOr(reason, "confirmed by the user through MCP elicitation"), opts)
		} else {
			decided, err = s.g.effects.Decline(ctx, effect.ID, s.actor(), reasonOr(reason, "declined by the user through MCP elicitation"), opts)
		}
		switch {
		case errors.Is(err, effects.ErrFourEyes):
			return nil, s.awaitingAnswer(effect, "Your confirmation was refused: another person must confirm this call (four eyes)."), nil
		case errors.Is(err, effects.ErrNotAwaitingConfirmation):
			// Decided meanwhile (an operator, or this same call answered twice): as it stands.
			current, err := s.g.effects.Get(ctx, effect.ID)
			if err != nil {
				return nil, nil, s.internal(ctx, "read effect", err, effect.IdempotencyKey)
			}
			return current, nil, nil
		case err != nil:
			return nil, nil, s.internal(ctx, "decide", err, effect.IdempotencyKey)
		}
		return decided, nil, nil
	}
	caps := req.ClientCapabilities()
	if s.g.config.FourEyes || caps == nil || caps.Elicitation == nil {
		return nil, s.awaitingAnswer(effect, ""), nil
	}
	return nil, &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{confirmInput: &mcp.ElicitParams{
			Mode:    "form",
			Message: effect.ConfirmationPrompt + " (" + effect.Connector + ", effect " + effect.ID.String() + ")",
			RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"confirm": map[string]any{"type": "boolean", "title": "Confirm", "description": "Perform this call"},
					"reason":  map[string]any{"type": "string", "title": "Reason", "description": "For the audit trail", "maxLength": 2000},
				},
				"required": []string{"confirm"},
			},
		}},
		RequestState: requestStatePrefix + key,
	}, nil
}

func reasonOr(reason, otherwise string) string {
	reason = strings.TrimSpace(reason)
	if reason == "" || len(reason) > 2000 || jsonx.CheckText(reason) != nil {
		return otherwise
	}
	return reason
}

// waitSettled waits for effect to be CONFIRMED, FAILED or STUCK, at most Config.Wait (less when
// the server stops), sending a progress notification each time where it stands changes (if the
// caller asked for progress).
func (s *session) waitSettled(ctx context.Context, req *mcp.CallToolRequest, effect *effects.Effect) (*effects.Effect, error) {
	deadline := time.Now().Add(s.g.wait)
	progressToken := req.Params.GetProgressToken()
	last, step := "", 0
	for {
		if progressToken != nil && req.Session != nil {
			if line := progressLine(effect); line != last {
				last, step = line, step+1
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: progressToken, Progress: float64(step), Message: line})
			}
		}
		if effect.State.Settled() || awaitingConfirmation(effect) {
			return effect, nil
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || s.g.stopping() {
			return effect, nil
		}
		waitCtx, cancel := context.WithTimeout(ctx, min(remaining, waitSlice))
		waited, err := s.g.effects.Wait(waitCtx, effect.ID)
		cancel()
		switch {
		case err == nil:
			effect = waited
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			current, err := s.g.effects.Get(ctx, effect.ID)
			if err != nil {
				return nil, s.internal(ctx, "read effect", err, effect.IdempotencyKey)
			}
			effect = current
		}
	}
}

// progressLine says where an effect stands, for a progress notification.
func progressLine(e *effects.Effect) string {
	switch {
	case awaitingConfirmation(e):
		return "awaiting confirmation"
	case e.State == effects.StatePending && e.Attempts == 0:
		return "recorded, waiting for a reactor"
	case e.State == effects.StatePending:
		return fmt.Sprintf("PENDING, attempt %d of %d", e.Attempts, e.MaxAttempts)
	case e.State == effects.StateUnknown:
		return "UNKNOWN: the outcome is being checked with the upstream"
	default:
		return string(e.State)
	}
}

// status is the structured content of an answer that is not a result.
type status struct {
	EffectID       uuid.UUID     `json:"effect_id"`
	State          effects.State `json:"state"`
	IdempotencyKey string        `json:"idempotency_key"`
	Outcome        string        `json:"outcome"`
	Error          string        `json:"error,omitempty"`
	Evidence       string        `json:"evidence"`
	Console        string        `json:"console,omitempty"`
	Confirm        string        `json:"confirm,omitempty"`
}

// answer is the tool result of effect as it stands after the wait.
func (s *session) answer(e *effects.Effect) *mcp.CallToolResult {
	st := s.statusOf(e)
	switch e.State {
	case effects.StateConfirmed:
		result := json.RawMessage(bytes.TrimSpace(e.Result))
		if len(result) == 0 {
			result = json.RawMessage(`null`)
		}
		var structured any = result
		if result[0] != '{' {
			structured = map[string]json.RawMessage{"result": result}
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(result)}, s.link(e)},
			StructuredContent: structured,
			Meta:              s.meta(e),
		}
	case effects.StateFailed:
		st.Outcome = "failed: nothing more will be done"
		return &mcp.CallToolResult{
			IsError:           true,
			Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("The call failed: %s. Effect %s; evidence: %s.", e.Error, e.ID, s.evidence(e))}, s.link(e)},
			StructuredContent: st, Meta: s.meta(e),
		}
	case effects.StateStuck:
		st.Outcome = "stuck: a person must decide"
		// Not an error result, as for an outcome being checked: an agent that reads "error" may
		// make the call again as a new one, and the call may have been performed.
		return &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("The outcome of this call could not be established and a person must decide it "+
				"(effect %s is STUCK: %s). Do not send a new call; evidence: %s.", e.ID, e.Error, s.evidence(e))}, s.link(e)},
			StructuredContent: st, Meta: s.meta(e),
		}
	}
	if awaitingConfirmation(e) {
		return s.awaitingAnswer(e, "")
	}
	st.Outcome = "being checked"
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("The call was recorded and its outcome is being checked (effect %s is %s). "+
			"Do not make it again as a new call. To learn the outcome, %s, or read %s; evidence: %s.",
			e.ID, e.State, again(e), effectURIPrefix+e.ID.String(), s.evidence(e))}, s.link(e)},
		StructuredContent: st, Meta: s.meta(e),
	}
}

// awaitingAnswer is the answer of a held effect that was not decided in this call.
func (s *session) awaitingAnswer(e *effects.Effect, note string) *mcp.CallToolResult {
	st := s.statusOf(e)
	st.Outcome = "awaiting confirmation"
	where := "POST /v1/effects/" + e.ID.String() + "/confirm (or /decline) with an API token"
	if s.consoleURL != "" {
		where = s.consoleURL + "/awaiting, or " + where
	}
	st.Confirm = where
	text := fmt.Sprintf("This call waits for a person's confirmation and was not performed: %q (effect %s). Confirm or decline it at %s. "+
		"Then, to learn the outcome, %s.", e.ConfirmationPrompt, e.ID, where, again(e))
	if note != "" {
		text = note + " " + text
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}, s.link(e)}, StructuredContent: st, Meta: s.meta(e)}
}

// again says how to ask for an effect's outcome with another call: the same tool and arguments
// under its idempotency key.
func again(e *effects.Effect) string {
	return fmt.Sprintf("call the tool again with the same arguments and _meta %q = %q (the same effect, never a second one)", IdempotencyKeyMeta, e.IdempotencyKey)
}

func (s *session) statusOf(e *effects.Effect) status {
	st := status{EffectID: e.ID, State: e.State, IdempotencyKey: e.IdempotencyKey, Error: e.Error, Evidence: effectURIPrefix + e.ID.String()}
	if s.consoleURL != "" {
		st.Console = s.consoleURL + "/effects/" + e.ID.String()
	}
	return st
}

// evidence is where an effect's evidence is: its console page if known, else its resource.
func (s *session) evidence(e *effects.Effect) string {
	if s.consoleURL != "" {
		return s.consoleURL + "/effects/" + e.ID.String()
	}
	return effectURIPrefix + e.ID.String()
}

func (s *session) link(e *effects.Effect) *mcp.ResourceLink {
	return &mcp.ResourceLink{URI: effectURIPrefix + e.ID.String(), Name: "effect " + e.ID.String(), MIMEType: "application/json",
		Description: "The effect's evidence: state, result or error, and its audit trail."}
}

func (s *session) meta(e *effects.Effect) mcp.Meta {
	return mcp.Meta{"reckon/effect_id": e.ID.String(), "reckon/state": string(e.State), "reckon/idempotency_key": e.IdempotencyKey}
}
