package httpturn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/turns"
)

// DefaultTimeout bounds one call to the handler URL when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// maxResponseBytes bounds the handler's answer.
const maxResponseBytes = 1 << 20

// maxAbsorbRounds bounds how often one turn asks the endpoint again after an ABSORB decision.
const maxAbsorbRounds = 5

// MaxEffects bounds the effects of one answer. A longer list fails the turn for good, without its
// effects being looked at one by one.
const MaxEffects = 1000

// MaxArtifacts bounds the artifacts an answer saves, and the names it reports reused. More fails
// the turn for good.
const MaxArtifacts = 100

// maxURLLength bounds a handler URL, as httpconn bounds a connector's.
const maxURLLength = 2048

// Config configures a Handler.
type Config struct {
	// URL is the handler endpoint of the tenants Lookup finds none for. Empty: their turns wait
	// (the Handler is not ready for them).
	URL string
	// Lookup finds a tenant's own handler (ok false: none; use URL), e.g. StoreLookup. Optional.
	Lookup func(ctx context.Context, tenant string) (target Target, ok bool, err error)
	// Registry holds the connectors the endpoint may name: the effects client's registry. Required.
	Registry *effects.Registry
	// Client makes the calls. Default: a client without its own timeout (Timeout applies).
	Client *http.Client
	// Timeout bounds one call. Default DefaultTimeout.
	Timeout time.Duration
}

// Handler is a turns.Handler and turns.Readier that delegates turns to an HTTP endpoint.
type Handler struct {
	config Config
}

// New returns a Handler. A URL, when given, must be an absolute http or https URL.
func New(config Config) (*Handler, error) {
	if config.Registry == nil {
		return nil, errors.New("httpturn: Config.Registry is required")
	}
	if config.URL != "" {
		if err := ValidateURL(config.URL); err != nil {
			return nil, err
		}
	}
	if config.Timeout < 0 {
		return nil, fmt.Errorf("httpturn: Config.Timeout must not be negative, got %v", config.Timeout)
	}
	if config.Timeout == 0 {
		config.Timeout = DefaultTimeout
	}
	if config.Client == nil {
		config.Client = &http.Client{}
	}
	return &Handler{config: config}, nil
}

// ValidateURL reports what is wrong with a handler URL: it must be an absolute http or https URL
// of at most 2048 bytes.
func ValidateURL(raw string) error {
	if len(raw) > maxURLLength {
		return fmt.Errorf("httpturn: handler URL is longer than %d bytes", maxURLLength)
	}
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") {
		return fmt.Errorf("httpturn: handler URL %q: want an absolute http:// or https:// URL", raw)
	}
	req, err := http.NewRequest(http.MethodPost, raw, nil)
	if err != nil || req.URL.Host == "" {
		return fmt.Errorf("httpturn: handler URL %q is not a valid URL", raw)
	}
	return nil
}

// Ready implements turns.Readier: not ready for a tenant without a handler (neither its own from
// Lookup nor Config.URL), or when Lookup fails.
func (h *Handler) Ready(ctx context.Context, sessionKey string) error {
	session, err := turns.ParseSessionKey(sessionKey)
	if err != nil {
		return err
	}
	_, err = h.target(ctx, session.Tenant)
	return err
}

// target is where the tenant's turns go.
func (h *Handler) target(ctx context.Context, tenant string) (Target, error) {
	if h.config.Lookup != nil {
		target, ok, err := h.config.Lookup(ctx, tenant)
		if err != nil {
			return Target{}, fmt.Errorf("%w: look up the turn handler of tenant %q: %w", turns.ErrNotReady, tenant, err)
		}
		if ok {
			if target.Timeout <= 0 {
				target.Timeout = h.config.Timeout
			}
			return target, nil
		}
	}
	if h.config.URL == "" {
		return Target{}, fmt.Errorf("%w: no HTTP turn handler for tenant %q (PUT /v1/turn-handlers/%s, or reactor -turn-handler-url / RECKON_TURN_HANDLER_URL)",
			turns.ErrNotReady, tenant, tenant)
	}
	return Target{URL: h.config.URL, Timeout: h.config.Timeout}, nil
}

