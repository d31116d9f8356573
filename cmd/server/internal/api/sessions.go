package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/turns"
)

// Sessions over HTTP (docs/turns.md): inbound messages for turn aggregation and the
// session's turns, for teams in any language. A reactor runs the turns with its HTTP turn handler
// (package turns/httpturn).

// maxMessageIDLen bounds a message id.
const maxMessageIDLen = 255

func (s *Server) requireTurns() error {
	if s.config.Turns == nil {
		return errorf(http.StatusNotImplemented, codeNotImplemented, "this server runs no turns client")
	}
	return nil
}

// session parses the {key} path value and checks that its tenant segment is the caller's.
func (s *Server) session(call *Call) (string, error) {
	key := call.Request.PathValue("key")
	parsed, err := turns.ParseSessionKey(key)
	if err != nil {
		return "", badRequest(codeInvalidSessionKey, "session key %q: want tenant:agent:interlocutor:channel, four non-empty parts", key)
	}
	if parsed.Tenant != call.Tenant() {
		return "", errorf(http.StatusForbidden, codeSessionForbidden,
			"session key %q belongs to tenant %q, not to this token's tenant %q", key, parsed.Tenant, call.Tenant())
	}
	return key, nil
}

// messageRequest is the body of POST /v1/sessions/{key}/messages.
type messageRequest struct {
	MessageID string          `json:"message_id"`
	Content   json.RawMessage `json:"content"`
	At        *time.Time      `json:"at"`
}

// messageJSON is an inbound message on the wire.
type messageJSON struct {
	ID         uuid.UUID       `json:"id"`
	MessageID  string          `json:"message_id"`
	Content    json.RawMessage `json:"content"`
	At         *time.Time      `json:"at,omitempty"`
	ReceivedAt time.Time       `json:"received_at"`
	TurnID     *uuid.UUID      `json:"turn_id,omitempty"`
}

func messageToJSON(m turns.Message) messageJSON {
	return messageJSON{ID: m.ID, MessageID: m.MessageID, Content: m.Content, At: m.SentAt, ReceivedAt: m.ReceivedAt, TurnID: m.TurnID}
}

// TurnJSON is a turn on the wire: what the API answers, and what the operator CLI prints with -o json.
type TurnJSON struct {
	ID                  uuid.UUID      `json:"id"`
	SessionKey          string         `json:"session_key"`
	Seq                 int64          `json:"seq"`
	TurnGroup           uuid.UUID      `json:"turn_group"`
	Status              turns.Status   `json:"status"`
	StatusReason        string         `json:"status_reason,omitempty"`
	Attempt             int            `json:"attempt"`
	AggregationReason   string         `json:"aggregation_reason,omitempty"`
	WindowMs            int64          `json:"window_ms"`
	CommitPointReached  bool           `json:"commit_point_reached"`
	SideEffectsExecuted int            `json:"side_effects_executed"`
	MessageIDs          []uuid.UUID    `json:"message_ids"`
	SupersededBy        *uuid.UUID     `json:"superseded_by,omitempty"`
	FirstAt             time.Time      `json:"first_at"`
	LastAt              time.Time      `json:"last_at"`
	CreatedAt           time.Time      `json:"created_at"`
	StartedAt           *time.Time     `json:"started_at,omitempty"`
	CompletedAt         *time.Time     `json:"completed_at,omitempty"`
	Messages            []messageJSON  `json:"messages,omitempty"`
	Decisions           []decisionJSON `json:"decisions,omitempty"`
}

type decisionJSON struct {
	Action     turns.Action `json:"action"`
	Reason     string       `json:"reason"`
	Decider    string       `json:"decider"`
	MessageIDs []uuid.UUID  `json:"message_ids"`
	DecidedAt  time.Time    `json:"decided_at"`
}

// TurnToJSON is r on the wire, without its messages and decisions.
func TurnToJSON(r *turns.Record) *TurnJSON {
	return &TurnJSON{
		ID: r.ID, SessionKey: r.SessionKey, Seq: r.Seq, TurnGroup: r.Group, Status: r.Status, StatusReason: r.StatusReason,
		Attempt: r.Attempt, AggregationReason: r.AggregationReason, WindowMs: r.Window.Milliseconds(),
		CommitPointReached: r.CommitPointReached, SideEffectsExecuted: r.SideEffectsExecuted, MessageIDs: r.MessageIDs,
		SupersededBy: r.SupersededBy, FirstAt: r.FirstAt, LastAt: r.LastAt, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt,
		CompletedAt: r.CompletedAt,
	}
}