// Request is the JSON body POSTed to the handler URL.
type Request struct {
	SessionKey string    `json:"session_key"`
	Tenant     string    `json:"tenant"`
	Channel    string    `json:"channel"`
	TurnID     uuid.UUID `json:"turn_id"`
	TurnGroup  uuid.UUID `json:"turn_group"`
	Seq        int64     `json:"seq"`
	Attempt    int       `json:"attempt"`
	Messages   []Message `json:"messages"`
	// Artifacts are every artifact stored for the turn group (by name), whatever its policy: the
	// endpoint decides which it may reuse and says so in Response.Reused.
	Artifacts []StoredArtifact `json:"artifacts"`
}

// Message is an inbound message in a Request.
type Message struct {
	// ID is the inbox id; MessageID the submitter's.
	ID         uuid.UUID       `json:"id"`
	MessageID  string          `json:"message_id"`
	Content    json.RawMessage `json:"content"`
	ReceivedAt time.Time       `json:"received_at"`
	SentAt     *time.Time      `json:"sent_at,omitempty"`
}

// Response is the JSON body the handler URL answers.
type Response struct {
	Effects []Effect `json:"effects"`
	// Artifacts are saved for the turn group at once, before any supersede check, so that a
	// superseding or retried turn gets them in its Request. At most MaxArtifacts.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Reused names the stored artifacts (Request.Artifacts) the endpoint used instead of computing
	// them again: each is reported as an artifact.reused event of the turn. Not a NEVER artifact,
	// nor one the answer saves. At most MaxArtifacts.
	Reused []string `json:"reused,omitempty"`
}

// Artifact is an artifact of the turn group as the endpoint saves it (turns.Artifact, whose
// Validate bounds it: name up to 200 bytes, data up to 1 MiB of JSON, fingerprints up to 512
// bytes, all without NUL).
type Artifact struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data"`
	// InputFingerprint identifies what it was computed from. Required.
	InputFingerprint string `json:"input_fingerprint"`
	// DependencyFingerprint identifies the versions of what else it depends on. Optional.
	DependencyFingerprint string `json:"dependency_fingerprint,omitempty"`
	// Policy is ALWAYS_SAFE, CONDITIONAL or NEVER. Default CONDITIONAL.
	Policy string `json:"policy,omitempty"`
}

// StoredArtifact is an artifact of the turn group in a Request, with the turn that saved it.
type StoredArtifact struct {
	Artifact
	TurnID  uuid.UUID `json:"turn_id"`
	SavedAt time.Time `json:"saved_at"`
}

// Effect is one effect the turn decides, at journal position (Decision, CallIndex).
type Effect struct {
	Connector   string          `json:"connector"`
	Args        json.RawMessage `json:"args,omitempty"`
	Decision    *int            `json:"decision"`
	CallIndex   *int            `json:"call_index"`
	BusinessKey string          `json:"business_key,omitempty"`
}

// HandleTurn implements turns.Handler.
func (h *Handler) HandleTurn(ctx context.Context, turn *turns.Turn) error {
	target, err := h.target(ctx, turn.Tenant)
	if err != nil {
		return err // attempted again
	}
	for round := 0; ; round++ {
		stored, err := turn.Artifacts(ctx)
		if err != nil {
			return err
		}
		answer, err := h.call(ctx, turn, target, stored)
		if err != nil {
			return err
		}
		specs, irreversible, err := h.specs(turn, answer)
		if err != nil {
			return err
		}
		artifacts, reused, err := checkArtifacts(answer, stored)
		if err != nil {
			return err
		}
		// Before the supersede check: what a superseded turn computed is what the next one reuses.
		for _, a := range reused {
			if _, ok, err := turn.Artifact(ctx, a.Name, a.InputFingerprint, a.DependencyFingerprint); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("httpturn: reused artifact %q changed during the turn", a.Name)
			}
		}
		for _, a := range artifacts {
			if err := turn.SaveArtifact(ctx, a); err != nil {
				return err
			}
		}
		if irreversible {
			decision, err := turn.BeforeIrreversible(ctx)
			if err != nil {
				return err // ErrSuperseded included: nothing is staged
			}
			if decision.Action == turns.ActionAbsorb && round < maxAbsorbRounds {
				continue // the turn has new messages: ask again with all of them
			}
		}
		for _, spec := range specs {
			if err := turn.Enqueue(spec); err != nil {
				return err
			}
		}
		return nil
	}
}