// messageResponse answers POST /v1/sessions/{key}/messages.
type messageResponse struct {
	Message      messageJSON `json:"message"`
	Turn         *TurnJSON   `json:"turn"`
	Deduplicated bool        `json:"deduplicated"`
}

// postMessage: POST /v1/sessions/{key}/messages. 202 with the turn the new message joined (the
// session's accumulating turn; a reactor processes it when its aggregation window closes); 200
// with the recorded message and its turn when the session has that message_id already.
func (s *Server) postMessage(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error) {
	if err := s.requireTurns(); err != nil {
		return 0, nil, err
	}
	key, err := s.session(call)
	if err != nil {
		return 0, nil, err
	}
	var req messageRequest
	if err := call.Decode(&req); err != nil {
		return 0, nil, err
	}
	switch {
	case strings.TrimSpace(req.MessageID) == "":
		return 0, nil, badRequest(codeInvalidRequest, "message_id is required: the message's id in your channel, unique per session (a repeat is deduplicated)")
	case len(req.MessageID) > maxMessageIDLen:
		return 0, nil, badRequest(codeInvalidRequest, "message_id is limited to %d bytes", maxMessageIDLen)
	}
	var content any // nil is {}
	if trimmed := strings.TrimSpace(string(req.Content)); trimmed != "" && trimmed != "null" {
		content = req.Content
	}
	m, err := s.config.Turns.SubmitTx(ctx, tx, turns.Inbound{SessionKey: key, MessageID: req.MessageID, Content: content, SentAt: req.At})
	if err != nil {
		return 0, nil, fmt.Errorf("submit message: %w", err)
	}
	out := messageResponse{Message: messageToJSON(*m), Deduplicated: m.Deduplicated}
	if m.TurnID != nil {
		turn, err := s.config.Turns.GetTx(ctx, tx, *m.TurnID)
		if err != nil {
			return 0, nil, err
		}
		out.Turn = TurnToJSON(turn)
	}
	if m.Deduplicated {
		return http.StatusOK, out, nil
	}
	return http.StatusAccepted, out, nil
}

// turnsResponse answers GET /v1/sessions/{key}/turns.
type turnsResponse struct {
	SessionKey string      `json:"session_key"`
	Turns      []*TurnJSON `json:"turns"`
}

// turnListParams are the query parameters of GET /v1/sessions/{key}/turns.
var turnListParams = listParams{limit: 50, maxLimit: 500}

// listTurns: GET /v1/sessions/{key}/turns?limit=, the session's newest turns (default 50, at most
// 500) in order, each with its messages and supersede decisions.
func (s *Server) listTurns(ctx context.Context, call *Call) (int, any, error) {
	if err := s.requireTurns(); err != nil {
		return 0, nil, err
	}
	key, err := s.session(call)
	if err != nil {
		return 0, nil, err
	}
	query, err := turnListParams.parse(call)
	if err != nil {
		return 0, nil, err
	}
	limit := query.limit
	records, err := s.config.Turns.List(ctx, key)
	if err != nil {
		return 0, nil, err
	}
	if len(records) > limit {
		records = records[len(records)-limit:]
	}
	out := turnsResponse{SessionKey: key, Turns: make([]*TurnJSON, len(records))}
	for i, r := range records {
		tj := TurnToJSON(r)
		messages, err := s.config.Turns.Messages(ctx, r.ID)
		if err != nil {
			return 0, nil, err
		}
		for _, m := range messages {
			tj.Messages = append(tj.Messages, messageToJSON(m))
		}
		decisions, err := s.config.Turns.Decisions(ctx, r.ID)
		if err != nil {
			return 0, nil, err
		}
		for _, d := range decisions {
			tj.Decisions = append(tj.Decisions, decisionJSON{Action: d.Action, Reason: d.Reason, Decider: d.Decider, MessageIDs: d.MessageIDs, DecidedAt: d.DecidedAt})
		}
		out.Turns[i] = tj
	}
	return http.StatusOK, out, nil
}