// call POSTs the turn and decodes a 2xx answer; it classifies failures as turns expects.
func (h *Handler) call(ctx context.Context, turn *turns.Turn, target Target, stored []turns.Artifact) (*Response, error) {
	messages := turn.Messages()
	req := Request{
		SessionKey: turn.SessionKey, Tenant: turn.Tenant, Channel: turn.Channel, TurnID: turn.ID, TurnGroup: turn.Group,
		Seq: turn.Seq, Attempt: turn.Attempt, Messages: make([]Message, len(messages)), Artifacts: make([]StoredArtifact, len(stored)),
	}
	for i, m := range messages {
		req.Messages[i] = Message{ID: m.ID, MessageID: m.MessageID, Content: m.Content, ReceivedAt: m.ReceivedAt, SentAt: m.SentAt}
	}
	for i, a := range stored {
		req.Artifacts[i] = StoredArtifact{
			Artifact: Artifact{Name: a.Name, Data: a.Data, InputFingerprint: a.InputFingerprint,
				DependencyFingerprint: a.DependencyFingerprint, Policy: string(a.Policy)},
			TurnID: a.TurnID, SavedAt: a.SavedAt,
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, effects.Permanent(fmt.Errorf("httpturn: encode turn: %w", err))
	}
	callCtx, cancel := context.WithTimeout(ctx, target.Timeout)
	defer cancel()
	httpReq, err := http.NewRequestWithContext(callCtx, http.MethodPost, target.URL, bytes.NewReader(body))
	if err != nil {
		return nil, effects.Permanent(fmt.Errorf("httpturn: request: %w", err))
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Reckon-Turn-Id", turn.ID.String())
	httpReq.Header.Set("Reckon-Turn-Group", turn.Group.String())
	httpReq.Header.Set("Reckon-Attempt", strconv.Itoa(turn.Attempt))
	resp, err := h.config.Client.Do(httpReq)
	if err != nil {
		return nil, fmt.Errorf("httpturn: call %s: %w", target.URL, err) // attempted again
	}
	defer resp.Body.Close()
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
	case resp.StatusCode >= 400 && resp.StatusCode <= 499 &&
		resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooEarly && resp.StatusCode != http.StatusTooManyRequests:
		return nil, effects.Permanent(fmt.Errorf("httpturn: the handler answered %d: %s", resp.StatusCode, snippet(raw)))
	default:
		return nil, fmt.Errorf("httpturn: the handler answered %d: %s", resp.StatusCode, snippet(raw))
	}
	if readErr != nil {
		return nil, fmt.Errorf("httpturn: read the handler's answer: %w", readErr)
	}
	if len(raw) > maxResponseBytes {
		return nil, effects.Permanent(fmt.Errorf("httpturn: the handler's answer exceeds %d bytes", maxResponseBytes))
	}
	var out Response
	if len(bytes.TrimSpace(raw)) == 0 {
		return &out, nil // no effects
	}
	if err := jsonx.Check(raw); err != nil && json.Valid(raw) {
		return nil, effects.Permanent(fmt.Errorf("httpturn: the handler answered %d with a value that cannot be stored: %w", resp.StatusCode, err))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil || dec.More() {
		if err == nil {
			err = errors.New("trailing data")
		}
		return nil, effects.Permanent(fmt.Errorf("httpturn: the handler answered %d with an invalid body (%v): %s", resp.StatusCode, err, snippet(raw)))
	}
	return &out, nil
}

// specs checks the answered effects and builds their specs; irreversible reports whether any of
// them is irreversible.
func (h *Handler) specs(turn *turns.Turn, answer *Response) (specs []effects.Spec, irreversible bool, err error) {
	if len(answer.Effects) > MaxEffects {
		return nil, false, effects.Permanent(fmt.Errorf("httpturn: effects: %d answered, at most %d", len(answer.Effects), MaxEffects))
	}
	for i, e := range answer.Effects {
		switch {
		case e.Connector == "":
			return nil, false, effects.Permanent(fmt.Errorf("httpturn: effect %d: connector is required", i))
		case e.Decision == nil || e.CallIndex == nil:
			return nil, false, effects.Permanent(fmt.Errorf("httpturn: effect %d (%s): decision and call_index are required", i, e.Connector))
		case *e.Decision < 0 || *e.CallIndex < 0:
			return nil, false, effects.Permanent(fmt.Errorf("httpturn: effect %d (%s): decision and call_index must not be negative", i, e.Connector))
		}
		args := strings.TrimSpace(string(e.Args))
		if args == "" || args == "null" {
			e.Args = json.RawMessage(`{}`)
		} else if !strings.HasPrefix(args, "{") {
			return nil, false, effects.Permanent(fmt.Errorf("httpturn: effect %d (%s): args must be a JSON object", i, e.Connector))
		}
		connector, ok := h.config.Registry.Get(e.Connector)
		if !ok {
			// Attempted again: the reactor may not have loaded a connector just added.
			return nil, false, fmt.Errorf("httpturn: effect %d: %w: %q", i, effects.ErrUnknownConnector, e.Connector)
		}
		if effects.PolicyOf(connector) == effects.PolicyIrreversible {
			irreversible = true
		}
		specs = append(specs, effects.Spec{
			Connector: e.Connector, Args: e.Args, BusinessKey: e.BusinessKey, Position: turn.Position(*e.Decision, *e.CallIndex),
		})
	}
	return specs, irreversible, nil
}

// checkArtifacts checks the answered artifacts and reused names against the stored artifacts it
// was sent, before anything is written: a bad one fails the turn for good, naming the field.
// reused are the stored artifacts named in Reused.
func checkArtifacts(answer *Response, stored []turns.Artifact) (artifacts []turns.Artifact, reused []turns.Artifact, err error) {
	if len(answer.Artifacts) > MaxArtifacts {
		return nil, nil, effects.Permanent(fmt.Errorf("httpturn: artifacts: %d answered, at most %d", len(answer.Artifacts), MaxArtifacts))
	}
	if len(answer.Reused) > MaxArtifacts {
		return nil, nil, effects.Permanent(fmt.Errorf("httpturn: reused: %d answered, at most %d", len(answer.Reused), MaxArtifacts))
	}
	saved := map[string]bool{}
	for i, a := range answer.Artifacts {
		artifact := turns.Artifact{
			Name: a.Name, Data: a.Data, InputFingerprint: a.InputFingerprint, DependencyFingerprint: a.DependencyFingerprint,
			Policy: turns.ReusePolicy(a.Policy),
		}
		if err := artifact.Validate(); err != nil {
			return nil, nil, effects.Permanent(fmt.Errorf("httpturn: artifacts[%d]: %w", i, err))
		}
		if saved[a.Name] {
			return nil, nil, effects.Permanent(fmt.Errorf("httpturn: artifacts[%d]: name %q is answered twice", i, a.Name))
		}
		saved[a.Name] = true
		artifacts = append(artifacts, artifact)
	}
	byName := make(map[string]turns.Artifact, len(stored))
	for _, a := range stored {
		byName[a.Name] = a
	}
	seen := map[string]bool{}
	for i, name := range answer.Reused {
		a, ok := byName[name]
		switch {
		case !ok:
			return nil, nil, effects.Permanent(fmt.Errorf("httpturn: reused[%d]: %q is not an artifact of the turn group (request artifacts)", i, name))
		case a.Policy == turns.ReuseNever:
			return nil, nil, effects.Permanent(fmt.Errorf("httpturn: reused[%d]: artifact %q has policy NEVER and may not be reused", i, name))
		case saved[name]:
			return nil, nil, effects.Permanent(fmt.Errorf("httpturn: reused[%d]: artifact %q is also saved by the answer", i, name))
		case seen[name]:
			return nil, nil, effects.Permanent(fmt.Errorf("httpturn: reused[%d]: %q is named twice", i, name))
		}
		seen[name] = true
		reused = append(reused, a)
	}
	return artifacts, reused, nil
}

// snippet is the start of a body for an error message.
func snippet(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
